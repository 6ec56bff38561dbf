// Picks the queue backend: JetStream when a NATS URL is configured, otherwise
// the durable table in the application database (embedded default).
import type { Sql } from "../storage/sql.js";
import type { NatsLink } from "../nats/nats-link.js";
import { createJetStreamQueue, type JetStreamQueueOptions } from "./jetstream-queue.js";
import type { BatchQueue, RetryPolicy } from "./queue.js";
import { createSqlQueue } from "./sql-queue.js";

export interface BatchQueueConfig {
  sql: Sql;
  /** NATS_URL; unset selects the embedded table queue. */
  natsUrl?: string;
  /** The process's NATS connection (preferred to natsUrl: one connection per process). */
  nats?: NatsLink;
  retry?: Partial<RetryPolicy>;
  /** JetStream names (defaults: stream PB_ANALYTICS, prefix pulsebase.analytics). */
  jetstream?: Omit<JetStreamQueueOptions, "servers" | "retry">;
}

export function createBatchQueue(cfg: BatchQueueConfig): BatchQueue {
  if (cfg.nats || cfg.natsUrl) return createJetStreamQueue({ ...cfg.jetstream, servers: cfg.natsUrl ?? [], link: cfg.nats, retry: cfg.retry });
  return createSqlQueue({ sql: cfg.sql, retry: cfg.retry });
}
