// A token bucket per key in rate_limit_buckets: capacity = the limit (a
// period's allowance as burst), refilled continuously at limit per period;
// the database clock is the only clock, so processes never disagree. A claim
// takes a tenth of a second of refill (1 to 500 tokens); tokens are not taken
// back (the bucket may have refilled meanwhile), so unspent ones lapse with
// their lease and with several processes the effective limit can be slightly
// below the configured one, never above.
import type { Sql } from "../storage/sql.js";
import type { Policy } from "./leased-limiter.js";

const CLAIM_SQL = `
UPDATE rate_limit_buckets b
SET tokens = s.avail - LEAST(floor(s.avail), $4::float8), updated_at = s.now
FROM (
  SELECT name, key, clock_timestamp() AS now,
    LEAST($3::float8, tokens + GREATEST(0, EXTRACT(EPOCH FROM (clock_timestamp() - updated_at))::float8) * $3::float8 / $5::float8) AS avail
  FROM rate_limit_buckets WHERE name = $1 AND key = $2 FOR UPDATE) s
WHERE b.name = s.name AND b.key = s.key
RETURNING LEAST(floor(s.avail), $4::float8)::float8 AS granted, s.avail::float8 AS avail`;

export function bucketPolicy(sql: Sql, o: { name: string; periodMs: number }): Policy {
  const known = new Set<string>();
  const periodS = o.periodMs / 1000;
  return {
    slot: () => 0,
    async claim(key, limit) {
      if (!known.has(key)) {
        // A new bucket starts full.
        await sql.query(
          "INSERT INTO rate_limit_buckets (name, key, tokens, updated_at) VALUES ($1, $2, $3, clock_timestamp()) ON CONFLICT (name, key) DO NOTHING",
          [o.name, key, limit],
        );
        if (known.size >= 100_000) known.clear();
        known.add(key);
      }
      const want = Math.min(500, Math.max(1, Math.ceil(limit / periodS / 10)));
      const r = await sql.query<{ granted: number; avail: number }>(CLAIM_SQL, [o.name, key, limit, want, periodS]);
      const { granted, avail } = r.rows[0] ?? { granted: 0, avail: 0 };
      return { granted, retryMs: ((1 - avail) * o.periodMs) / limit };
    },
  };
}
