// Invocation rate limits shared by every server process: one token bucket
// row per key in PostgreSQL (function_rate_buckets), refilled continuously
// at limit/60 tokens per second up to `limit` (a burst of one minute's
// allowance). One statement per invocation takes a token from every bucket
// that applies (application and function) and says which allowed it; the
// database clock is the only clock, so processes never disagree. A denied
// call takes no token; when one bucket allows and another denies, the
// allowing one keeps its token spent (documented).
import type { Sql } from "../storage/sql.js";

export interface Bucket {
  key: string;
  /** Invocations per minute; 0 or less = unlimited (no row touched). */
  perMinute: number;
}

export type TakeResult = { allowed: true } | { allowed: false; retryAfterSeconds: number; key: string };

export interface RateLimiter {
  take(buckets: Bucket[]): Promise<TakeResult>;
}

const AVAIL = `LEAST(EXCLUDED.tokens + 1,
  b.tokens + GREATEST(0, EXTRACT(EPOCH FROM (EXCLUDED.updated_at - b.updated_at))) * (EXCLUDED.tokens + 1) / 60.0)`;

// A new row starts full minus this call's token; EXCLUDED.tokens + 1 is the
// bucket's capacity (the current limit, so a plan change applies at once).
const TAKE_SQL = `
INSERT INTO function_rate_buckets AS b (key, tokens, allowed, updated_at)
SELECT u.k, u.c - 1, true, clock_timestamp() FROM unnest($1::text[], $2::float8[]) AS u(k, c)
ON CONFLICT (key) DO UPDATE SET
  tokens = CASE WHEN ${AVAIL} >= 1 THEN ${AVAIL} - 1 ELSE ${AVAIL} END,
  allowed = ${AVAIL} >= 1,
  updated_at = EXCLUDED.updated_at
RETURNING key, allowed, tokens`;

export function createPgRateLimiter(sql: Sql): RateLimiter {
  return {
    async take(buckets) {
      // Sorted so concurrent statements lock rows in one order (no deadlock).
      const active = buckets.filter((b) => b.perMinute > 0).sort((a, b) => (a.key < b.key ? -1 : 1));
      if (active.length === 0) return { allowed: true };
      const r = await sql.query<{ key: string; allowed: boolean; tokens: number }>(TAKE_SQL, [
        active.map((b) => b.key),
        active.map((b) => b.perMinute),
      ]);
      let worst: { key: string; retryAfterSeconds: number } | undefined;
      for (const row of r.rows) {
        if (row.allowed) continue;
        const limit = active.find((b) => b.key === row.key)!.perMinute;
        const wait = Math.max(1, Math.ceil(((1 - Number(row.tokens)) * 60) / limit));
        if (!worst || wait > worst.retryAfterSeconds) worst = { key: row.key, retryAfterSeconds: wait };
      }
      return worst ? { allowed: false, ...worst } : { allowed: true };
    },
  };
}
