// The functions capability as a server module: the HTTP trigger on the
// public listener, the operator API on the admin listener, event triggers
// when NATS is configured, and shutdown (flush records, release isolates).
import type { ChangeBus } from "../../infra/cluster/change-bus.js";
import type { NatsLink } from "../../infra/nats/nats-link.js";
import { FunctionService as AdminFunctionService } from "../../../gen/pulsebase/admin/v1/functions_pb.js";
import { FunctionService } from "../../../gen/pulsebase/platform/v1/functions_pb.js";
import { registerIsolateMetrics, registerQueueMetrics } from "../../server/metrics.js";
import { binding, type PulsebaseModule } from "../../kernel/module.js";
import type { CmsChange as CmsAuthoringChange } from "../cms/index.js";
import type { DatabaseModule } from "../database/database-module.js";
import type { Sql } from "../../infra/storage/sql.js";
import type { FunctionsConfig } from "./config.js";
import { changeCaptureFromDatabase } from "./events/database-capture.js";
import { functionEventStreams } from "./events/event-worker.js";
import { createFunctionsModule, type FunctionsModule } from "./functions-module.js";
import type { UserErrorLog } from "./function-runtime.js";

export interface FunctionsServerModuleDeps {
  sql: Sql;
  database: DatabaseModule;
  dataDir: string;
  config?: Partial<FunctionsConfig>;
  /**
   * JetStream for event triggers (the process's NATS link, used even while
   * NATS is unreachable, so every process runs the same transport); unset =
   * the PostgreSQL table transport.
   */
  nats?: NatsLink;
  /** Function changes go out and come in (kinds functions and app) here. */
  changes: ChangeBus;
  natsNamespace: string;
  onError(err: unknown): void;
  logUserError?: UserErrorLog;
}

/**
 * CMS authoring operations onto the trigger operations: created is insert,
 * deleted is delete; updated, published and unpublished are update (before
 * and after show what changed, `published` included).
 */
const CMS_OPS = { created: "insert", updated: "update", published: "update", unpublished: "update", deleted: "delete" } as const;

export function createFunctionsServerModule(deps: FunctionsServerModuleDeps): PulsebaseModule & { functions: FunctionsModule; onCmsChange(appId: number, c: CmsAuthoringChange): Promise<void> } {
  const functions = createFunctionsModule({
    sql: deps.sql,
    db: deps.database.runner,
    config: deps.config,
    onError: deps.onError,
    logUserError: deps.logUserError,
    announce: (appId) => deps.changes.publish("functions", appId),
    // Event triggers ride on JetStream when NATS is configured, else on a
    // PostgreSQL table (so the embedded default has them too).
    events: {
      nats: deps.nats,
      capture: changeCaptureFromDatabase({ store: deps.database.store, pool: deps.database.pool, dataDir: deps.dataDir }),
      config: functionEventStreams(deps.natsNamespace),
    },
  });
  deps.changes.subscribe("functions", () => functions.runtime.invalidate());
  // The plan is part of every cached resolution.
  deps.changes.subscribe("app", (c) => functions.planChanged(c.appId));
  return {
    name: "functions",
    functions,
    device: [binding(FunctionService, functions.invokeService)],
    admin: [binding(AdminFunctionService, functions.adminService)],
    onCmsChange: (appId, c) =>
      functions.emitCmsChange(appId, { collection: c.collection, operation: CMS_OPS[c.operation], before: c.before, after: c.after }),
    registerMetrics(registry) {
      registerIsolateMetrics(registry, () => functions.sandbox.stats());
      const events = functions.events;
      if (events) registerQueueMetrics(registry, "function-events", events.queue, deps.onError);
    },
    async start() {
      await functions.events?.start();
      functions.scheduler.start();
    },
    async stop() {
      await functions.close();
    },
  };
}
