// Linked-database benchmark scenarios.
//
//   setupDatabaseBench(env)       the fixture the REST / Connect transports
//                                 reuse: the platform DatabaseService impl, a
//                                 consumer principal whose app is linked to a
//                                 seeded embedded database, clean-up.
//   benchDatabase(env, opts)      in one run, through the service
//                                 implementation (no transport) and straight
//                                 on @libsql/client (the baseline) on the same
//                                 file: SELECT by primary key (sequential and
//                                 with `concurrency` in flight) and a 100-row
//                                 INSERT batch in a transaction. Prints and
//                                 returns per-request microseconds and the
//                                 service's overhead over the baseline.
//
// Standalone: node --import tsx bench/scenarios/database.ts
//   env DATABASE_URL (PostgreSQL for the service's own tables; PGlite when unset).
import { randomBytes, randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { create } from "@bufbuild/protobuf";
import { createContextValues, createHandlerContext, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import { createClient } from "@libsql/client";
import {
  BatchRequestSchema,
  DatabaseService,
  QueryRequestSchema,
  StatementSchema,
} from "../../gen/pulsebase/platform/v1/database_pb.js";
import { createDatabaseModule, type DatabaseModule } from "../../src/capabilities/database/database-module.js";
import { createDatabaseServiceImpl } from "../../src/capabilities/database/platform-service.js";
import { jsonToValue } from "../../src/capabilities/database/proto-values.js";
import { kConsumer, kRequestId, type ConsumerPrincipal } from "../../src/kernel/principal.js";
import { migrate } from "../../src/infra/storage/migrate.js";
import { createPgSql } from "../../src/infra/storage/pg-sql.js";
import { createScratchSchema, dropScratchSchema } from "../../src/infra/storage/scratch-schema.js";
import { createPgliteSql } from "../../src/infra/storage/pglite-sql.js";
import type { Sql } from "../../src/infra/storage/sql.js";

export interface DatabaseBenchEnv {
  /** PostgreSQL for the service's tables (a private schema, dropped after); PGlite when unset. */
  databaseUrl?: string;
}

export interface DatabaseBenchFixture {
  service: ServiceImpl<typeof DatabaseService>;
  module: DatabaseModule;
  principal: ConsumerPrincipal;
  /** Absolute path of the linked database file (seeded: table kv, ids 1..rows). */
  filePath: string;
  rows: number;
  /** A HandlerContext carrying the principal and a fresh request id. */
  context(): HandlerContext;
  close(): Promise<void>;
}

const SEED_ROWS = 10_000;

export async function setupDatabaseBench(env: DatabaseBenchEnv = {}): Promise<DatabaseBenchFixture> {
  let sql: Sql;
  let dropSchema = async () => {};
  if (env.databaseUrl) {
    const url = env.databaseUrl;
    const schema = await createScratchSchema(url, "bench_db");
    sql = createPgSql({ connectionString: url, schema, max: 4 });
    dropSchema = () => dropScratchSchema(url, schema);
  } else {
    sql = await createPgliteSql();
  }
  await migrate(sql);
  const dataDir = await mkdtemp(join(tmpdir(), "pb-bench-db-"));
  const module = await createDatabaseModule({ dataDir }, { sql });
  const team = Number((await sql.query<{ id: string }>("INSERT INTO teams (name) VALUES ('bench') RETURNING id")).rows[0]!.id);
  const appId = Number(
    (
      await sql.query<{ id: string }>("INSERT INTO apps (team_id, name, app_key, plan) VALUES ($1, 'bench', $2, '{}') RETURNING id", [
        team,
        randomBytes(8).toString("hex"),
      ])
    ).rows[0]!.id,
  );
  const db = await module.manager.create({ teamId: team, name: "bench" });
  await module.manager.link(db.id, appId);
  const filePath = join(dataDir, db.filePath!);
  // seed straight on the file
  const seed = createClient({ url: `file:${filePath}` });
  await seed.execute("CREATE TABLE kv (id INTEGER PRIMARY KEY, name TEXT NOT NULL, score REAL, note TEXT)");
  await seed.execute({
    sql: "INSERT INTO kv (id, name, score, note) SELECT value, 'name-' || value, value * 0.5, 'note' FROM generate_series(1, ?)",
    args: [SEED_ROWS],
  });
  await seed.execute("CREATE TABLE ins (id INTEGER PRIMARY KEY, a TEXT, b INTEGER)");
  seed.close();
  const principal: ConsumerPrincipal = { consumerId: 1, appId, appKey: "bench", userId: "u", deviceId: "d" };
  return {
    service: createDatabaseServiceImpl({ runner: module.runner }),
    module,
    principal,
    filePath,
    rows: SEED_ROWS,
    context() {
      const values = createContextValues().set(kConsumer, principal).set(kRequestId, randomUUID());
      return createHandlerContext({
        service: DatabaseService,
        method: DatabaseService.method.query,
        protocolName: "bench",
        requestMethod: "POST",
        url: "/api/db/query",
        contextValues: values,
      });
    },
    async close() {
      await module.stop();
      await sql.close();
      await dropSchema();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

export interface DatabaseBenchOptions {
  /** Sequential SELECTs per measurement (default 5000). */
  selects?: number;
  /** 100-row batches per measurement (default 200). */
  batches?: number;
  /** Requests in flight for the concurrent SELECT measurement (default 16). */
  concurrency?: number;
  log?: (line: string) => void;
}

export interface DatabaseBenchResult {
  /** Microseconds per request. */
  selectServiceUs: number;
  selectBaselineUs: number;
  selectOverheadUs: number;
  /** Microseconds per request with `concurrency` in flight (throughput view). */
  selectServiceConcurrentUs: number;
  selectBaselineConcurrentUs: number;
  /** Microseconds per 100-row transactional batch. */
  insertBatchServiceUs: number;
  insertBatchBaselineUs: number;
  insertBatchOverheadUs: number;
}

async function timeIt(n: number, fn: (i: number) => unknown): Promise<number> {
  const t = process.hrtime.bigint();
  for (let i = 0; i < n; i++) await fn(i);
  return Number(process.hrtime.bigint() - t) / 1e3 / n;
}

async function timeConcurrent(n: number, inFlight: number, fn: (i: number) => unknown): Promise<number> {
  const t = process.hrtime.bigint();
  let next = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < n) await fn(next++);
    }),
  );
  return Number(process.hrtime.bigint() - t) / 1e3 / n;
}

export async function benchDatabase(env: DatabaseBenchEnv = {}, opts: DatabaseBenchOptions = {}): Promise<DatabaseBenchResult> {
  const selects = opts.selects ?? 5000;
  const batches = opts.batches ?? 200;
  const concurrency = opts.concurrency ?? 16;
  const log = opts.log ?? ((l: string) => console.log(l));
  const fx = await setupDatabaseBench(env);
  const baseline = createClient({ url: `file:${fx.filePath}` });
  try {
    // the engine's connection settings, so both sides commit the same way
    // (WAL + synchronous=NORMAL: no fsync per commit)
    await baseline.execute("PRAGMA synchronous = NORMAL");
    const selectSql = "SELECT id, name, score, note FROM kv WHERE id = ?";
    const key = (i: number) => (i % fx.rows) + 1;
    const serviceSelect = (i: number) =>
      fx.service.query!(create(QueryRequestSchema, { sql: selectSql, params: jsonToValue([key(i)]) }), fx.context());
    const baselineSelect = (i: number) => baseline.execute({ sql: selectSql, args: [key(i)] });
    let row = 0;
    const batchRows = (i: number) => Array.from({ length: 100 }, (_, k) => [`a-${i}-${k}`, (row += 1)] as const);
    const serviceBatch = (i: number) =>
      fx.service.batch!(
        create(BatchRequestSchema, {
          transaction: true,
          statements: batchRows(i).map(([a, b]) =>
            create(StatementSchema, { sql: "INSERT INTO ins (a, b) VALUES (?, ?)", params: jsonToValue([a, b]) }),
          ),
        }),
        fx.context(),
      );
    const baselineBatch = (i: number) =>
      baseline.batch(
        batchRows(i).map(([a, b]) => ({ sql: "INSERT INTO ins (a, b) VALUES (?, ?)", args: [a, b] })),
        "write",
      );

    // warm up both paths (connections, compiled statements, JIT)
    await timeIt(500, serviceSelect);
    await timeIt(500, baselineSelect);
    await timeIt(10, serviceBatch);
    await timeIt(10, baselineBatch);

    // interleave two rounds each and keep the better one
    const best = async (f: () => Promise<number>) => Math.min(await f(), await f());
    const selectServiceUs = await best(() => timeIt(selects, serviceSelect));
    const selectBaselineUs = await best(() => timeIt(selects, baselineSelect));
    const selectServiceConcurrentUs = await best(() => timeConcurrent(selects, concurrency, serviceSelect));
    const selectBaselineConcurrentUs = await best(() => timeConcurrent(selects, concurrency, baselineSelect));
    const insertBatchServiceUs = await best(() => timeIt(batches, serviceBatch));
    const insertBatchBaselineUs = await best(() => timeIt(batches, baselineBatch));
    const r: DatabaseBenchResult = {
      selectServiceUs,
      selectBaselineUs,
      selectOverheadUs: selectServiceUs - selectBaselineUs,
      selectServiceConcurrentUs,
      selectBaselineConcurrentUs,
      insertBatchServiceUs,
      insertBatchBaselineUs,
      insertBatchOverheadUs: insertBatchServiceUs - insertBatchBaselineUs,
    };
    const f = (x: number) => x.toFixed(1).padStart(8);
    log("database: per request, microseconds          service  baseline  overhead");
    log(`  SELECT by primary key, sequential        ${f(selectServiceUs)}  ${f(selectBaselineUs)}  ${f(r.selectOverheadUs)}`);
    log(`  SELECT by primary key, ${String(concurrency).padStart(2)} in flight      ${f(selectServiceConcurrentUs)}  ${f(selectBaselineConcurrentUs)}  ${f(selectServiceConcurrentUs - selectBaselineConcurrentUs)}`);
    log(`  100-row INSERT batch in a transaction    ${f(insertBatchServiceUs)}  ${f(insertBatchBaselineUs)}  ${f(r.insertBatchOverheadUs)}`);
    return r;
  } finally {
    baseline.close();
    await fx.close();
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  await benchDatabase({ databaseUrl: process.env.DATABASE_URL });
}
