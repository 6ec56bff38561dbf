// The scrape-time gauges in isolation: fresh values at every scrape, and a
// queue whose statistics cannot be read shows as down instead of stale.
import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { registerQueueMetrics } from "../../src/server/metrics.js";

describe("queue gauges", () => {
  it("show this scrape's reading, read once per scrape", async () => {
    const registry = new Registry();
    let reads = 0;
    registerQueueMetrics(registry, "analytics", { backend: "embedded", stats: async () => ({ lag: ++reads * 10, inFlight: reads, deadLetters: 0 }) });
    const first = await registry.metrics();
    expect(first).toContain('pulsebase_queue_lag_messages{queue="analytics",backend="embedded"} 10');
    expect(first).toContain('pulsebase_queue_in_flight_messages{queue="analytics",backend="embedded"} 1');
    expect(first).toContain('pulsebase_queue_stats_up{queue="analytics",backend="embedded"} 1');
    expect(reads).toBe(1);
    expect(await registry.metrics()).toContain('pulsebase_queue_lag_messages{queue="analytics",backend="embedded"} 20');
    expect(reads).toBe(2);
  });

  it("leave the series out and report stats_up 0 when the backend fails", async () => {
    const registry = new Registry();
    let fail = false;
    const errors: unknown[] = [];
    registerQueueMetrics(registry, "analytics", {
      backend: "jetstream",
      stats: async () => {
        if (fail) throw new Error("NATS down");
        return { lag: 5, inFlight: 0, deadLetters: 2 };
      },
    }, (e) => errors.push(e));
    expect(await registry.metrics()).toContain('pulsebase_queue_lag_messages{queue="analytics",backend="jetstream"} 5');
    fail = true;
    const down = await registry.metrics();
    expect(down).toContain('pulsebase_queue_stats_up{queue="analytics",backend="jetstream"} 0');
    expect(down).not.toMatch(/pulsebase_queue_lag_messages\{/);
    expect(down).not.toMatch(/pulsebase_queue_dead_letter_messages\{/);
    expect(errors).toHaveLength(1);
  });
});
