// Linked database through the whole server: SELECT by primary key over REST
// (HTTP/1.1 and HTTP/2) and Connect binary (HTTP/2), a 100-row INSERT batch in
// a transaction over REST, and, in the same run, the same operations straight
// on @libsql/client against the same file (the baseline).
import { join } from "node:path";
import { create, toBinary } from "@bufbuild/protobuf";
import { createClient as createLibsql } from "@libsql/client";
import { DatabaseService as AdminDatabaseService } from "../../gen/pulsebase/admin/v1/database_pb.js";
import { QueryRequestSchema } from "../../gen/pulsebase/platform/v1/database_pb.js";
import { jsonToValue } from "../../src/capabilities/database/proto-values.js";
import { alternateAll, closedLoop, h1Load, h2, inProcessLoad, seqLoad, versusRest, type BenchResult, type Row } from "../lib.js";
import type { BenchContext } from "../run.js";

const SEED = 10_000;

/** An app with a linked database holding `kv` (SEED rows) and a device token for it. */
export async function seedPkTable(ctx: BenchContext, name = "database") {
  const { token, appId, teamId } = await ctx.newConsumer(name);
  const dbs = ctx.adminClient(AdminDatabaseService);
  const db = await dbs.createDatabase({ teamId, name: "bench" });
  await dbs.linkDatabase({ databaseId: db.id, appId });
  const auth = { authorization: `Bearer ${token}`, "content-type": "application/json" };
  const q = (body: unknown) => fetch(`${ctx.https}/api/db/batch`, { method: "POST", headers: auth, body: JSON.stringify(body) }).then((r) => r.json());
  await q({ statements: [{ sql: "CREATE TABLE kv (id INTEGER PRIMARY KEY, v TEXT)" }] });
  for (let i = 0; i < SEED; i += 1000) {
    await q({ transaction: true, statements: [{ sql: "INSERT INTO kv (id, v) SELECT value, 'value-' || value FROM json_each(?)", params: [JSON.stringify(Array.from({ length: 1000 }, (_, k) => i + k + 1))] }] });
  }
  const file = join(ctx.dataDir, "databases", (await dbs.getDatabase({ id: db.id })).filePath.split("/").pop()!);
  return { token, auth, file, select: { sql: "SELECT id, v FROM kv WHERE id = ?", params: [4242] } };
}

export async function databaseScenarios(ctx: BenchContext): Promise<Row[]> {
  const { token, auth, file, select } = await seedPkTable(ctx);
  const bare = createLibsql({ url: `file:${file}` });
  const d = ctx.durationSec;
  const rows: Row[] = [];

  // One request at a time: the per-request overhead of the HTTP path.
  rows.push({ scenario: "SELECT by PK, 1 in flight", transport: "@libsql/client in process", result: await inProcessLoad(() => bare.execute({ sql: select.sql, args: [4242] }), 1, d) });
  rows.push({
    scenario: "SELECT by PK, 1 in flight", transport: "REST h1", baseline: "SELECT by PK, 1 in flight @libsql/client in process",
    result: await seqLoad({ url: `${ctx.https}/api/db/query`, method: "POST", headers: auth, body: JSON.stringify(select), durationSec: d }),
  });
  rows.push({ scenario: "SELECT by PK", transport: "@libsql/client in process", result: await inProcessLoad(() => bare.execute({ sql: select.sql, args: [4242] }), 16, d) });
  const fastify = ctx.baseline("bare Fastify POST REST h1");
  // the gateway's fixed cost: TLS, routing, the envelope, no service call
  rows.push({
    scenario: "/api/db/query, no token (401)", transport: "REST h1", baseline: "bare Fastify POST REST h1",
    result: await h1Load({ url: `${ctx.https}/api/db/query`, method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(select), durationSec: d, ok: (s) => s === 401 }),
  });
  const pk = await h1Load({ url: `${ctx.https}/api/db/query`, method: "POST", headers: auth, body: JSON.stringify(select), durationSec: d });
  rows.push({ scenario: "SELECT by PK /api/db/query", transport: "REST h1", baseline: "SELECT by PK @libsql/client in process", result: pk, note: `${(pk.rps / fastify.rps).toFixed(2)} x bare Fastify` });
  // REST, Connect and the bare POST on h2 turn about (alternateAll): their ratios are the point.
  const bareUrl = new URL(ctx.bareUrl);
  const [pkH2, pkConnect, bareH2] = (await alternateAll([
    (t) => h2({ url: ctx.https, path: "/api/db/query", headers: auth, body: Buffer.from(JSON.stringify(select)), durationSec: t }),
    (t) => h2({
      url: ctx.https,
      path: "/pulsebase.platform.v1.DatabaseService/Query",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/proto", "connect-protocol-version": "1" },
      body: toBinary(QueryRequestSchema, create(QueryRequestSchema, { sql: select.sql, params: jsonToValue([4242]) })),
      durationSec: t,
    }),
    (t) => h2({ url: bareUrl.origin, path: bareUrl.pathname, headers: { "content-type": "application/json" }, body: Buffer.from(JSON.stringify({ x: 1 })), durationSec: t }),
  ], d)) as [BenchResult, BenchResult, BenchResult];
  rows.push({ scenario: "bare Fastify POST, turn about with the PK read", transport: "REST h2", result: bareH2 });
  rows.push({ scenario: "SELECT by PK /api/db/query", transport: "REST h2", baseline: "SELECT by PK @libsql/client in process", result: pkH2 });
  rows.push({
    scenario: "SELECT by PK DatabaseService/Query", transport: "Connect binary h2", baseline: "SELECT by PK @libsql/client in process", result: pkConnect,
    note: versusRest(pkConnect, pkH2, "REST h2", { name: "bare Fastify POST h2 (turn about)", result: bareH2 }),
  });
  // The same call through connect-es's router (PULSEBASE_RPC_PIPELINE=connect-node,
  // what served it before the project's own codecs), in the same run.
  const viaRouter = await ctx.variant({ PULSEBASE_RPC_PIPELINE: "connect-node" });
  try {
    const seeded = await seedPkTable(viaRouter.ctx, "database-router");
    const routed = await h2({
      url: viaRouter.ctx.https,
      path: "/pulsebase.platform.v1.DatabaseService/Query",
      headers: { authorization: `Bearer ${seeded.token}`, "content-type": "application/proto", "connect-protocol-version": "1" },
      body: toBinary(QueryRequestSchema, create(QueryRequestSchema, { sql: select.sql, params: jsonToValue([4242]) })),
      durationSec: d,
    });
    rows.push({
      scenario: "SELECT by PK DatabaseService/Query", transport: "Connect binary h2, connect-node router", baseline: "SELECT by PK @libsql/client in process", result: routed,
      note: versusRest(routed, pkH2, "REST h2", { name: "bare Fastify POST h2", result: ctx.baseline("bare Fastify POST REST h2") }),
    });
  } finally {
    await viaRouter.stop();
  }

  let next = SEED + 1_000_000;
  const batchArgs = () => Array.from({ length: 100 }, () => ({ sql: "INSERT INTO kv (id, v) VALUES (?, ?)", args: [next++, "x"] }));
  rows.push({ scenario: "100-row INSERT tx", transport: "@libsql/client in process", result: await inProcessLoad(() => bare.batch(batchArgs(), "write"), 1, d) });
  // Ids from autoincrement so the same request body can repeat.
  const insertBody = JSON.stringify({ transaction: true, statements: Array.from({ length: 100 }, () => ({ sql: "INSERT INTO kv (v) VALUES (?)", params: ["x"] })) });
  rows.push({
    scenario: "100-row INSERT tx /api/db/batch", transport: "REST h1", baseline: "100-row INSERT tx @libsql/client in process",
    result: await h1Load({ url: `${ctx.https}/api/db/batch`, method: "POST", headers: auth, body: insertBody, durationSec: d, connections: 4 }),
  });
  bare.close();
  return rows;
}

/** A new app with an empty linked database and a device token for it. */
async function linkedApp(ctx: BenchContext, name: string) {
  const { token, appId, teamId } = await ctx.newConsumer(name);
  const dbs = ctx.adminClient(AdminDatabaseService);
  const db = await dbs.createDatabase({ teamId, name: "bench" });
  await dbs.linkDatabase({ databaseId: db.id, appId });
  return { "authorization": `Bearer ${token}`, "content-type": "application/json" };
}

/**
 * Issue 15 point 2: application B's trivial query (`SELECT 1`, which needs an
 * engine process) with and without application A flooding the engine pool
 * with runaway statements, in the same run. A keeps six in flight (each
 * stopped at the 5 s limit, or refused after waiting 2 s), so it holds its
 * share of the engines throughout. Alone and flooded alternate twice (A's
 * last runaways drained in between) and each row pools both rounds, so
 * drift of this shared machine hits both. The engines run on the server's
 * core (taskset is inherited): A's runaway statement also takes CPU from B,
 * which the latency includes.
 */
export async function fairnessScenarios(ctx: BenchContext): Promise<Row[]> {
  const a = await linkedApp(ctx, "flooder");
  const b = await linkedApp(ctx, "victim");
  const half = (ctx.durationSec * 1000) / 2;
  const url = `${ctx.https}/api/db/query`;
  const trivial = JSON.stringify({ sql: "SELECT 1" });
  const runaway = JSON.stringify({ sql: "SELECT count(*) FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT x FROM c)" });
  const origin = new URL(url).origin;

  /** B's latencies (ms) with `inFlight` requests outstanding for `ms`. */
  const victim = (inFlight: number, ms: number) => closedLoop(origin, { path: "/api/db/query", method: "POST", headers: b, body: trivial }, inFlight, ms);

  const answered: Record<number, number> = {};
  async function flooded<T>(work: () => Promise<T>): Promise<T> {
    let on = true;
    const flood = Array.from({ length: 6 }, async () => {
      while (on) {
        const r = await fetch(url, { method: "POST", headers: a, body: runaway }).catch(() => undefined);
        if (r) {
          answered[r.status] = (answered[r.status] ?? 0) + 1;
          await r.arrayBuffer();
        }
      }
    });
    await new Promise((r) => setTimeout(r, 300)); // A holds its share now
    try {
      return await work();
    } finally {
      on = false;
      await Promise.all(flood); // A's last runaways end before B is measured alone again
    }
  }

  const result = (parts: Array<{ lat: number[]; errors: number; ms: number }>): BenchResult => {
    const lat = Float64Array.from(parts.flatMap((p) => p.lat)).sort();
    const q = (p: number) => (lat.length ? lat[Math.min(lat.length - 1, Math.floor(p * lat.length))]! : 0);
    const ms = parts.reduce((x, p) => x + p.ms, 0);
    return { requests: lat.length, errors: parts.reduce((x, p) => x + p.errors, 0), durationMs: ms, rps: (lat.length / ms) * 1000, p50Ms: q(0.5), p99Ms: q(0.99), statuses: {} };
  };
  const rows: Row[] = [];
  for (const inFlight of [1, 8]) {
    const alone: Array<{ lat: number[]; errors: number; ms: number }> = [];
    const during: typeof alone = [];
    for (let round = 0; round < 2; round++) {
      alone.push(await victim(inFlight, half));
      during.push(await flooded(() => victim(inFlight, half)));
    }
    const base = `SELECT 1 of app B, ${inFlight} in flight`;
    const x = result(alone);
    const y = result(during);
    rows.push({ scenario: base, transport: "REST h1", result: x });
    rows.push({ scenario: `${base}, A flooding`, transport: "REST h1", baseline: `${base} REST h1`, result: y, note: `B p99 ${x.p99Ms.toFixed(2)} -> ${y.p99Ms.toFixed(2)} ms` });
  }
  rows[rows.length - 1]!.note += `; A answered ${Object.entries(answered).map(([st, n]) => `${n}x ${st}`).join(", ")}`;
  return rows;
}
