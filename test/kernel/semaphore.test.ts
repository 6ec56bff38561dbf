import { describe, expect, it } from "vitest";
import { Semaphore } from "../../src/kernel/semaphore.js";

describe("Semaphore", () => {
  it("lets `limit` holders in at once and reports idle when all released", async () => {
    const s = new Semaphore(2);
    await s.acquire();
    await s.acquire();
    let third = false;
    const waiting = s.acquire().then(() => (third = true));
    await Promise.resolve();
    expect(third).toBe(false);
    s.release();
    await waiting;
    expect(s.inUse).toBe(2);
    const idle = s.idle();
    s.release();
    s.release();
    await idle;
    expect(s.inUse).toBe(0);
  });
});
