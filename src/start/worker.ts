// `npm run worker`: batch workers as their own process (scale-out). Needs
// PostgreSQL (DATABASE_URL); several worker processes share the work, with
// either queue backend (JetStream with NATS_URL, else the table queue).
import { createLogger } from "../app/logger.js";
import { loadConfigOrExit } from "../config/config.js";
import { createBatchQueue } from "../queue/create-queue.js";
import { startWorkers } from "../workers/start-workers.js";
import { openStorage } from "./storage.js";
import { analyticsStreams } from "../analytics/analytics-module.js";
import { NatsLink } from "../queue/nats-link.js";

async function main(): Promise<void> {
  const config = loadConfigOrExit();
  if (!config.databaseUrl) {
    console.error("configuration error: DATABASE_URL must be set for a separate worker process (the embedded database runs its workers inside the server)");
    process.exit(2);
  }
  const logger = createLogger(config.logLevel);
  const sql = await openStorage(config, "worker", (err, attempt, retryInMs) =>
    logger.warn({ err, attempt, retryInMs }, "PostgreSQL unavailable at start-up, retrying"));
  // The process's one NATS connection, opened in the background and retried until NATS answers.
  const nats = config.natsUrl
    ? new NatsLink({
        servers: config.natsUrl,
        name: "pulsebase-worker",
        onRetry: (err, attempt) => {
          if (attempt === 1 || attempt % 30 === 0) logger.warn({ err, attempt }, "NATS unreachable, retrying");
        },
      })
    : undefined;
  const queue = createBatchQueue({ sql, nats, jetstream: analyticsStreams(config.natsNamespace) });
  const workers = startWorkers({ sql, queue, logger });
  logger.info({ queue: queue.backend }, "pulsebase workers running");
  let closing = false;
  const stop = async () => {
    if (closing) return;
    closing = true;
    await workers.stop();
    await queue.close();
    await nats?.close();
    await sql.close();
    process.exit(0);
  };
  process.on("SIGINT", () => void stop());
  process.on("SIGTERM", () => void stop());
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
