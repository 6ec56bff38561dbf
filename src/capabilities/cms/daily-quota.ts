// The plan's daily allowance of counted CMS requests (requests_per_day),
// enforced across every server process. The shared state is the day's usage
// row (cms_usage_daily.quota_claimed: requests handed out to the servers
// today). A server does not write per request: it claims a few requests at
// a time (⌈left/16⌉, at most 100, never more than are left) in one
// statement under the row's lock, and spends them locally. So the servers
// together never serve more counted requests than the plan allows; near the
// end of the day's allowance claims are of one request. A claim not spent
// within LEASE_MS goes back to the row, so requests another server holds
// unused are refused elsewhere for at most that long (and the sweep's period).
// Requests counted while the plan had no daily limit count too: the row's
// `counted` (the metered figure, flushed by UsageMeter) is a floor of what
// was handed out.
import type { Sql } from "../../infra/storage/sql.js";

interface Lease {
  day: number;
  limit: number;
  tokens: number;
  expiresAt: number;
  /** a claim found nothing left: refuse without asking again until then */
  emptyUntil: number;
  claiming: Promise<void> | undefined;
}

/** Claimed requests not spent within this are given back. */
export const LEASE_MS = 2000;
/** After a claim found the allowance used up, requests are refused without a query for this long. */
const EMPTY_RECHECK_MS = 1000;
const DAY_MS = 86_400_000;

const CLAIM_SQL = `
UPDATE cms_usage_daily u
   SET quota_claimed = GREATEST(s.quota_claimed, s.counted) + s.grant
  FROM (SELECT app_id, day, quota_claimed, counted,
               LEAST(100::bigint, CEIL(s0.left_ / 16.0)::bigint, s0.left_) AS grant
          FROM (SELECT app_id, day, quota_claimed, counted,
                       GREATEST(0, $3::bigint - GREATEST(quota_claimed, counted)) AS left_
                  FROM cms_usage_daily WHERE app_id = $1 AND day = $2::date FOR UPDATE) s0) s
 WHERE u.app_id = s.app_id AND u.day = s.day AND s.grant > 0
RETURNING s.grant`;

const isoDay = (day: number) => new Date(day * DAY_MS).toISOString().slice(0, 10);

export class DailyQuota {
  private readonly leases = new Map<number, Lease>();
  /** `${app}|${day}` rows known to exist */
  private readonly rows = new Set<string>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly sql: Sql,
    private readonly now: () => number = Date.now,
    private readonly onError?: (err: unknown) => void,
  ) {}

  /**
   * true (one request spent) when the application may serve one more
   * counted request today under `limit` (0 = unlimited); false when the
   * day's allowance is used up. Rejects when PostgreSQL cannot be reached.
   */
  async take(appId: number, limit: number): Promise<boolean> {
    if (!limit || limit <= 0) return true;
    for (;;) {
      const day = Math.floor(this.now() / DAY_MS);
      let l = this.leases.get(appId);
      if (l && (l.day !== day || l.limit !== limit)) {
        // Claimed under another day or plan: never spent under this one.
        this.drop(appId, l);
        l = undefined;
      }
      if (!l) {
        l = { day, limit, tokens: 0, expiresAt: 0, emptyUntil: 0, claiming: undefined };
        this.leases.set(appId, l);
      }
      if (l.tokens > 0) {
        l.tokens--;
        return true;
      }
      if (l.emptyUntil > this.now()) return false;
      l.claiming ??= this.claim(appId, l).finally(() => {
        l.claiming = undefined;
      });
      await l.claiming;
      if (l.tokens === 0 && l.emptyUntil > this.now() && this.leases.get(appId) === l) return false;
    }
  }

  private async claim(appId: number, l: Lease): Promise<void> {
    const day = isoDay(l.day);
    const rowKey = `${appId}|${day}`;
    if (!this.rows.has(rowKey)) {
      await this.sql.query("INSERT INTO cms_usage_daily (app_id, day) VALUES ($1, $2::date) ON CONFLICT (app_id, day) DO NOTHING", [appId, day]);
      if (this.rows.size > 10_000) this.rows.clear();
      this.rows.add(rowKey);
    }
    const { rows } = await this.sql.query<{ grant: string | number }>(CLAIM_SQL, [appId, day, l.limit]);
    const granted = Number(rows[0]?.grant ?? 0);
    if (this.leases.get(appId) !== l) {
      // Dropped meanwhile (plan changed): what was just claimed goes back.
      if (granted > 0) void this.giveBack(appId, l.day, granted);
      return;
    }
    if (granted > 0) {
      l.tokens += granted;
      l.expiresAt = this.now() + LEASE_MS;
    } else {
      l.emptyUntil = this.now() + EMPTY_RECHECK_MS;
    }
  }

  private drop(appId: number, l: Lease): void {
    if (this.leases.get(appId) === l) this.leases.delete(appId);
    if (l.tokens > 0 && l.day === Math.floor(this.now() / DAY_MS)) void this.giveBack(appId, l.day, l.tokens);
    l.tokens = 0;
  }

  private async giveBack(appId: number, day: number, n: number): Promise<void> {
    try {
      await this.sql.query("UPDATE cms_usage_daily SET quota_claimed = GREATEST(0, quota_claimed - $3) WHERE app_id = $1 AND day = $2::date", [appId, isoDay(day), n]);
    } catch (err) {
      // Lost for today: other servers may refuse that many requests early.
      this.onError?.(err);
    }
  }

  /** The application's plan changed: its unspent claim goes back now. */
  forgetApp(appId: number): void {
    const l = this.leases.get(appId);
    if (l) this.drop(appId, l);
  }

  /** Starts giving back claims left unspent for LEASE_MS. */
  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      const now = this.now();
      for (const [appId, l] of this.leases) {
        if (!l.claiming && l.expiresAt <= now && l.emptyUntil <= now) this.drop(appId, l);
      }
    }, LEASE_MS / 2);
    this.timer.unref();
  }

  /** Gives every unspent claim back. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    const pending: Promise<void>[] = [];
    for (const [appId, l] of this.leases) {
      if (l.tokens > 0) pending.push(this.giveBack(appId, l.day, l.tokens));
      l.tokens = 0;
    }
    this.leases.clear();
    await Promise.all(pending);
  }
}
