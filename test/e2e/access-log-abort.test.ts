// Requests whose client goes away before the answer: one access line and one
// metrics sample each, status 499, with the time until the abort; requests
// that complete are still recorded once. Over HTTP/1.1 (a GET, and a POST
// whose body was read: Fastify's onRequestAbort misses that one) and HTTP/2.
import { randomUUID } from "node:crypto";
import http2 from "node:http2";
import https from "node:https";
import { Writable } from "node:stream";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { until } from "../helpers/until.js";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Line = Record<string, any>;
const lines: Line[] = [];
const sink = new Writable({
  write(chunk: Buffer, _enc, done) {
    for (const l of chunk.toString("utf8").split("\n")) if (l) lines.push(JSON.parse(l) as Line);
    done();
  },
});

/**
 * The slow route's handler for one request id: it waits for the test's
 * release, so the client's abort always comes while it is still working,
 * and the test knows when it has started and when it has ended.
 */
interface Held {
  entered: Promise<void>;
  ended: Promise<void>;
  release(): void;
  enter(): void;
  end(): void;
}
const held = new Map<string, Held>();
function hold(reqId: string): Held {
  let h = held.get(reqId);
  if (h === undefined) {
    let enter!: () => void, release!: () => void, end!: () => void;
    const entered = new Promise<void>((r) => (enter = r));
    const released = new Promise<void>((r) => (release = r));
    const ended = new Promise<void>((r) => (end = r));
    h = { entered, ended, release, enter, end, released } as Held & { released: Promise<void> };
    held.set(reqId, h);
  }
  return h;
}
let s: TestServer;

beforeAll(async () => {
  s = await startTestServer({
    logger: pino({ level: "info" }, sink),
    // A test-only slow route on the public listener (a handler still working when the client leaves).
    modules: () => {
      const slow = {
        path: "/test/slow",
        iface: "platform",
        async handle(req: { headers: Record<string, string | string[] | undefined> }) {
          const h = hold(String(req.headers["x-request-id"])) as Held & { released: Promise<void> };
          h.enter();
          await h.released;
          h.end();
          return { status: 200, headers: { "content-type": "application/json; charset=utf-8" }, body: JSON.stringify({ done: true }) };
        },
      } as const;
      return [{ name: "slow", routes: [{ ...slow, method: "GET" }, { ...slow, method: "POST" }] }];
    },
  });
});
afterAll(() => {
  for (const h of held.values()) h.release();
  return s?.close();
});

const accessLines = (reqId: string) => lines.filter((l) => l.msg === "request" && l.reqId === reqId);

/**
 * The request's lines once its handler has ended: a late completion would be
 * a second line, recorded before a later request on the listener is answered
 * (lines are written in the order recorded).
 */
async function settled(reqId: string): Promise<Line[]> {
  await until(async () => (accessLines(reqId).length > 0 ? true : undefined));
  const h = hold(reqId);
  h.release();
  await h.ended;
  const barrier = randomUUID();
  await (await s.fetch("/healthz", { headers: { "x-request-id": barrier } })).arrayBuffer();
  await until(async () => (accessLines(barrier).length > 0 ? true : undefined));
  return accessLines(reqId);
}

/** The line of an aborted request, written while its handler is still held (it is not waiting for the handler's end). */
async function lineAtAbort(reqId: string): Promise<void> {
  await until(async () => (accessLines(reqId).length > 0 ? true : undefined));
  expect(held.get(reqId)).toBeDefined();
  let ended = false;
  void hold(reqId).ended.then(() => (ended = true));
  await Promise.resolve();
  expect(ended).toBe(false);
}

/** An HTTP/1.1 request over TLS, destroyed `abortAfterMs` after its handler has started. */
function http1Abort(method: "GET" | "POST", reqId: string, abortAfterMs: number): Promise<void> {
  return new Promise((resolve) => {
    const req = https.request(`${s.httpsUrl}/test/slow`, {
      method,
      rejectUnauthorized: false,
      agent: false,
      headers: { "x-request-id": reqId, ...(method === "POST" ? { "content-type": "application/json" } : {}) },
    });
    req.on("error", () => resolve());
    req.end(method === "POST" ? JSON.stringify({ a: 1 }) : undefined);
    void hold(reqId).entered.then(() => setTimeout(() => {
      req.destroy();
      resolve();
    }, abortAfterMs));
  });
}

async function scrape(): Promise<string> {
  return (await fetch(`${s.adminUrl}/metrics`)).text();
}

function count(text: string, labels: string): number {
  const m = new RegExp(`^pulsebase_http_requests_total\\{${labels.replace(/[/\\^$*+?.()|[\]{}]/g, "\\$&")}\\} (\\d+)$`, "m").exec(text);
  return m ? Number(m[1]) : 0;
}

describe("a client that goes away before the answer", () => {
  it("over HTTP/1.1 (GET, and a POST whose body was read): one line each, status 499, duration until the abort", async () => {
    const before = await scrape();
    const get = randomUUID();
    const post = randomUUID();
    await Promise.all([http1Abort("GET", get, 150), http1Abort("POST", post, 150)]);
    await Promise.all([lineAtAbort(get), lineAtAbort(post)]);
    const [getLines, postLines] = await Promise.all([settled(get), settled(post)]);
    for (const [found, method] of [[getLines, "GET"], [postLines, "POST"]] as const) {
      expect(found).toHaveLength(1);
      expect(found[0]).toMatchObject({ listener: "public", method, route: "/test/slow", status: 499 });
      // timed until the abort (150 ms into the handler), the handler being held until after the line was in
      expect(found[0]!.ms).toBeGreaterThanOrEqual(100);
      expect(found[0]).not.toHaveProperty("bytes");
    }
    const after = await scrape();
    for (const method of ["GET", "POST"]) {
      const labels = `listener="public",method="${method}",route="/test/slow",status="499"`;
      expect(count(after, labels) - count(before, labels)).toBe(1);
      // not counted as answered either
      expect(count(after, labels.replace("499", "200"))).toBe(count(before, labels.replace("499", "200")));
    }
  });

  it("over HTTP/2 (stream cancelled): one line, status 499, not a second one when the handler ends", async () => {
    const before = await scrape();
    const reqId = randomUUID();
    const session = http2.connect(s.httpsUrl, { rejectUnauthorized: false });
    session.on("error", () => {});
    try {
      const stream = session.request({ ":method": "GET", ":path": "/test/slow", "x-request-id": reqId });
      stream.on("error", () => {});
      stream.end();
      await hold(reqId).entered;
      await new Promise((r) => setTimeout(r, 150)); // the duration to expect (a lower bound)
      stream.close(http2.constants.NGHTTP2_CANCEL);
      await lineAtAbort(reqId);
      const found = await settled(reqId);
      expect(found).toHaveLength(1);
      expect(found[0]).toMatchObject({ method: "GET", route: "/test/slow", status: 499 });
      expect(found[0]!.ms).toBeGreaterThanOrEqual(100);
    } finally {
      session.close();
    }
    const after = await scrape();
    const labels = `listener="public",method="GET",route="/test/slow",status="499"`;
    expect(count(after, labels) - count(before, labels)).toBe(1);
  });

  it("a request that completes is recorded once, with its status (HTTP/1.1 and HTTP/2)", async () => {
    const before = await scrape();
    const h1 = randomUUID();
    const pending = s.fetch("/test/slow", { headers: { "x-request-id": h1 } });
    await hold(h1).entered;
    hold(h1).release();
    const res = await pending;
    expect(res.status).toBe(200);
    await res.text();
    const h2 = randomUUID();
    const session = http2.connect(s.httpsUrl, { rejectUnauthorized: false });
    try {
      await new Promise<void>((resolve, reject) => {
        const stream = session.request({ ":method": "GET", ":path": "/test/slow", "x-request-id": h2 });
        stream.on("error", reject);
        stream.resume();
        stream.on("end", resolve);
        stream.end();
        void hold(h2).entered.then(() => hold(h2).release());
      });
    } finally {
      session.close();
    }
    for (const id of [h1, h2]) {
      const found = await settled(id);
      expect(found).toHaveLength(1);
      expect(found[0]).toMatchObject({ route: "/test/slow", status: 200 });
    }
    const after = await scrape();
    const labels = `listener="public",method="GET",route="/test/slow",status="200"`;
    expect(count(after, labels) - count(before, labels)).toBe(2);
  });
});
