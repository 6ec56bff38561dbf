// The public listener under a hostile client: HTTP/2
// streams and header lists are limited, a token is checked before a byte of
// the body is read, bodies share one budget per process as their bytes
// arrive (503 past it, one application at most its share), and a body
// trickled in is cut.
import { connect as h2connect, type ClientHttp2Session, type ClientHttp2Stream } from "node:http2";
import { connect as tlsConnect } from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createModules } from "../../src/server/modules.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { H2_ERROR, RawH2, SETTING } from "../helpers/h2-frames.js";
import { answer, post, within, type Answer } from "../helpers/h2-answers.js";

const MiB = 1024 * 1024;
const EVENT = JSON.stringify({ name: "tap", metadata: { screen: "home" } });
let s: TestServer;
let tokenA: string;
let tokenB: string;

beforeAll(async () => {
  s = await startTestServer({
    modules: createModules,
    env: {
      PULSEBASE_BODY_LIMIT_BYTES: String(MiB),
      PULSEBASE_BODY_BUDGET_BYTES: String(4 * MiB),
      PULSEBASE_BODY_TIMEOUT_SECONDS: "2",
      PULSEBASE_BODY_MIN_RATE_BYTES: "4096",
    },
  });
  tokenA = (await s.register((await s.createApp("a")).appKey)).token;
  tokenB = (await s.register((await s.createApp("b")).appKey)).token;
});
afterAll(() => s.close());

function session(): ClientHttp2Session {
  const c = h2connect(s.httpsUrl, { rejectUnauthorized: false });
  c.on("error", () => {});
  return c;
}

describe("HTTP/2 limits", () => {
  it("advertises a stream limit of 100 and a header list limit of 16 KiB", async () => {
    const c = await RawH2.open(s.httpsUrl);
    try {
      expect(c.serverSettings.get(SETTING.MAX_CONCURRENT_STREAMS)).toBe(100);
      expect(c.serverSettings.get(SETTING.MAX_HEADER_LIST_SIZE)).toBe(16 * 1024);
    } finally {
      c.close();
    }
  });

  /** 150 requests declaring bodies they do not send (the first streams stay open), in one write. */
  function flood(c: RawH2): number[] {
    const ids = Array.from({ length: 150 }, (_, i) => 1 + 2 * i);
    c.send(...ids.map((id) => c.headers(id, [[":method", "POST"], [":path", "/api/events"], [":scheme", "https"], [":authority", "localhost"],
      ["authorization", `Bearer ${tokenA}`], ["content-type", "application/json"], ["content-length", "100"]])));
    return ids;
  }

  it("refuses the streams a client opens past the limit while its SETTINGS are unacknowledged; the first 100 go on", async () => {
    const c = await RawH2.open(s.httpsUrl, [], false);
    try {
      const ids = flood(c);
      await c.until(() => c.resets().size >= 50);
      const resets = c.resets();
      expect(ids.filter((id) => resets.get(id) === H2_ERROR.REFUSED_STREAM)).toEqual(ids.slice(100));
      // The open ones are still served: the first completes.
      c.send(c.data(1, Buffer.from(EVENT.padEnd(100, " ")), true));
      await c.until(() => c.answered().has(1));
      expect(c.goaway()).toBeUndefined();
    } finally {
      c.close();
    }
  });

  it("closes a connection that opens streams past the acknowledged limit (PROTOCOL_ERROR after its 100th)", async () => {
    const c = await RawH2.open(s.httpsUrl);
    try {
      const ids = flood(c);
      await c.until(() => c.goaway() !== undefined);
      expect(c.goaway()).toEqual({ lastStreamId: ids[99], code: H2_ERROR.PROTOCOL_ERROR });
    } finally {
      c.close();
    }
  });

  it("refuses a header list over 16 KiB", async () => {
    const c = await RawH2.open(s.httpsUrl);
    try {
      c.send(c.headers(1, [[":method", "GET"], [":path", "/healthz"], [":scheme", "https"], [":authority", "localhost"], ["x-pad", "p".repeat(20_000)]], true));
      c.send(c.headers(3, [[":method", "GET"], [":path", "/healthz"], [":scheme", "https"], [":authority", "localhost"], ["x-pad", "p".repeat(8_000)]], true));
      await c.until(() => c.answered().has(3) || c.closed);
      // The big one is reset (or its connection closed), never answered; the one within the limit is.
      expect(c.answered().has(1)).toBe(false);
      expect(c.answered().has(3) || c.goaway() !== undefined).toBe(true);
    } finally {
      c.close();
    }
  });
});

describe("the token is checked before the body is read", () => {
  const MB = String(MiB);
  it.each([
    ["a JSON route", "/api/events", { "content-type": "application/json" }],
    ["a multipart route", "/api/logs", { "content-type": "multipart/form-data; boundary=x" }],
    ["a function", "/api/fn/anything", { "content-type": "application/octet-stream" }],
  ])("answers 401 on %s without waiting for the declared body", async (_name, path, headers) => {
    const c = session();
    try {
      const st = c.request({ ...post(path, "not-a-token", { "content-length": MB }), ...headers });
      st.write(Buffer.alloc(1024, 0x20));
      const a = await within(answer(st), 3000);
      expect(a).toMatchObject({ status: 401 });
      expect(JSON.parse((a as Answer).body)).toMatchObject({ error: "unauthenticated" });
    } finally {
      c.destroy();
    }
  });

  it("answers 404 for a path no route takes without waiting for the declared body", async () => {
    const c = session();
    try {
      const st = c.request(post("/api/nothing-here", tokenA, { "content-length": MB }));
      st.write(Buffer.alloc(1024, 0x20));
      const a = await within(answer(st), 3000);
      expect(a).toMatchObject({ status: 404 });
      expect(JSON.parse((a as Answer).body)).toMatchObject({ error: "not_found" });
    } finally {
      c.destroy();
    }
  });

  it("answers 401 on Connect and gRPC calls in their own protocol, without reading the body", async () => {
    const c = session();
    try {
      const connectCall = c.request({ ...post("/pulsebase.platform.v1.AnalyticsService/RecordEvent", undefined, { "content-length": MB }), "content-type": "application/proto", "connect-protocol-version": "1" });
      const a = await within(answer(connectCall), 3000);
      expect(a).toMatchObject({ status: 401 });
      expect(JSON.parse((a as Answer).body)).toMatchObject({ code: "unauthenticated" });
      const grpcCall = c.request({ ...post("/pulsebase.platform.v1.AnalyticsService/RecordEvent", "not-a-token"), "content-type": "application/grpc", te: "trailers" });
      grpcCall.write(Buffer.alloc(4096));
      const trailers = new Promise<Record<string, unknown>>((r) => grpcCall.once("trailers", r));
      const g = await within(answer(grpcCall), 3000);
      expect(g).toMatchObject({ status: 200 });
      const status = (g as Answer).headers["grpc-status"] ?? (await within(trailers, 1000) as Record<string, unknown>)["grpc-status"];
      expect(String(status)).toBe("16");
    } finally {
      c.destroy();
    }
  });
});

describe("the body budget", () => {
  /** Opens a stream declaring a 1 MiB body and sends `sent` bytes of it (reserved as they arrive); never ends it. */
  function hold(c: ClientHttp2Session, token: string, sent = 64 * 1024): { stream: ClientHttp2Stream; answered: Promise<Answer | { reset: number }>; written: Promise<void> } {
    const stream = c.request(post("/api/events", token, { "content-length": String(MiB) }));
    const written = new Promise<void>((resolve) => stream.write(Buffer.alloc(sent, 0x20), () => resolve()));
    return { stream, answered: answer(stream), written };
  }
  const ping = (c: ClientHttp2Session) => new Promise<void>((resolve) => c.ping(() => resolve()));

  it("answers 503 past one application's share of the budget (bytes received), until its bodies finish", async () => {
    const c = session();
    try {
      // 4 MiB budget, 1 MiB bodies: one application holds at most 1 MiB.
      const a1 = hold(c, tokenA, MiB - 1);
      await a1.written;
      await ping(c);
      const a2 = c.request(post("/api/events", tokenA));
      a2.end(EVENT);
      const refused = await within(answer(a2), 3000);
      expect(refused).toMatchObject({ status: 503 });
      expect((refused as Answer).headers["retry-after"]).toBe("1");
      expect(JSON.parse((refused as Answer).body)).toMatchObject({ error: "unavailable" });
      expect(await within(a1.answered, 300)).toBe("timeout");
      // Another application, and clients without a token, still have their shares.
      const b = c.request(post("/api/events", tokenB));
      b.end(EVENT);
      expect(await within(answer(b), 3000)).toMatchObject({ status: 200 });
      const reg = c.request(post("/api/consumer", undefined, { "content-length": "10" }));
      reg.end('{"x":1}   ');
      expect(await within(answer(reg), 3000)).toMatchObject({ status: 422 });
      // A body that ends gives its share back.
      a1.stream.close();
      await a1.answered;
      const ok = c.request(post("/api/events", tokenA));
      ok.end(EVENT);
      expect(await within(answer(ok), 5000)).toMatchObject({ status: 200 });
    } finally {
      c.destroy();
    }
  });

  it("reserves next to nothing for declared lengths whose bytes have not come", async () => {
    const c = session();
    try {
      // 40 streams declaring 1 MiB each (10 times the budget), 1 KiB sent.
      const held = Array.from({ length: 40 }, () => hold(c, tokenA, 1024));
      await ping(c);
      const ok = c.request(post("/api/events", tokenB));
      ok.end(EVENT);
      expect(await within(answer(ok), 5000)).toMatchObject({ status: 200 });
      expect(await within(held[0]!.answered, 100)).toBe("timeout");
      for (const h of held) h.stream.close();
      await Promise.all(held.map((h) => h.answered));
    } finally {
      c.destroy();
    }
  });

  it("fails a body of undeclared length that runs past the budget with 503", async () => {
    const c = session();
    try {
      // The application's share is nearly taken: the undeclared body fails past it.
      const held = [hold(c, tokenA, 512 * 1024)];
      expect(await within(held[0]!.answered, 300)).toBe("timeout");
      const st = c.request(post("/api/events", tokenA));
      const done = answer(st);
      const chunk = Buffer.alloc(256 * 1024, 0x20);
      for (let i = 0; i < 12 && !st.closed; i++) {
        st.write(chunk);
        await new Promise((r) => setTimeout(r, 20));
      }
      const a = await within(done, 5000);
      expect(a).toMatchObject({ status: 503 });
      expect(JSON.parse((a as Answer).body)).toMatchObject({ error: "unavailable" });
      for (const h of held) h.stream.close();
      await Promise.all(held.map((h) => h.answered));
    } finally {
      c.destroy();
    }
  });

  it("answers Connect calls over the budget in the Connect protocol", async () => {
    const c = session();
    try {
      const held = [hold(c, tokenA, MiB - 1)];
      await held[0]!.written;
      await ping(c);
      const call = c.request({ ...post("/pulsebase.platform.v1.AnalyticsService/RecordEvent", tokenA, { "content-length": "100" }), "content-type": "application/proto", "connect-protocol-version": "1" });
      const a = await within(answer(call), 3000);
      expect(a).toMatchObject({ status: 503 });
      expect(JSON.parse((a as Answer).body)).toMatchObject({ code: "unavailable" });
      for (const h of held) h.stream.close();
      await Promise.all(held.map((h) => h.answered));
    } finally {
      c.destroy();
    }
  });
});

describe("slow bodies", () => {
  it("cuts an HTTP/2 stream whose body trickles in", async () => {
    const c = session();
    try {
      const st = c.request(post("/api/events", tokenA, { "content-length": "100000" }));
      const done = answer(st);
      const started = Date.now();
      // A few bytes every 200 ms: never idle, never done.
      const drip = setInterval(() => !st.closed && st.write("          "), 200);
      const a = await within(done, 10_000);
      clearInterval(drip);
      expect(a).toEqual({ reset: H2_ERROR.CANCEL });
      expect(Date.now() - started).toBeGreaterThanOrEqual(1900);
      // The session goes on serving.
      const ok = c.request(post("/api/events", tokenA));
      ok.end(EVENT);
      expect(await within(answer(ok), 5000)).toMatchObject({ status: 200 });
    } finally {
      c.destroy();
    }
  });

  it("closes an HTTP/1.1 connection whose body trickles in", async () => {
    const url = new URL(s.httpsUrl);
    const socket = tlsConnect({ host: url.hostname, port: Number(url.port), rejectUnauthorized: false, ALPNProtocols: ["http/1.1"] });
    await new Promise<void>((done) => socket.once("secureConnect", () => done()));
    socket.on("error", () => {});
    const started = Date.now();
    socket.write(`POST /api/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${tokenA}\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n`);
    const drip = setInterval(() => socket.write("          "), 200);
    let received = "";
    socket.on("data", (d) => (received += d));
    const closed = await within(new Promise<void>((done) => socket.once("close", () => done())), 10_000);
    clearInterval(drip);
    expect(closed).not.toBe("timeout");
    expect(Date.now() - started).toBeGreaterThanOrEqual(1900);
    expect(received).not.toMatch(/^HTTP\/1\.1 2/);
  });
});
