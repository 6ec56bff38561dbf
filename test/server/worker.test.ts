// `npm run worker` processes beside a server process, all as child
// processes on this machine's PostgreSQL and NATS: a worker killed with
// SIGKILL while it holds batches hands them to the other worker within a few
// seconds (JetStream ack_wait, kept short by in-progress marks), nothing is
// lost or counted twice; each worker serves /metrics.
import { describe, expect, it } from "vitest";
import { DEFAULT_ACK_WAIT_MS } from "../../src/infra/queue/queue.js";
import { metricValue, type ChildWorker } from "../helpers/child-worker.js";
import { until } from "../helpers/until.js";
import { BATCHES, PER_BATCH, useWorkerDrain } from "./worker-fixture.js";

const fx = useWorkerDrain({ operator: "op_worker_test_token_0123456789", tmpPrefix: "pb-worker-" });
const processed = () => fx.count("SELECT count(*)::int AS n FROM analytics_processed_batches");

describe("worker processes", () => {
  it("hand a killed worker's batches to the other within a few seconds, each counted once", async () => {
    const token = await fx.consumerToken("workers");
    const [a, b] = fx.workers as [ChildWorker, ChildWorker];
    // Both workers take batches and then wait on a lock, so both hold
    // some when one of them is killed.
    const { releasedAt: killedAt } = await fx.holdBatchesAndKill(token, "takeover", a, async () => {
      // Checked while the lock still holds: the survivor applies its batches
      // the moment it is released.
      expect(await processed()).toBe(0);
    });

    // The survivor applies its own and the waiting ones at once, then the
    // killed worker's once their ack_wait after the last in-progress mark
    // has passed.
    const changes: { at: number; n: number }[] = [{ at: killedAt, n: 0 }];
    await until(async () => {
      const n = await processed();
      if (n !== changes[changes.length - 1]!.n) changes.push({ at: Date.now(), n });
      return n === BATCHES ? true : undefined;
    }, 45_000, 50);
    const takeoverMs = changes[changes.length - 1]!.at - killedAt;
    // The longest stretch with nothing applied: the survivor idle, waiting for the killed worker's batches.
    const gap = changes.slice(1).reduce((g, c, i) => (c.at - changes[i]!.at > g.ms ? { ms: c.at - changes[i]!.at, done: changes[i]!.n } : g), { ms: 0, done: 0 });
    console.log(
      `takeover: all ${BATCHES} batches applied ${takeoverMs} ms after the SIGKILL (ack_wait ${DEFAULT_ACK_WAIT_MS} ms); ` +
        `the survivor stood idle ${gap.ms} ms after ${gap.done} batches, waiting for the killed worker's ${BATCHES - gap.done}`,
    );
    // What bounds the takeover is the consumer's ack_wait (the killed
    // worker's batches are redelivered that long after its last in-progress
    // mark), not a timing of this machine: the consumer has the short one.
    expect((await fx.analyticsConsumer()).config.ack_wait).toBe(DEFAULT_ACK_WAIT_MS * 1_000_000);

    // Nothing lost, nothing counted twice.
    expect(await fx.count("SELECT occurrences::int AS n FROM analytics_breadcrumbs WHERE name = 'takeover'")).toBe(BATCHES * PER_BATCH);
    await fx.consumerDrained(10_000);
    expect(b.child.exitCode).toBeNull();
  }, 90_000);

  it("serve /metrics: the analytics queue, the function-event transport, the PostgreSQL pool, the process", async () => {
    // The gauges are sampled; wait for a sample taken after the drain.
    const text = await fx.metricsOnceDrained(() => fx.workers[1]!.metrics());
    expect(metricValue(text, "pulsebase_queue_stats_up", { queue: "analytics", backend: "jetstream" })).toBe(1);
    expect(metricValue(text, "pulsebase_queue_in_flight_messages", { queue: "analytics" })).toBe(0);
    expect(metricValue(text, "pulsebase_queue_dead_letter_messages", { queue: "analytics" })).toBe(0);
    // The server created the function-event stream and its lanes at start.
    expect(metricValue(text, "pulsebase_queue_stats_up", { queue: "function-events", backend: "jetstream" })).toBe(1);
    expect(metricValue(text, "pulsebase_queue_lag_messages", { queue: "function-events" })).toBe(0);
    expect(metricValue(text, "pulsebase_queue_dead_letter_messages", { queue: "function-events" })).toBe(0);
    expect(metricValue(text, "pulsebase_pg_pool_connections", { state: "idle" })).toBeGreaterThanOrEqual(0);
    expect(text).toMatch(/^process_cpu_user_seconds_total /m);
    expect(text).toMatch(/^nodejs_eventloop_lag_seconds /m);
  });
});
