// Analytics through the whole server: POST /api/events over REST and
// Connect binary, and batch ingestion end to end over REST (100-item
// batches; items/s from the first request until the aggregates show every
// item) with one and with two worker processes (`src/server/worker.ts`) on
// JetStream. The bench server runs without in-process workers.
import { spawn, type ChildProcess } from "node:child_process";
import { create, toBinary } from "@bufbuild/protobuf";
import autocannon from "autocannon";
import { RecordEventRequestSchema } from "../../gen/pulsebase/platform/v1/analytics_pb.js";
import { createPgSql } from "../../src/infra/storage/pg-sql.js";
import { alternate, h1Load, h2, versusRest, type Row } from "../lib.js";
import type { BenchContext } from "../run.js";

function startWorker(ctx: BenchContext): ChildProcess {
  const url = new URL(ctx.databaseUrl);
  url.searchParams.set("options", `-c search_path=${ctx.schema},public`);
  return spawn(process.execPath, ["--import", "tsx", "src/server/worker.ts"], {
    // Without a metrics listener: a second worker would find the port taken and exit, and "2 worker processes" would measure one.
    env: { ...process.env, DATABASE_URL: url.toString(), NATS_URL: ctx.natsUrl, PULSEBASE_NATS_NAMESPACE: ctx.natsNamespace, PULSEBASE_LOG_LEVEL: "warn", PULSEBASE_WORKER_METRICS_PORT: "0" },
    stdio: ["ignore", "ignore", "inherit"],
  });
}

async function stop(children: ChildProcess[]): Promise<void> {
  await Promise.all(children.map((c) => new Promise<void>((resolve) => {
    if (c.exitCode !== null) return resolve();
    c.once("exit", () => resolve());
    c.kill("SIGTERM");
  })));
}

export async function analyticsScenarios(ctx: BenchContext): Promise<Row[]> {
  const { token, appId } = await ctx.newConsumer("analytics");
  const auth = { authorization: `Bearer ${token}`, "content-type": "application/json" };
  const d = ctx.durationSec;
  const rows: Row[] = [];
  const single = await h1Load({ url: `${ctx.https}/api/events`, method: "POST", headers: auth, body: JSON.stringify({ name: "tap", metadata: { screen: "home" } }), durationSec: d });
  const fastify = ctx.baseline("bare Fastify POST REST h1");
  rows.push({ scenario: "POST /api/events", transport: "REST h1", baseline: "bare Fastify POST REST h1", result: single, note: `${(single.rps / fastify.rps).toFixed(2)} x bare Fastify` });
  // REST and Connect turn about (alternate): their ratio is the point.
  const [restH2, connect] = await alternate(
    (t) => h2({ url: ctx.https, path: "/api/events", headers: auth, body: Buffer.from(JSON.stringify({ name: "tap", metadata: { screen: "home" } })), durationSec: t }),
    (t) => h2({
      url: ctx.https, path: "/pulsebase.platform.v1.AnalyticsService/RecordEvent",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/proto", "connect-protocol-version": "1" },
      body: toBinary(RecordEventRequestSchema, create(RecordEventRequestSchema, { name: "tap", metadata: { screen: "home" } })),
      durationSec: t,
    }),
    d,
  );
  rows.push({ scenario: "POST /api/events", transport: "REST h2", baseline: "bare Fastify POST REST h2", result: restH2 });
  rows.push({ scenario: "AnalyticsService/RecordEvent", transport: "Connect binary h2", baseline: "bare Fastify POST REST h2", result: connect, note: versusRest(connect, restH2, "REST h2") });

  const session = (await (await fetch(`${ctx.https}/api/session/start`, { method: "POST", headers: { authorization: `Bearer ${token}` } })).json()) as { session_id: number };
  const sql = createPgSql({ connectionString: ctx.databaseUrl, schema: ctx.schema, max: 2 });
  try {
    for (const workers of [1, 2]) {
      const name = `batch-${workers}w`;
      const body = JSON.stringify({
        events: Array.from({ length: 100 }, (_, i) => ({ name: `${name}-${i % 25}`, metadata: { screen: `s${i % 8}` }, session_id: session.session_id })),
      });
      const batches = 2000;
      const children = Array.from({ length: workers }, () => startWorker(ctx));
      await new Promise((r) => setTimeout(r, 3000)); // worker start-up (tsx)
      if (children.some((c) => c.exitCode !== null)) {
        await stop(children);
        throw new Error(`a worker process exited at start-up (${name}): the row would measure fewer workers than it names`);
      }
      const start = performance.now();
      let accepted = 0;
      const sent = autocannon({
        url: `${ctx.https}/api/events/batch`, method: "POST", headers: auth, body, connections: 16, amount: batches,
        setupClient: (c: { on: (e: string, f: (s: number) => void) => void }) => c.on("response", (s: number) => { if (s === 202) accepted++; }),
      } as autocannon.Options);
      await sent;
      const publishSec = (performance.now() - start) / 1000;
      const total = accepted * 100;
      const deadline = performance.now() + 120_000;
      let done = 0;
      while (performance.now() < deadline) {
        const { rows: r } = await sql.query<{ n: number | null }>(
          "SELECT sum(occurrences)::bigint AS n FROM analytics_events WHERE app_id = $1 AND name LIKE $2", [Number(appId), `${name}-%`]);
        done = Number(r[0]?.n ?? 0);
        if (done >= total) break;
        await new Promise((res) => setTimeout(res, 50));
      }
      const sec = (performance.now() - start) / 1000;
      await stop(children);
      rows.push({
        scenario: `events batch end to end, ${workers} worker process${workers > 1 ? "es" : ""}`,
        transport: "REST h1 + JetStream",
        result: { requests: done, errors: total - done, durationMs: sec * 1000, rps: done / sec, p50Ms: 0, p99Ms: 0, statuses: {} },
        note: `items/s; ${accepted} batches x 100 accepted, requests alone ${(total / publishSec).toFixed(0)} items/s`,
      });
    }
  } finally {
    await sql.close();
  }
  return rows;
}
