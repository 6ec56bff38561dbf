// The capability modules the server runs besides identity, wired together:
// functions reach the linked databases, CMS changes fire functions' cms
// triggers, the process's one NATS connection (when configured) carries
// batches, events and the change bus's fast path.
import { join } from "node:path";
import type { PulsebaseModule } from "../kernel/module.js";
import type { Shared } from "./build.js";
import { createDatabaseModule } from "../capabilities/database/database-module.js";
import { DatabaseService as AdminDatabaseService } from "../../gen/pulsebase/admin/v1/database_pb.js";
import { DatabaseService } from "../../gen/pulsebase/platform/v1/database_pb.js";
import { SqlService } from "../../gen/pulsebase/admin/v1/sql_pb.js";
import { binding } from "../kernel/module.js";
import { registerEngineMetrics } from "./metrics.js";
import { createCmsModule } from "../capabilities/cms/cms-module.js";
import { createAnalyticsModule } from "../capabilities/analytics/analytics-module.js";
import { createFunctionsServerModule } from "../capabilities/functions/functions-server-module.js";

export async function createModules(shared: Shared): Promise<PulsebaseModule[]> {
  const { config, sql, logger, nats, changes } = shared;
  // Link and status changes reach the other processes' link caches through the change bus.
  const db = await createDatabaseModule(
    {
      dataDir: config.dataDir,
      engineProcesses: config.db.engineProcesses,
      limits: { appRunning: config.db.appRunning, appQueued: config.db.appQueued, queueWaitMs: config.db.queueWaitMs, remoteAppRunning: config.db.remoteAppRunning },
    },
    { sql, onChange: () => void changes.publish("database", 0) },
  );
  changes.subscribe("database", () => db.runner.invalidate());
  const database: PulsebaseModule = {
    name: "database",
    device: [binding(DatabaseService, db.platform)],
    admin: [binding(AdminDatabaseService, db.admin), binding(SqlService, db.sqlAdmin)],
    stop: () => db.close(),
    registerMetrics: (registry) => registerEngineMetrics(registry, { engines: () => db.pool.stats(), remote: () => db.runner.remoteStats() }),
  };
  const functions = createFunctionsServerModule({
    sql,
    database: db,
    dataDir: config.dataDir,
    config: {
      enforcePlan: config.planEnforcement,
      sandbox: { hostCallsRunning: config.fnDbCalls.running, hostCallsQueued: config.fnDbCalls.queued },
      publicTriggerPerMinute: config.functions.publicTriggerPerMinute,
      publicPerAddressPerMinute: config.functions.publicPerAddressPerMinute,
      maxSchedulesPerApp: config.functions.maxSchedulesPerApp,
      scheduler: { pollMs: config.functions.schedulePollMs, graceMs: config.functions.scheduleGraceMs },
      kv: { maxBytesPerApp: config.functions.kvMaxBytesPerApp, maxKeysPerApp: config.functions.kvMaxKeysPerApp },
    },
    nats,
    changes,
    natsNamespace: config.natsNamespace,
    onError: (err) => logger.error({ err }, "functions background work failed"),
    // The user's code failing is not the service failing: warn, never error.
    logUserError: (fields, message) => logger.warn(fields, message),
  });
  const cms = createCmsModule({
    sql,
    changes,
    logger,
    config: {
      mediaBaseUrl: config.mediaBaseUrl ?? `https://localhost:${config.httpsPort}`,
      mediaDir: join(config.dataDir, "media"),
    },
    onChange: (appId, change) => functions.onCmsChange(appId, change),
  });
  const analytics = createAnalyticsModule({
    sql,
    dataDir: config.dataDir,
    nats,
    natsNamespace: config.natsNamespace,
    logger,
    // PGlite is one process: its workers must run here.
    workers: config.inProcessWorkers || sql.kind === "pglite",
  });
  // Stopped in reverse: cms, functions, analytics, database (NATS after them: build.ts).
  return [database, analytics, functions, cms];
}
