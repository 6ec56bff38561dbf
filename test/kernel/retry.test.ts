import { describe, expect, it } from "vitest";
import { backoffMs, sleep } from "../../src/kernel/retry.js";

describe("backoff", () => {
  it("doubles per attempt up to the maximum", () => {
    const b = { baseBackoffMs: 250, maxBackoffMs: 2000 };
    expect([1, 2, 3, 4, 5, 1000].map((a) => backoffMs(b, a))).toEqual([250, 500, 1000, 2000, 2000, 2000]);
  });

  it("draws the jitter share at random below the wait", () => {
    for (let i = 0; i < 50; i++) {
      const ms = backoffMs({ baseBackoffMs: 100, maxBackoffMs: 1000, jitter: 0.5 }, 2);
      expect(ms).toBeGreaterThan(100);
      expect(ms).toBeLessThanOrEqual(200);
    }
  });
});

describe("sleep", () => {
  it("ends early when its signal aborts", async () => {
    const ac = new AbortController();
    const t0 = Date.now();
    setTimeout(() => ac.abort(), 20);
    await sleep(10_000, ac.signal);
    expect(Date.now() - t0).toBeLessThan(5000);
    await sleep(10_000, ac.signal); // already aborted: at once
  });
});
