// The engine pool shared by every application (docs/database.md, "Scheduling"): each
// application runs at most its share of the engine processes at once, waits
// in its own bounded queue with a bounded wait, is served round robin with
// the others, and what a cancelled caller (an ended function run) left
// queued never runs while what it left running is stopped.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { failure } from "./errors.js";
import { createHarness, rowsOf, type Harness } from "./harness.js";
import { until } from "../../helpers/until.js";

const RUNAWAY = "SELECT count(*) FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT x FROM c)";
/** Waits until every engine process has started (the counts below assume they serve). */
async function enginesUp(h: Harness): Promise<void> {
  await until(async () => (h.module.pool.stats().starting > 0 ? undefined : true), 30_000);
}

/** Waits until the pool holds what `ok` expects of the application (each request first looks its link up). */
function poolHas(h: Harness, app: number, want: { queued: number; running: number }): Promise<true> {
  return until(async () => {
    const o = h.module.pool.stats().owners.find((x) => x.owner === app);
    return o && o.queued === want.queued && o.running === want.running ? true : undefined;
  }, 10_000, 10);
}

/** A statement that keeps an engine busy for a while (well under the time limit). */
const busy = (n: number) => `SELECT count(*) FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < ${n * 1000}) SELECT x FROM c)`;

describe("two engines, one application floods", () => {
  let h: Harness;
  let a: number;
  let b: number;
  beforeAll(async () => {
    h = await createHarness({ engineProcesses: 2, limits: { queryTimeoutMs: 3000, appQueued: 3, queueWaitMs: 2000 } });
    const team = await h.team();
    a = await h.app(team);
    b = await h.app(team);
    await h.linkedDb(team, a);
    await h.linkedDb(team, b);
    await enginesUp(h);
  });
  afterAll(async () => h?.close());

  it("holds A to one engine and a queue of three; B is answered at once; A's overflow gets 503 in the envelope", async () => {
    const flood = Array.from({ length: 4 }, () => failure(h.query(a, RUNAWAY)));
    await poolHas(h, a, { queued: 3, running: 1 });
    expect(h.module.pool.stats().busy).toBe(1);

    // one more from A: its queue is full
    const full = await failure(h.query(a, "SELECT 1"));
    expect(full).toMatchObject({ code: "database_unavailable", http: 503 });
    expect(full.message).toMatch(/at most 3/);

    // B meanwhile: the other engine, at once. "At once" is an ordering, not
    // a time: B's first answer comes while all of A's backlog is still
    // waiting (its three queued requests give up only after 2 s), and all
    // five while A's runaway still holds its engine (stopped only at 3 s).
    let floodSettled = 0;
    for (const f of flood) void f.finally(() => floodSettled++);
    for (let i = 0; i < 5; i++) {
      const r = await h.query(b, "SELECT 42");
      expect(rowsOf(r.results[0])).toEqual([[42]]);
      const aNow = h.module.pool.stats().owners.find((x) => x.owner === a);
      if (i === 0) {
        expect(floodSettled).toBe(0);
        expect(aNow).toMatchObject({ queued: 3, running: 1 });
      }
      expect(aNow?.running).toBe(1);
    }
    expect(floodSettled).toBeLessThan(4);

    // A's queued requests could not start within 2000 ms; the running one hits the time limit
    const results = await Promise.all(flood);
    expect(results.filter((f) => f.code === "timeout")).toHaveLength(1);
    const waited = results.filter((f) => f.code === "database_unavailable");
    expect(waited).toHaveLength(3);
    for (const w of waited) expect(w.message).toMatch(/could not start within 2000 ms/);
    const after = h.module.pool.stats();
    expect(after.refused.queue_full).toBeGreaterThanOrEqual(1);
    expect(after.refused.queue_timeout).toBeGreaterThanOrEqual(3);
  }, 20_000);
});

describe("one engine, three applications", () => {
  let h: Harness;
  const apps: number[] = [];
  beforeAll(async () => {
    h = await createHarness({ engineProcesses: 1, limits: { queryTimeoutMs: 60_000, appQueued: 10, queueWaitMs: 60_000, abandonGraceMs: 200 } });
    const team = await h.team();
    for (let i = 0; i < 3; i++) {
      const app = await h.app(team);
      await h.linkedDb(team, app);
      await h.query(app, "CREATE TABLE t (v TEXT)");
      apps.push(app);
    }
    await enginesUp(h);
  });
  afterAll(async () => h?.close());

  it("serves the applications in turn, not in arrival order", async () => {
    const [a, b, c] = apps as [number, number, number];
    const order: string[] = [];
    const q = (app: number, tag: string) => h.query(app, busy(1500)).then(() => order.push(tag));
    // A queues four, then B and C one each: A's turn comes once, then B's
    // and C's, then A's again (one request per turn)
    const all = [q(a, "a1"), q(a, "a2"), q(a, "a3"), q(a, "a4")];
    await poolHas(h, a, { queued: 3, running: 1 });
    all.push(q(b, "b1"), q(c, "c1"));
    await Promise.all(all);
    // (which of A's, and B or C first, depends on when each reached the pool)
    const byApp = order.map((t) => t[0]);
    expect(byApp.slice(0, 2)).toEqual(["a", "a"]);
    expect(byApp.slice(2, 4).sort()).toEqual(["b", "c"]);
    expect(byApp.slice(4)).toEqual(["a", "a"]);
  }, 30_000);

  it("drops a cancelled caller's queued requests (they never run) and stops its running one", async () => {
    const [a, b] = apps as [number, number, number];
    const ctl = new AbortController();
    const opts = { signal: ctl.signal };
    const runaway = h.module.runner.query(a, { sql: RUNAWAY }, opts);
    runaway.catch(() => {});
    await poolHas(h, a, { queued: 0, running: 1 });
    const write = h.module.runner.query(a, { sql: "INSERT INTO t VALUES ('must not run')" }, opts);
    const settled = Promise.allSettled([runaway, write]);
    await poolHas(h, a, { queued: 1, running: 1 });
    const restartsBefore = h.module.pool.stats().restarts.cancelled;
    ctl.abort();
    const [r1, r2] = await settled;
    // the caller is answered at once: before the engine running its runaway
    // is stopped (that waits for the grace time)
    expect(h.module.pool.stats().restarts.cancelled).toBe(restartsBefore);
    expect(r1.status).toBe("rejected");
    expect(r2.status).toBe("rejected");
    // the runaway is stopped after the grace time, not at the time limit
    // (raised to a minute for this test: only the cancellation can free the
    // single engine within the test's timeout), and the single engine
    // serves another application right after
    const r = await h.query(b, "SELECT count(*) FROM t");
    expect(rowsOf(r.results[0])).toEqual([[0]]);
    expect(h.module.pool.stats().restarts.cancelled).toBe(restartsBefore + 1);
    // the queued write never ran
    const left = await h.query(a, "SELECT count(*) FROM t");
    expect(rowsOf(left.results[0])).toEqual([[0]]);
    expect(h.module.pool.stats().refused.cancelled).toBeGreaterThanOrEqual(1);
  }, 30_000);
});
