// Issue #28, point 3, more cases (red team): HTTP/1.1 bodies that never
// keep the minimum rate: chunked without Content-Length trickling one byte
// at a time (with and without a token, from another loopback address), and
// a declared body of which no byte ever comes. The server closes each
// connection on its own (the test keeps sending until it does), and another application's POST /api/events
// still answers 200 meanwhile.
import { connect, type ConnectionOptions, type TLSSocket } from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createModules } from "../../src/server/modules.js";
import { TEST_NATS_URL } from "../helpers/db.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

let s: TestServer;
let token: string;
let victim: string;
beforeAll(async () => {
  s = await startTestServer({ modules: createModules, env: { NATS_URL: TEST_NATS_URL, PULSEBASE_BODY_TIMEOUT_SECONDS: "2", PULSEBASE_BODY_MIN_RATE_BYTES: "4096" } });
  token = (await s.register((await s.createApp("slow attacker")).appKey)).token;
  victim = (await s.register((await s.createApp("slow victim")).appKey)).token;
});
afterAll(() => s?.close());

function tls(localAddress?: string): Promise<TLSSocket> {
  const u = new URL(s.httpsUrl);
  return new Promise((resolve, reject) => {
    const so = connect({ host: u.hostname, port: Number(u.port), rejectUnauthorized: false, ALPNProtocols: ["http/1.1"], ...(localAddress && { localAddress }) } as unknown as ConnectionOptions, () => resolve(so));
    so.once("error", reject);
  });
}

/**
 * Sends `head`, then `step` every 250 ms for as long as the connection is
 * open: only the server can end it (a hang is this test's timeout). `open`
 * says whether it still is, `started` when the head has gone out.
 */
function trickle(head: string, step: string | undefined, localAddress?: string): { started: Promise<void>; open(): boolean; done: Promise<{ closedByServer: boolean; text: string }> } {
  let closed = false;
  let started!: () => void;
  const startedP = new Promise<void>((r) => (started = r));
  const done = (async () => {
    const so = await tls(localAddress);
    let text = "";
    so.on("data", (d: Buffer) => (text += d.toString("latin1")));
    so.on("error", () => {});
    so.once("close", () => (closed = true));
    so.write(head);
    started();
    while (!closed) {
      await new Promise((r) => setTimeout(r, 250));
      if (step && !closed) so.write(step);
    }
    return { closedByServer: true, text };
  })();
  return { started: startedP, open: () => !closed, done };
}

const events = (auth: string | undefined, framing: string) =>
  `POST /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n${auth ? `authorization: Bearer ${auth}\r\n` : ""}${framing}\r\n`;

describe("HTTP/1.1 bodies below the minimum rate", () => {
  it("are cut: chunked one byte at a time with a token, without one from 127.0.0.7, and a declared body that never comes", async () => {
    const attackers = [
      trickle(events(token, "transfer-encoding: chunked\r\n") + "1\r\n[\r\n", "1\r\n \r\n"),
      trickle(events(undefined, "transfer-encoding: chunked\r\n") + "1\r\n[\r\n", "1\r\n \r\n", "127.0.0.7"),
      trickle(events(token, "content-length: 100000\r\n"), undefined),
      trickle(`POST /api/consumer HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n1\r\n{\r\n`, "1\r\n \r\n", "127.0.0.8"),
    ];
    // meanwhile another application's events answer: while the slow bodies are still being sent
    await Promise.all(attackers.map((a) => a.started));
    const r = await s.fetch("/api/events", { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${victim}` }, body: JSON.stringify({ name: "tap", metadata: { screen: "home" } }) });
    const stillOpen = attackers.filter((a) => a.open()).length;
    expect(`status ${r.status}`).toMatch(/status 20\d/);
    expect(stillOpen).toBeGreaterThan(0);
    // every slow connection is closed by the server (the client would go on sending)
    const cases = await Promise.all(attackers.map((a) => a.done));
    expect(cases.map((c) => c.closedByServer)).toEqual([true, true, true, true]);
  }, 30_000);
});
