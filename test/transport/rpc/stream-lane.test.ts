// The HTTP/2 stream lane (stream-lane.ts): unary calls answered off the
// stream, ahead of Node's compatibility layer and Fastify, must look to a
// client and to an operator exactly as the Fastify routes answer them:
// the same headers as the same call over HTTP/1.1 (which never takes the
// lane), one access line and metrics sample per call (499 when the client
// goes away), the routes' refusals of broken bodies; and the calls whose
// answer needs Fastify (an Origin the CORS list checks, a trusted proxy's
// forwarded client) are left to it.
import http2 from "node:http2";
import { randomUUID } from "node:crypto";
import { Writable } from "node:stream";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { QueryRequestSchema, QueryResponseSchema } from "../../../gen/pulsebase/platform/v1/database_pb.js";
import { ObservedLogController } from "../../../src/server/access-log.js";
import { createMetrics } from "../../../src/server/metrics.js";
import { until } from "../../helpers/until.js";
import { frame, frames, GOOD, h1Call, h2Call, HELD_TOKEN, SLOW_TOKEN, startRpcApp, type RpcApp } from "./rpc-app.js";

const QUERY = "/pulsebase.platform.v1.DatabaseService/Query";
const query = (sql: string) => toBinary(QueryRequestSchema, create(QueryRequestSchema, { sql }));
const connectProto = { "content-type": "application/proto", "connect-protocol-version": "1", authorization: GOOD };

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Line = Record<string, any>;
const lines: Line[] = [];
const metrics = createMetrics();
let app: RpcApp;

beforeAll(async () => {
  const accessLog = pino({ level: "info" }, new Writable({
    write(chunk: Buffer, _e, done) {
      for (const l of chunk.toString("utf8").split("\n")) if (l) lines.push(JSON.parse(l) as Line);
      done();
    },
  }));
  app = await startRpcApp({ pipeline: "fast", logController: new ObservedLogController({ listener: "public", metrics: metrics.http, accessLog: accessLog.child({ listener: "public" }) }) });
});

afterAll(async () => {
  await app?.close();
});

/**
 * The access lines of a request, once a later call's line is in: a second
 * line of it would have been recorded before that call was answered, and
 * lines are written in the order recorded.
 */
async function linesOf(reqId: string): Promise<Line[]> {
  await until(async () => (lines.some((l) => l.reqId === reqId) ? true : undefined));
  const barrier = randomUUID();
  // (a path no route has: counted apart from the calls the tests count)
  await h2Call(app.url, "/barrier", { "x-request-id": barrier }, new Uint8Array(0));
  await until(async () => (lines.some((l) => l.reqId === barrier) ? true : undefined));
  return lines.filter((l) => l.reqId === reqId);
}

function count(text: string, labels: string): number {
  const line = text.split("\n").find((l) => l.startsWith("pulsebase_http_requests_total{") && l.includes(labels));
  return line ? Number(line.split(" ").pop()) : 0;
}

describe("the HTTP/2 stream lane", () => {
  it("stands in front of Node's compatibility layer on the TLS listener", () => {
    const listeners = app.server.listeners("stream") as { name: string }[];
    expect(listeners.map((l) => l.name)).toEqual(["laneOrCompat"]);
  });

  it("answers with the headers the same call gets over HTTP/1.1 (request id, CORS, protocol)", async () => {
    const id = randomUUID();
    const over2 = await h2Call(app.url, QUERY, { ...connectProto, "x-request-id": id }, query("x"));
    const over1 = await h1Call(app.url, QUERY, { ...connectProto, "x-request-id": id }, query("x"));
    expect(over2.status).toBe(200);
    expect(over2.headers["x-request-id"]).toBe(id);
    expect(fromBinary(QueryResponseSchema, over2.body).requestId).toBe("sql:x");
    const meaningful = (h: Record<string, string>) => {
      const { date: _d, connection: _c, "keep-alive": _k, ...rest } = h;
      return rest;
    };
    expect(meaningful(over2.headers)).toEqual(meaningful(over1.headers));
    expect(over2.headers).toMatchObject({ "access-control-allow-origin": "*", "content-type": "application/proto" });
    expect(over2.headers["access-control-expose-headers"]).toContain("grpc-status");
    // a request without a well-formed id gets a fresh one
    const fresh = await h2Call(app.url, QUERY, { ...connectProto, "x-request-id": "not an id" }, query("x"));
    expect(fresh.headers["x-request-id"]).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("records each call once in the access log and the request metrics, by procedure, with status and bytes", async () => {
    const before = await metrics.scrape();
    const ok = randomUUID();
    const a = await h2Call(app.url, QUERY, { ...connectProto, "x-request-id": ok }, query("x"));
    const denied = randomUUID();
    const g = await h2Call(app.url, QUERY, { "content-type": "application/grpc", te: "trailers", authorization: GOOD, "x-request-id": denied }, frame(query("denied")));
    expect(g.trailers["grpc-status"]).toBe("7");
    const [okLine] = await linesOf(ok);
    expect(await linesOf(ok)).toHaveLength(1);
    expect(okLine).toMatchObject({ listener: "public", method: "POST", route: QUERY, status: 200, bytes: a.body.length, msg: "request" });
    expect(okLine!.ms).toBeGreaterThan(0);
    const grpcLines = await linesOf(denied);
    expect(grpcLines).toHaveLength(1);
    // a gRPC error: HTTP 200 with the status in the trailers, and no body (no length to record, as on the routes)
    expect(grpcLines[0]).toMatchObject({ route: QUERY, status: 200 });
    expect(grpcLines[0]!.bytes).toBeUndefined();
    const after = await metrics.scrape();
    const labels = `listener="public",method="POST",route="${QUERY}",status="200"`;
    expect(count(after, labels) - count(before, labels)).toBe(2);
  });

  it("records 499 when the client goes away before the answer, and aborts the call's signal", async () => {
    const id = randomUUID();
    const n = app.slow.length;
    await expect(h2Call(app.url, QUERY, { ...connectProto, "x-request-id": id }, query("slow"), { resetAfterMs: 100 })).rejects.toThrow(/reset/);
    // the handler has ended (a late answer would be a second line)
    await until(async () => (app.slow.length > n ? true : undefined));
    const found = await linesOf(id);
    expect(found).toHaveLength(1);
    expect(found[0]).toMatchObject({ route: QUERY, status: 499 });
    // (how long it lasted is the client's timer against the server's clock: only that it was measured)
    expect(found[0]!.ms).toBeGreaterThan(0);
    expect(found[0]!.bytes).toBeUndefined();
    await until(async () => (app.slow.length > n ? true : undefined));
    expect(app.slow[n]).toMatchObject({ aborted: true });
  });

  it("refuses a body over the limit sent without a length, and goes on serving the connection", async () => {
    const session = http2.connect(app.url, { rejectUnauthorized: false });
    try {
      const call = (body: Buffer) =>
        new Promise<{ status: number; body: string }>((resolve, reject) => {
          const req = session.request({ ":method": "POST", ":path": QUERY, ...connectProto });
          let status = 0;
          const chunks: Buffer[] = [];
          req.on("response", (h) => (status = Number(h[":status"])));
          req.on("data", (c: Buffer) => chunks.push(c));
          req.on("end", () => resolve({ status, body: Buffer.concat(chunks).toString("utf8") }));
          req.on("error", reject);
          req.end(body);
        });
      const big = await call(Buffer.alloc(300 * 1024, 1));
      expect(big.status).toBe(429);
      expect(JSON.parse(big.body)).toMatchObject({ code: "resource_exhausted", details: [{ debug: { code: "payload_too_large" } }] });
      const fine = await call(Buffer.from(query("x")));
      expect(fine.status).toBe(200);
    } finally {
      session.close();
    }
  });

  it("keeps a body that arrived whole while the token was being checked, an empty one included", async () => {
    const slow = { ...connectProto, authorization: SLOW_TOKEN };
    const withBody = await h2Call(app.url, QUERY, slow, query("arrived early"));
    expect(withBody.status).toBe(200);
    expect(fromBinary(QueryResponseSchema, withBody.body).requestId).toBe("sql:arrived early");
    // an empty body (an empty DATA frame ends the stream): answered, not left hanging
    const empty = await Promise.race([
      h2Call(app.url, QUERY, slow, new Uint8Array(0)),
      new Promise<never>((_, reject) => setTimeout(() => reject(new Error("no answer within 2 s")), 2000)),
    ]);
    expect(empty.status).toBe(200);
    expect(fromBinary(QueryResponseSchema, empty.body).requestId).toBe("sql:");
  });

  it("closes the streams of refused calls: a connection retrying with a bad token stays usable, every refusal recorded", async () => {
    const session = http2.connect(app.url, { rejectUnauthorized: false });
    session.on("error", () => {});
    const call = (authorization: string, id: string) =>
      new Promise<number>((resolve, reject) => {
        const req = session.request({ ":method": "POST", ":path": QUERY, ...connectProto, authorization, "x-request-id": id });
        let status = 0;
        req.on("response", (h) => (status = Number(h[":status"])));
        req.on("error", reject);
        req.resume();
        req.on("end", () => resolve(status));
        req.end(Buffer.from(query("x")));
      });
    try {
      // more refusals than the connection's 100 concurrent streams: each must close
      const ids: string[] = Array.from({ length: 120 }, () => randomUUID());
      for (const id of ids) expect(await call("Bearer expired", id)).toBe(401);
      expect(await call(GOOD, randomUUID())).toBe(200);
      const last = await linesOf(ids[ids.length - 1]!);
      expect(last).toHaveLength(1);
      expect(last[0]).toMatchObject({ status: 401, route: QUERY });
      expect(lines.filter((l) => ids.includes(l.reqId as string))).toHaveLength(120);
    } finally {
      session.close();
    }
  });

  it("reserves nothing for bodies whose client went away while the token was checked", async () => {
    // 140 x 250 KB declared is past the application's share (32 MiB) if any of it stayed reserved
    const session = http2.connect(app.url, { rejectUnauthorized: false });
    session.on("error", () => {});
    await new Promise((r) => session.once("remoteSettings", r));
    // The server's side of each stream: closed once the server has taken the reset.
    let closed = 0;
    const onStream = (s: http2.ServerHttp2Stream) => s.once("close", () => closed++);
    app.server.on("stream", onStream);
    try {
      for (let round = 1; round <= 2; round++) {
        const streams = Array.from({ length: 70 }, () => {
          const req = session.request({ ":method": "POST", ":path": QUERY, ...connectProto, authorization: HELD_TOKEN, "content-length": "250000" });
          req.on("error", () => {});
          return req;
        });
        // every token check is running (the server has the headers) ...
        await until(async () => (app.heldTokens.pending() === 70 ? true : undefined), 10_000, 5);
        // ... when the client resets the streams; the checks end only once the server has taken every reset
        for (const req of streams) req.close(http2.constants.NGHTTP2_CANCEL);
        await until(async () => (closed === 70 * round ? true : undefined), 10_000, 5);
        app.heldTokens.release();
      }
    } finally {
      app.server.off("stream", onStream);
      app.heldTokens.release();
      session.close();
    }
    const body = Buffer.alloc(200_000, 1);
    const declared = await h2Call(app.url, QUERY, { ...connectProto, "content-length": String(body.length) }, body);
    // the body is no query message, but it was admitted and read: a parse error, not 503
    expect(declared.status).not.toBe(503);
  });

  it("cuts a gRPC call whose trailers HTTP/2 refuses, and serves on", async () => {
    const g = { "content-type": "application/grpc", te: "trailers", authorization: GOOD };
    await expect(h2Call(app.url, QUERY, g, frame(query("bad-trailer")))).rejects.toThrow();
    const a = await h2Call(app.url, QUERY, g, frame(query("x")));
    expect(a.trailers["grpc-status"]).toBe("0");
  });

  it("answers gRPC with its frame and trailers, a call without a body included", async () => {
    const a = await h2Call(app.url, QUERY, { "content-type": "application/grpc", te: "trailers", authorization: GOOD }, frame(query("x")));
    expect(a.trailers["grpc-status"]).toBe("0");
    expect(fromBinary(QueryResponseSchema, frames(a.body)[0]!.data).requestId).toBe("sql:x");
    // no body at all: an empty request message, not a hang
    const empty = await new Promise<number>((resolve, reject) => {
      const session = http2.connect(app.url, { rejectUnauthorized: false });
      const req = session.request({ ":method": "POST", ":path": QUERY, ...connectProto }, { endStream: true });
      req.on("response", (h) => resolve(Number(h[":status"])));
      req.on("error", reject);
      req.on("close", () => session.close());
      req.resume();
    });
    expect(empty).toBe(200);
  });
});

describe("calls the lane leaves to Fastify", () => {
  let listed: RpcApp;
  let proxied: RpcApp;
  beforeAll(async () => {
    [listed, proxied] = await Promise.all([
      startRpcApp({ pipeline: "fast", corsOrigins: ["https://app.example"] }),
      startRpcApp({ pipeline: "fast", trustedProxies: ["127.0.0.1"] }),
    ]);
  });
  afterAll(async () => {
    await Promise.all([listed?.close(), proxied?.close()]);
  });

  it("an Origin the CORS list allows gets it back; without one, Vary: Origin and no allowed origin", async () => {
    const allowed = await h2Call(listed.url, QUERY, { ...connectProto, origin: "https://app.example" }, query("x"));
    expect(allowed.status).toBe(200);
    expect(allowed.headers["access-control-allow-origin"]).toBe("https://app.example");
    const other = await h2Call(listed.url, QUERY, { ...connectProto, origin: "https://evil.example" }, query("x"));
    expect(other.headers["access-control-allow-origin"]).toBeUndefined();
    const none = await h2Call(listed.url, QUERY, connectProto, query("x"));
    expect(none.status).toBe(200);
    expect(none.headers.vary).toBe("Origin");
    expect(none.headers["access-control-allow-origin"]).toBeUndefined();
    expect(none.headers["access-control-expose-headers"]).toBe(allowed.headers["access-control-expose-headers"]);
  });

  it("behind a trusted proxy, the service sees the forwarded client address", async () => {
    const a = await h2Call(proxied.url, QUERY, { ...connectProto, "x-forwarded-for": "203.0.113.7" }, query("context"));
    expect(a.status).toBe(200);
    expect(JSON.parse(fromBinary(QueryResponseSchema, a.body).requestId)).toMatchObject({ address: "203.0.113.7" });
    // a direct client of the same listener: its own address
    const direct = await h2Call(app.url, QUERY, { ...connectProto, "x-forwarded-for": "203.0.113.7" }, query("context"));
    expect(JSON.parse(fromBinary(QueryResponseSchema, direct.body).requestId)).toMatchObject({ address: "127.0.0.1" });
  });
});
