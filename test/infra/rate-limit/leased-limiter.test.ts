// The leased limiter's two policies on both SQL backends: two limiters on one
// schema stand in for two server processes and never allow more than the
// limit together; a window gives unspent tokens back at stop.
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createTestDb, uniqueName, type TestDb } from "../../helpers/db.js";
import { createLeasedLimiter, type RateLimiter } from "../../../src/infra/rate-limit/leased-limiter.js";
import { windowPolicy } from "../../../src/infra/rate-limit/window-policy.js";
import { bucketPolicy } from "../../../src/infra/rate-limit/bucket-policy.js";

describe.each(["postgres", "pglite"] as const)("leased limiter on %s", (kind) => {
  let db: TestDb;
  beforeAll(async () => {
    db = await createTestDb(kind);
  });
  afterAll(() => db.drop());

  const allowed = async (limiters: RateLimiter[], key: string, limit: number, n: number) =>
    (await Promise.all(Array.from({ length: n }, (_, i) => limiters[i % limiters.length]!.take({ key, limit })))).filter((v) => v.allowed).length;

  it("window: together exactly the limit; a refusal waits for the window's end; unspent tokens go back at stop", async () => {
    const make = () => createLeasedLimiter(windowPolicy(db.sql, { name: "t-hour", windowMs: 3_600_000, batch: () => 5 }), { leaseMs: 60_000 });
    const [a, b] = [make(), make()];
    const key = uniqueName("w");
    expect(await allowed([a, b], key, 23, 40)).toBe(23);
    const refused = await a.take({ key, limit: 23 });
    expect(refused).toMatchObject({ allowed: false, key });
    expect(!refused.allowed && refused.retryAfterSeconds).toBeLessThanOrEqual(3600);
    const other = uniqueName("w");
    expect((await a.take({ key: other, limit: 100 })).allowed).toBe(true); // claims 5, spends 1
    await a.stop();
    expect(await allowed([b], other, 100, 120)).toBe(99);
  });

  it("window: a floor counted elsewhere is part of the window's count", async () => {
    const floorSql = "SELECT length($2::text) + 0 * $3::bigint";
    const a = createLeasedLimiter(windowPolicy(db.sql, { name: "t-floor", windowMs: 60_000, batch: () => 100, shareOfLeft: 16, floorSql }), { leaseMs: 60_000 });
    const key = `f${"x".repeat(9)}`; // a floor of 10
    expect(await allowed([a], key, 25, 30)).toBe(15);
  });

  it("bucket: together exactly the burst, all or none of several limits", async () => {
    const make = () => createLeasedLimiter(bucketPolicy(db.sql, { name: "t-min", periodMs: 60_000 }), { leaseMs: 1000 });
    const [a, b] = [make(), make()];
    const key = uniqueName("b");
    expect(await allowed([a, b], key, 12, 30)).toBe(12);
    const wide = uniqueName("b");
    expect(await a.take({ key: wide, limit: 5 }, { key, limit: 12 })).toMatchObject({ allowed: false, key });
    expect(await allowed([a], wide, 5, 10)).toBe(5);
  });

  it("takeNow: allowed without a promise while every limit has a leased token, else undefined and nothing spent", async () => {
    const a = createLeasedLimiter(windowPolicy(db.sql, { name: "t-now", windowMs: 3_600_000, batch: () => 3 }), { leaseMs: 60_000 });
    const [k1, k2] = [uniqueName("n"), uniqueName("n")];
    expect(a.takeNow({ key: k1, limit: 10 })).toBeUndefined(); // nothing leased yet: take() asks the policy
    expect(a.takeNow({ key: k1, limit: 0 }, { key: k2, limit: -1 })).toEqual({ allowed: true }); // unlimited
    expect((await a.take({ key: k1, limit: 10 })).allowed).toBe(true); // leases 3, spends 1
    expect(a.takeNow({ key: k1, limit: 10 }, { key: k2, limit: 10 })).toBeUndefined(); // k2 has none: k1's token stays
    expect((await a.take({ key: k2, limit: 10 })).allowed).toBe(true); // leases 3, spends 1
    expect(a.takeNow({ key: k1, limit: 10 }, { key: k2, limit: 10 })).toEqual({ allowed: true }); // 1 and 1 left
    expect(a.takeNow({ key: k1, limit: 10 })).toEqual({ allowed: true }); // k1 has spent its 3
    expect(a.takeNow({ key: k1, limit: 10 }, { key: k2, limit: 10 })).toBeUndefined(); // k2's last token stays
    expect(a.takeNow({ key: k2, limit: 10 })).toEqual({ allowed: true });
    // a changed limit is a new lease: decided by take()
    expect(a.takeNow({ key: k2, limit: 11 })).toBeUndefined();
    // a key named twice spends one token, in takeNow and in take
    const k3 = uniqueName("n");
    expect((await a.take({ key: k3, limit: 10 }, { key: k3, limit: 10 })).allowed).toBe(true); // leases 3, spends 1
    expect(a.takeNow({ key: k3, limit: 10 }, { key: k3, limit: 10 })).toEqual({ allowed: true });
    expect(a.takeNow({ key: k3, limit: 10 })).toEqual({ allowed: true });
    expect(a.takeNow({ key: k3, limit: 10 })).toBeUndefined();
  });

  it("a refused claim answers at once, even with no refusal remembered (recheckMs 0)", async () => {
    const a = createLeasedLimiter(windowPolicy(db.sql, { name: "t-recheck", windowMs: 3_600_000, batch: () => 1 }), { leaseMs: 60_000, recheckMs: 0 });
    const key = uniqueName("r");
    expect(await allowed([a], key, 1, 1)).toBe(1);
    expect(await a.take({ key, limit: 1 })).toMatchObject({ allowed: false, key });
  }, 5_000);

  it("started, forgets idle keys without forgetting their counts", async () => {
    // The limiter's clock and its sweep timer are the test's: the lease runs
    // out and the sweep comes when the test says, not after a sleep.
    let clock = Date.now();
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    try {
      const a = createLeasedLimiter(windowPolicy(db.sql, { name: "t-idle", windowMs: 3_600_000, batch: () => 1 }), { leaseMs: 100, now: () => clock });
      a.start();
      const key = uniqueName("i");
      expect(await allowed([a], key, 2, 2)).toBe(2);
      clock += 250;
      vi.advanceTimersByTime(100);
      expect((await a.take({ key, limit: 2 })).allowed).toBe(false);
      await a.stop();
    } finally {
      vi.useRealTimers();
    }
  });
});
