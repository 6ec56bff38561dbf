// Issue #28, point 13: two `npm run worker` processes on one host, started
// as the README's Scale-out section says (same environment, so the same
// default metrics port 8445). The second must not exit because the first
// holds the port: it takes a next port, with a warning. With one of them
// killed (SIGKILL) while both hold batches, the other drains everything,
// each batch counted once. A port set explicitly and taken leaves a worker
// running without GET /metrics, with a warning.
import { describe, expect, it } from "vitest";
import { fetch } from "undici";
import { metricValue, spawnWorker, type ChildWorker } from "../helpers/child-worker.js";
import { until } from "../helpers/until.js";
import { BATCHES, PER_BATCH, useWorkerDrain } from "./worker-fixture.js";

/** One environment for every worker, as the README says; the metrics port left to its default. */
const fx = useWorkerDrain({
  operator: "op_worker_same_env_token_0123456789",
  tmpPrefix: "pb-worker-env-",
  // unset (the helper would give each worker its own port): the default, 8445;
  // the workers start one after the other, so the second finds the first's port taken
  env: { PULSEBASE_WORKER_METRICS_PORT: "" },
});
const workers = fx.workers;

/** The metrics port a worker says it serves (its "pulsebase workers running" line), or undefined for none. */
function servedPort(w: ChildWorker): number | undefined {
  const line = w.output().split("\n").find((l) => l.includes("pulsebase workers running"));
  const parsed = JSON.parse(line!) as { metricsPort?: number };
  return parsed.metricsPort;
}

describe("two workers on one host with one environment", () => {
  it("both run: the second serves its metrics on another port, with a warning", async () => {
    const [a, b] = workers as [ChildWorker, ChildWorker];
    expect(a.child.exitCode).toBeNull();
    expect(b.child.exitCode).toBeNull();
    const pa = servedPort(a), pb = servedPort(b);
    expect(pa).toBeGreaterThanOrEqual(8445);
    expect(pb).toBeGreaterThan(pa!);
    expect(b.output()).toMatch(/worker metrics: port in use/);
    // each answers on its own port
    for (const p of [pa, pb]) expect((await fetch(`http://127.0.0.1:${p}/metrics`)).status).toBe(200);
  });

  it("with one killed mid-drain (SIGKILL), the other drains everything, each batch counted once", async () => {
    const token = await fx.consumerToken("same env");
    const [a, b] = workers as [ChildWorker, ChildWorker];
    // Both workers take batches and then wait on a lock, so both hold some when one is killed.
    const { killedAt } = await fx.holdBatchesAndKill(token, "same-env", a);
    // The failure deadline (not a timing claim): 15 s after the kill.
    await until(async () => (await fx.count("SELECT count(*)::int AS n FROM analytics_processed_batches")) === BATCHES ? true : undefined, 15_000, 100);
    await fx.consumerDrained(15_000, 100);
    console.log(`same environment: all ${BATCHES} batches applied and acknowledged ${Date.now() - killedAt} ms after one worker's SIGKILL`);
    expect(await fx.count("SELECT occurrences::int AS n FROM analytics_breadcrumbs WHERE name = 'same-env'")).toBe(BATCHES * PER_BATCH);
    expect(b.child.exitCode).toBeNull();
    // the survivor's metrics say so too
    const text = await fx.metricsOnceDrained(async () => (await fetch(`http://127.0.0.1:${servedPort(b)}/metrics`)).text());
    expect(metricValue(text, "pulsebase_queue_in_flight_messages", { queue: "analytics" })).toBe(0);
  }, 90_000);

  it("a port set explicitly and taken: the worker runs on without metrics, with a warning", async () => {
    const taken = servedPort(workers[1]!)!;
    const c = await spawnWorker({ ...fx.env, PULSEBASE_WORKER_METRICS_PORT: String(taken) });
    workers.push(c);
    expect(servedPort(c)).toBeUndefined();
    expect(c.output()).toMatch(new RegExp(`port ${taken} in use; running WITHOUT GET /metrics`));
    expect(await c.stop()).toBe(0);
  }, 60_000);
});
