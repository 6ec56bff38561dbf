// Per application per UTC day request counts, aggregated in memory and
// written with one multi-row upsert per flush (never a write per request).
// This is the metered figure GetCmsUsage reports; the plan's daily allowance
// is enforced by the daily limiter (request-limits.ts), which does not wait for a flush.
import type { Sql } from "../../infra/storage/sql.js";

export interface UsageDay {
  day: string;
  counted: number;
  included: number;
}

export class UsageMeter {
  private pending = new Map<string, { appId: number; day: string; counted: number; included: number }>();
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> = Promise.resolve();

  constructor(
    private readonly sql: Sql,
    private readonly flushIntervalMs = 10_000,
    private readonly now: () => Date = () => new Date(),
  ) {}

  // The UTC day of the last record() and the millisecond range it covers, so
  // the hot path formats a date once a day, not once per request.
  private day = "";
  private dayStart = 0;
  private dayEnd = 0;

  private today(): string {
    const t = this.now().getTime();
    if (t < this.dayStart || t >= this.dayEnd) {
      this.dayStart = t - (t % 86_400_000);
      this.dayEnd = this.dayStart + 86_400_000;
      this.day = new Date(this.dayStart).toISOString().slice(0, 10);
    }
    return this.day;
  }

  record(appId: number, counted: boolean): void {
    const day = this.today();
    const key = `${appId}|${day}`;
    let e = this.pending.get(key);
    if (!e) this.pending.set(key, (e = { appId, day, counted: 0, included: 0 }));
    if (counted) e.counted++;
    else e.included++;
  }

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.flush().catch(() => {}), this.flushIntervalMs);
    this.timer.unref();
  }

  /** Stops the timer and writes what is pending. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.flush();
  }

  /** Writes pending counts; on failure they are kept for the next flush. */
  flush(): Promise<void> {
    const run = this.flushing.then(() => this.flushNow());
    this.flushing = run.catch(() => {});
    return run;
  }

  private async flushNow(): Promise<void> {
    if (this.pending.size === 0) return;
    const batch = [...this.pending.values()];
    this.pending = new Map();
    try {
      await this.sql.query(
        `INSERT INTO cms_usage_daily (app_id, day, counted, included)
         SELECT * FROM unnest($1::bigint[], $2::date[], $3::bigint[], $4::bigint[])
         ON CONFLICT (app_id, day) DO UPDATE
           SET counted = cms_usage_daily.counted + EXCLUDED.counted,
               included = cms_usage_daily.included + EXCLUDED.included`,
        [batch.map((b) => b.appId), batch.map((b) => b.day), batch.map((b) => b.counted), batch.map((b) => b.included)],
      );
    } catch (err) {
      for (const b of batch) {
        const key = `${b.appId}|${b.day}`;
        const e = this.pending.get(key);
        if (e) {
          e.counted += b.counted;
          e.included += b.included;
        } else this.pending.set(key, b);
      }
      throw err;
    }
  }

  /** Flushed days in [from, to] (inclusive, YYYY-MM-DD). */
  async read(appId: number, from: string, to: string): Promise<UsageDay[]> {
    await this.flush();
    const { rows } = await this.sql.query<{ day: string; counted: number; included: number }>(
      `SELECT to_char(day, 'YYYY-MM-DD') AS day, counted, included FROM cms_usage_daily
        WHERE app_id = $1 AND day BETWEEN $2::date AND $3::date ORDER BY day`,
      [appId, from, to],
    );
    return rows.map((r) => ({ day: r.day, counted: Number(r.counted), included: Number(r.included) }));
  }
}
