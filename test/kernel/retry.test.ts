import { afterEach, describe, expect, it, vi } from "vitest";
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
  afterEach(() => {
    vi.useRealTimers();
  });

  it("ends early when its signal aborts, and leaves no timer behind", async () => {
    vi.useFakeTimers();
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 20);
    let done = false;
    const slept = sleep(10_000, ac.signal).then(() => (done = true));
    await vi.advanceTimersByTimeAsync(19);
    expect(done).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(done).toBe(true);
    await slept;
    expect(vi.getTimerCount()).toBe(0);
    await sleep(10_000, ac.signal); // already aborted: at once
    expect(vi.getTimerCount()).toBe(0);
  });

  it("ends after its time without a signal", async () => {
    vi.useFakeTimers();
    let done = false;
    void sleep(1000).then(() => (done = true));
    await vi.advanceTimersByTimeAsync(999);
    expect(done).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(done).toBe(true);
  });
});
