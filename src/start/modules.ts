// The capability modules the server runs besides identity, wired together:
// functions reach the linked databases, CMS changes fire functions' cms
// triggers, NATS (when configured) carries events and cache invalidation.
import { join } from "node:path";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import type { PulsebaseModule } from "../app/module.js";
import type { Shared } from "../app/build.js";
import { createDatabaseModule } from "../database/database-module.js";
import { DatabaseService as AdminDatabaseService } from "../../gen/pulsebase/admin/v1/database_pb.js";
import { DatabaseService } from "../../gen/pulsebase/platform/v1/database_pb.js";
import { binding } from "../app/module.js";
import { registerEngineMetrics } from "../app/metrics.js";
import { createCmsModule } from "../cms/cms-module.js";
import { createAnalyticsModule } from "../analytics/analytics-module.js";
import { createFunctionsServerModule } from "../functions/functions-server-module.js";

async function connectNats(url: string | undefined, shared: Shared): Promise<NatsConnection | undefined> {
  if (!url) return undefined;
  try {
    return await connect({ servers: url, maxReconnectAttempts: -1, name: "pulsebase-events", timeout: 5000 });
  } catch (err) {
    shared.logger.error({ err }, "NATS unreachable at start: function event triggers are off in this process");
    return undefined;
  }
}

export async function createModules(shared: Shared): Promise<PulsebaseModule[]> {
  const { config, sql, logger } = shared;
  const db = await createDatabaseModule(
    {
      dataDir: config.dataDir,
      engineProcesses: config.db.engineProcesses,
      limits: { appRunning: config.db.appRunning, appQueued: config.db.appQueued, queueWaitMs: config.db.queueWaitMs, remoteAppRunning: config.db.remoteAppRunning },
    },
    { sql },
  );
  const database: PulsebaseModule = {
    name: "database",
    device: [binding(DatabaseService, db.platform)],
    admin: [binding(AdminDatabaseService, db.admin)],
    stop: () => db.close(),
    registerMetrics: (registry) => registerEngineMetrics(registry, { engines: () => db.pool.stats(), remote: () => db.runner.remoteStats() }),
  };
  const nats = await connectNats(config.natsUrl, shared);
  const functions = createFunctionsServerModule({
    sql,
    database: db,
    dataDir: config.dataDir,
    config: { enforcePlan: config.planEnforcement, sandbox: { dbCallsRunning: config.fnDbCalls.running, dbCallsQueued: config.fnDbCalls.queued } },
    nats,
    natsNamespace: config.natsNamespace,
    onError: (err) => logger.error({ err }, "functions background work failed"),
  });
  const cms = createCmsModule({
    sql,
    natsUrl: config.natsUrl,
    natsNamespace: config.natsNamespace,
    logger,
    config: {
      mediaBaseUrl: config.mediaBaseUrl ?? `https://localhost:${config.httpsPort}`,
      mediaDir: join(config.dataDir, "media"),
    },
    onChange: (appId, change) => functions.onCmsChange(appId, change),
  });
  // SetAppPlan in this process: the plan caches of functions and CMS drop the app at once.
  shared.plans.subscribe((appId) => {
    functions.functions.planChanged(appId);
    cms.planChanged(appId);
  });
  const analytics = createAnalyticsModule({
    sql,
    dataDir: config.dataDir,
    natsUrl: config.natsUrl,
    natsNamespace: config.natsNamespace,
    logger,
    // PGlite is one process: its workers must run here.
    workers: config.inProcessWorkers || sql.kind === "pglite",
  });
  const natsModule: PulsebaseModule = {
    name: "nats",
    stop: async () => {
      await nats?.drain().catch(() => {});
    },
  };
  // Stopped in reverse: cms, functions, analytics, database, then NATS.
  return [natsModule, database, analytics, functions, cms];
}
