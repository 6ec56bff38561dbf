// The plan's per-second CMS rate limit, shared by every process. The shared
// state is one PostgreSQL row per application per one-second window; a
// process does not write per request: it claims a batch of tokens from the
// window row (never more than the limit leaves) and spends them locally, so
// the database sees at most limit/batch claims per second per process and the
// limit is never exceeded across processes (unused claimed tokens lapse with
// the window).
import type { Sql } from "../../infra/storage/sql.js";

interface Local {
  window: number;
  tokens: number;
  exhausted: boolean;
  claiming: Promise<void> | undefined;
}

export class RateLimiter {
  private readonly local = new Map<number, Local>();
  private lastCleanup = 0;

  constructor(
    private readonly sql: Sql,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Synchronous: true (and a token spent) when the request may proceed
   * without waiting, i.e. unlimited or a locally claimed token is left;
   * false when take() has to decide (nothing is spent then).
   */
  tryTake(appId: number, limit: number): boolean {
    if (!limit || limit <= 0) return true;
    const l = this.local.get(appId);
    if (!l || l.tokens <= 0 || l.window !== Math.floor(this.now() / 1000)) return false;
    l.tokens--;
    return true;
  }

  /** true when the request may proceed; limit 0 means unlimited. */
  async take(appId: number, limit: number): Promise<boolean> {
    if (!limit || limit <= 0) return true;
    for (;;) {
      const window = Math.floor(this.now() / 1000);
      let l = this.local.get(appId);
      if (!l || l.window !== window) {
        l = { window, tokens: 0, exhausted: false, claiming: undefined };
        this.local.set(appId, l);
      }
      if (l.tokens > 0) {
        l.tokens--;
        return true;
      }
      if (l.exhausted) return false;
      if (!l.claiming) {
        const cur = l;
        cur.claiming = this.claim(appId, window, limit)
          .then((granted) => {
            cur.tokens += granted;
            if (granted === 0) cur.exhausted = true;
          })
          .finally(() => {
            cur.claiming = undefined;
          });
      }
      await l.claiming;
    }
  }

  private async claim(appId: number, window: number, limit: number): Promise<number> {
    const batch = Math.max(1, Math.min(100, Math.floor(limit / 10)));
    const { rows } = await this.sql.query<{ last_grant: number }>(
      `INSERT INTO cms_rate_windows AS w (app_id, window_start, used, last_grant)
       VALUES ($1, $2, LEAST($3::int, $4::int), LEAST($3::int, $4::int))
       ON CONFLICT (app_id, window_start) DO UPDATE
         SET used = LEAST(w.used + $3::int, $4::int), last_grant = LEAST(w.used + $3::int, $4::int) - w.used
       RETURNING last_grant`,
      [appId, window, batch, limit],
    );
    void this.cleanup(window);
    return Number(rows[0]?.last_grant ?? 0);
  }

  private async cleanup(window: number): Promise<void> {
    if (window - this.lastCleanup < 60) return;
    this.lastCleanup = window;
    await this.sql.query("DELETE FROM cms_rate_windows WHERE window_start < $1", [window - 60]).catch(() => {});
  }
}
