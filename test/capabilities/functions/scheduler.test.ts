// The scheduler on its own, on real PostgreSQL and on PGlite (the embedded
// default runs it too): two schedulers polling one database run each tick
// once; a schedule found far behind (the service was down) follows its
// missed-tick policy exactly: skip records one skipped run with the count,
// run_once runs the newest missed tick once with the count in ctx.event.
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createFunctionStore } from "../../../src/capabilities/functions/function-store.js";
import { createScheduler, type ScheduleEvent } from "../../../src/capabilities/functions/scheduler.js";
import type { RunReport } from "../../../src/capabilities/functions/function-runtime.js";
import type { Sql } from "../../../src/infra/storage/sql.js";
import { createTestDb, type TestDb } from "../../helpers/db.js";
import { until } from "../../helpers/until.js";

for (const kind of ["postgres", "pglite"] as const) {
  describe(`scheduler (${kind})`, () => {
    let db: TestDb;
    let functionId: number;
    const runs: Array<{ triggerId: number; event: ScheduleEvent }> = [];
    const runtime = {
      async runSchedule(_fid: number, triggerId: number, event: unknown): Promise<RunReport | undefined> {
        runs.push({ triggerId, event: event as ScheduleEvent });
        return { status: 200, outcome: "ok", errorName: "", errorMessage: "", errorStack: "", logs: [], logsTruncated: false, durationMs: 1, memoryBytes: 0, version: 1, coldStart: false, invocationId: runs.length };
      },
    };

    beforeAll(async () => {
      db = await createTestDb(kind);
      const team = await db.sql.query<{ id: number }>("INSERT INTO teams (name) VALUES ('t') RETURNING id");
      const app = await db.sql.query<{ id: number }>("INSERT INTO apps (team_id, name, app_key, plan) VALUES ($1, 'a', 'pk_sched', '{}') RETURNING id", [team.rows[0]!.id]);
      const store = createFunctionStore(db.sql);
      functionId = (await store.create(Number(app.rows[0]!.id), "f", { timeoutMs: 1000, memoryMb: 32, invocationsPerMinute: 0 })).id;
    });
    afterAll(() => db.drop());

    async function trigger(missed: "skip" | "run_once", nextRunAt: Date, cron = "* * * * * *"): Promise<number> {
      const t = await createFunctionStore(db.sql).createScheduleTrigger(functionId, { cron, timezone: "UTC", missedTicks: missed, enabled: true, nextRunAt }, 100);
      if (!t || t === "limit") throw new Error("no trigger");
      return Number(t.id);
    }
    const rowsOf = async (id: number) =>
      (await db.sql.query<{ scheduled_for: Date; status: string; missed: number }>(
        "SELECT scheduled_for, status, missed FROM function_schedule_runs WHERE trigger_id = $1 ORDER BY scheduled_for", [id])).rows;

    it("two schedulers on one database run each tick once", async () => {
      const start = new Date(Math.ceil(Date.now() / 1000) * 1000);
      const id = await trigger("skip", start);
      const a = createScheduler({ sql: db.sql, runtime, options: { pollMs: 20, graceMs: 5000 } });
      const b = createScheduler({ sql: db.sql, runtime, options: { pollMs: 20, graceMs: 5000 } });
      a.start();
      b.start();
      // three ticks (one a second) run
      await until(async () => (runs.filter((r) => r.triggerId === id).length >= 3 ? true : undefined), 15_000, 20);
      await db.sql.query("UPDATE function_triggers SET enabled = false WHERE id = $1", [id]);
      await Promise.all([a.stop(), b.stop()]);
      const mine = runs.filter((r) => r.triggerId === id).map((r) => r.event.scheduled_time);
      expect(mine.length).toBeGreaterThanOrEqual(3);
      expect(new Set(mine).size).toBe(mine.length);
      const rows = await rowsOf(id);
      expect(rows.map((r) => r.status)).toEqual(mine.map(() => "ok"));
      expect(mine.sort()).toEqual(rows.map((r) => new Date(r.scheduled_for).toISOString()));
    });

    it("skip: ticks missed while down are one skipped run with their count; the schedule goes on", async () => {
      // the scheduler's clock stands still at `now` (the database's due check stays real)
      vi.useFakeTimers({ toFake: ["Date"] });
      try {
        await skipCase();
      } finally {
        vi.useRealTimers();
      }
    });
    async function skipCase(): Promise<void> {
      const now = Date.now();
      const behind = new Date(Math.floor(now / 1000) * 1000 - 10_000); // 10 ticks ago
      const id = await trigger("skip", behind);
      const s = createScheduler({ sql: db.sql, runtime, options: { pollMs: 1000, graceMs: 2000 } });
      await s.poll();
      await s.stop();
      const rows = await rowsOf(id);
      const skipped = rows.filter((r) => r.status === "skipped");
      expect(skipped).toHaveLength(1);
      // ticks from 10 s ago up to 2 s (the grace) ago: 8 or 9 depending on where the poll fell in its second
      expect(skipped[0]!.missed).toBeGreaterThanOrEqual(8);
      expect(skipped[0]!.missed).toBeLessThanOrEqual(10);
      // the ticks within the grace period ran, each once, none of them counted as missed
      const ran = runs.filter((r) => r.triggerId === id);
      expect(ran.length).toBeGreaterThanOrEqual(1);
      expect(ran.length).toBeLessThanOrEqual(3);
      expect(ran.every((r) => r.event.missed === 0 && Date.parse(r.event.scheduled_time) > now - 3000)).toBe(true);
      const next = await db.sql.query<{ next_run_at: Date }>("SELECT next_run_at FROM function_triggers WHERE id = $1", [id]);
      expect(new Date(next.rows[0]!.next_run_at).getTime()).toBeGreaterThan(now - 1000);
    }

    it("run_once: the newest missed tick runs once, told how many were missed before it", async () => {
      vi.useFakeTimers({ toFake: ["Date"] });
      try {
        await runOnceCase();
      } finally {
        vi.useRealTimers();
      }
    });
    async function runOnceCase(): Promise<void> {
      const now = Date.now();
      const behind = new Date(Math.floor(now / 1000) * 1000 - 10_000);
      const id = await trigger("run_once", behind);
      const s = createScheduler({ sql: db.sql, runtime, options: { pollMs: 1000, graceMs: 2000 } });
      await s.poll();
      await s.stop();
      const rows = await rowsOf(id);
      expect(rows.filter((r) => r.status === "skipped")).toEqual([]);
      const caughtUp = rows.filter((r) => r.missed > 0);
      expect(caughtUp).toHaveLength(1);
      expect(caughtUp[0]!.missed).toBeGreaterThanOrEqual(7);
      const ran = runs.filter((r) => r.triggerId === id);
      const first = ran[0]!.event;
      expect(first.missed).toBe(caughtUp[0]!.missed);
      expect(Date.parse(first.scheduled_time)).toBe(new Date(caughtUp[0]!.scheduled_for).getTime());
      // it is the newest tick beyond the grace period: no later tick was missed
      expect(Date.parse(first.scheduled_time)).toBeGreaterThan(now - 4000);
      expect(new Set(ran.map((r) => r.event.scheduled_time)).size).toBe(ran.length);
    }

    it("a schedule whose runs outlast the poll is not run twice for a tick; a disabled one not at all", async () => {
      // a run that lasts until the test lets it end
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      let started = 0;
      const slow = {
        async runSchedule(_f: number, triggerId: number, event: unknown): Promise<RunReport | undefined> {
          started++;
          await gate;
          return runtime.runSchedule(_f, triggerId, event);
        },
      };
      // the scheduler's polls, counted
      let polls = 0;
      const counting: Sql = {
        kind: db.sql.kind,
        query(text: string, params?: readonly unknown[]) {
          if (/FROM function_triggers\s+WHERE kind = 'schedule' AND enabled AND next_run_at <= now\(\)/.test(text)) polls++;
          return db.sql.query(text, params);
        },
        exec: (text: string) => db.sql.exec(text),
        transaction: (fn) => db.sql.transaction(fn),
        close: () => db.sql.close(),
      } as Sql;
      const id = await trigger("skip", new Date(Math.ceil(Date.now() / 1000) * 1000));
      const off = await trigger("skip", new Date(Date.now() - 1000));
      await db.sql.query("UPDATE function_triggers SET enabled = false WHERE id = $1", [off]);
      const s = createScheduler({ sql: counting, runtime: slow, options: { pollMs: 20, graceMs: 5000 } });
      s.start();
      // a tick's run started; many polls (20 ms) look at the schedule while it lasts
      await until(async () => (started > 0 ? true : undefined), 15_000, 20);
      const pollsAtStart = polls;
      await until(async () => (polls >= pollsAtStart + 20 ? true : undefined), 15_000, 20);
      release();
      await until(async () => (runs.some((r) => r.triggerId === id) ? true : undefined), 15_000, 20);
      await db.sql.query("UPDATE function_triggers SET enabled = false WHERE id = $1", [id]);
      await s.stop();
      const ticks = runs.filter((r) => r.triggerId === id).map((r) => r.event.scheduled_time);
      expect(ticks.length).toBeGreaterThanOrEqual(1);
      expect(new Set(ticks).size).toBe(ticks.length);
      expect(runs.filter((r) => r.triggerId === off)).toEqual([]);
      expect(await rowsOf(off)).toEqual([]);
    });
  });
}
