// The analytics capability's module definition: the device RPCs (single and batch endpoints)
// on the public listener, the operator read API on the admin listener, the
// batch queue (JetStream with NATS_URL, else the embedded table) and the
// batch workers, which run in this process unless turned off.
import { join } from "node:path";
import type { Logger } from "pino";
import { AnalyticsService as AdminAnalyticsService } from "../../../gen/pulsebase/admin/v1/analytics_pb.js";
import { AnalyticsService } from "../../../gen/pulsebase/platform/v1/analytics_pb.js";
import { decodeRecordEventRequest, encodeEvent } from "../../../gen/fastcodec/pulsebase/platform/v1/analytics.js";
import { binding, type PulsebaseModule } from "../../kernel/module.js";
import { createDirBlobStore } from "../../infra/blobs/dir-blob-store.js";
import { createQueue } from "../../infra/queue/create-queue.js";
import type { Sql } from "../../infra/storage/sql.js";
import type { NatsLink } from "../../infra/nats/nats-link.js";
import { startWorkers } from "./analytics-worker.js";
import { createAdminAnalyticsServiceImpl } from "./admin-analytics-service.js";
import { createAnalyticsServiceImpl } from "./analytics-service.js";

export interface AnalyticsModuleDeps {
  sql: Sql;
  dataDir: string;
  /** The process's NATS connection: the queue is JetStream with it, else the embedded table. */
  nats?: NatsLink;
  natsNamespace: string;
  logger: Logger;
  /** Run the batch workers in this process (always on for PGlite). */
  workers: boolean;
}

/** The analytics batch queue (JetStream names for the namespace). */
export function analyticsQueue(sql: Sql, nats: NatsLink | undefined, ns: string) {
  return createQueue({ name: "analytics", sql, nats, jetstream: { stream: `${ns.toUpperCase()}_ANALYTICS`, subjectPrefix: `${ns}.analytics`, durable: "analytics-workers" } });
}

export function createAnalyticsModule(deps: AnalyticsModuleDeps): PulsebaseModule {
  const queue = analyticsQueue(deps.sql, deps.nats, deps.natsNamespace);
  const blobs = createDirBlobStore(join(deps.dataDir, "blobs"));
  let workers: { stop(): Promise<void> } | undefined;
  return {
    name: "analytics",
    device: [
      binding(AnalyticsService, createAnalyticsServiceImpl({ sql: deps.sql, queue, blobs }), {
        // generated from the fast_codec option (bin/protoc-gen-fastcodec.js)
        recordEvent: { decode: decodeRecordEventRequest, encode: encodeEvent },
      }),
    ],
    admin: [binding(AdminAnalyticsService, createAdminAnalyticsServiceImpl({ sql: deps.sql, queue, blobs }))],
    gauges: { queues: { analytics: queue } },
    async start() {
      if (deps.workers) workers = startWorkers({ sql: deps.sql, queue, logger: deps.logger });
    },
    async stop() {
      await workers?.stop();
      await queue.close();
    },
  };
}
