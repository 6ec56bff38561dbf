// Picks the queue backend: JetStream when the process has a NATS connection,
// otherwise the tables in the application database (embedded default).
import { createJetStreamQueue } from "./jetstream-queue.js";
import type { Queue, QueueOptions } from "./queue.js";
import { createSqlQueue } from "./sql-queue.js";

export function createQueue(opts: QueueOptions): Queue {
  return opts.nats ? createJetStreamQueue({ ...opts, nats: opts.nats }) : createSqlQueue(opts);
}
