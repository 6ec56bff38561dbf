// `pulsebase load`: registers a consumer, then drives one RPC over the
// Connect protocol with the binary codec on HTTP/2 against a running
// deployment, with a progress line per second and a summary.
import { create, toBinary } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { ConsumerService, CreateConsumerRequestSchema } from "../../gen/pulsebase/platform/v1/consumer_pb.js";
import { StartSessionRequestSchema } from "../../gen/pulsebase/platform/v1/session_pb.js";
import { h2Load } from "../load/h2-load.js";

export interface LoadOptions {
  url: string;
  appKey: string;
  rpc: string;
  durationSec: number;
  concurrency: number;
  insecure: boolean;
}

export async function runLoad(o: LoadOptions): Promise<void> {
  if (o.insecure) process.env.NODE_TLS_REJECT_UNAUTHORIZED = "0";
  const transport = createConnectTransport({ baseUrl: o.url, httpVersion: "2", useBinaryFormat: true });
  const consumers = createClient(ConsumerService, transport);
  const reg = { appKey: o.appKey, deviceId: `load-${process.pid}`, deviceModel: "load", userId: "load", os: "linux", country: "US", language: "en" };
  const me = await consumers.createConsumer(reg);
  const targets: Record<string, { path: string; body: Uint8Array; auth: boolean }> = {
    "session.start": { path: "/pulsebase.platform.v1.SessionService/StartSession", body: toBinary(StartSessionRequestSchema, create(StartSessionRequestSchema)), auth: true },
    "consumer.create": { path: "/pulsebase.platform.v1.ConsumerService/CreateConsumer", body: toBinary(CreateConsumerRequestSchema, create(CreateConsumerRequestSchema, reg)), auth: false },
  };
  const t = targets[o.rpc];
  if (!t) throw new Error(`unknown --rpc ${o.rpc}; one of ${Object.keys(targets).join(", ")}`);
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
    insecure: o.insecure,
    onTick: ({ elapsedMs, done, errors }) => {
      process.stderr.write(`\r${(elapsedMs / 1000).toFixed(0).padStart(3)}s  ${String(done - last).padStart(6)} req/s  total ${done}  errors ${errors}   `);
      last = done;
    },
  });
  process.stderr.write("\n");
  console.log(JSON.stringify({ rpc: o.rpc, requests: r.requests, errors: r.errors, rps: Math.round(r.rps), p50_ms: +r.p50Ms.toFixed(3), p99_ms: +r.p99Ms.toFixed(3), statuses: r.statuses }, null, 2));
}
