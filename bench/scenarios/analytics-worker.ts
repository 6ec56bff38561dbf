// A worker process for the ingestion benchmark (one "worker instance"):
// `node --import tsx bench/scenarios/analytics-worker.ts '<json>'`.
import { createPgSql } from "../../src/infra/storage/pg-sql.js";
import { createBatchQueue } from "../../src/infra/queue/create-queue.js";
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
const queue = createBatchQueue({ sql, natsUrl: cfg.natsUrl, jetstream: { stream: cfg.stream, subjectPrefix: cfg.subjectPrefix } });
const workers = startWorkers({ sql, queue, concurrency: cfg.concurrency });
process.stdout.write("ready\n");
process.on("SIGTERM", () => {
  void workers.stop().then(() => queue.close()).then(() => sql.close()).finally(() => process.exit(0));
});
