// A run must not outlive itself, with ctx.db on the real
// database module (engine processes, the query runner): work a run leaves
// behind never resumes, its isolate is never reused, its db calls are
// cancelled when it ends, nothing of it runs past its deadline, and the
// service's thread never waits on a busy isolate (metrics included).
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createDatabaseModule, type DatabaseModule } from "../../../src/capabilities/database/database-module.js";
import { dbCapability } from "../../../src/capabilities/database/function-db.js";
import { createSandbox, type Sandbox } from "../../../src/infra/sandbox/sandbox.js";
import type { RunInput, RunTarget } from "../../../src/infra/sandbox/types.js";
import { createApp } from "../../capabilities/functions/fixtures.js";
import { createTestDb, type TestDb } from "../../helpers/db.js";
import { until } from "../../helpers/until.js";
import { spinningThreads } from "../../helpers/spinning-threads.js";

const RUNAWAY = "SELECT count(*) FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT x FROM c)";

let db: TestDb;
let dataDir: string;
let dbModule: DatabaseModule;
let sandbox: Sandbox;
let appId: number;

beforeAll(async () => {
  db = await createTestDb("postgres");
  dataDir = await mkdtemp(join(tmpdir(), "pb-leftover-"));
  // One engine: a query left running would hold up everything after it. The
  // link stays cached, so a run's calls reach the engine queue in the order
  // it made them (each would otherwise first look the link up).
  dbModule = await createDatabaseModule({ dataDir, linkCacheMs: 600_000, engineProcesses: 1, limits: { queryTimeoutMs: 5000, abandonGraceMs: 200 } }, { sql: db.sql });
  sandbox = createSandbox({ capabilities: [dbCapability(dbModule.runner)], limits: { hostCallsRunning: 2, hostCallsQueued: 3 } });
  appId = await createApp(db.sql);
  const team = await db.sql.query<{ team_id: number }>("SELECT team_id FROM apps WHERE id = $1", [appId]);
  const linked = await dbModule.manager.create({ teamId: Number(team.rows[0]!.team_id), name: "main" });
  await dbModule.manager.link(linked.id, appId);
  await dbModule.runner.query(appId, { sql: "CREATE TABLE marks (v TEXT)" });
}, 30_000);
afterAll(async () => {
  sandbox?.close();
  await dbModule?.stop();
  await db?.drop();
  await rm(dataDir, { recursive: true, force: true });
});

let nextVersion = 5000;
const target = (code: string, over: Partial<RunTarget> = {}): RunTarget => ({ versionId: nextVersion++, appId, code, memoryMb: 32, timeoutMs: 1000, ...over });
const input = (query: Record<string, string> = {}): RunInput => ({
  req: { method: "GET", slug: "s", query, headers: {}, body: null }, consumer: null, event: null, env: {}, trigger: "http", requestId: "r",
});
const body = (r: Awaited<ReturnType<Sandbox["run"]>>) => JSON.parse(r.response!.body);

const count = async (sql: string) => Number((await dbModule.runner.query(appId, { sql }))[0]!.rows[0]![0]);

it("answers a run that left a db call behind, never resumes that work, and never reuses its isolate", async () => {
  const t = target(`let runs = 0;
    export default (req, ctx) => {
      runs++;
      if (req.query.leave) ctx.db.query("SELECT 1").then(() => { const end = Date.now() + 1500; while (Date.now() < end); });
      return { runs };
    }`);
  expect(body(await sandbox.run(t, input()))).toEqual({ runs: 1 });
  const r = await sandbox.run(t, input({ leave: "1" }));
  expect(r.outcome).toBe("ok");
  expect(body(r)).toEqual({ runs: 2 });
  expect(r.logs.map((l) => l.message)).toContainEqual(expect.stringMatching(/1 ctx\.db call was still pending .* cancelled/));
  // A later query on the same engine has its answer: the left-over call's
  // would have come first, and its continuation would be spinning now (for
  // 1.5 s). The metrics read answers, and nothing spins.
  expect(await count("SELECT 1")).toBe(1);
  await sandbox.stats();
  expect(await spinningThreads(undefined)).toEqual([]);
  // a fresh isolate serves the next run
  expect(body(await sandbox.run(t, input()))).toEqual({ runs: 1 });
}, 20_000);

it("cancels the db calls a run left queued or running when it ends", async () => {
  // "now": fired in the synchronous slice (they reach the host after the run
  // ended); "later": fired after an await, on their way while it ends
  const t = target(`export default async (req, ctx) => {
    if (req.query.when === "later") await ctx.db.query("SELECT 1");
    ctx.db.query(${JSON.stringify(RUNAWAY)}).catch(() => 0);
    ctx.db.query("INSERT INTO marks VALUES ('left queued')").catch(() => 0);
    return "done";
  }`);
  for (const when of ["now", "later"]) {
    const r = await sandbox.run(t, input({ when }));
    expect(r.response!.body).toBe(JSON.stringify("done"));
    // no runaway holds the single engine until the 5 s time limit: at
    // most the 200 ms grace, and a restart (none for the time limit)
    const timeouts = dbModule.pool.stats().restarts.timeout;
    expect(await count("SELECT count(*) FROM marks")).toBe(0);
    expect(dbModule.pool.stats().restarts.timeout, when).toBe(timeouts);
    // the queued write never ran: a later run's query, through the same
    // host and engine, comes after where it would have been
    const later = await sandbox.run(target(`export default async (req, ctx) => (await ctx.db.query("SELECT count(*) FROM marks")).values[0][0]`), input());
    expect(body(later)).toBe(0);
    expect(await count("SELECT count(*) FROM marks")).toBe(0);
  }
}, 20_000);

it("cancels the db call of a run that times out", async () => {
  const t = target(`export default async (req, ctx) => { await ctx.db.query(${JSON.stringify(RUNAWAY)}); return 1; }`, { timeoutMs: 300 });
  const r = await sandbox.run(t, input());
  expect(r.outcome).toBe("timeout");
  // the engine serves the next query without the runaway reaching its 5 s time limit
  const timeouts = dbModule.pool.stats().restarts.timeout;
  expect(await count("SELECT count(*) FROM marks")).toBe(0);
  expect(dbModule.pool.stats().restarts.timeout).toBe(timeouts);
}, 20_000);

it("stops code a run left going after its output at the run's deadline", async () => {
  const t = target(`export default async (req, ctx) => {
    await ctx.db.query("SELECT 1");
    let p = Promise.resolve();
    for (let i = 0; i < 40; i++) p = p.then(() => 0);
    // (bounded, so that where it does run it cannot hang the test process;
    // far longer than the deadline and this test's waits)
    p.then(() => { const end = Date.now() + 60000; while (Date.now() < end); });
    return "answered";
  }`, { timeoutMs: 1500 });
  const r = await sandbox.run(t, input());
  expect(r.outcome).toBe("ok");
  // answered (not cut at the deadline): the left-over work was not waited for
  expect(r.response!.body).toBe(JSON.stringify("answered"));
  // the metrics read answers while the left-over work is still spinning (it does not wait for it)
  await sandbox.stats();
  await until(async () => ((await spinningThreads(undefined, 3)).length > 0 ? true : undefined), 10_000, 0);
  // at the deadline (1.5 s after the start) it is stopped: long before its own end
  await until(async () => ((await spinningThreads(undefined)).length === 0 ? true : undefined), 15_000, 0);
}, 20_000);

it("lets one invocation run 2 db calls at once and queue 3 more; further ones fail with database_unavailable", async () => {
  const t = target(`export default async (req, ctx) => {
    const calls = [];
    for (let i = 0; i < 8; i++) calls.push(ctx.db.query("SELECT ?", [i]));
    const settled = await Promise.allSettled(calls);
    return settled.map((s) => s.status === "fulfilled" ? s.value.values[0][0] : s.reason.code);
  }`);
  const r = await sandbox.run(t, input());
  expect(body(r)).toEqual([0, 1, 2, 3, 4, "database_unavailable", "database_unavailable", "database_unavailable"]);
}, 20_000);
