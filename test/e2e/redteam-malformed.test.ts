// Issue #28, point 6, more cases (red team): a request whose body framing
// breaks after its head (an invalid chunk size, a Transfer-Encoding other
// than chunked) was dropped without an answer on the public listener; the
// admin listener answered unparseable requests and URLs in Fastify's own
// JSON without X-Request-Id (431 and a reset for an over-long URL). Every
// case now gets a 4xx in the envelope with X-Request-Id, and the
// connection closes after it.
import { connect as tcp, type Socket } from "node:net";
import { connect } from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../helpers/server.js";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
let s: TestServer;
beforeAll(async () => {
  s = await startTestServer();
});
afterAll(() => s?.close());

function open(kind: "public" | "admin"): Promise<Socket> {
  const u = new URL(kind === "public" ? s.httpsUrl : s.adminUrl);
  return new Promise((resolve, reject) => {
    const so: Socket = kind === "public"
      ? connect({ host: u.hostname, port: Number(u.port), rejectUnauthorized: false, ALPNProtocols: ["http/1.1"] }, () => resolve(so))
      : tcp({ host: u.hostname, port: Number(u.port) }, () => resolve(so));
    so.once("error", reject);
  });
}

/** Sends the bytes and reads until the server closes the connection (the test's own timeout bounds it). */
async function exchange(kind: "public" | "admin", bytes: string) {
  const so = await open(kind);
  let text = "";
  so.on("data", (d: Buffer) => (text += d.toString("latin1")));
  so.on("error", () => {});
  const closed = new Promise<void>((r) => so.once("close", () => r()));
  so.write(bytes);
  await closed;
  const head = text.indexOf("\r\n\r\n");
  const lines = (head < 0 ? text : text.slice(0, head)).split("\r\n");
  const headers: Record<string, string> = {};
  for (const l of lines.slice(1)) headers[l.slice(0, l.indexOf(":")).trim().toLowerCase()] = l.slice(l.indexOf(":") + 1).trim();
  const body = head < 0 ? "" : text.slice(head + 4, head + 4 + Number(headers["content-length"] ?? 0));
  return { status: Number(lines[0]!.split(" ")[1] ?? 0), headers, body };
}

const big = "a".repeat(100_000);
const H = "Host: 127.0.0.1\r\n";
const json = "content-type: application/json\r\n";
const cases: Array<[string, string]> = [
  ["invalid chunk size", `POST /api/events HTTP/1.1\r\n${H}${json}transfer-encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n`],
  ["transfer-encoding gzip", `POST /api/events HTTP/1.1\r\n${H}${json}transfer-encoding: gzip\r\n\r\n{}`],
  ["invalid chunk size, CMS", `POST /api/v1/items HTTP/1.1\r\n${H}${json}transfer-encoding: chunked\r\n\r\n1;\0\r\n{\r\n0\r\n\r\n`],
  ["duplicate content-length", `POST /api/events HTTP/1.1\r\n${H}${json}content-length: 2\r\ncontent-length: 3\r\n\r\n{}`],
  ["content-length and chunked", `POST /api/events HTTP/1.1\r\n${H}${json}content-length: 2\r\ntransfer-encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n`],
  ["header line without colon", `GET /api/v1/x HTTP/1.1\r\n${H}bogus header\r\n\r\n`],
  ["NUL in the path", `GET /api/v1/a\0b HTTP/1.1\r\n${H}\r\n`],
  ["100 KB URL, /api", `GET /api/consumer?x=${big} HTTP/1.1\r\n${H}\r\n`],
  ["100 KB URL, /api/fn", `GET /api/fn/x/${big} HTTP/1.1\r\n${H}\r\n`],
  ["100 KB URL, Connect", `POST /pulsebase.admin.v1.IdentityService/${big} HTTP/1.1\r\n${H}${json}content-length: 2\r\n\r\n{}`],
  ["invalid percent-encoding", `GET /api/fn/%E0%A4%A HTTP/1.1\r\n${H}connection: close\r\n\r\n`],
];

describe.each(["public", "admin"] as const)("the %s listener", (kind) => {
  it.each(cases)("%s: a 4xx in the envelope with X-Request-Id", async (_name, bytes) => {
    const a = await exchange(kind, bytes);
    expect(a.status).toBeGreaterThanOrEqual(400);
    expect(a.status).toBeLessThan(500);
    expect(a.headers["x-request-id"]).toMatch(UUID);
    const body = JSON.parse(a.body) as { error: unknown };
    // the platform envelope ({error: code, message}) or the CMS one ({error: {status, code, message}})
    expect(typeof body.error === "string" || (typeof body.error === "object" && body.error !== null && "code" in body.error)).toBe(true);
    expect(JSON.stringify(body)).not.toMatch(/FST_|statusCode|Client Error/);
  });
});
