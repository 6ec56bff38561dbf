// The capability modules the server runs besides identity: a list of their
// module definitions, wired together here (functions reach the linked
// databases, CMS changes fire functions' cms triggers and reach realtime
// CMS subscribers rendered by the CMS read side, realtime table
// subscriptions ride on the functions' change capture and read the database
// capability's rules) over the process's one NATS connection and change bus.
import { join } from "node:path";
import type { PulsebaseModule } from "../kernel/module.js";
import type { Shared } from "./build.js";
import { createDatabaseModule } from "../capabilities/database/database-module.js";
import { kOperator } from "../capabilities/console/principal.js";
import { createCmsModule } from "../capabilities/cms/cms-module.js";
import { createAnalyticsModule } from "../capabilities/analytics/analytics-module.js";
import { createFunctionsModule } from "../capabilities/functions/functions-module.js";
import { changeCaptureFromDatabase } from "../capabilities/functions/events/database-capture.js";
import { functionEventStreams } from "../capabilities/functions/events/event-worker.js";
import { createRealtimeModule } from "../capabilities/realtime/realtime-module.js";

export async function createModules(shared: Shared): Promise<PulsebaseModule[]> {
  const { config, sql, logger, nats, changes, authenticate } = shared;
  const database = await createDatabaseModule(
    {
      dataDir: config.dataDir,
      engineProcesses: config.db.engineProcesses,
      limits: { appRunning: config.db.appRunning, appQueued: config.db.appQueued, queueWaitMs: config.db.queueWaitMs, remoteAppRunning: config.db.remoteAppRunning },
      linkCacheMs: config.cacheTtlMs,
    },
    // The SQL editor's history is per console account (kOperator: set by the admin listener's policy).
    { sql, changes, callerId: (ctx) => ctx.values.get(kOperator)?.userId ?? 0 },
  );
  const analytics = createAnalyticsModule({
    sql,
    dataDir: config.dataDir,
    nats,
    natsNamespace: config.natsNamespace,
    logger,
    // PGlite is one process: its workers must run here.
    workers: config.inProcessWorkers || sql.kind === "pglite",
  });
  const cms = createCmsModule({
    sql,
    changes,
    config: {
      mediaBaseUrl: config.mediaBaseUrl ?? `https://localhost:${config.httpsPort}`,
      mediaDir: join(config.dataDir, "media"),
      appKeyTtlMs: config.cacheTtlMs,
      cacheTtlMs: config.cacheTtlMs,
    },
    // functions and realtime are made below, with the host capabilities of the modules above; changes come only once the server runs.
    // (realtime's sink renders the entry once for its subscribers on every server, and never throws)
    onChange: async (appId, change) => {
      await Promise.all([realtime.cmsSink(appId, change), functions.onCmsChange(appId, change)]);
    },
    onHookError: (err) => logger.error({ err }, "cms change hook failed"),
    onIndexError: (err, info) => logger[info.willRetry ? "warn" : "error"]({ err, ...info }, "cms per-field index build failed"),
  });
  // One change capture (SQLite triggers and the drainer of the functions'
  // event worker) for event triggers and realtime subscribers alike.
  const capture = changeCaptureFromDatabase({ store: database.store, pool: database.pool, dataDir: config.dataDir });
  const functions = createFunctionsModule({
    sql,
    // Every other module's ctx.<name> (ctx.db from the database module); functions add their own.
    hostCapabilities: [database, analytics, cms].flatMap((m) => m.hostCapabilities ?? []),
    config: {
      enforcePlan: config.planEnforcement,
      ...(config.cacheTtlMs !== undefined && { resolveCacheMs: config.cacheTtlMs }),
      sandbox: {
        hostCallsRunning: config.fnDbCalls.running,
        hostCallsQueued: config.fnDbCalls.queued,
        appIsolates: config.fnIsolates.appIsolates,
        heapBudgetBytes: config.fnIsolates.heapBudgetMb * 1024 * 1024,
        appHeapBytes: config.fnIsolates.appHeapMb * 1024 * 1024,
        keepHeapBytes: config.fnIsolates.keepHeapMb * 1024 * 1024,
      },
      publicTriggerPerMinute: config.functions.publicTriggerPerMinute,
      publicPerAddressPerMinute: config.functions.publicPerAddressPerMinute,
      maxSchedulesPerApp: config.functions.maxSchedulesPerApp,
      sandboxCsp: config.functions.sandboxCsp,
      scheduler: { pollMs: config.functions.schedulePollMs, graceMs: config.functions.scheduleGraceMs },
      kv: { maxBytesPerApp: config.functions.kvMaxBytesPerApp, maxKeysPerApp: config.functions.kvMaxKeysPerApp },
      fetch: config.functions.fetch,
    },
    changes,
    // Event triggers ride on JetStream when NATS is configured (the process's
    // link, used even while NATS is unreachable, so every process runs the
    // same transport), else on a PostgreSQL table.
    events: {
      nats,
      capture,
      config: functionEventStreams(config.natsNamespace),
      // realtime is made below; the drainer runs only once the server runs
      extraWatch: (q, onlyApp) => realtime.captureWatch(q, onlyApp),
      changeSink: (appId, changes) => realtime.changeSink(appId, changes),
    },
    onError: (err) => logger.error({ err }, "functions background work failed"),
    // The user's code failing is not the service failing: warn, never error.
    logUserError: (fields, message) => logger.warn(fields, message),
  });
  const realtime = createRealtimeModule({
    limits: config.realtime,
    changes,
    sql,
    authenticate,
    nats,
    natsNamespace: config.natsNamespace,
    onError: (err) => logger.warn({ err }, "realtime: background work failed"),
    tables: {
      sql,
      async ensureCaptured(appId) {
        if (!functions.events) throw new Error("change capture is not configured");
        await functions.events.syncApp(appId);
      },
      access: async (appId) => (await database.store.linkedTo(appId))?.access,
      query: async (appId, statements) =>
        (await capture.serviceBatch(appId, statements)).map((r) => ({ columns: r.columns, rows: r.rows as unknown[][], ...(r.error !== undefined && { error: r.error }) })),
      // as the caller's device: its rules connection and guard (docs/realtime.md, "Under access rules")
      queryAs: async (appId, caller, st) => {
        const [r] = await database.runner.query(appId, { sql: st.sql, params: st.params }, { caller });
        if (!r) throw new Error("no result");
        return { columns: r.columns, rows: r.rows as unknown[][], ...(r.error !== undefined && { error: r.error }) };
      },
    },
    cms: {
      hasContentType: (appId, slug) => cms.hasContentType(appId, slug),
      render: async (appId, id) => (await cms.renderEntry(appId, id))?.entry,
    },
  });
  // Stopped in reverse: realtime, cms, functions, analytics, database (NATS after them: build.ts).
  return [database, analytics, functions, cms, realtime];
}
