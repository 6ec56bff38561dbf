// Issue 15 point 2, as a hostile tenant plays it: application A floods the
// engine pool with runaway queries (over /api/db, and from a function that
// fires them without waiting and returns). Application B's trivial queries
// and functions keep their normal latency; A's own requests are answered in
// the documented envelope; what A's ended run left queued never runs.
import { afterAll, beforeAll, expect, it } from "vitest";
import { DatabaseService as AdminDatabaseService } from "../../gen/pulsebase/admin/v1/database_pb.js";
import { FunctionService as AdminFunctionService } from "../../gen/pulsebase/admin/v1/functions_pb.js";
import { createModules } from "../../src/server/modules.js";
import { startTestServer, type TestResponse, type TestServer } from "../helpers/server.js";

let s: TestServer;
let tokenA: string;
let tokenB: string;
let appA: bigint;

// The attack of the issue: a recursive CTE without end, reached through a
// subquery (a statement starting with WITH is refused on /api/db).
const RUNAWAY = "SELECT count(*) FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT x FROM c)";

const FLOOD = `export default async function (req, ctx) {
  for (let i = 0; i < 12; i++) ctx.db.query(${JSON.stringify(RUNAWAY)}).catch(() => 0);
  return { ok: 1 };
}`;
const B_FN = `export default async function (req, ctx) {
  const [r] = await ctx.db.query("SELECT 1 + 1");
  return { two: r.rows[0][0] };
}`;

const query = (token: string, sql: string): Promise<TestResponse> =>
  s.fetch("/api/db/query", { method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, body: JSON.stringify({ sql }) });

/** Latencies of `n` sequential `SELECT 1` of B, each checked. */
async function bLatencies(n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    const r = await query(tokenB, "SELECT 1");
    const body = await r.json();
    out.push(performance.now() - t0);
    expect(r.status, JSON.stringify(body)).toBe(200);
    expect(body.results[0].rows).toEqual([[1]]);
  }
  return out;
}

beforeAll(async () => {
  s = await startTestServer({ modules: createModules });
  const dbs = s.adminClient(AdminDatabaseService);
  const fns = s.adminClient(AdminFunctionService);
  for (const name of ["A", "B"]) {
    const app = await s.createApp(`fair ${name}`);
    const token = (await s.register(app.appKey)).token;
    const db = await dbs.createDatabase({ teamId: app.teamId, name: `db${name}` });
    await dbs.linkDatabase({ databaseId: db.id, appId: app.appId });
    const fn = await fns.createFunction({ appId: app.appId, name: `fn${name}`, timeoutMs: 10_000 });
    await fns.deployVersion({ functionId: fn.id, code: name === "A" ? FLOOD : B_FN, activate: true });
    await fns.createHttpTrigger({ functionId: fn.id, slug: `fn-${name.toLowerCase()}` });
    if (name === "A") {
      tokenA = token;
      appA = app.appId;
    }
    else tokenB = token;
  }
}, 60_000);
afterAll(() => s?.close());

it("answers B at its normal latency while A runs six runaway queries at once", async () => {
  await bLatencies(5); // warm
  await bLatencies(15);
  let floodAnswered = 0;
  const flood = Array.from({ length: 6 }, () => query(tokenA, RUNAWAY).then(async (r) => ({ status: r.status, body: await r.json() })).finally(() => floodAnswered++));
  await new Promise((r) => setTimeout(r, 150)); // A's queries hold their share now
  // the operator sees A's share and queue on /metrics
  const metrics = await (await fetch(`${s.adminUrl}/metrics`)).text();
  expect(metrics).toContain(`pulsebase_engine_app_requests{app="${appA}",state="in_flight"} 1`);
  expect(metrics).toContain(`pulsebase_engine_app_requests{app="${appA}",state="queued"} 5`);
  expect(metrics).toMatch(/pulsebase_engine_processes\{state="busy"\} 1/);
  await bLatencies(15);
  // the issue saw 15 s; a query that waited for A's runaways would come
  // after them: all fifteen of B's were answered while A's still ran
  expect(floodAnswered).toBe(0);

  // A is answered in the documented envelope: stopped at the time limit, or refused for waiting too long
  for (const r of await Promise.all(flood)) {
    expect([503, 504]).toContain(r.status);
    expect(r.body.error).toBe(r.status === 504 ? "timeout" : "database_unavailable");
    expect(typeof r.body.message).toBe("string");
  }
}, 60_000);

it("drops what a function left queued when it returns; B's queries and functions are not held up", async () => {
  const t0 = performance.now();
  const r = await s.fetch("/api/fn/fn-a", { headers: { authorization: `Bearer ${tokenA}` } });
  expect(r.status).toBe(200);
  expect(await r.json()).toEqual({ ok: 1 });
  expect(performance.now() - t0).toBeLessThan(2000);

  const during = await bLatencies(10);
  expect(Math.max(...during), `B after A's function: ${during.map((x) => x.toFixed(0)).join(" ")} ms`).toBeLessThan(1500);
  for (let i = 0; i < 5; i++) {
    const t = performance.now();
    const f = await s.fetch("/api/fn/fn-b", { headers: { authorization: `Bearer ${tokenB}` } });
    expect(f.status).toBe(200);
    expect(await f.json()).toEqual({ two: 2 });
    expect(performance.now() - t).toBeLessThan(1500);
  }
  // A's twelve runaways were cancelled with the run: A is served again well
  // before twelve time limits (or even one) have passed
  const t1 = performance.now();
  const again = await query(tokenA, "SELECT 1");
  expect(again.status).toBe(200);
  expect(performance.now() - t1).toBeLessThan(3000);
}, 60_000);
