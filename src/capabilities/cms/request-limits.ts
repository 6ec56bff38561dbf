// The plan's CMS request limits, shared by every process through the leased
// limiter (docs/cms.md, "Per-second limit" and "Daily allowance"), keyed by
// the application id.
import type { Sql } from "../../infra/storage/sql.js";
import { createLeasedLimiter, type RateLimiter } from "../../infra/rate-limit/leased-limiter.js";
import { windowPolicy } from "../../infra/rate-limit/window-policy.js";

/** cmsRequestsPerSecond, all requests: one-second windows, claims of limit/10 (1 to 100) that lapse with the window. */
export function perSecondLimiter(sql: Sql, now?: () => number): RateLimiter {
  const batch = (limit: number) => Math.min(100, Math.floor(limit / 10));
  return createLeasedLimiter(windowPolicy(sql, { name: "cms-second", windowMs: 1000, batch }), { leaseMs: 2000, now });
}

/** Claimed requests not spent within this are given back. */
export const LEASE_MS = 2000;

/**
 * cmsRequestsPerDay, counted requests: UTC days, claims of ⌈left/16⌉ (1 to
 * 100) given back after LEASE_MS unused; requests the meter counted (also
 * while the plan had no daily limit) are a floor of the day's count.
 */
export function dailyLimiter(sql: Sql, onError?: (err: unknown) => void): RateLimiter {
  const floorSql = "SELECT counted FROM cms_usage_daily WHERE app_id = $2::text::bigint AND day = DATE '1970-01-01' + ($3::bigint / 86400000)::int";
  const policy = windowPolicy(sql, { name: "cms-day", windowMs: 86_400_000, batch: () => 100, shareOfLeft: 16, floorSql });
  return createLeasedLimiter(policy, { leaseMs: LEASE_MS, onError });
}
