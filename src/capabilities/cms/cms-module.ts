// The CMS capability's module definition: the content API on the public
// listener (with its REST fast paths), the authoring API on the admin
// listener, media files at {media_base_url}/<APP_KEY>/cms/media/<file_id>,
// the stores, caches, meter and rate limiter, and cached reads invalidated
// in every process through the change bus (infra/cluster/change-bus.ts).
import type { ServiceImpl } from "@connectrpc/connect";
import { CmsService } from "../../../gen/pulsebase/admin/v1/cms_pb.js";
import { ContentService } from "../../../gen/pulsebase/cms/v1/content_pb.js";
import type { ChangeBus } from "../../infra/cluster/change-bus.js";
import type { Sql } from "../../infra/storage/sql.js";
import { appError } from "../../kernel/errors.js";
import { binding, type PulsebaseModule } from "../../kernel/module.js";
import { AppResolver } from "./app-resolver.js";
import { createCmsAdminServiceImpl, type CmsChangeHook } from "./cms-admin-service.js";
import type { JsonObject } from "@bufbuild/protobuf";
import { createContentFastPaths, createContentServiceImpl, renderPublishedEntry } from "./content-service.js";
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
  /** Content changes go out (kind cms) and come in (kinds cms and app) here. */
  changes?: ChangeBus;
  /** tells the other processes to invalidate (tests; else the change bus); they call cms.invalidate(appId) */
  broadcastInvalidation?: (appId: number) => void | Promise<void>;
  onHookError?: (err: unknown) => void;
  /** a per-field index build or drop failed (info.willRetry: another attempt follows) */
  onIndexError?: (err: unknown, info: IndexBuildErrorInfo) => void;
}

export interface Cms extends PulsebaseModule {
  contentService: ServiceImpl<typeof ContentService>;
  adminService: ServiceImpl<typeof CmsService>;
  /** GET {media_base_url}/<APP_KEY>/cms/media/<file_id> */
  serveMedia: ReturnType<typeof createMediaHandler>;
  /** drops this process's cached reads of the application (no broadcast) */
  invalidate(appId: number): void;
  /** Whether the application has a content type of this slug (published entries or not). */
  hasContentType(appId: number, slug: string): Promise<boolean>;
  /** A published entry, read now and rendered as GET /api/v1/<type>/<uuid> answers it (no populate); undefined when it is not published. */
  renderEntry(appId: number, id: string): Promise<{ contentType: string; entry: JsonObject } | undefined>;
  /**
   * The application's key or plan changed (here or in another process): its
   * key lookup, its cached reads (their media URLs hold the key) and its
   * unspent daily-allowance claim go.
   */
  appChanged(appId: number): void;
  /** starts the usage meter's periodic flush and repairs per-field indexes left missing or INVALID by an interrupted build */
  start(): Promise<void>;
  /** flushes the usage meter and waits for the index build in progress (queued ones are left to the next start); call before closing sql */
  stop(): Promise<void>;
  /** internals, for tests and the bench */
  readonly meter: UsageMeter;
  readonly quota: RateLimiter;
  readonly cache: ReadCache;
  readonly apps: AppResolver;
  readonly indexes: IndexBuilder;
}

export function createCmsModule(deps: CmsDeps): Cms {
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
  const appChanged = (appId: number) => {
    apps.forgetApp(appId);
    invalidate(appId);
    quota.forget(String(appId));
  };
  const broadcast = deps.broadcastInvalidation ?? (deps.changes && ((appId: number) => deps.changes!.publish("cms", appId)));
  deps.changes?.subscribe("cms", (c) => invalidate(c.appId));
  // The plan's CMS limits and the key itself are read with the app key.
  deps.changes?.subscribe("app", (c) => appChanged(c.appId));
  const contentService = createContentServiceImpl({
    sql, mediaBaseUrl: config.mediaBaseUrl, apps, cache, meter, limiter, quota, queryTimeoutMs: config.queryTimeoutMs,
  });
  const adminService = createCmsAdminServiceImpl({
    sql,
    types: new ContentTypeStore(sql),
    entries: new EntryStore(sql),
    media,
    meter,
    indexes,
    indexWaitMs: config.indexWaitMs,
    invalidate: async (appId) => {
      invalidate(appId);
      await broadcast?.(appId);
    },
    onChange: deps.onChange,
    onHookError: deps.onHookError,
  });
  const serveMedia = createMediaHandler({ media, apps });
  const fast = createContentFastPaths({ apps, cache, meter, limiter });
  return {
    name: "cms",
    device: [
      binding(ContentService, contentService, {
        listSchemas: { rest: fast.listSchemas },
        getSchema: { rest: fast.getSchema },
        listEntries: { rest: fast.listEntries },
        getEntry: { rest: fast.getEntry },
      }),
    ],
    admin: [binding(CmsService, adminService)],
    routes: [{
      method: "GET",
      path: `${new URL(config.mediaBaseUrl).pathname.replace(/\/$/, "")}/:appKey/cms/media/:fileId`,
      iface: "cms",
      async handle({ params, headers }) {
        const inm = headers["if-none-match"];
        const res = await serveMedia(params["appKey"] ?? "", params["fileId"] ?? "", Array.isArray(inm) ? inm.join(", ") : inm);
        if (res.status === 404) throw appError("NOT_FOUND", "Media file not found.");
        return res;
      },
    }],
    contentService,
    adminService,
    serveMedia,
    invalidate,
    appChanged,
    async hasContentType(appId, slug) {
      const { rows } = await sql.query("SELECT 1 FROM cms_content_types WHERE app_id = $1 AND slug = $2", [appId, slug]);
      return rows.length > 0;
    },
    async renderEntry(appId, id) {
      const key = await apps.keyOf(appId);
      return key === undefined ? undefined : renderPublishedEntry(sql, config.mediaBaseUrl, key, appId, id);
    },
    start: async () => {
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
export { CACHE_CONTROL_PUBLIC, CACHE_CONTROL_SEARCH } from "./content-service.js";
