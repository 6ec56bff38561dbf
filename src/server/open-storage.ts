// Opens the process's backends. NATS: one connection per process (NATS_URL
// set), handed to every user. PostgreSQL: a pg pool when DATABASE_URL is set,
// else the embedded PGlite in the data directory. Migrations run on open; while
// PostgreSQL is unreachable (starting, restarting, failing over) opening
// waits for it instead of exiting.
import { join } from "node:path";
import { mkdir } from "node:fs/promises";
import type { Config } from "../kernel/config.js";
import { errorDetail } from "../kernel/errors.js";
import { migrate } from "../infra/storage/migrate.js";
import { createPgSql } from "../infra/storage/pg-sql.js";
import { createPgliteSql } from "../infra/storage/pglite-sql.js";
import type { Sql } from "../infra/storage/sql.js";
import { backoffMs, sleep } from "../kernel/retry.js";
import type { Logger } from "pino";
import { NatsLink } from "../infra/nats/nats-link.js";

/** Told about each failed attempt to reach PostgreSQL at start-up. */
export type StorageRetryListener = (err: unknown, attempt: number, retryInMs: number) => void;

const defaultRetryListener: StorageRetryListener = (err, attempt, retryInMs) =>
  console.warn(`pulsebase: PostgreSQL unavailable (${(err as Error).message}; attempt ${attempt}), retrying in ${retryInMs} ms`);

/** `role` names the process's connections (application_name "pulsebase-server" or "pulsebase-worker"). */
export async function openStorage(
  config: Config,
  role: "server" | "worker" = "server",
  onRetry: StorageRetryListener = defaultRetryListener,
): Promise<Sql> {
  let sql: Sql;
  if (config.databaseUrl) {
    sql = createPgSql({ connectionString: config.databaseUrl, max: config.pgPoolSize, applicationName: `pulsebase-${role}` });
    for (let attempt = 1; ; attempt++) {
      try {
        await migrate(sql);
        return sql;
      } catch (err) {
        // Anything but unreachability (bad credentials, a failing migration)
        // will not heal by waiting.
        if (errorDetail(err)?.code !== "unavailable") {
          await sql.close().catch(() => {});
          throw err;
        }
        const wait = backoffMs({ baseBackoffMs: 250, maxBackoffMs: 5000 }, attempt);
        onRetry(err, attempt, wait);
        await sleep(wait);
      }
    }
  } else {
    const dir = join(config.dataDir, "pg");
    await mkdir(dir, { recursive: true });
    sql = await createPgliteSql(dir);
  }
  await migrate(sql);
  return sql;
}

/**
 * The process's one NATS connection. Opened in the background and retried until NATS answers: a process
 * started while NATS is down serves what does not need it and joins later.
 */
export function openNats(config: Config, logger: Logger, name: string): NatsLink | undefined {
  if (!config.natsUrl) return undefined;
  return new NatsLink({
    servers: config.natsUrl,
    name,
    onRetry: (err, attempt) => {
      if (attempt === 1 || attempt % 30 === 0) logger.warn({ err, attempt }, "NATS unreachable, retrying");
    },
  });
}
