// A worker process for the crash tests: `node --import tsx worker-child.ts '<json config>'`.
// Prints "ready" once consuming; applies batches until killed.
import { createPgSql } from "../../../src/infra/storage/pg-sql.js";
import { connect } from "@nats-io/transport-node";
import { createJetStreamQueue } from "../../../src/infra/queue/jetstream-queue.js";
import { startWorkers } from "../../../src/capabilities/analytics/analytics-worker.js";

interface ChildConfig {
  dbUrl: string;
  schema: string;
  natsUrl: string;
  stream: string;
  subjectPrefix: string;
  ackWaitMs: number;
  concurrency: number;
}

const cfg = JSON.parse(process.argv[2]!) as ChildConfig;
const sql = createPgSql({ connectionString: cfg.dbUrl, schema: cfg.schema, max: cfg.concurrency + 1 });
const queue = createJetStreamQueue({
  name: "analytics",
  nats: await connect({ servers: cfg.natsUrl }),
  jetstream: { stream: cfg.stream, subjectPrefix: cfg.subjectPrefix },
  ackWaitMs: cfg.ackWaitMs,
});
await queue.ready();
startWorkers({ sql, queue, concurrency: cfg.concurrency });
process.stdout.write("ready\n");
