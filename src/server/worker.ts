// `npm run worker`: batch workers as their own process (scale-out). Needs
// PostgreSQL (DATABASE_URL); several worker processes share the work, with
// either queue backend (JetStream with NATS_URL, else the table queue).
// GET /metrics on PULSEBASE_WORKER_METRICS_PORT (adminHost): the analytics
// queue, the function-event transport, the PostgreSQL pool and the process.
// Several workers on one host with one environment (README, Scale-out): a
// taken default port moves to the next ones, a taken explicit port leaves the
// worker without metrics; either way with a warning, and the worker works.
import Fastify, { type FastifyInstance } from "fastify";
import { createLogger } from "../infra/logging/logger.js";
import { createMetrics, registerMetricsRoute, registerNatsMetrics, registerPgPoolMetrics, registerQueueMetrics, type QueueStatsSource } from "./metrics.js";
import { loadConfigOrExit, type Config } from "../kernel/config.js";
import { DEFAULT_EVENT_WORKER_CONFIG, functionEventQueue, functionEventStreams } from "../capabilities/functions/events/event-worker.js";
import type { Sql } from "../infra/storage/sql.js";
import { startWorkers } from "../capabilities/analytics/analytics-worker.js";
import { openNats, openStorage } from "./open-storage.js";
import { analyticsQueue } from "../capabilities/analytics/analytics-module.js";
import type { NatsLink } from "../infra/nats/nats-link.js";

/** Ports tried after a taken default port (8445, 8446, ... 8445 + this - 1). */
const WORKER_METRICS_PORT_TRIES = 10;

async function serveMetrics(config: Config, port: number, sql: Sql, nats: NatsLink | undefined, sources: { analytics: QueueStatsSource; events: QueueStatsSource }, warn: (what: string) => (err: unknown) => void): Promise<FastifyInstance> {
  const metrics = createMetrics();
  registerQueueMetrics(metrics.registry, "analytics", sources.analytics, warn("analytics queue"));
  registerQueueMetrics(metrics.registry, "function-events", sources.events, warn("function-event transport"));
  const poolStats = sql.poolStats?.bind(sql);
  if (poolStats) registerPgPoolMetrics(metrics.registry, poolStats);
  if (nats) registerNatsMetrics(metrics.registry, nats);
  const app = Fastify({ logger: false });
  registerMetricsRoute(app, metrics, { metricsToken: config.metricsToken, operatorToken: config.operatorToken ?? "" });
  try {
    await app.listen({ host: config.adminHost, port });
  } catch (err) {
    await app.close().catch(() => {});
    throw err;
  }
  return app;
}

async function main(): Promise<void> {
  const config = loadConfigOrExit();
  if (!config.databaseUrl) {
    console.error("configuration error: DATABASE_URL must be set for a separate worker process (the embedded database runs its workers inside the server)");
    process.exit(2);
  }
  const logger = createLogger(config.logLevel);
  const sql = await openStorage(config, "worker", (err, attempt, retryInMs) =>
    logger.warn({ err, attempt, retryInMs }, "PostgreSQL unavailable at start-up, retrying"));
  // The process's one NATS connection, handed to the analytics queue and the function-event queue.
  const nats = openNats(config, logger, "pulsebase-worker");
  const queue = analyticsQueue(sql, nats, config.natsNamespace);
  // Read for its gauges only (the servers deliver the events); until NATS is up they say pulsebase_queue_stats_up 0.
  const events = functionEventQueue(sql, nats, { ...DEFAULT_EVENT_WORKER_CONFIG, ...functionEventStreams(config.natsNamespace) });
  let metricsApp: FastifyInstance | undefined;
  let metricsPort: number | undefined;
  if (config.workerMetricsPort > 0) {
    // The default port walks on past ports other workers on this host hold; an explicit one does not (it was chosen).
    const tries = config.workerMetricsPortExplicit ? 1 : Math.min(WORKER_METRICS_PORT_TRIES, 65536 - config.workerMetricsPort);
    for (let i = 0; i < tries && !metricsApp; i++) {
      const port = config.workerMetricsPort + i;
      try {
        metricsApp = await serveMetrics(config, port, sql, nats, { analytics: queue, events }, (what) => (err) => logger.warn({ err }, `metrics: ${what} statistics unavailable`));
        metricsPort = port;
      } catch (err) {
        if ((err as { code?: string }).code !== "EADDRINUSE") {
          // a host or port this machine cannot serve at all: a configuration error
          console.error(`cannot serve metrics on ${config.adminHost}:${port} (PULSEBASE_WORKER_METRICS_PORT; 0 turns it off): ${(err as Error).message}`);
          process.exit(1);
        }
        if (i + 1 < tries) {
          logger.warn({ port, next: port + 1 }, "worker metrics: port in use (another worker on this host?), trying the next");
          continue;
        }
        // Metrics are for watching; the batches matter more: run on without them.
        logger.warn(
          { host: config.adminHost, port, explicit: config.workerMetricsPortExplicit },
          `worker metrics: port${tries > 1 ? `s ${config.workerMetricsPort}-${port}` : ` ${port}`} in use; running WITHOUT GET /metrics (give each worker on this host its own PULSEBASE_WORKER_METRICS_PORT, or 0 for none)`,
        );
      }
    }
  }
  const workers = startWorkers({ sql, queue, logger });
  logger.info({ queue: queue.backend, metricsPort }, "pulsebase workers running");
  let closing = false;
  const stop = async () => {
    if (closing) return;
    closing = true;
    await workers.stop();
    await metricsApp?.close();
    await queue.close();
    await events.close();
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
