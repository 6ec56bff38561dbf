// Issue #28, point 6: malformed requests get an answer a client can read,
// with X-Request-Id and the JSON envelope: a GET /api/fn/{slug} with a
// 12,000-character query parameter and odd Cookie headers (fuzz seed
// 745210419), and a multipart POST /api/events/batch of 5,000 parts without
// credentials, sent at a modest pace: the server answers 401 and reads the
// body to its end (a bounded drain) instead of closing the connection while
// the client is still sending, so the client reads the 401 once it has sent it.
import { connect as h2connect } from "node:http2";
import { connect, type TLSSocket } from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createModules } from "../../src/server/modules.js";
import { TEST_NATS_URL } from "../helpers/db.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { until } from "../helpers/until.js";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
let s: TestServer;
let token: string;

beforeAll(async () => {
  // A short body clock, so a body sent over a few seconds outlives it.
  s = await startTestServer({ modules: createModules, env: { NATS_URL: TEST_NATS_URL, PULSEBASE_BODY_TIMEOUT_SECONDS: "2", PULSEBASE_BODY_MIN_RATE_BYTES: "4096" } });
  token = (await s.register((await s.createApp("hostile requests")).appKey)).token;
});
afterAll(() => s?.close());

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

function tlsSocket(): Promise<TLSSocket> {
  const u = new URL(s.httpsUrl);
  return new Promise((resolve, reject) => {
    const sock = connect({ host: u.hostname, port: Number(u.port), rejectUnauthorized: false, ALPNProtocols: ["http/1.1"] }, () => resolve(sock));
    sock.once("error", reject);
  });
}

/** Parses the first HTTP/1.1 answer in `text`. */
function parse(text: string): Answer | undefined {
  const head = text.indexOf("\r\n\r\n");
  if (head < 0) return undefined;
  const lines = text.slice(0, head).split("\r\n");
  const headers: Record<string, string> = {};
  for (const l of lines.slice(1)) headers[l.slice(0, l.indexOf(":")).trim().toLowerCase()] = l.slice(l.indexOf(":") + 1).trim();
  const body = text.slice(head + 4, head + 4 + Number(headers["content-length"] ?? 0));
  return { status: Number(lines[0]!.split(" ")[1]), headers, body };
}

/** Sends the bytes on a new HTTP/1.1 connection and reads until the server closes it. */
async function exchange(bytes: Buffer): Promise<Answer | undefined> {
  const sock = await tlsSocket();
  let text = "";
  sock.on("data", (d: Buffer) => (text += d.toString("latin1")));
  sock.on("error", () => {});
  const closed = new Promise<void>((r) => sock.once("close", () => r()));
  sock.write(bytes);
  await closed;
  return parse(text);
}

function expectEnvelope(a: Answer | undefined, statuses: number[]): void {
  expect(a).toBeDefined();
  expect(statuses).toContain(a!.status);
  expect(a!.headers["x-request-id"]).toMatch(UUID);
  const body = JSON.parse(a!.body) as { error: unknown; message: unknown };
  expect(typeof body.error).toBe("string");
  expect(typeof body.message).toBe("string");
}

const COOKIES: [string, string][] = [
  ["unbalanced quotes", 'session="abc; theme=dark"; x="'],
  ["only =", "="],
  ["non-ASCII", "name=Jürgen; emoji=\u00e9\u00e8\u00ff"],
  ["very long", `big=${"c".repeat(6000)}`],
  ["several", "a=1; a=2;;; =; b"],
];

describe("a GET /api/fn/{slug} with a 12,000-character query parameter and odd cookies", () => {
  const query = `q=${"x".repeat(12_000)}`;
  it.each(COOKIES)("answers in the envelope with X-Request-Id over HTTP/1.1 (%s)", async (_name, cookie) => {
    const a = await exchange(Buffer.from(
      `GET /api/fn/hello?${query} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nCookie: ${cookie}\r\nConnection: close\r\n\r\n`,
      "latin1",
    ));
    // 404: no such function; 400: the request headers are over 16 KiB.
    expectEnvelope(a, [400, 404]);
  });

  it("answers over HTTP/2 in the envelope with X-Request-Id (cookies within the header list limit)", async () => {
    const c = h2connect(s.httpsUrl, { rejectUnauthorized: false });
    c.on("error", () => {});
    try {
      for (const [, cookie] of COOKIES.filter(([n]) => n !== "very long")) {
        const st = c.request({ ":method": "GET", ":path": `/api/fn/hello?${query}`, authorization: `Bearer ${token}`, cookie });
        const a = await new Promise<Answer>((resolve, reject) => {
          let headers: Record<string, string> = {};
          let body = "";
          st.on("response", (h) => (headers = h as Record<string, string>));
          st.on("data", (d: Buffer) => (body += d.toString()));
          st.on("error", reject);
          st.on("end", () => resolve({ status: Number(headers[":status"]), headers, body }));
        });
        expectEnvelope(a, [404]);
      }
    } finally {
      c.destroy();
    }
  });
});

describe("a multipart POST /api/events/batch of 5,000 parts without credentials", () => {
  const parts: string[] = [];
  for (let i = 0; i < 5000; i++) parts.push(`--xx\r\nContent-Disposition: form-data; name="events[${i}][name]"\r\n\r\n${"v".repeat(100)}\r\n`);
  const body = Buffer.from(parts.join("") + "--xx--\r\n");

  it("is answered 401, and the client that sends it all at a modest pace reads the answer", async () => {
    const sock = await tlsSocket();
    let text = "";
    let closed = false;
    sock.on("error", () => {});
    sock.on("close", () => (closed = true));
    sock.write(`POST /api/events/batch HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=xx\r\nContent-Length: ${body.length}\r\n\r\n`);
    // 1.2 MB at about 200 KB/s (well above the minimum rate, longer than
    // the 2 s body clock), the answer read only once the body is sent, as
    // most clients do.
    let sent = 0;
    for (; sent < body.length && !closed; sent += 32 * 1024) {
      sock.write(body.subarray(sent, sent + 32 * 1024));
      await new Promise((r) => setTimeout(r, 160));
    }
    expect(closed).toBe(false);
    expect(sent).toBeGreaterThanOrEqual(body.length);
    sock.on("data", (d: Buffer) => (text += d.toString("latin1")));
    const a = await until(async () => {
      const got = parse(text);
      return got && got.body.length >= Number(got.headers["content-length"]) ? got : closed ? null : undefined;
    }, 5000);
    sock.destroy();
    expectEnvelope(a ?? undefined, [401]);
    expect(JSON.parse(a!.body)).toMatchObject({ error: "unauthenticated" });
  }, 30_000);
});
