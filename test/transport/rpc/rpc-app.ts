// A public listener (buildPublicApp, TLS, HTTP/1.1 and HTTP/2) serving a
// DatabaseService and a ConsumerService whose implementations behave as the
// request asks (slow, failing, large answers), for the transport tests of
// the codecs and the dispatcher; and raw HTTP/2 and HTTP/1.1 calls that
// show status, headers, body and trailers as they went over the wire.
import { mkdtemp, rm } from "node:fs/promises";
import https from "node:https";
import http2 from "node:http2";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import type { LogController } from "fastify";
import pino from "pino";
import { ConsumerService } from "../../../gen/pulsebase/platform/v1/consumer_pb.js";
import { DatabaseService } from "../../../gen/pulsebase/platform/v1/database_pb.js";
import { decodeQueryRequest, encodeQueryResponse } from "../../../gen/fastcodec/pulsebase/platform/v1/database.js";
import { appError } from "../../../src/kernel/errors.js";
import { binding } from "../../../src/kernel/module.js";
import { consumerOf, kClientAddress, requestIdOf, type ConsumerPrincipal } from "../../../src/kernel/principal.js";
import { buildPublicApp } from "../../../src/server/public-app.js";
import { loadOrCreateTls } from "../../../src/server/tls.js";

export const GOOD = "Bearer good-token";
export const SLOW_TOKEN = "Bearer slow-token";
/** A token whose check stays pending until the test calls `heldTokens.release()`. */
export const HELD_TOKEN = "Bearer held-token";
const principal: ConsumerPrincipal = { consumerId: 1, appId: 7, appKey: "k", userId: "u", deviceId: "d" };

export interface RpcApp {
  url: string;
  port: number;
  /** Log lines at error level. */
  errors: Record<string, unknown>[];
  /** What the slow method saw when it ended: whether its signal was aborted. */
  slow: { aborted: boolean; timeoutMs: number | undefined }[];
  /** Calls the implementations received. */
  calls: string[];
  /** The listener's server (its 'stream' listeners show whether the HTTP/2 lane stands in front). */
  server: import("node:net").Server;
  /** Checks of HELD_TOKEN: how many are pending, and ending them (the token is good). */
  heldTokens: { pending(): number; release(): void };
  close(): Promise<void>;
}

export interface RpcAppOptions {
  pipeline: "fast" | "connect-node";
  bodyLimitBytes?: number;
  /** The access log and request metrics (default: none). */
  logController?: LogController;
  corsOrigins?: string[];
  trustedProxies?: string[];
}

export async function startRpcApp(opts: RpcAppOptions): Promise<RpcApp> {
  const dataDir = await mkdtemp(join(tmpdir(), "pulsebase-rpc-"));
  const tls = await loadOrCreateTls({ dataDir });
  const errors: Record<string, unknown>[] = [];
  const slow: RpcApp["slow"] = [];
  const calls: string[] = [];
  // Checks of HELD_TOKEN end when the test says so, not after a timer: a test
  // can act while the server is known to be checking the token.
  let held: Array<() => void> = [];
  const logger = pino({ level: "error" }, new Writable({
    write(chunk: Buffer, _e, done) {
      for (const l of chunk.toString().split("\n").filter(Boolean)) errors.push(JSON.parse(l) as Record<string, unknown>);
      done();
    },
  }));
  const db = binding(DatabaseService, {
    query(req, ctx) {
      calls.push(`query:${req.sql}`);
      const { appId } = consumerOf(ctx);
      switch (req.sql) {
        case "context":
          return { requestId: JSON.stringify({ appId, protocol: ctx.protocolName, address: ctx.values.get(kClientAddress), requestId: requestIdOf(ctx), timeoutMs: ctx.timeoutMs() }) };
        case "big":
          return { requestId: "x".repeat(5000) };
        case "slow":
          return new Promise((resolve) => {
            const timeoutMs = ctx.timeoutMs();
            setTimeout(() => {
              slow.push({ aborted: ctx.signal.aborted, timeoutMs });
              resolve({ requestId: "late" });
            }, 300);
          });
        case "boom":
          throw Object.assign(new Error("disk on fire"), { code: "ENOSPC" });
        case "denied":
          throw appError("forbidden_query", "Nope: not allowed, 100% sure.");
        case "bad-trailer":
          // a trailer HTTP/2 refuses to send (a connection header)
          ctx.responseTrailer.set("connection", "close");
          return { requestId: "t" };
        case "headers":
          ctx.responseHeader.set("x-custom", "yes");
          ctx.responseTrailer.set("x-trail", "end");
          return { requestId: "h" };
        default:
          return Promise.resolve({ requestId: `sql:${req.sql}` });
      }
    },
    batch: () => ({}),
    // The database module's own binary reader and writer, as the server binds them (database-module.ts).
  }, { query: { decode: decodeQueryRequest, encode: encodeQueryResponse } });
  const consumers = binding(ConsumerService, {
    createConsumer: (req) => {
      calls.push(`create:${req.deviceId}`);
      return { id: 5n, deviceId: req.deviceId, appKey: req.appKey };
    },
    updateConsumer: () => ({}),
    issueToken: () => ({}),
  });
  const { app } = await buildPublicApp({
    logger,
    tls,
    bodyLimitBytes: opts.bodyLimitBytes ?? 256 * 1024,
    bodyBudget: { limitBytes: 64 * 1024 * 1024, shareBytes: 32 * 1024 * 1024, timeoutMs: 30_000, minBytesPerSecond: 1 },
    http2MaxStreams: 100,
    maxFileBytes: 4 * 1024 * 1024,
    trustedProxies: opts.trustedProxies ?? [],
    corsOrigins: opts.corsOrigins ?? ["*"],
    logController: opts.logController,
    rpcPipeline: opts.pipeline,
    services: [db, consumers],
    authenticate: (h) => {
      if (h === GOOD) return principal;
      // A token not in the cache: checked asynchronously, while the body arrives.
      if (h === SLOW_TOKEN) return new Promise((resolve) => setTimeout(() => resolve(principal), 50));
      if (h === HELD_TOKEN) return new Promise((resolve) => held.push(() => resolve(principal)));
      throw appError("unauthenticated");
    },
    ready: () => Promise.resolve(),
  });
  await app.listen({ host: "127.0.0.1", port: 0 });
  const port = (app.server.address() as { port: number }).port;
  return {
    url: `https://127.0.0.1:${port}`,
    port,
    errors,
    slow,
    calls,
    server: app.server,
    heldTokens: {
      pending: () => held.length,
      release() {
        const now = held;
        held = [];
        for (const r of now) r();
      },
    },
    async close() {
      await app.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

export interface WireAnswer {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
  trailers: Record<string, string>;
}

function flat(h: Record<string, unknown>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(h)) if (!k.startsWith(":") && v !== undefined) out[k] = Array.isArray(v) ? v.join(", ") : String(v);
  return out;
}

/**
 * One HTTP/2 request. `send: false` sends the headers only and waits for the
 * answer without ever sending the body (a refusal before the body is read);
 * `resetAfterMs` cancels the stream then (a client going away).
 */
export function h2Call(url: string, path: string, headers: Record<string, string>, body?: Uint8Array, o: { send?: boolean; resetAfterMs?: number } = {}): Promise<WireAnswer> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(url, { rejectUnauthorized: false });
    session.on("error", reject);
    const req = session.request({ ":method": "POST", ":path": path, ...headers }, { endStream: false });
    let status = 0;
    let head: Record<string, string> = {};
    let trailers: Record<string, string> = {};
    const chunks: Buffer[] = [];
    req.on("response", (h) => {
      status = Number(h[":status"]);
      head = flat(h);
    });
    req.on("trailers", (t) => (trailers = flat(t)));
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      session.close();
      resolve({ status, headers: head, body: Buffer.concat(chunks), trailers });
    });
    req.on("error", (err) => {
      session.destroy();
      reject(err);
    });
    if (o.resetAfterMs !== undefined) {
      setTimeout(() => {
        req.close(http2.constants.NGHTTP2_CANCEL);
        session.destroy();
        reject(new Error("reset by the client"));
      }, o.resetAfterMs);
    }
    if (o.send === false) return;
    req.end(body ? Buffer.from(body) : undefined);
  });
}

/** One HTTP/1.1 request (a fresh connection). */
export function h1Call(url: string, path: string, headers: Record<string, string>, body?: Uint8Array): Promise<WireAnswer> {
  return new Promise((resolve, reject) => {
    const req = https.request(`${url}${path}`, { method: "POST", headers, rejectUnauthorized: false, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: flat(res.headers), body: Buffer.concat(chunks), trailers: flat(res.trailers) }));
    });
    req.on("error", reject);
    req.end(body ? Buffer.from(body) : undefined);
  });
}

/** A length-prefixed frame (gRPC, gRPC-Web). */
export function frame(data: Uint8Array, flags = 0): Buffer {
  const b = Buffer.alloc(5 + data.byteLength);
  b[0] = flags;
  b.writeUInt32BE(data.byteLength, 1);
  b.set(data, 5);
  return b;
}

/** The frames of a gRPC or gRPC-Web body. */
export function frames(body: Buffer): { flags: number; data: Buffer }[] {
  const out: { flags: number; data: Buffer }[] = [];
  let off = 0;
  while (off + 5 <= body.length) {
    const len = body.readUInt32BE(off + 1);
    out.push({ flags: body[off]!, data: body.subarray(off + 5, off + 5 + len) });
    off += 5 + len;
  }
  return out;
}

/** gRPC-Web trailer frame text as a record. */
export function webTrailers(data: Buffer): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of data.toString("latin1").split("\r\n")) {
    const i = line.indexOf(":");
    if (i > 0) out[line.slice(0, i).trim()] = line.slice(i + 1).trim();
  }
  return out;
}
