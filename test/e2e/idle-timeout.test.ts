// A client that stops sending in the middle of a request (a stalled upload,
// slowloris) is cut off after PULSEBASE_IDLE_TIMEOUT_SECONDS on HTTP/1.1 and
// HTTP/2 alike, and the server goes on answering others.
import { connect as h2connect } from "node:http2";
import { connect as tlsConnect } from "node:tls";
import { afterAll, beforeAll, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../helpers/server.js";

let server: TestServer;
let token: string;

beforeAll(async () => {
  server = await startTestServer({ env: { PULSEBASE_IDLE_TIMEOUT_SECONDS: "1" } });
  const { appKey } = await server.createApp("idle");
  token = (await server.register(appKey)).token;
});
afterAll(async () => {
  await server.close();
});

// (/api/session/end: a route of the identity module, the only one this server mounts.)
it("closes an HTTP/1.1 connection whose request body stops arriving", async () => {
  const url = new URL(server.httpsUrl);
  const socket = tlsConnect({ host: url.hostname, port: Number(url.port), rejectUnauthorized: false, ALPNProtocols: ["http/1.1"] });
  await new Promise<void>((done) => socket.once("secureConnect", () => done()));
  const started = Date.now();
  socket.write(
    `POST /api/session/end HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"name":`,
  );
  let received = "";
  socket.on("data", (d) => (received += d));
  await new Promise<void>((done) => socket.once("close", () => done()));
  const waited = Date.now() - started;
  // not before the limit (1 s); cut off at all: nothing else would close it
  // within this test's timeout (Node's own request timeouts are minutes)
  expect(waited).toBeGreaterThanOrEqual(900);
  // Nothing was accepted from the half request.
  expect(received).not.toMatch(/^HTTP\/1\.1 2/);
  expect((await server.fetch("/readyz")).status).toBe(200);
});

it("closes an HTTP/2 session that goes silent mid-request", async () => {
  const session = h2connect(server.httpsUrl, { rejectUnauthorized: false });
  const sessionClosed = new Promise<void>((done) => session.once("close", () => done()));
  const started = Date.now();
  const stream = session.request({
    ":method": "POST",
    ":path": "/api/session/end",
    authorization: `Bearer ${token}`,
    "content-type": "application/json",
    "content-length": "1000",
  });
  stream.on("error", () => {});
  stream.write('{"name":');
  let status: string | undefined;
  stream.on("response", (h) => (status = String(h[":status"])));
  // The stalled stream is cancelled and the idle session closed.
  await new Promise<void>((done) => stream.once("close", () => done()));
  expect(status).toBeUndefined();
  await sessionClosed;
  const waited = Date.now() - started;
  // not before the limit (1 s); cut off at all: nothing else would close it
  // within this test's timeout (Node's own request timeouts are minutes)
  expect(waited).toBeGreaterThanOrEqual(900);
  expect((await server.fetch("/readyz")).status).toBe(200);
});

it("keeps a connection that is busy for longer than the limit", async () => {
  // Requests one after another on one HTTP/2 session, over 2.5 s in all (a
  // minimum), with gaps well under the limit: activity, not age, is what counts.
  const session = h2connect(server.httpsUrl, { rejectUnauthorized: false });
  let closed = false;
  session.on("close", () => (closed = true));
  const end = Date.now() + 2500;
  let answered = 0;
  while (Date.now() < end) {
    const status = await new Promise<number>((done, fail) => {
      const s = session.request({ ":path": "/readyz" });
      s.on("response", (h) => done(Number(h[":status"])));
      s.on("error", fail);
      s.resume();
    });
    expect(status).toBe(200);
    answered++;
    await new Promise((r) => setTimeout(r, 100));
  }
  expect(closed).toBe(false);
  expect(answered).toBeGreaterThan(5);
  session.close();
});
