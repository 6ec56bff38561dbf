// The CMS daily allowance shared by several processes (two dailyLimiter
// instances on one PostgreSQL schema): together they never allow more than
// the limit, requests one holds unspent go back to the others, requests
// counted before the limit existed count, and a plan change drops a claim.
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { dailyLimiter, LEASE_MS } from "../../../src/capabilities/cms/request-limits.js";
import type { RateLimiter } from "../../../src/infra/rate-limit/leased-limiter.js";
import { createTestDb, type TestDb } from "../../helpers/db.js";
import { until } from "../../helpers/until.js";

let db: TestDb;
const quotas: RateLimiter[] = [];
beforeAll(async () => {
  db = await createTestDb("postgres");
});
afterAll(async () => {
  for (const q of quotas) await q.stop();
  await db.drop();
});

function quota(): RateLimiter {
  const q = dailyLimiter(db.sql);
  q.start();
  quotas.push(q);
  return q;
}

/** The app's requests claimed in today's window, as the database holds them. */
async function used(appId: number): Promise<number> {
  const { rows } = await db.sql.query<{ used: string }>("SELECT used FROM rate_limit_windows WHERE name = 'cms-day' AND key = $1", [String(appId)]);
  return Number(rows[0]?.used ?? 0);
}

const take = async (q: RateLimiter, appId: number, limit: number) => (await q.take({ key: String(appId), limit })).allowed;
const allowed = async (q: RateLimiter, appId: number, limit: number, n: number) =>
  (await Promise.all(Array.from({ length: n }, () => take(q, appId, limit)))).filter(Boolean).length;

describe("the CMS daily allowance", () => {
  it("two processes together allow exactly the limit", async () => {
    const [a, b] = [quota(), quota()];
    const [x, y] = await Promise.all([allowed(a, 101, 37, 40), allowed(b, 101, 37, 40)]);
    expect(x + y).toBe(37);
    expect(await take(a, 101, 37)).toBe(false);
    expect(await take(b, 101, 37)).toBe(false);
    // unlimited: always
    expect(await take(a, 101, 0)).toBe(true);
  });

  it("requests claimed and not spent go back to the others after the lease", async () => {
    // the limiters' clock and sweep run on fake timers: the lease runs out
    // when the test says (the database round trips stay real)
    vi.useFakeTimers({ toFake: ["Date", "setInterval", "clearInterval"] });
    try {
      const [a, b] = [quota(), quota()];
      expect(await take(a, 102, 32)).toBe(true); // claims 2, spends 1
      expect(await allowed(b, 102, 32, 40)).toBe(30);
      expect(await take(b, 102, 32)).toBe(false);
      expect(await used(102)).toBe(32);
      // before the lease has run out, nothing goes back
      await vi.advanceTimersByTimeAsync(LEASE_MS - 100);
      expect(await take(b, 102, 32)).toBe(false);
      expect(await used(102)).toBe(32);
      // past the lease, a's sweep gives its unspent request back (and b's
      // remembered refusal has lapsed)
      await vi.advanceTimersByTimeAsync(LEASE_MS * 0.5 + 1100);
      await until(async () => ((await used(102)) === 31 ? true : undefined));
      expect(await take(b, 102, 32)).toBe(true);
      expect(await take(b, 102, 32)).toBe(false);
    } finally {
      vi.useRealTimers();
    }
  });

  it("counts requests counted before the limit was set, and a plan change gives the claim back", async () => {
    const today = new Date().toISOString().slice(0, 10);
    await db.sql.query("INSERT INTO cms_usage_daily (app_id, day, counted) VALUES (103, $1::date, 15)", [today]);
    const [a, b] = [quota(), quota()];
    expect(await allowed(a, 103, 20, 10)).toBe(5);
    // A higher limit: the claim made under the old one is not spent under it.
    expect(await take(a, 104, 100)).toBe(true); // claims 7 (⌈100/16⌉), spends 1
    expect(await used(104)).toBe(7);
    a.forget("104");
    // the six unspent go back (an asynchronous write): wait for it
    await until(async () => ((await used(104)) === 1 ? true : undefined));
    expect(await allowed(b, 104, 100, 120)).toBe(99);
  });
});
