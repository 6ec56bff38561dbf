// Wiring of the CMS capability: one call builds the stores, caches, meter and
// rate limiter, and returns the two Connect service implementations, the
// media GET handler, the cache invalidation function and start/stop.
import type { ServiceImpl } from "@connectrpc/connect";
import type { CmsService } from "../../../gen/pulsebase/admin/v1/cms_pb.js";
import type { ContentService } from "../../../gen/pulsebase/cms/v1/content_pb.js";
import type { Sql } from "../../infra/storage/sql.js";
import { AppResolver } from "./app-resolver.js";
import { createCmsAdminServiceImpl, type CmsChangeHook } from "./cms-admin-service.js";
import { createContentServiceImpl } from "./content-service.js";
import { ContentTypeStore } from "./content-type-store.js";
import { EntryStore } from "./entry-store.js";
import { IndexBuilder, type IndexBuildErrorInfo } from "./index-builder.js";
import { createMediaHandler, MediaStore } from "./media.js";
import { dailyLimiter, perSecondLimiter } from "./request-limits.js";
import { ReadCache } from "./read-cache.js";
import { UsageMeter } from "./usage-meter.js";
import type { RateLimiter } from "../../infra/rate-limit/leased-limiter.js";

export interface CmsConfig {
  /** {media_base_url}: media URLs are {mediaBaseUrl}/<APP_KEY>/cms/media/<file_id> */
  mediaBaseUrl: string;
  /** blob store directory for uploaded media */
  mediaDir: string;
  /** upload limit in bytes (default 10 MiB) */
  mediaMaxBytes?: number;
  /** statement timeout of computed reads (default 5000 ms) */
  queryTimeoutMs?: number;
  /** usage meter flush interval (default 10 s) */
  meterFlushMs?: number;
  /** app key lookups are cached this long (default 5 s) */
  appKeyTtlMs?: number;
  /** cached reads expire after this even without invalidation (default 300 s) */
  cacheTtlMs?: number;
  /** Create/UpdateContentType wait this long for their index build, which then goes on in the background (default 30 s) */
  indexWaitMs?: number;
  /** attempts per index build before giving up until the next change or restart (default 3) */
  indexBuildAttempts?: number;
  /** pause before retrying a failed index build, doubled each time (default 1000 ms) */
  indexRetryDelayMs?: number;
}

export interface CmsDeps {
  sql: Sql;
  config: CmsConfig;
  /** functions' cms triggers; called after each entry change commits */
  onChange?: CmsChangeHook;
  /** tells the other processes to invalidate (the change bus); they call cms.invalidate(appId) */
  broadcastInvalidation?: (appId: number) => void | Promise<void>;
  onHookError?: (err: unknown) => void;
  /** a per-field index build or drop failed (info.willRetry: another attempt follows) */
  onIndexError?: (err: unknown, info: IndexBuildErrorInfo) => void;
}

export interface Cms {
  contentService: ServiceImpl<typeof ContentService>;
  adminService: ServiceImpl<typeof CmsService>;
  /** GET {media_base_url}/<APP_KEY>/cms/media/<file_id> */
  serveMedia: ReturnType<typeof createMediaHandler>;
  /** drops this process's cached reads of the application (no broadcast) */
  invalidate(appId: number): void;
  /**
   * The application's key or plan changed (here or in another process): its
   * key lookup, its cached reads (their media URLs hold the key) and its
   * unspent daily-allowance claim go.
   */
  appChanged(appId: number): void;
  /** starts the usage meter's periodic flush and repairs per-field indexes left missing or INVALID by an interrupted build */
  start(): void;
  /** flushes the usage meter and waits for the index build in progress (queued ones are left to the next start); call before closing sql */
  stop(): Promise<void>;
  /** internals, for tests and the bench */
  readonly meter: UsageMeter;
  readonly quota: RateLimiter;
  readonly cache: ReadCache;
  readonly apps: AppResolver;
  readonly indexes: IndexBuilder;
}

export function createCms(deps: CmsDeps): Cms {
  const { sql, config } = deps;
  const cache = new ReadCache({ ttlMs: config.cacheTtlMs });
  const apps = new AppResolver(sql, config.appKeyTtlMs);
  const meter = new UsageMeter(sql, config.meterFlushMs);
  const limiter = perSecondLimiter(sql);
  const quota = dailyLimiter(sql);
  const media = new MediaStore({ sql, blobDir: config.mediaDir, maxBytes: config.mediaMaxBytes });
  const indexes = new IndexBuilder(sql, {
    attempts: config.indexBuildAttempts,
    retryDelayMs: config.indexRetryDelayMs,
    onError: deps.onIndexError,
  });
  const invalidate = (appId: number) => cache.invalidate(appId);
  return {
    contentService: createContentServiceImpl({
      sql, mediaBaseUrl: config.mediaBaseUrl, apps, cache, meter, limiter, quota, queryTimeoutMs: config.queryTimeoutMs,
    }),
    adminService: createCmsAdminServiceImpl({
      sql,
      types: new ContentTypeStore(sql),
      entries: new EntryStore(sql),
      media,
      meter,
      indexes,
      indexWaitMs: config.indexWaitMs,
      invalidate: async (appId) => {
        invalidate(appId);
        await deps.broadcastInvalidation?.(appId);
      },
      onChange: deps.onChange,
      onHookError: deps.onHookError,
    }),
    serveMedia: createMediaHandler({ media, apps }),
    invalidate,
    appChanged: (appId) => {
      apps.forgetApp(appId);
      invalidate(appId);
      quota.forget(String(appId));
    },
    start: () => {
      meter.start();
      quota.start();
      indexes.reconcileAll().catch((err: unknown) => deps.onIndexError?.(err, { typeId: 0, index: "", attempt: 1, willRetry: false }));
    },
    stop: async () => {
      await Promise.all([meter.stop(), quota.stop(), indexes.stop()]);
    },
    meter,
    quota,
    cache,
    apps,
    indexes,
  };
}

export type { CmsChange, CmsChangeHook, ChangeOperation } from "./cms-admin-service.js";
export { NOT_MODIFIED_HEADER, CACHE_CONTROL_PUBLIC, CACHE_CONTROL_SEARCH } from "./content-service.js";
