// Fixed windows aligned to the epoch (a second, a UTC day): one row per key
// per window in rate_limit_windows counts the tokens handed out to the
// processes. A claim takes min(left, max(limit), ⌈left/shareOfLeft⌉) in one
// upsert under the row's lock; unspent tokens go back while their window lasts.
import type { Sql } from "../storage/sql.js";
import type { Policy } from "./leased-limiter.js";

export interface WindowOptions {
  /** Separates the limiters sharing the table. */
  name: string;
  windowMs: number;
  /** Most tokens one claim takes under this limit. */
  batch: (limit: number) => number;
  /** A claim takes at most ⌈left/shareOfLeft⌉ (1: no share), so servers near the end of the allowance claim little. */
  shareOfLeft?: number;
  /**
   * A scalar SQL expression of $2 (the key) and $3 (the window's start, ms):
   * tokens already used otherwise (counted elsewhere), a floor of the window's count.
   */
  floorSql?: string;
}

export function windowPolicy(sql: Sql, o: WindowOptions): Policy {
  const floor = o.floorSql ? `GREATEST(%, COALESCE((${o.floorSql}), 0))` : "%";
  const used = (col: string) => floor.replace("%", col);
  const left = (col: string) => `GREATEST(0, $4::bigint - ${used(col)})`;
  const grant = (col: string) => `LEAST(${left(col)}, $5::bigint, CEIL(${left(col)} / $6::float8)::bigint)`;
  const claimSql = `
INSERT INTO rate_limit_windows AS w (name, key, window_start, used, last_grant)
VALUES ($1, $2, $3, ${used("0")} + ${grant("0")}, ${grant("0")})
ON CONFLICT (name, key, window_start) DO UPDATE
  SET used = ${used("w.used")} + ${grant("w.used")}, last_grant = ${grant("w.used")}
RETURNING last_grant`;
  let lastCleanup = 0;
  return {
    slot: (now) => Math.floor(now / o.windowMs) * o.windowMs,
    async claim(key, limit, slot, now) {
      const { rows } = await sql.query<{ last_grant: string | number }>(claimSql, [o.name, key, slot, limit, Math.max(1, o.batch(limit)), o.shareOfLeft ?? 1]);
      if (slot - lastCleanup >= Math.max(60_000, o.windowMs)) {
        lastCleanup = slot;
        void sql.query("DELETE FROM rate_limit_windows WHERE name = $1 AND window_start < $2", [o.name, slot - Math.max(60_000, o.windowMs)]).catch(() => {});
      }
      return { granted: Number(rows[0]?.last_grant ?? 0), retryMs: slot + o.windowMs - now };
    },
    async giveBack(key, slot, n) {
      await sql.query("UPDATE rate_limit_windows SET used = GREATEST(0, used - $4) WHERE name = $1 AND key = $2 AND window_start = $3", [o.name, key, slot, n]);
    },
  };
}
