// Analytics benchmark scenarios.
//
//   benchSingleEvent(env, opts)     POST /api/events through the service
//                                   implementation (no transport): req/s.
//   benchBatchIngestion(env, opts)  100-item event batches end to end: items/s
//                                   from the first publish until the aggregates
//                                   show every item, with N worker processes.
//   setupAnalyticsBench(env)        the fixture the REST / Connect transports
//                                   reuse (service impl, a consumer, clean-up).
//
// Standalone: node --import tsx bench/scenarios/analytics.ts
//   env DATABASE_URL (default postgres://root@127.0.0.1:5432/test),
//   NATS_URL (default nats://127.0.0.1:4222; "" for the embedded table queue).
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { create } from "@bufbuild/protobuf";
import { createContextValues, createHandlerContext, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import { connect } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { AnalyticsService, BatchEventsRequestSchema, RecordEventRequestSchema } from "../../gen/pulsebase/platform/v1/analytics_pb.js";
import { createAnalyticsServiceImpl } from "../../src/capabilities/analytics/analytics-service.js";
import { createDirBlobStore } from "../../src/infra/blobs/dir-blob-store.js";
import { kConsumer, type ConsumerPrincipal } from "../../src/kernel/principal.js";
import { createQueue } from "../../src/infra/queue/create-queue.js";
import type { Queue } from "../../src/infra/queue/queue.js";
import { NatsLink } from "../../src/infra/nats/nats-link.js";
import { createPgSql } from "../../src/infra/storage/pg-sql.js";
import { createScratchSchema, dropScratchSchema } from "../../src/infra/storage/scratch-schema.js";
import { migrate } from "../../src/infra/storage/migrate.js";
import type { Sql } from "../../src/infra/storage/sql.js";

export interface AnalyticsBenchEnv {
  /** PostgreSQL server; a private schema is created and dropped. */
  databaseUrl: string;
  /** JetStream; unset selects the embedded table queue (in PostgreSQL here). */
  natsUrl?: string;
}

export interface BenchResult {
  name: string;
  /** Requests (single) or events (batch) completed. */
  items: number;
  seconds: number;
  perSecond: number;
  notes: string;
}

export interface AnalyticsBenchFixture {
  sql: Sql;
  queue: Queue;
  impl: ServiceImpl<typeof AnalyticsService>;
  schema: string;
  appId: number;
  /** Consumers of the app, each with one session. */
  consumers: Array<ConsumerPrincipal & { sessionId: number }>;
  /** A HandlerContext carrying consumer i (for calling impl directly). */
  contextFor(i: number, headers?: Record<string, string>): HandlerContext;
  close(): Promise<void>;
}

export async function setupAnalyticsBench(env: AnalyticsBenchEnv, consumerCount = 20): Promise<AnalyticsBenchFixture> {
  const schema = await createScratchSchema(env.databaseUrl, "bench_analytics");
  const sql = createPgSql({ connectionString: env.databaseUrl, schema, max: 8 });
  await migrate(sql);
  const blobDir = await mkdtemp(join(tmpdir(), "pb-bench-blobs-"));
  const names = { stream: schema.toUpperCase(), subjectPrefix: `bench.${schema}` };
  const nats = env.natsUrl ? new NatsLink({ servers: env.natsUrl, name: "bench" }) : undefined;
  const queue = createQueue({ name: "analytics", sql, nats, jetstream: names });
  const impl = createAnalyticsServiceImpl({ sql, queue, blobs: createDirBlobStore(blobDir) });

  const team = await sql.query<{ id: number }>("INSERT INTO teams (name) VALUES ('bench') RETURNING id");
  const app = await sql.query<{ id: number }>(
    "INSERT INTO apps (team_id, name, app_key, plan) VALUES ($1, 'bench', $2, '{}'::jsonb) RETURNING id",
    [team.rows[0]!.id, `bench-${schema}`],
  );
  const appId = Number(app.rows[0]!.id);
  const { rows } = await sql.query<{ id: number; user_id: string; device_id: string; session_id: number }>(
    `WITH c AS (
       INSERT INTO consumers (app_id, user_id, device_id, device_model, os, country, language)
       SELECT $1, 'user-' || (g % $3), 'device-' || g, 'bench', 'android', 'NL', 'nl' FROM generate_series(1, $2) g
       RETURNING id, user_id, device_id
     ), s AS (
       INSERT INTO sessions (consumer_id, app_id, started_at) SELECT id, $1, now() FROM c RETURNING id, consumer_id
     )
     SELECT c.id, c.user_id, c.device_id, s.id AS session_id FROM c JOIN s ON s.consumer_id = c.id ORDER BY c.id`,
    [appId, consumerCount, Math.max(1, Math.floor(consumerCount / 2))],
  );
  const consumers = rows.map((r) => ({
    consumerId: Number(r.id), appId, appKey: `bench-${schema}`, userId: r.user_id, deviceId: r.device_id, sessionId: Number(r.session_id),
  }));

  return {
    sql, queue, impl, schema, appId, consumers,
    contextFor(i, headers = {}) {
      const values = createContextValues();
      values.set(kConsumer, consumers[i % consumers.length]);
      return createHandlerContext({
        service: AnalyticsService,
        method: AnalyticsService.method.recordEvent,
        protocolName: "bench",
        requestMethod: "POST",
        url: "http://bench/api/events",
        requestHeader: headers,
        contextValues: values,
      });
    },
    async close() {
      await queue.close();
      await nats?.close();
      await sql.close();
      await rm(blobDir, { recursive: true, force: true });
      if (env.natsUrl) {
        const nc = await connect({ servers: env.natsUrl });
        const jsm = await jetstreamManager(nc);
        await jsm.streams.delete(names.stream).catch(() => {});
        await jsm.streams.delete(`${names.stream}_DLQ`).catch(() => {});
        await nc.close();
      }
      await dropScratchSchema(env.databaseUrl, schema);
    },
  };
}

/** RecordEvent calls (synchronous single endpoint), `concurrency` in flight. */
export async function benchSingleEvent(env: AnalyticsBenchEnv, opts: { durationMs: number; concurrency: number }): Promise<BenchResult> {
  const fx = await setupAnalyticsBench(env);
  try {
    let done = 0;
    const start = performance.now();
    const end = start + opts.durationMs;
    await Promise.all(
      Array.from({ length: opts.concurrency }, async (_, w) => {
        for (let i = 0; performance.now() < end; i++) {
          const req = create(RecordEventRequestSchema, { name: `screen-${i % 20}`, metadata: { variant: String(i % 4), os: "android" } });
          await fx.impl.recordEvent!(req, fx.contextFor(w + i));
          done++;
        }
      }),
    );
    const seconds = (performance.now() - start) / 1000;
    return { name: "analytics: single event (service impl)", items: done, seconds, perSecond: done / seconds, notes: `concurrency ${opts.concurrency}` };
  } finally {
    await fx.close();
  }
}

function spawnWorker(env: AnalyticsBenchEnv, fx: AnalyticsBenchFixture, concurrency: number): Promise<ChildProcess> {
  const script = fileURLToPath(new URL("./analytics-worker.ts", import.meta.url));
  const child = spawn(process.execPath, ["--import", "tsx", script, JSON.stringify({
    databaseUrl: env.databaseUrl, schema: fx.schema, natsUrl: env.natsUrl, stream: fx.schema.toUpperCase(), subjectPrefix: `bench.${fx.schema}`, concurrency,
  })], { stdio: ["ignore", "pipe", "inherit"] });
  return new Promise((resolve, reject) => {
    child.stdout!.once("data", () => resolve(child));
    child.once("exit", (code) => reject(new Error(`worker exited with ${code}`)));
  });
}

/**
 * 100-item event batches published through BatchEvents, applied by
 * `workerProcesses` worker processes. Measures items/s from the first publish
 * until the aggregates count every item.
 */
export async function benchBatchIngestion(
  env: AnalyticsBenchEnv,
  opts: { batches: number; batchSize?: number; workerProcesses: number; workerConcurrency?: number; publishConcurrency?: number },
): Promise<BenchResult> {
  const batchSize = opts.batchSize ?? 100;
  const fx = await setupAnalyticsBench(env);
  const children: ChildProcess[] = [];
  try {
    await fx.queue.ready();
    for (let i = 0; i < opts.workerProcesses; i++) children.push(await spawnWorker(env, fx, opts.workerConcurrency ?? 32));
    const total = opts.batches * batchSize;
    const requests = Array.from({ length: opts.batches }, (_, b) => {
      const c = fx.consumers[b % fx.consumers.length]!;
      return create(BatchEventsRequestSchema, {
        events: Array.from({ length: batchSize }, (_, i) => ({
          name: `event-${(b + i) % 25}`,
          metadata: { screen: `s${i % 8}`, variant: String(b % 3) },
          sessionId: BigInt(c.sessionId),
        })),
      });
    });
    const start = performance.now();
    let next = 0;
    let publishedAt = 0;
    const publishing = Promise.all(
      Array.from({ length: opts.publishConcurrency ?? 16 }, async () => {
        while (next < requests.length) {
          const b = next++;
          await fx.impl.batchEvents!(requests[b]!, fx.contextFor(b));
        }
      }),
    ).then(() => (publishedAt = performance.now()));
    for (;;) {
      const { rows } = await fx.sql.query<{ n: number | null }>("SELECT sum(occurrences)::bigint AS n FROM analytics_events WHERE app_id = $1", [fx.appId]);
      if (Number(rows[0]?.n ?? 0) >= total) break;
      await new Promise((r) => setTimeout(r, 25));
    }
    await publishing;
    const seconds = (performance.now() - start) / 1000;
    const publishSeconds = (publishedAt - start) / 1000;
    return {
      name: `analytics: batch ingestion end to end, ${opts.workerProcesses} worker process(es), ${env.natsUrl ? "JetStream" : "embedded queue"}`,
      items: total,
      seconds,
      perSecond: total / seconds,
      notes: `${opts.batches} batches x ${batchSize}; publish alone ${(total / publishSeconds).toFixed(0)} items/s`,
    };
  } finally {
    await Promise.all(children.map((c) => new Promise<void>((resolve) => {
      if (c.exitCode !== null) return resolve();
      c.once("exit", () => resolve());
      c.kill("SIGTERM");
    })));
    await fx.close();
  }
}

/**
 * Worker throughput alone: publish a backlog first, then start the worker
 * processes and time until every batch is applied (includes process start).
 */
export async function benchWorkerDrain(
  env: AnalyticsBenchEnv,
  opts: { batches: number; batchSize?: number; workerProcesses: number; workerConcurrency?: number },
): Promise<BenchResult> {
  const batchSize = opts.batchSize ?? 100;
  const fx = await setupAnalyticsBench(env);
  const children: ChildProcess[] = [];
  try {
    await fx.queue.ready();
    for (let b = 0; b < opts.batches; b++) {
      const c = fx.consumers[b % fx.consumers.length]!;
      await fx.impl.batchEvents!(
        create(BatchEventsRequestSchema, {
          events: Array.from({ length: batchSize }, (_, i) => ({
            name: `event-${(b + i) % 25}`,
            metadata: { screen: `s${i % 8}`, variant: String(b % 3) },
            sessionId: BigInt(c.sessionId),
          })),
        }),
        fx.contextFor(b),
      );
    }
    await Promise.all(Array.from({ length: opts.workerProcesses }, async () => children.push(await spawnWorker(env, fx, opts.workerConcurrency ?? 32))));
    // Timed from the moment every worker is up; batches applied before count out.
    const start = performance.now();
    const done0 = Number((await fx.sql.query<{ n: number }>("SELECT count(*)::int AS n FROM analytics_processed_batches")).rows[0]?.n ?? 0);
    for (;;) {
      const { rows } = await fx.sql.query<{ n: number }>("SELECT count(*)::int AS n FROM analytics_processed_batches");
      if (Number(rows[0]?.n ?? 0) >= opts.batches) break;
      await new Promise((r) => setTimeout(r, 25));
    }
    const seconds = (performance.now() - start) / 1000;
    const total = (opts.batches - done0) * batchSize;
    return {
      name: `analytics: worker drain of a backlog, ${opts.workerProcesses} worker process(es) x ${opts.workerConcurrency ?? 32}`,
      items: total,
      seconds,
      perSecond: total / seconds,
      notes: `${opts.batches} batches x ${batchSize}, ${done0} applied before every worker was up`,
    };
  } finally {
    await Promise.all(children.map((c) => new Promise<void>((resolve) => {
      if (c.exitCode !== null) return resolve();
      c.once("exit", () => resolve());
      c.kill("SIGTERM");
    })));
    await fx.close();
  }
}

/** Every analytics scenario with default sizes. */
export async function runAnalyticsBench(env: AnalyticsBenchEnv): Promise<BenchResult[]> {
  const out: BenchResult[] = [];
  out.push(await benchSingleEvent(env, { durationMs: 5000, concurrency: 16 }));
  out.push(await benchBatchIngestion(env, { batches: 2000, workerProcesses: 1 }));
  out.push(await benchBatchIngestion(env, { batches: 2000, workerProcesses: 2 }));
  out.push(await benchWorkerDrain(env, { batches: 2000, workerProcesses: 1 }));
  out.push(await benchWorkerDrain(env, { batches: 2000, workerProcesses: 2 }));
  return out;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const env: AnalyticsBenchEnv = {
    databaseUrl: process.env.DATABASE_URL ?? "postgres://root@127.0.0.1:5432/test",
    natsUrl: process.env.NATS_URL ?? "nats://127.0.0.1:4222",
  };
  if (env.natsUrl === "") delete env.natsUrl;
  const only = process.argv[2];
  const results =
    only === "single"
      ? [await benchSingleEvent(env, { durationMs: 5000, concurrency: Number(process.argv[3] ?? 16) })]
      : only === "drain"
      ? [await benchWorkerDrain(env, { batches: Number(process.env.BENCH_BATCHES ?? 2000), workerProcesses: Number(process.argv[3] ?? 1), workerConcurrency: Number(process.argv[4] ?? 32) })]
      : only === "e2e"
        ? [await benchBatchIngestion(env, { batches: Number(process.env.BENCH_BATCHES ?? 2000), workerProcesses: Number(process.argv[3] ?? 1), workerConcurrency: Number(process.argv[4] ?? 32) })]
        : await runAnalyticsBench(env);
  for (const r of results) {
    console.log(`${r.name}: ${r.perSecond.toFixed(0)}/s (${r.items} in ${r.seconds.toFixed(2)} s; ${r.notes})`);
  }
}
