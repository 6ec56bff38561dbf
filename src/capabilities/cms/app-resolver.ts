// X-App-Key -> application and its CMS plan limits, cached briefly in
// process. A rotated key or a changed plan reaches every process through the
// change bus (kind app), which calls forgetApp; ttlMs is only the safety net.
import { TtlCache } from "../../kernel/ttl-cache.js";
import type { Sql } from "../../infra/storage/sql.js";

export interface CmsApp {
  id: number;
  appKey: string;
  /** 0 = unlimited */
  requestsPerSecond: number;
  requestsPerDay: number;
}

export class AppResolver {
  private readonly cache: TtlCache<string, CmsApp | null>;
  // Bumped by every forget: a lookup that started before one may have read
  // the old key or plan, so it answers its own request but is not cached.
  private generation = 0;

  constructor(private readonly sql: Sql, ttlMs = 5000) {
    this.cache = new TtlCache(ttlMs, 50_000);
  }

  async byKey(appKey: string): Promise<CmsApp | null> {
    // No key holds U+0000 (the media path can carry one), and PostgreSQL
    // would refuse the parameter (a 500).
    if (appKey.includes("\u0000")) return null;
    const hit = this.cache.get(appKey);
    if (hit !== undefined) return hit;
    const started = this.generation;
    const { rows } = await this.sql.query<{ id: number; plan: Record<string, unknown> | string | null }>(
      "SELECT id, plan FROM apps WHERE app_key = $1",
      [appKey],
    );
    const r = rows[0];
    // plan is the proto Plan as JSON (camelCase); int64 may arrive as a string
    const plan = (typeof r?.plan === "string" ? JSON.parse(r.plan) : r?.plan) as Record<string, unknown> | null | undefined;
    const app: CmsApp | null = r
      ? {
          id: Number(r.id),
          appKey,
          requestsPerSecond: Number(plan?.cmsRequestsPerSecond ?? 0) || 0,
          requestsPerDay: Number(plan?.cmsRequestsPerDay ?? 0) || 0,
        }
      : null;
    if (started === this.generation) this.cache.set(appKey, app);
    return app;
  }

  /** The cached application of a key, without a lookup (undefined: unknown or not cached). */
  peek(appKey: string): CmsApp | undefined {
    return this.cache.get(appKey) ?? undefined;
  }

  async keyOf(appId: number): Promise<string | undefined> {
    const { rows } = await this.sql.query<{ app_key: string }>("SELECT app_key FROM apps WHERE id = $1", [appId]);
    return rows[0]?.app_key;
  }

  forget(): void {
    this.generation++;
    this.cache.clear();
  }

  /**
   * Drops the cached entry of one application (its key or plan changed).
   * Unknown keys cached as null go too: one of them may be the new key.
   */
  forgetApp(appId: number): void {
    this.generation++;
    this.cache.deleteWhere((app) => app === null || app.id === appId);
  }
}
