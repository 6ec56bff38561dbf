// Runs schedule triggers. Every server process polls for schedules whose
// next tick is due; PostgreSQL decides which process runs a tick: claiming
// is one statement that moves the trigger's next_run_at from the tick it saw
// to the following one (compare-and-set: of several processes only one
// finds the old value) and inserts the run row (UNIQUE per trigger and
// tick). The claiming process then runs the active version through the same
// path as a manual run and writes the outcome into the run.
//
// Missed ticks: a tick more than graceMs late (no process ran while it was
// due: the service was down or overloaded) is missed. With "skip" the missed
// ticks are recorded as one skipped run and the schedule goes on from the
// next tick; with "run_once" the newest missed tick runs once.
import { hostname } from "node:os";
import { randomUUID } from "node:crypto";
import { errorDetail } from "../../kernel/errors.js";
import type { Sql } from "../../infra/storage/sql.js";
import { parseSchedule } from "./cron-schedule.js";
import type { SchedulerOptions } from "./config.js";
import type { FunctionRuntime } from "./function-runtime.js";

export const DEFAULT_SCHEDULER_OPTIONS: SchedulerOptions = {
  pollMs: 500,
  graceMs: 30_000,
  maxConcurrent: 16,
  retentionDays: 30,
  abandonAfterMs: 5 * 60_000,
};

/** What the function receives as ctx.event for a tick (req is null). */
export interface ScheduleEvent {
  type: "schedule";
  trigger_id: number;
  cron: string;
  timezone: string;
  /** The tick's time, ISO 8601 UTC. */
  scheduled_time: string;
  /** Ticks before this one that no process ran. */
  missed: number;
}

interface DueRow {
  id: number;
  cron: string;
  timezone: string;
  missed_ticks: "skip" | "run_once";
  next_run_at: Date;
}

/** Counting missed ticks stops here (each costs a cron step). */
const MAX_COUNTED_MISSES = 500;
const HOUSEKEEPING_MS = 60_000;
const PRUNE_MS = 3_600_000;

export interface Scheduler {
  start(): void;
  /** Stops polling and waits for the runs in progress. */
  stop(): Promise<void>;
  /** One poll now (tests, and start-up). */
  poll(): Promise<void>;
}

export function createScheduler(deps: {
  sql: Sql;
  runtime: Pick<FunctionRuntime, "runSchedule">;
  options?: Partial<SchedulerOptions>;
  onError?: (err: unknown) => void;
  /** Other periodic clean-up run with the scheduler's (about once a minute per process): the KV sweep. */
  housekeeping?: () => Promise<unknown>;
}): Scheduler {
  const opts: SchedulerOptions = { ...DEFAULT_SCHEDULER_OPTIONS, ...deps.options };
  const { sql } = deps;
  const server = `${hostname()}:${process.pid}`;
  const running = new Set<Promise<void>>();
  let timer: NodeJS.Timeout | undefined;
  let stopped = true;
  let polling: Promise<void> | undefined;
  let housekeptAt = 0;
  let prunedAt = 0;
  const onError = (err: unknown) => deps.onError?.(err);

  /** Claims one tick: the trigger moves on to `following`; the run row is inserted (none when `status` is undefined). */
  async function claim(row: DueRow, following: Date | null, tick: Date, status: "running" | undefined, missed: number): Promise<{ id: number; function_id: number } | undefined> {
    const r = await sql.query<{ id: number | null; function_id: number; claimed: boolean }>(
      `WITH claimed AS (
         UPDATE function_triggers SET next_run_at = $3
         WHERE id = $1 AND kind = 'schedule' AND enabled AND next_run_at = $2
         RETURNING id, app_id, function_id),
       run AS (
         INSERT INTO function_schedule_runs (trigger_id, app_id, function_id, scheduled_for, status, missed, server, finished_at)
         SELECT id, app_id, function_id, $4, $5, $6, $7, NULL::timestamptz FROM claimed WHERE $5::text IS NOT NULL
         ON CONFLICT (trigger_id, scheduled_for) DO NOTHING
         RETURNING id)
       SELECT (SELECT id FROM run) AS id, function_id, true AS claimed FROM claimed`,
      [row.id, row.next_run_at, following, tick, status ?? null, missed, server],
    );
    const c = r.rows[0];
    if (!c || c.id === null || status === undefined) return undefined;
    return { id: Number(c.id), function_id: Number(c.function_id) };
  }

  async function finish(runId: number, status: string, invocationId: number | null, error: string | null): Promise<void> {
    await sql.query(
      "UPDATE function_schedule_runs SET status = $2, invocation_id = $3, error = $4, finished_at = now() WHERE id = $1",
      [runId, status, invocationId, error],
    );
  }

  async function execute(row: DueRow, run: { id: number; function_id: number }, tick: Date, missed: number): Promise<void> {
    const event: ScheduleEvent = { type: "schedule", trigger_id: Number(row.id), cron: row.cron, timezone: row.timezone, scheduled_time: tick.toISOString(), missed };
    try {
      const report = await deps.runtime.runSchedule(run.function_id, Number(row.id), event, randomUUID());
      if (!report) await finish(run.id, "error", null, "The function has no active version.");
      else await finish(run.id, report.outcome, report.invocationId ?? null, report.error ?? null);
    } catch (err) {
      // The plan or the rate limit refused the run: recorded as skipped with the reason.
      const d = errorDetail(err);
      await finish(run.id, d ? "skipped" : "error", null, d ? `${d.code}: ${(err as Error).message}` : String(err)).catch(onError);
      if (!d) onError(err);
    }
  }

  /** Starts a claimed run without waiting for it (its promise is tracked for stop()). */
  function launch(row: DueRow, run: { id: number; function_id: number }, tick: Date, missed: number): void {
    const p: Promise<void> = execute(row, run, tick, missed).catch(onError).finally(() => running.delete(p));
    running.add(p);
  }

  /**
   * Handles one due schedule up to `now`: each tick on time runs; ticks
   * missed beyond the grace period follow the policy. Every step is a claim
   * from the tick this process saw: when another process claimed first, it
   * has the schedule and this one stops. All lateness is judged against the
   * one `now`, so a tick on time when the catch-up began is not counted as
   * missed a moment later.
   */
  async function handle(row: DueRow, now: Date): Promise<void> {
    let sched;
    try {
      sched = parseSchedule(row.cron, row.timezone);
    } catch (err) {
      // Stored expressions were valid when created; a runtime whose time
      // zone data lost one stops the schedule rather than failing each poll.
      await claim(row, null, row.next_run_at, undefined, 0);
      onError(err);
      return;
    }
    let cur: DueRow = { ...row, next_run_at: new Date(row.next_run_at) };
    for (let steps = 0; cur.next_run_at.getTime() <= now.getTime() && steps < 100; steps++) {
      const seen = cur.next_run_at;
      if (now.getTime() - seen.getTime() <= opts.graceMs) {
        const following = sched.next(seen);
        const run = await claim(cur, following, seen, "running", 0);
        if (!run) return;
        launch(cur, run, seen, 0);
        if (!following) return;
        cur = { ...cur, next_run_at: following };
        continue;
      }
      // Behind: every tick up to (now - grace) is missed; L is the newest.
      const horizon = new Date(now.getTime() - opts.graceMs + 1);
      const last = sched.previous(horizon);
      const lastMissed = last && last.getTime() > seen.getTime() ? last : seen;
      let count = 1;
      for (let t = sched.next(seen); t && t.getTime() <= lastMissed.getTime() && count < MAX_COUNTED_MISSES; t = sched.next(t)) count++;
      const following = sched.next(lastMissed);
      if (row.missed_ticks === "run_once") {
        const run = await claim(cur, following, lastMissed, "running", count - 1);
        if (!run) return;
        launch(cur, run, lastMissed, count - 1);
      } else {
        const r = await claimSkip(cur, following, lastMissed, count);
        if (!r) return;
      }
      if (!following) return;
      cur = { ...cur, next_run_at: following };
    }
  }

  async function claimSkip(row: DueRow, following: Date | null, tick: Date, missed: number): Promise<boolean> {
    const r = await sql.query(
      `WITH claimed AS (
         UPDATE function_triggers SET next_run_at = $3
         WHERE id = $1 AND kind = 'schedule' AND enabled AND next_run_at = $2
         RETURNING id, app_id, function_id)
       INSERT INTO function_schedule_runs (trigger_id, app_id, function_id, scheduled_for, status, missed, server, finished_at)
       SELECT id, app_id, function_id, $4, 'skipped', $5, $6, now() FROM claimed
       ON CONFLICT (trigger_id, scheduled_for) DO NOTHING
       RETURNING id`,
      [row.id, row.next_run_at, following, tick, missed, server],
    );
    return r.rows.length > 0;
  }

  async function housekeeping(): Promise<void> {
    const now = Date.now();
    if (now - housekeptAt < HOUSEKEEPING_MS) return;
    housekeptAt = now;
    await sql.query(
      `UPDATE function_schedule_runs SET status = 'error', error = 'The server process running it stopped.', finished_at = now()
       WHERE status = 'running' AND started_at < now() - make_interval(secs => $1::float8 / 1000)`,
      [opts.abandonAfterMs],
    );
    await deps.housekeeping?.().catch(onError);
    if (opts.retentionDays > 0 && now - prunedAt > PRUNE_MS) {
      prunedAt = now;
      await sql.query("DELETE FROM function_schedule_runs WHERE started_at < now() - make_interval(days => $1::int)", [opts.retentionDays]);
    }
  }

  async function poll(): Promise<void> {
    const room = opts.maxConcurrent - running.size;
    if (room <= 0) return;
    const due = await sql.query<DueRow>(
      `SELECT id, cron, timezone, missed_ticks, next_run_at FROM function_triggers
       WHERE kind = 'schedule' AND enabled AND next_run_at <= now() ORDER BY next_run_at LIMIT $1`,
      [room],
    );
    const now = new Date();
    for (const row of due.rows) {
      const p: Promise<void> = handle(row, now).catch(onError).finally(() => running.delete(p));
      running.add(p);
    }
    await housekeeping().catch(onError);
  }

  function schedule(): void {
    if (stopped) return;
    timer = setTimeout(() => {
      polling = poll().catch(onError).finally(() => {
        polling = undefined;
        schedule();
      });
    }, opts.pollMs);
    timer.unref();
  }

  return {
    start() {
      if (!stopped) return;
      stopped = false;
      schedule();
    },
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      await polling;
      await Promise.allSettled([...running]);
    },
    poll,
  };
}
