// Schedule triggers across several real server processes on one PostgreSQL
// (docs/functions.md, "Schedules"): a schedule every second runs each tick exactly once
// however many processes poll, with its run history; after every process
// was stopped for a while, the missed ticks are skipped (one "skipped" run
// recording how many) or run once (the newest missed tick), per trigger;
// a disabled schedule does not run and, enabled again, does not catch up.
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Code, ConnectError } from "@connectrpc/connect";
import { FunctionService as AdminFunctionService, type ScheduleRun } from "../../gen/pulsebase/admin/v1/functions_pb.js";
import { IdentityService } from "../../gen/pulsebase/admin/v1/identity_pb.js";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { errorDetail } from "../../src/kernel/errors.js";
import { OPERATOR_TOKEN, startCluster, type Cluster, type ClusterServer } from "../helpers/cluster.js";
import { operatorEnv, runCli } from "../helpers/cli.js";
import { until } from "../helpers/until.js";

let cluster: Cluster;
let appId: bigint;

// The function logs the tick it was run for: what ran is read back from the invocation records.
const TICK = `export default (req, ctx) => {
  console.log(ctx.trigger + " " + ctx.event.type + " " + ctx.event.scheduled_time + " missed=" + ctx.event.missed);
  return { tick: ctx.event.scheduled_time };
};`;

const fnsOf = (s: ClusterServer) => s.client(AdminFunctionService);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Real time passing is what is tested here: a negative check (nothing runs meanwhile) or an outage of a given length. */
const letTimePass = sleep;
/** Waits until the trigger has at least `n` runs that `ok` accepts (ticks every second). */
const runsOf = (s: ClusterServer, triggerId: bigint, n: number, ok: (r: ScheduleRun) => boolean = () => true) =>
  until(async () => ((await allRuns(s, triggerId)).filter(ok).length >= n ? true : undefined), 30_000, 100);

async function allRuns(s: ClusterServer, triggerId: bigint): Promise<ScheduleRun[]> {
  const out: ScheduleRun[] = [];
  let pageToken = "";
  do {
    const r = await fnsOf(s).listScheduleRuns({ triggerId, pageSize: 200, pageToken });
    out.push(...r.runs);
    pageToken = r.nextPageToken;
  } while (pageToken);
  return out.reverse();
}

/** The ticks the function logged, in order of invocation id. */
async function ranTicks(s: ClusterServer, functionId: bigint): Promise<string[]> {
  const r = await fnsOf(s).listInvocations({ functionId, pageSize: 200 });
  return r.invocations.reverse().map((i) => {
    expect(i.triggerKind).toBe("schedule");
    const m = /^schedule schedule (\S+) missed=\d+$/.exec(i.logs[0]?.message ?? "");
    expect(m, JSON.stringify(i.logs)).not.toBeNull();
    return m![1]!;
  });
}

/** Waits until no run of the trigger is still running. */
async function settled(s: ClusterServer, triggerId: bigint): Promise<ScheduleRun[]> {
  for (let i = 0; i < 100; i++) {
    const runs = await allRuns(s, triggerId);
    if (runs.every((r) => r.status !== "running")) return runs;
    await sleep(100);
  }
  throw new Error("runs still running");
}

const iso = (r: ScheduleRun) => timestampDate(r.scheduledFor!).toISOString();

beforeAll(async () => {
  cluster = await startCluster(["a", "b", "c"], {
    env: { PULSEBASE_SCHEDULE_POLL_MS: "200", PULSEBASE_SCHEDULE_GRACE_MS: "3000" },
  });
  const admin = cluster.servers[0]!.client(IdentityService);
  const team = await admin.createTeam({ name: "sched" });
  appId = (await admin.createApp({ teamId: team.id, name: "sched" })).id;
}, 120_000);
afterAll(() => cluster?.close());

describe("schedules across processes", () => {
  it("run each tick of an every-second schedule exactly once, with run history", async () => {
    const [a, b] = cluster.servers;
    const fn = await fnsOf(a!).createFunction({ appId, name: "every-second", code: TICK });
    const t = await fnsOf(b!).createScheduleTrigger({ functionId: fn.id, cron: "* * * * * *", timezone: "UTC", missedTicks: "skip" });
    expect(t).toMatchObject({ cron: "* * * * * *", timezone: "UTC", missedTicks: "skip", enabled: true });
    expect(t.nextRunAt).toBeDefined();
    await runsOf(a!, t.id, 5, (r) => r.status === "ok");
    await fnsOf(a!).setTriggerEnabled({ triggerId: t.id, enabled: false });
    const runs = await settled(a!, t.id);
    const ticks = await ranTicks(a!, fn.id);
    // every run ran once and the function saw each tick once
    expect(runs.length).toBeGreaterThanOrEqual(4);
    expect(runs.every((r) => r.status === "ok" && r.invocationId > 0n && r.missed === 0), JSON.stringify(runs.map((r) => [iso(r), r.status, r.error]))).toBe(true);
    expect(new Set(ticks).size).toBe(ticks.length);
    expect([...ticks].sort()).toEqual(runs.map(iso).sort());
    // consecutive seconds: none skipped, none twice
    const secs = ticks.map((x) => Date.parse(x) / 1000).sort((x, y) => x - y);
    for (let i = 1; i < secs.length; i++) expect(secs[i]! - secs[i - 1]!).toBe(1);
    // which processes ran them (PostgreSQL decides; each tick by exactly one)
    const byServer = await cluster.db.sql.query<{ server: string; n: number }>(
      "SELECT server, count(*)::int AS n FROM function_schedule_runs WHERE trigger_id = $1 GROUP BY server", [Number(t.id)]);
    expect(byServer.rows.reduce((n, r) => n + r.n, 0)).toBe(runs.length);
    // disabled: nothing more runs. A witness schedule still enabled runs
    // ticks a second and more after the disabling (the processes' polls
    // went past those ticks): the disabled one would have run them too.
    const disabledAt = Date.now();
    const witnessFn = await fnsOf(a!).createFunction({ appId, name: "witness", code: TICK });
    const witness = await fnsOf(a!).createScheduleTrigger({ functionId: witnessFn.id, cron: "* * * * * *", timezone: "UTC", missedTicks: "skip" });
    await runsOf(a!, witness.id, 2, (r) => timestampDate(r.scheduledFor!).getTime() > disabledAt + 1000);
    await fnsOf(a!).setTriggerEnabled({ triggerId: witness.id, enabled: false });
    expect((await allRuns(a!, t.id)).length).toBe(runs.length);
  }, 60_000);

  it("a disabled schedule enabled again starts from its next tick (no catch-up)", async () => {
    const [a] = cluster.servers;
    const fn = (await fnsOf(a!).listFunctions({ appId })).functions.find((f) => f.name === "every-second")!;
    const t = (await fnsOf(a!).listTriggers({ functionId: fn.id })).triggers[0]!;
    const before = (await allRuns(a!, t.id)).length;
    const enabled = await fnsOf(a!).setTriggerEnabled({ triggerId: t.id, enabled: true });
    const since = Date.now();
    expect(timestampDate(enabled.nextRunAt!).getTime()).toBeGreaterThan(since - 1000);
    await runsOf(a!, t.id, before + 1);
    await fnsOf(a!).setTriggerEnabled({ triggerId: t.id, enabled: false });
    const disabledAt = Date.now();
    const runs = (await settled(a!, t.id)).slice(before);
    expect(runs.length).toBeGreaterThanOrEqual(1);
    // one run per second it was enabled at most (a catch-up would add the
    // ticks of the disabled stretch), however long this machine took
    expect(new Set(runs.map(iso)).size).toBe(runs.length);
    expect(runs.length).toBeLessThanOrEqual(Math.ceil((disabledAt - since) / 1000) + 1);
    for (const r of runs) {
      expect(r.status).toBe("ok");
      expect(timestampDate(r.scheduledFor!).getTime()).toBeGreaterThan(since - 1000);
    }
  }, 30_000);

  it("after every process was down: skip records the missed ticks as one skipped run; run_once runs the newest once", async () => {
    const [a] = cluster.servers;
    const skipFn = await fnsOf(a!).createFunction({ appId, name: "skipper", code: TICK });
    const onceFn = await fnsOf(a!).createFunction({ appId, name: "once", code: TICK });
    const skip = await fnsOf(a!).createScheduleTrigger({ functionId: skipFn.id, cron: "* * * * * *", missedTicks: "skip" });
    const once = await fnsOf(a!).createScheduleTrigger({ functionId: onceFn.id, cron: "* * * * * *", missedTicks: "run_once" });
    expect(skip.timezone).toBe("UTC");
    await runsOf(a!, skip.id, 1);
    await runsOf(a!, once.id, 1);
    // every process stops: nobody polls
    await Promise.all(cluster.servers.map((s) => s.stop()));
    const downAt = Date.now();
    await letTimePass(6000); // the outage: longer than the 3 s grace
    const d = await cluster.startServer("d");
    const upAt = Date.now();
    // d polls: the skip schedule records its skipped run and goes on, the run_once one catches up
    await runsOf(d, skip.id, 1, (r) => r.status === "skipped");
    await runsOf(d, skip.id, 1, (r) => r.status === "ok" && timestampDate(r.scheduledFor!).getTime() > upAt - 3000 + 1000);
    await runsOf(d, once.id, 1, (r) => r.missed > 0);
    await fnsOf(d).setTriggerEnabled({ triggerId: skip.id, enabled: false });
    await fnsOf(d).setTriggerEnabled({ triggerId: once.id, enabled: false });

    const skipRuns = await settled(d, skip.id);
    const skipped = skipRuns.filter((r) => r.status === "skipped");
    expect(skipped, JSON.stringify(skipRuns.map((r) => [iso(r), r.status, r.missed]))).toHaveLength(1);
    // at least the seconds of the pause beyond the grace period
    expect(skipped[0]!.missed).toBeGreaterThanOrEqual(3);
    expect(skipped[0]!.invocationId).toBe(0n);
    // no run of the skip schedule for a tick inside the outage (beyond grace)
    const skipTicks = (await ranTicks(d, skipFn.id)).map((x) => Date.parse(x));
    const gapStart = downAt + 1000;
    const gapEnd = upAt - 3000 - 1000;
    expect(skipTicks.filter((x) => x > gapStart && x < gapEnd)).toEqual([]);
    expect(skipTicks.some((x) => x > upAt - 3000)).toBe(true); // it went on afterwards

    const onceRuns = await settled(d, once.id);
    const caughtUp = onceRuns.filter((r) => r.missed > 0);
    expect(caughtUp, JSON.stringify(onceRuns.map((r) => [iso(r), r.status, r.missed]))).toHaveLength(1);
    expect(caughtUp[0]!).toMatchObject({ status: "ok" });
    expect(caughtUp[0]!.missed).toBeGreaterThanOrEqual(2);
    expect(onceRuns.filter((r) => r.status === "skipped")).toEqual([]);
    const onceTicks = await ranTicks(d, onceFn.id);
    expect(new Set(onceTicks).size).toBe(onceTicks.length);
    const inGap = onceTicks.map((x) => Date.parse(x)).filter((x) => x > gapStart && x < gapEnd);
    expect(inGap.length).toBeLessThanOrEqual(1);
    // the function was told how many ticks were missed
    const inv = (await fnsOf(d).listInvocations({ functionId: onceFn.id, pageSize: 200 })).invocations.find((i) => i.id === caughtUp[0]!.invocationId)!;
    expect(inv.logs[0]!.message).toContain(`missed=${caughtUp[0]!.missed}`);
  }, 120_000);

  it("the CLI creates schedules (cron, time zone, policy) and lists their runs; bad input is a 422 naming the field", async () => {
    const s = cluster.servers[cluster.servers.length - 1]!;
    const fn = await fnsOf(s).createFunction({ appId, name: "cli-sched", code: TICK });
    const env = { ...operatorEnv({ adminUrl: `http://127.0.0.1:${s.admin}`, operatorToken: OPERATOR_TOKEN }), PULSEBASE_DATA_DIR: join(cluster.dataDir, "cli") };
    const cli = (args: string[]) => runCli(args, { env });
    const made = await cli(["functions", "triggers", "create", "--id", String(fn.id), "--cron", "0 9 * * 1-5", "--tz", "Europe/Berlin", "--missed", "run_once"]);
    expect(made.code, made.stderr).toBe(0);
    const t = JSON.parse(made.stdout);
    expect(t).toMatchObject({ kind: "TRIGGER_KIND_SCHEDULE", cron: "0 9 * * 1-5", timezone: "Europe/Berlin", missed_ticks: "run_once", enabled: true });
    // 09:00 in Berlin is 07:00 or 08:00 UTC, on a weekday
    const next = new Date(t.next_run_at);
    expect([7, 8]).toContain(next.getUTCHours());
    expect(next.getUTCMinutes()).toBe(0);
    expect([1, 2, 3, 4, 5]).toContain(new Date(next.toLocaleString("en-US", { timeZone: "Europe/Berlin" })).getDay());
    const runs = await cli(["functions", "schedules", "runs", "--trigger", String(t.id)]);
    expect(runs.code, runs.stderr).toBe(0);
    expect(JSON.parse(runs.stdout).runs ?? []).toEqual([]);

    for (const [req, field] of [
      [{ cron: "every minute" }, "cron"],
      [{ cron: "61 * * * *" }, "cron"],
      [{ cron: "* * * * *", timezone: "Mars/Olympus" }, "timezone"],
      [{ cron: "0 0 30 2 *" }, "cron"],
      [{ cron: "* * * * *", missedTicks: "all" }, "missed_ticks"],
      [{ cron: "* ".repeat(50_000) }, "cron"],
      [{ cron: "* * * * *", timezone: "Europe/" + "x".repeat(10_000) }, "timezone"],
    ] as const) {
      const err = await fnsOf(s).createScheduleTrigger({ functionId: fn.id, ...req } as never).catch((e: unknown) => e);
      expect(err, JSON.stringify(req)).toBeInstanceOf(ConnectError);
      expect((err as ConnectError).code).toBe(Code.InvalidArgument);
      expect(errorDetail(err)?.fieldViolations.map((f) => f.field), JSON.stringify(req)).toEqual([field]);
    }
  }, 60_000);
});
