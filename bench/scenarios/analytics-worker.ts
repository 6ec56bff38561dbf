// A worker process for the ingestion benchmark (one "worker instance"):
// `node --import tsx bench/scenarios/analytics-worker.ts '<json>'`.
import { createPgSql } from "../../src/infra/storage/pg-sql.js";
import { createQueue } from "../../src/infra/queue/create-queue.js";
import { NatsLink } from "../../src/infra/nats/nats-link.js";
import { startWorkers } from "../../src/capabilities/analytics/analytics-worker.js";

interface WorkerConfig {
  databaseUrl: string;
  schema: string;
  natsUrl?: string;
  stream: string;
  subjectPrefix: string;
  concurrency: number;
}

const cfg = JSON.parse(process.argv[2]!) as WorkerConfig;
const sql = createPgSql({ connectionString: cfg.databaseUrl, schema: cfg.schema, max: cfg.concurrency + 2 });
const nats = cfg.natsUrl ? new NatsLink({ servers: cfg.natsUrl, name: "bench-worker" }) : undefined;
const queue = createQueue({ name: "analytics", sql, nats, jetstream: { stream: cfg.stream, subjectPrefix: cfg.subjectPrefix } });
const workers = startWorkers({ sql, queue, concurrency: cfg.concurrency });
process.stdout.write("ready\n");
process.on("SIGTERM", () => {
  void workers.stop().then(() => queue.close()).then(() => nats?.close()).then(() => sql.close()).finally(() => process.exit(0));
});
