// Bench scenario: function invocation.
//   - bare:   isolated-vm alone: one warm isolate, the compiled handler called
//             with `apply` (arguments and result copied, promise awaited).
//   - warm:   the same handler through the service implementation
//             (pulsebase.platform.v1.FunctionService.Invoke: resolve, request
//             building, sandbox pool, response shaping, invocation record).
//   - cold:   first call after a deploy (isolate creation + module compile).
// Exported signature (for bench/run.ts):
//   export const name: string
//   export async function run(opts?: FunctionsBenchOptions): Promise<FunctionsBenchResult>
// Standalone: node --import tsx bench/scenarios/functions.ts [seconds] [postgres-url]
import { performance } from "node:perf_hooks";
import { create } from "@bufbuild/protobuf";
import { createContextValues, type HandlerContext } from "@connectrpc/connect";
import ivm from "isolated-vm";
import { HttpRequestSchema } from "../../gen/pulsebase/common/v1/options_pb.js";
import { createFunctionsModule } from "../../src/capabilities/functions/functions-module.js";
import { dbCapability, type FunctionDb } from "../../src/capabilities/database/function-db.js";
import { FREE_PLAN } from "../../src/capabilities/identity/plan.js";
import { kConsumer, kRequestId } from "../../src/kernel/principal.js";
import { migrate } from "../../src/infra/storage/migrate.js";
import { createPgliteSql } from "../../src/infra/storage/pglite-sql.js";
import { createPgSql } from "../../src/infra/storage/pg-sql.js";
import { createScratchSchema, dropScratchSchema } from "../../src/infra/storage/scratch-schema.js";
import type { Sql } from "../../src/infra/storage/sql.js";

export const name = "functions";

export interface FunctionsBenchOptions {
  /** Seconds per throughput phase (default 3). */
  seconds?: number;
  /** Invocations in flight during throughput phases (default 16). */
  concurrency?: number;
  /** Sequential calls measured for latency percentiles (default 2000). */
  latencySamples?: number;
  /** Cold starts measured (default 20). */
  coldSamples?: number;
  /** PostgreSQL for the service's tables (a fresh schema, dropped after); PGlite in memory when unset. */
  databaseUrl?: string;
}

export interface LatencyStats {
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
}

export interface FunctionsBenchResult {
  name: string;
  bare: { throughputPerSec: number; latency: LatencyStats };
  warm: { throughputPerSec: number; latency: LatencyStats };
  /** warm p50 minus bare p50 (the service's added latency). */
  addedP50Ms: number;
  cold: LatencyStats;
}

const HANDLER = `export default async function (req, ctx) { return { ok: true, n: req.query.n, who: ctx.consumer.id }; }`;

function stats(samples: number[]): LatencyStats {
  const s = [...samples].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? 0;
  return { p50Ms: round(at(0.5)), p90Ms: round(at(0.9)), p99Ms: round(at(0.99)) };
}
const round = (n: number) => Math.round(n * 1000) / 1000;

async function throughput(seconds: number, concurrency: number, call: (i: number) => Promise<unknown>): Promise<number> {
  const until = performance.now() + seconds * 1000;
  let done = 0;
  const worker = async (w: number) => {
    let i = w;
    while (performance.now() < until) {
      await call(i);
      i += concurrency;
      done++;
    }
  };
  const start = performance.now();
  await Promise.all(Array.from({ length: concurrency }, (_, w) => worker(w)));
  return Math.round(done / ((performance.now() - start) / 1000));
}

async function latency(samples: number, call: (i: number) => Promise<unknown>): Promise<LatencyStats> {
  const out: number[] = [];
  for (let i = 0; i < samples; i++) {
    const t = performance.now();
    await call(i);
    out.push(performance.now() - t);
  }
  return stats(out);
}

/** isolated-vm alone, as the baseline. */
async function bare(opts: { latencySamples: number; seconds: number; concurrency: number }) {
  const isolate = new ivm.Isolate({ memoryLimit: 64 });
  const context = await isolate.createContext();
  const mod = await isolate.compileModule(HANDLER);
  try {
    await mod.instantiate(context, () => {
      throw new Error("no imports");
    });
    await mod.evaluate();
    const fn = await mod.namespace.get("default", { reference: true });
    const call = (i: number) =>
      fn.apply(undefined, [{ query: { n: String(i) } }, { consumer: { id: 1 } }], {
        arguments: { copy: true },
        result: { promise: true, copy: true },
        timeout: 1000,
      });
    await latency(200, call);
    const lat = await latency(opts.latencySamples, call);
    const tput = await throughput(opts.seconds, opts.concurrency, call);
    fn.release();
    return { throughputPerSec: tput, latency: lat };
  } finally {
    mod.release();
    context.release();
    isolate.dispose();
  }
}

export async function run(options: FunctionsBenchOptions = {}): Promise<FunctionsBenchResult> {
  const opts = { seconds: 3, concurrency: 16, latencySamples: 2000, coldSamples: 20, ...options };
  const db = await openDb(opts.databaseUrl);
  const sql = db.sql;
  const noDb: FunctionDb = {
    query: async () => [],
    batch: async () => [],
  };
  const fn = createFunctionsModule({ sql, hostCapabilities: [dbCapability(noDb)], config: { resolveCacheMs: 1000 } });
  try {
    const team = await sql.query<{ id: number }>("INSERT INTO teams (name) VALUES ('bench') RETURNING id");
    const app = await sql.query<{ id: number }>(
      "INSERT INTO apps (team_id, name, app_key, plan) VALUES ($1, 'bench', 'bench-key', $2) RETURNING id",
      [team.rows[0]!.id, JSON.stringify({ ...FREE_PLAN, functionInvocationsPerMinute: 0 })],
    );
    const appId = Number(app.rows[0]!.id);
    const f = await fn.adminService.createFunction({ appId: BigInt(appId), name: "bench" } as never, {} as HandlerContext);
    await fn.adminService.deployVersion({ functionId: f.id, code: HANDLER, activate: true } as never, {} as HandlerContext);
    await fn.adminService.createHttpTrigger({ functionId: f.id, slug: "bench" } as never, {} as HandlerContext);

    const ctx = {
      values: createContextValues()
        .set(kConsumer, { consumerId: 1, appId, appKey: "bench-key", userId: "u", deviceId: "d" })
        .set(kRequestId, "bench"),
    } as unknown as HandlerContext;
    const reqs = Array.from({ length: 1024 }, (_, i) =>
      create(HttpRequestSchema, { method: "GET", pathParams: { slug: "bench" }, query: { n: String(i) }, headers: { accept: "application/json" } }),
    );
    const invoke = (i: number) => fn.invokeService.invoke(reqs[i % reqs.length]!, ctx) as Promise<unknown>;

    const b = await bare(opts);
    await latency(200, invoke);
    const warmLat = await latency(opts.latencySamples, invoke);
    const warmTput = await throughput(opts.seconds, opts.concurrency, invoke);

    // Cold start: a new version is deployed and activated, then called once.
    const cold: number[] = [];
    for (let i = 0; i < opts.coldSamples; i++) {
      await fn.adminService.deployVersion({ functionId: f.id, code: HANDLER + `\n// ${i}`, activate: true } as never, {} as HandlerContext);
      fn.runtime.invalidate();
      const t = performance.now();
      await invoke(i);
      cold.push(performance.now() - t);
    }
    return {
      name,
      bare: b,
      warm: { throughputPerSec: warmTput, latency: warmLat },
      addedP50Ms: round(warmLat.p50Ms - b.latency.p50Ms),
      cold: stats(cold),
    };
  } finally {
    await fn.close();
    await db.close();
  }
}

async function openDb(url: string | undefined): Promise<{ sql: Sql; close(): Promise<void> }> {
  if (!url) {
    const sql = await createPgliteSql();
    await migrate(sql);
    return { sql, close: () => sql.close() };
  }
  const schema = await createScratchSchema(url, "bench_fn");
  const sql = createPgSql({ connectionString: url, schema, max: 4 });
  await migrate(sql);
  return {
    sql,
    async close() {
      await sql.close();
      await dropScratchSchema(url, schema);
    },
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const seconds = Number(process.argv[2] ?? 3);
  run({ seconds, databaseUrl: process.argv[3] }).then(
    (r) => console.log(JSON.stringify(r, null, 2)),
    (err: unknown) => {
      console.error(err);
      process.exitCode = 1;
    },
  );
}
