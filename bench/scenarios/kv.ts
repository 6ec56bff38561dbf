// The key-value store behind ctx.kv (src/capabilities/functions/kv-store.ts), in
// process on the server's PostgreSQL schema, against the bare statements on
// the same pool in the same run: a primary-key SELECT for get, a one-row
// upsert for put. Puts of one application take its usage row lock (exact
// quota accounting), so they are measured for one application and spread
// over 16 applications; list reads a page of 100 keys by prefix. Then
// through the server: a function doing ctx.kv.get, and get then put, over
// GET /api/fn/{slug} (REST h1) against a trivial function in the same run.
import { FunctionService as AdminFunctionService } from "../../gen/pulsebase/admin/v1/functions_pb.js";
import { createKvStore } from "../../src/capabilities/functions/kv-store.js";
import { createPgSql } from "../../src/infra/storage/pg-sql.js";
import { h1Load, inProcessLoad, type Row } from "../lib.js";
import type { BenchContext } from "../run.js";

const IN_FLIGHT = 16;
const KEYS = 1000;

export async function kvScenarios(ctx: BenchContext): Promise<Row[]> {
  const sql = createPgSql({ connectionString: ctx.databaseUrl, schema: ctx.schema, max: IN_FLIGHT });
  const kv = createKvStore(sql);
  const apps: number[] = [];
  for (let i = 0; i < IN_FLIGHT; i++) apps.push(Number((await ctx.newConsumer(`kv-${i}`)).appId));
  const app = apps[0]!;
  const value = JSON.stringify({ user: 42, plan: "pro", seen: "2026-11-25T00:00:00Z" }).padEnd(64, " ");
  for (let i = 0; i < KEYS; i++) await kv.put(app, `user:${String(i).padStart(4, "0")}`, value);
  let n = 0;
  const key = () => `user:${String(n++ % KEYS).padStart(4, "0")}`;
  const d = ctx.durationSec;
  const rows: Row[] = [];
  try {
    rows.push({
      scenario: "bare PostgreSQL PK SELECT", transport: "in process",
      result: await inProcessLoad(() => sql.query("SELECT value FROM function_kv WHERE app_id = $1 AND key = $2", [app, key()]), IN_FLIGHT, d),
    });
    rows.push({ scenario: "kv get", transport: "in process", baseline: "bare PostgreSQL PK SELECT in process", result: await inProcessLoad(() => kv.get(app, key()), IN_FLIGHT, d) });
    rows.push({
      scenario: "bare PostgreSQL upsert", transport: "in process",
      result: await inProcessLoad(() => sql.query(
        "INSERT INTO function_kv (app_id, key, value, size) VALUES ($1, $2, $3, $4) ON CONFLICT (app_id, key) DO UPDATE SET value = EXCLUDED.value",
        [app, key(), value, 73],
      ), IN_FLIGHT, d),
    });
    rows.push({
      scenario: "kv put, one app", transport: "in process", baseline: "bare PostgreSQL upsert in process",
      note: "writes of one app serialise on its usage row",
      result: await inProcessLoad(() => kv.put(app, key(), value), IN_FLIGHT, d),
    });
    let a = 0;
    rows.push({
      scenario: "kv put, 16 apps", transport: "in process", baseline: "bare PostgreSQL upsert in process",
      result: await inProcessLoad(() => kv.put(apps[a++ % apps.length]!, key(), value), IN_FLIGHT, d),
    });
    rows.push({
      scenario: "kv put with TTL, 16 apps", transport: "in process", baseline: "bare PostgreSQL upsert in process",
      result: await inProcessLoad(() => kv.put(apps[a++ % apps.length]!, key(), value, { ttlSeconds: 3600 }), IN_FLIGHT, d),
    });
    rows.push({ scenario: "kv list 100 by prefix", transport: "in process", result: await inProcessLoad(() => kv.list(app, { prefix: "user:0", limit: 100 }), IN_FLIGHT, d) });
    rows.push(...(await kvFunctions(ctx)));
  } finally {
    await sql.close();
  }
  return rows;
}

const FUNCTIONS = {
  trivial: "export default async function (req, ctx) { return { ok: true }; }",
  get: "export default async function (req, ctx) { return { v: await ctx.kv.get('user:' + req.query.n) }; }",
  "get-put": `export default async function (req, ctx) {
    const key = "count:" + req.query.n;
    const n = Number((await ctx.kv.get(key)) ?? 0) + 1;
    await ctx.kv.put(key, String(n), { ttlSeconds: 3600 });
    return { n };
  }`,
};

/** Functions using ctx.kv through the whole server, against a trivial function. */
async function kvFunctions(ctx: BenchContext): Promise<Row[]> {
  const { token, appId } = await ctx.newConsumer("kv-functions");
  const app = await ctx.admin.getApp({ key: { case: "id", value: appId } });
  await ctx.admin.setAppPlan({ appId, plan: { ...app.plan!, functionInvocationsPerMinute: 0 } });
  const fns = ctx.adminClient(AdminFunctionService);
  for (const [slug, code] of Object.entries(FUNCTIONS)) {
    const fn = await fns.createFunction({ appId, name: `kv-${slug}`, invocationsPerMinute: 100_000_000 });
    await fns.deployVersion({ functionId: fn.id, code, activate: true });
    await fns.createHttpTrigger({ functionId: fn.id, slug: `kv-${slug}` });
  }
  const load = (slug: string) => h1Load({ url: `${ctx.https}/api/fn/kv-${slug}?n=0001`, headers: { authorization: `Bearer ${token}` }, durationSec: ctx.durationSec });
  const baseline = "GET /api/fn/kv-trivial REST h1";
  return [
    { scenario: "GET /api/fn/kv-trivial", transport: "REST h1", result: await load("trivial") },
    { scenario: "function: ctx.kv.get", transport: "REST h1", baseline, result: await load("get") },
    { scenario: "function: ctx.kv.get + put", transport: "REST h1", baseline, note: "one key of one app: puts take turns on its usage row", result: await load("get-put") },
  ];
}
