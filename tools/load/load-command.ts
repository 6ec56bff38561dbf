// `pulsebase load`: registers a consumer, then drives one RPC over the
// Connect protocol with the binary codec on HTTP/2 against a running
// deployment, with a progress line per second and a summary.
import { create, toBinary } from "@bufbuild/protobuf";
import { ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { ErrorDetailSchema } from "../../gen/pulsebase/common/v1/error_pb.js";
import { ConsumerService, CreateConsumerRequestSchema } from "../../gen/pulsebase/platform/v1/consumer_pb.js";
import { StartSessionRequestSchema } from "../../gen/pulsebase/platform/v1/session_pb.js";
import { h2Load } from "./h2-load.js";
import { networkCode } from "../../src/server/admin-target.js";

export interface LoadOptions {
  url: string;
  appKey: string;
  rpc: string;
  durationSec: number;
  concurrency: number;
  /** Per request (and per connection attempt). */
  requestTimeoutMs: number;
  insecure: boolean;
}

export interface LoadSummary {
  rpc: string;
  duration_s: number;
  /** Requests sent (succeeded + failed). */
  requests: number;
  succeeded: number;
  /** Sent, but answered with an error status, reset, or not answered in time. */
  failed: number;
  /** Not sent: the connection could not be made or was lost. */
  unsent: number;
  /** Successful requests per second. */
  rps: number;
  p50_ms: number;
  p99_ms: number;
  statuses: Record<string, number>;
  /** Why requests failed or were not sent. */
  failures: Record<string, number>;
}

/** A load run that could not start; its message is for the operator as is. */
export class LoadError extends Error {}

export async function runLoad(o: LoadOptions): Promise<LoadSummary> {
  if (!Number.isFinite(o.durationSec) || o.durationSec <= 0) throw new LoadError("--duration must be a positive number of seconds");
  if (!Number.isInteger(o.concurrency) || o.concurrency < 1) throw new LoadError("--concurrency must be a positive integer");
  if (!Number.isFinite(o.requestTimeoutMs) || o.requestTimeoutMs <= 0) throw new LoadError("--request-timeout must be a positive number of seconds");
  if (o.insecure) process.env.NODE_TLS_REJECT_UNAUTHORIZED = "0";
  const transport = createConnectTransport({ baseUrl: o.url, httpVersion: "2", useBinaryFormat: true, defaultTimeoutMs: o.requestTimeoutMs });
  const consumers = createClient(ConsumerService, transport);
  const reg = { appKey: o.appKey, deviceId: `load-${process.pid}`, deviceModel: "load", userId: "load", os: "linux", country: "US", language: "en" };
  const targets: Record<string, { path: string; body: Uint8Array; auth: boolean }> = {
    "session.start": { path: "/pulsebase.platform.v1.SessionService/StartSession", body: toBinary(StartSessionRequestSchema, create(StartSessionRequestSchema)), auth: true },
    "consumer.create": { path: "/pulsebase.platform.v1.ConsumerService/CreateConsumer", body: toBinary(CreateConsumerRequestSchema, create(CreateConsumerRequestSchema, reg)), auth: false },
  };
  const t = targets[o.rpc];
  if (!t) throw new LoadError(`unknown --rpc ${o.rpc}; one of ${Object.keys(targets).join(", ")}`);
  let me;
  try {
    me = await consumers.createConsumer(reg);
  } catch (err) {
    const net = networkCode(err);
    if (net) throw new LoadError(`cannot reach ${o.url} (${net}): is the server running and the URL right?`);
    const detail = err instanceof ConnectError ? err.findDetails(ErrorDetailSchema)[0] : undefined;
    throw new LoadError(`registering the load consumer at ${o.url} failed: ${detail?.code ? `${detail.code}: ` : ""}${err instanceof ConnectError ? err.rawMessage : (err as Error).message}`);
  }
  const connections = Math.max(1, Math.min(8, Math.ceil(o.concurrency / 8)));
  console.error(`driving ${o.rpc} for ${o.durationSec}s, ${connections} connections x ${Math.ceil(o.concurrency / connections)} streams`);
  let last = 0;
  const r = await h2Load({
    url: o.url,
    path: t.path,
    headers: { "content-type": "application/proto", "connect-protocol-version": "1", ...(t.auth ? { authorization: `Bearer ${me.token}` } : {}) },
    body: t.body,
    connections,
    streams: Math.ceil(o.concurrency / connections),
    durationMs: o.durationSec * 1000,
    requestTimeoutMs: o.requestTimeoutMs,
    insecure: o.insecure,
    onTick: ({ elapsedMs, done, failed, unsent }) => {
      process.stderr.write(`\r${(elapsedMs / 1000).toFixed(0).padStart(3)}s  ${String(done - last).padStart(6)} req/s  ok ${done}  failed ${failed}  unsent ${unsent}   `);
      last = done;
    },
  });
  process.stderr.write("\n");
  if (r.failed || r.unsent) {
    const why = Object.entries(r.reasons).map(([k, n]) => `${k}: ${n}`).join(", ");
    console.error(`${r.failed} request(s) failed, ${r.unsent} not sent (${why})`);
  }
  return {
    rpc: o.rpc,
    duration_s: +(r.durationMs / 1000).toFixed(3),
    requests: r.requests + r.failed,
    succeeded: r.requests,
    failed: r.failed,
    unsent: r.unsent,
    rps: Math.round(r.rps),
    p50_ms: +r.p50Ms.toFixed(3),
    p99_ms: +r.p99Ms.toFixed(3),
    statuses: r.statuses,
    failures: r.reasons,
  };
}
