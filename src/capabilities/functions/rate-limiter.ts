// Invocation rate limits shared by every server process: one token bucket
// row per key in PostgreSQL (function_rate_buckets), refilled continuously
// at limit/60 tokens per second up to `limit` (a burst of one minute's
// allowance); the database clock is the only clock, so processes never
// disagree.
import type { Sql } from "../../infra/storage/sql.js";

export interface Bucket {
  key: string;
  /** Invocations per minute; 0 or less = unlimited (no row touched). */
  perMinute: number;
}

export type TakeResult = { allowed: true } | { allowed: false; retryAfterSeconds: number; key: string };

export interface RateLimiter {
  take(buckets: Bucket[]): Promise<TakeResult>;
}

// A statement (and a row lock on one hot row) per invocation would cap a busy
// function, so each process takes tokens from the buckets in small batches (a tenth of a second of refill, at most 500) and spends them
// locally, so a busy function costs one statement per batch. The limit still
// holds across processes: a token is only ever spent after the bucket gave
// it. Leased tokens not used within LEASE_MS are dropped (never returned),
// so with several processes the effective limit can be slightly lower than
// configured, never higher. A lease remembers the limit it was claimed under
// and serves only takes under that same limit: once a plan or a function's
// setting changes, tokens leased under the old limit (also by a claim that
// was still in flight at the change) are never spent under the new one.

const LEASE_MS = 1000;

const CLAIM_SQL = `
UPDATE function_rate_buckets b
SET tokens = s.avail - LEAST(floor(s.avail), $3::float8), allowed = s.avail >= 1, updated_at = s.now
FROM (
  SELECT key, clock_timestamp() AS now,
    LEAST($2::float8, tokens + GREATEST(0, EXTRACT(EPOCH FROM (clock_timestamp() - updated_at))::float8) * $2::float8 / 60.0) AS avail
  FROM function_rate_buckets WHERE key = $1 FOR UPDATE) s
WHERE b.key = s.key
RETURNING LEAST(floor(s.avail), $3::float8)::float8 AS granted, s.avail::float8 AS avail`;

interface Lease {
  perMinute: number;
  tokens: number;
  expiresAt: number;
}

export function createLeasedRateLimiter(sql: Sql): RateLimiter {
  const leases = new Map<string, Lease>();
  const known = new Set<string>();
  const inflight = new Map<string, Promise<{ granted: number; avail: number }>>();

  async function claim(key: string, perMinute: number): Promise<{ granted: number; avail: number }> {
    const want = Math.min(500, Math.max(1, Math.ceil(perMinute / 600)));
    if (!known.has(key)) {
      // A new bucket starts full (one minute's allowance).
      await sql.query(
        "INSERT INTO function_rate_buckets (key, tokens, allowed, updated_at) VALUES ($1, $2, true, clock_timestamp()) ON CONFLICT (key) DO NOTHING",
        [key, perMinute],
      );
      known.add(key);
    }
    const r = await sql.query<{ granted: number; avail: number }>(CLAIM_SQL, [key, perMinute, want]);
    const row = r.rows[0] ?? { granted: 0, avail: 0 };
    if (row.granted > 0) {
      // A lease under another limit is replaced (its tokens are dropped).
      const l = live(key, perMinute);
      leases.set(key, { perMinute, tokens: (l?.tokens ?? 0) + row.granted, expiresAt: Date.now() + LEASE_MS });
    }
    return row;
  }

  /** The key's unexpired lease, if it was claimed under this limit. */
  function live(key: string, perMinute: number): Lease | undefined {
    const l = leases.get(key);
    if (l && l.expiresAt < Date.now()) {
      leases.delete(key);
      return undefined;
    }
    return l?.perMinute === perMinute ? l : undefined;
  }

  // Callers under the same limit share a claim; one under another limit
  // (during a change of limit) claims on its own.
  function claimOnce(key: string, perMinute: number) {
    const id = `${key}\u0000${perMinute}`;
    let p = inflight.get(id);
    if (!p) {
      p = claim(key, perMinute).finally(() => inflight.delete(id));
      inflight.set(id, p);
    }
    return p;
  }

  return {
    async take(buckets) {
      const active = buckets.filter((b) => b.perMinute > 0).sort((a, b) => (a.key < b.key ? -1 : 1));
      if (active.length === 0) return { allowed: true };
      // Concurrent callers share claims; a caller that finds its claimed
      // token taken by another claims again until the bucket says empty.
      for (;;) {
        let worst: { key: string; retryAfterSeconds: number } | undefined;
        for (const b of active) {
          while (!((live(b.key, b.perMinute)?.tokens ?? 0) >= 1)) {
            const r = await claimOnce(b.key, b.perMinute);
            if (r.granted === 0 && !((live(b.key, b.perMinute)?.tokens ?? 0) >= 1)) {
              const wait = Math.max(1, Math.ceil(((1 - r.avail) * 60) / b.perMinute));
              if (!worst || wait > worst.retryAfterSeconds) worst = { key: b.key, retryAfterSeconds: wait };
              break;
            }
          }
        }
        if (worst) return { allowed: false, ...worst };
        // Spend only when every bucket has a token now (no await since the check).
        if (active.every((b) => (live(b.key, b.perMinute)?.tokens ?? 0) >= 1)) {
          for (const b of active) live(b.key, b.perMinute)!.tokens -= 1;
          return { allowed: true };
        }
      }
    },
  };
}
