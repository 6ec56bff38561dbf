// The query time limit: a runaway statement is stopped, the caller gets a
// clear error, and other applications are answered meanwhile.
import { afterAll, beforeAll, expect, it } from "vitest";
import { failure } from "./errors.js";
import { createHarness, rowsOf, type Harness } from "./harness.js";
import { until } from "../../helpers/until.js";

/** Waits until the application has a request running on an engine. */
const running = (app: number) =>
  until(async () => ((h.module.pool.stats().owners.find((x) => x.owner === app)?.running ?? 0) > 0 ? true : undefined), 10_000, 10);

let h: Harness;
let slowApp: number;
let otherApp: number;

beforeAll(async () => {
  // (a request waits for an engine as long as it takes: after the kill below
  // the engines restart, which on a loaded machine can outlast the default
  // 2 s queue wait)
  h = await createHarness({ limits: { queryTimeoutMs: 800, queueWaitMs: 30_000 }, engineProcesses: 2 });
  const team = await h.team();
  slowApp = await h.app(team);
  otherApp = await h.app(team);
  await h.linkedDb(team, slowApp);
  await h.linkedDb(team, otherApp);
  await h.query(slowApp, "CREATE TABLE t (v TEXT)");
  await h.query(otherApp, "CREATE TABLE o (v TEXT); INSERT INTO o VALUES ('still here')");
});
afterAll(async () => h?.close());

const crossJoin = "SELECT count(*) FROM (WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < 100000) SELECT value FROM s) a, (WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < 100000) SELECT value FROM s) b";

it("stops a runaway query at the time limit while another application is answered", async () => {
  const started = Date.now();
  let slowEnded = false;
  const slow = failure(h.query(slowApp, crossJoin)).finally(() => (slowEnded = true));
  // once the runaway query runs, ask from the other application
  await running(slowApp);
  const other = await h.query(otherApp, "SELECT v FROM o");
  expect(rowsOf(other.results[0])).toEqual([["still here"]]);
  // answered while the runaway still runs
  expect(slowEnded).toBe(false);

  // (the cross join would run for minutes: that it ends is the time limit)
  const f = await slow;
  const elapsed = Date.now() - started;
  expect(f).toMatchObject({ code: "timeout", http: 504 });
  expect(f.message).toMatch(/800 ms/);
  expect(elapsed).toBeGreaterThanOrEqual(750);
});

it("stops a query that returns rows slowly, rolls back its writes, and serves the app again", async () => {
  // the first rows come at once, the last one only after 10^10 steps
  const sparse =
    "SELECT a.value, b.value FROM (WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < 100000) SELECT value FROM s) a, (WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < 100000) SELECT value FROM s) b " +
    "WHERE a.value + b.value < 5 OR a.value * b.value = 9999800001";
  const f = await failure(
    h.batch(slowApp, [{ sql: "INSERT INTO t VALUES ('written before the runaway')" }, { sql: sparse }], true),
  );
  expect(f.code).toBe("timeout");
  const after = await h.query(slowApp, "SELECT count(*) FROM t");
  expect(rowsOf(after.results[0])).toEqual([[0]]);
});

it("keeps serving requests queued behind a runaway one", async () => {
  const slow = failure(h.query(slowApp, crossJoin));
  const queued = await Promise.all(Array.from({ length: 6 }, (_, i) => h.query(i % 2 ? slowApp : otherApp, `SELECT ${i}`)));
  expect(queued.map((r) => rowsOf(r.results[0])[0]![0])).toEqual([0, 1, 2, 3, 4, 5]);
  expect((await slow).code).toBe("timeout");
});

it("answers 500 query_error when an engine process dies under a request, and recovers", async () => {
  const pending = failure(h.query(slowApp, crossJoin));
  await running(slowApp);
  for (const pid of h.module.pool.pids()) process.kill(pid, "SIGKILL");
  expect(await pending).toMatchObject({ code: "query_error", http: 500 });
  const again = await h.query(slowApp, "SELECT count(*) FROM t");
  expect(again.results[0]!.error).toBeUndefined();
});
