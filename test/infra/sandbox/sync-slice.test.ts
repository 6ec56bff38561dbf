// The fast path: runs start inside a synchronous call on the service's
// thread, cut after syncSliceMs. A cut run must leave no trace and be run
// again off the thread; a version that needs more than syncBudgetMs of
// synchronous work, or is cut twice within ten runs, leaves the fast path,
// so it cannot hold up other requests.
import { afterAll, describe, expect, it, vi } from "vitest";
import { FunctionIsolate } from "../../../src/infra/sandbox/function-isolate.js";
import { createSandbox } from "../../../src/infra/sandbox/sandbox.js";
import type { RunInput, RunTarget } from "../../../src/infra/sandbox/types.js";
import { dbCapability } from "../../../src/capabilities/database/function-db.js";
import { createTestFunctionDb } from "../../capabilities/functions/libsql-function-db.js";
import { spinningThreads } from "../../helpers/spinning-threads.js";
import { until } from "../../helpers/until.js";

const fdb = createTestFunctionDb();
const sandbox = createSandbox({
  capabilities: [dbCapability(fdb)],
  limits: { maxIsolates: 16, isolatesPerVersion: 2, syncSliceMs: 10, syncBudgetMs: 1 },
});
afterAll(() => {
  sandbox.close();
  fdb.close();
});

let nextVersion = 1000;
const target = (code: string, over: Partial<RunTarget> = {}): RunTarget => ({ versionId: nextVersion++, appId: 21, code, memoryMb: 32, timeoutMs: 2000, ...over });
const input = (over: Partial<RunInput> = {}): RunInput => ({
  req: { method: "POST", slug: "s", query: {}, headers: {}, body: null }, consumer: { id: 1 }, event: null, env: {}, trigger: "http", requestId: "r", ...over,
});

/** Computes past its 10 ms slice when the body says "heavy", else answers at once. */
const HEAVY_WHEN_ASKED = `export default (req) => { if (req.body === "heavy") { const end = Date.now() + 200; while (Date.now() < end); } return req.body; }`;

/**
 * Runs `body` with the isolate's calls observed and counts the runs cut at
 * their slice: those asked "heavy" (always cut) and the others. V8 cuts a
 * slice by wall time, so a quick run is cut too when the machine stops its
 * thread for longer than the slice: the tests below tell such a cut from the
 * ones they make (instead of hoping the machine never does it).
 */
async function countingCuts(body: () => Promise<void>): Promise<{ heavy: number; quick: number }> {
  const runs = vi.spyOn(FunctionIsolate.prototype, "run");
  try {
    await body();
    const cuts = { heavy: 0, quick: 0 };
    runs.mock.calls.forEach(([runInput], i) => {
      const out = runs.mock.results[i]!;
      if (out.type !== "return" || out.value instanceof Promise || out.value.kind !== "slice") return;
      if ((runInput.req as { body?: unknown }).body === "heavy") cuts.heavy++;
      else cuts.quick++;
    });
    return cuts;
  } finally {
    runs.mockRestore();
  }
}

/**
 * Makes tries of `attempt` (each with a new version) until one ran without
 * a quick run cut by the machine, then checks what that try saw.
 */
async function withoutStrayCuts(attempt: () => Promise<() => void>): Promise<void> {
  await until(async () => {
    let check: () => void = () => {};
    const cuts = await countingCuts(async () => {
      check = await attempt();
    });
    if (cuts.quick > 0) return undefined; // the machine cut a quick run: this try shows nothing
    check();
    return true;
  }, 60_000, 0);
}

describe("the synchronous slice", () => {
  it("keeps a quick function on the fast path, including one that awaits db calls", async () => {
    const before = sandbox.stats().slowVersions;
    const quick = target(`export default (req) => ({ echo: req.body })`);
    const viaDb = target(`export default async (req, { db }) => { const { rows } = await db.query("SELECT ? AS v", [req.body]); return rows[0].v; }`);
    for (let i = 0; i < 50; i++) {
      const a = await sandbox.run(quick, input({ req: { body: i } }));
      expect(JSON.parse(a.response!.body)).toEqual({ echo: i });
      const b = await sandbox.run(viaDb, input({ req: { body: i } }));
      expect(JSON.parse(b.response!.body)).toBe(i);
    }
    expect(sandbox.stats().slowVersions).toBe(before);
  });

  it("runs a function cut at its slice again off the thread, with its db writes applied once", async () => {
    await fdb.client(22).execute("CREATE TABLE hits (id INTEGER PRIMARY KEY, tag TEXT)");
    const t = target(`export default async (req, { db }) => {
      // queued before the long computation: must not run for the cut attempt
      const write = db.query("INSERT INTO hits (tag) VALUES (?)", [req.body]);
      let x = 0; const end = Date.now() + 40; while (Date.now() < end) x++;
      await write;
      return "done";
    }`, { appId: 22 });
    const before = sandbox.stats().slowVersions;
    for (const tag of ["first", "second"]) {
      const r = await sandbox.run(t, input({ req: { body: tag } }));
      expect(r.outcome).toBe("ok");
      expect(r.response!.body).toBe(JSON.stringify("done"));
    }
    const rows = await fdb.client(22).execute("SELECT tag, count(*) AS n FROM hits GROUP BY tag ORDER BY tag");
    expect(rows.rows.map((x) => [x.tag, Number(x.n)])).toEqual([["first", 1], ["second", 1]]);
    // cut twice in a row: off the fast path
    expect(sandbox.stats().slowVersions).toBe(before + 1);
  });

  it("keeps a quick version cut once (as when the machine preempts its thread) on the fast path", async () => {
    // the first run computes past the slice, like a quick one whose thread
    // the machine stopped for more than 10 ms; the next ones are quick
    await withoutStrayCuts(async () => {
      const t = target(HEAVY_WHEN_ASKED);
      const before = sandbox.stats().slowVersions;
      const outcomes: string[] = [];
      const answeredLater: number[] = [];
      outcomes.push((await sandbox.run(t, input({ req: { body: "heavy" } }))).outcome); // cut, then run again off the thread
      for (let i = 0; i < 20; i++) outcomes.push((await sandbox.run(t, input())).outcome);
      const afterQuick = sandbox.stats().slowVersions;
      // quick runs stay on the service's thread: each answers within the call,
      // without a promise (none waits for isolated-vm's thread)
      for (let i = 0; i < 20; i++) {
        const r = sandbox.run(t, input());
        if (r instanceof Promise) answeredLater.push(i);
        outcomes.push((await r).outcome);
      }
      return () => {
        expect(outcomes.every((o) => o === "ok"), outcomes.join()).toBe(true);
        expect(afterQuick).toBe(before);
        expect(answeredLater).toEqual([]);
      };
    });
  });

  it("moves a version cut twice within ten runs off the fast path", async () => {
    await withoutStrayCuts(async () => {
      const t = target(HEAVY_WHEN_ASKED);
      const before = sandbox.stats().slowVersions;
      const outcomes: string[] = [];
      outcomes.push((await sandbox.run(t, input({ req: { body: "heavy" } }))).outcome);
      for (let i = 0; i < 4; i++) outcomes.push((await sandbox.run(t, input())).outcome);
      const afterOneCut = sandbox.stats().slowVersions;
      outcomes.push((await sandbox.run(t, input({ req: { body: "heavy" } }))).outcome); // the second cut
      const afterTwoCuts = sandbox.stats().slowVersions;
      return () => {
        expect(outcomes.every((o) => o === "ok"), outcomes.join()).toBe(true);
        expect(afterOneCut).toBe(before);
        expect(afterTwoCuts).toBe(before + 1);
      };
    });
  });

  it("holds the thread for at most one slice per run, twice, then never again for that version", async () => {
    // Told by what the isolate was asked: a call on the thread with the
    // 10 ms slice (cut: it answers "slice" within the call), the run again
    // off the thread (slice 0, a promise). How long a slice takes on a
    // loaded machine is the bench's business.
    const t = target(`export default () => { let x = 0; const end = Date.now() + 100; while (Date.now() < end) x++; return x > 0; }`);
    const before = sandbox.stats().slowVersions;
    const runs = vi.spyOn(FunctionIsolate.prototype, "run");
    try {
      for (let i = 0; i < 3; i++) expect((await sandbox.run(t, input())).outcome).toBe("ok");
      const calls = runs.mock.calls.map(([, , sliceMs], i) => {
        const out = runs.mock.results[i]!;
        const answer = out.type === "return" && !(out.value instanceof Promise) ? out.value.kind : "later";
        return [sliceMs ?? 0, answer];
      });
      expect(calls).toEqual([[10, "slice"], [0, "later"], [10, "slice"], [0, "later"], [0, "later"]]);
    } finally {
      runs.mockRestore();
    }
    expect(sandbox.stats().slowVersions).toBe(before + 1);
  });

  it("moves a version whose warm synchronous work exceeds the budget off the fast path", async () => {
    const before = sandbox.stats().slowVersions;
    const t = target(`export default () => { let x = 0; const end = Date.now() + 4; while (Date.now() < end) x++; return 1; }`);
    await sandbox.run(t, input()); // cold: its timing is not judged
    // the median of the last eleven warm runs decides: six over the budget
    for (let i = 0; i < 5; i++) await sandbox.run(t, input());
    expect(sandbox.stats().slowVersions).toBe(before);
    // (a run whose thread the machine preempted may read under the budget)
    for (let i = 0; i < 6 && sandbox.stats().slowVersions === before; i++) await sandbox.run(t, input());
    expect(sandbox.stats().slowVersions).toBe(before + 1);
    expect((await sandbox.run(t, input())).outcome).toBe("ok");
  });

  it("judges a slow version again after slowRecheckMs", async () => {
    // The sandbox reads performance.now() for when a version left the fast
    // path: the test moves that clock instead of sleeping through the 300 ms.
    vi.useFakeTimers({ toFake: ["performance"] });
    const quick = createSandbox({ capabilities: [dbCapability(fdb)], limits: { syncSliceMs: 10, syncBudgetMs: 1, slowRecheckMs: 300 } });
    try {
      const t = target(`export default () => { let x = 0; const end = Date.now() + 4; while (Date.now() < end) x++; return 1; }`);
      for (let i = 0; i < 12 && quick.stats().slowVersions === 0; i++) await quick.run(t, input());
      expect(quick.stats().slowVersions).toBe(1);
      vi.advanceTimersByTime(299);
      expect((await quick.run(t, input())).outcome).toBe("ok"); // still off the fast path
      expect(quick.stats().slowVersions).toBe(1);
      vi.advanceTimersByTime(1);
      expect((await quick.run(t, input())).outcome).toBe("ok"); // on the fast path again, judged anew
      expect(quick.stats().slowVersions).toBe(0);
    } finally {
      quick.close();
      vi.useRealTimers();
    }
  });

  it("never waits on the service's thread for work a previous run left running in the isolate", async () => {
    // The run answers; work it left queued as microtasks after a host call
    // (a db call it does not await is cancelled when the run ends) goes on
    // in the isolate, on isolated-vm's thread, until the deadline.
    const t = target(`export default async (req, { db }) => {
      if (req.body === "leave") {
        await db.query("SELECT 1");
        let p = Promise.resolve();
        for (let i = 0; i < 40; i++) p = p.then(() => 0);
        p.then(() => { const end = Date.now() + 20000; while (Date.now() < end); });
      }
      return req.body;
    }`, { timeoutMs: 3000 });
    expect((await sandbox.run(t, input({ req: { body: "warm" } }))).outcome).toBe("ok");
    expect((await sandbox.run(t, input({ req: { body: "leave" } }))).outcome).toBe("ok");
    // the left-over work is running now (a thread of this process spinning)
    await until(async () => ((await spinningThreads(undefined, 3)).length > 0 ? true : undefined), 10_000, 0);
    const r = await sandbox.run(t, input({ req: { body: "next" } }));
    expect(r.response!.body).toBe(JSON.stringify("next"));
    // answered while the left-over work still runs (until the deadline), not after it
    await until(async () => ((await spinningThreads(undefined, 3)).length > 0 ? true : undefined), 10_000, 0);
  });

  it("still times out a run that never ends, at its own timeout", async () => {
    const t = target(`export default () => { for (;;) {} }`, { timeoutMs: 300 });
    const t0 = performance.now();
    const r = await sandbox.run(t, input());
    expect(r.outcome).toBe("timeout");
    expect(performance.now() - t0).toBeGreaterThanOrEqual(280);
  });
});
