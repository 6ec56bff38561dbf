// Sql over node-postgres with a pool (the scale-out backend).
import pg from "pg";
import { appError } from "../../kernel/errors.js";
import type { QueryResult, Sql } from "./sql.js";
import { isConnectionLoss, markRetryableTx, translatePgError } from "./pg-errors.js";

// BIGINT ids and counters fit in a JS number (< 2^53) in this service.
pg.types.setTypeParser(20, (v) => Number(v));
pg.types.setTypeParser(1700, (v) => Number(v));

// Statements are prepared once per connection and reused by name (the server
// skips parsing and planning, the client sends less). Only texts seen here
// get a name, at most PREPARED_MAX of them, so dynamically built SQL (CMS
// filters) cannot grow the per-connection statement cache without bound.
const PREPARED_MAX = 500;
const prepared = new Map<string, string>();
function statement(text: string, values: unknown[] | undefined): pg.QueryConfig {
  let name = prepared.get(text);
  if (name === undefined && prepared.size < PREPARED_MAX && text.length < 4000) {
    name = `pb_${prepared.size}`;
    prepared.set(text, name);
  }
  return name ? { name, text, values } : { text, values };
}

export interface PgSqlOptions {
  connectionString: string;
  /** Schema to put first on search_path (tests use one schema per file). */
  schema?: string;
  max?: number;
  statementTimeoutMs?: number;
  /**
   * application_name of every connection (shown in pg_stat_activity, lets an
   * operator tell servers from workers). An application_name in the
   * connection string wins.
   */
  applicationName?: string;
  /** How long a query waits for a free connection of the pool before it fails (default 5000 ms). */
  connectionTimeoutMs?: number;
}

export function createPgSql(opts: PgSqlOptions): Sql {
  const options: string[] = [];
  if (opts.schema) options.push(`-c search_path=${opts.schema},public`);
  if (opts.statementTimeoutMs) options.push(`-c statement_timeout=${opts.statementTimeoutMs}`);
  const pool = new pg.Pool({
    connectionString: opts.connectionString,
    max: opts.max ?? 10,
    options: options.length ? options.join(" ") : undefined,
    application_name: opts.applicationName,
    connectionTimeoutMillis: opts.connectionTimeoutMs ?? 5000,
    idleTimeoutMillis: 30000,
  });
  // An idle client losing its connection must not crash the process.
  pool.on("error", () => {});
  // Nor a lent-out one: the pool detaches its own listener while a client
  // is checked out, and a server's FATAL can arrive in the very chunk that
  // completes the connection, before the borrower can listen. The failure
  // reaches the statement as a rejection; the pool discards a client that
  // is no longer queryable when it comes back.
  pool.on("connect", (client) => client.on("error", () => {}));
  return wrapPool(pool);
}

// A statement that only reads: when its connection is lost it is run again,
// once, on a fresh one (a failover then costs a read nothing). Anything that
// may write is not, since whether it committed is unknown.
const sideEffects = /\b(nextval|setval|pg_advisory\w*|pg_try_advisory\w*|pg_notify|pg_terminate_backend|pg_cancel_backend|function_kv_put|function_kv_delete)\b/i;
function isPlainRead(text: string): boolean {
  return /^\s*SELECT\b/i.test(text) && !sideEffects.test(text);
}

/** A 503 whose write may have been stored: the connection died during COMMIT. */
export const COMMIT_UNKNOWN_MESSAGE = "The database connection was lost while committing; the change may or may not have been stored.";

// node-postgres' refusal to send anything on a client whose connection failed.
const notSent = /is not queryable/;

function wrapClient(client: pg.PoolClient): Sql {
  const sql: Sql = {
    kind: "postgres",
    async query<R>(text: string, params?: readonly unknown[]): Promise<QueryResult<R>> {
      try {
        const r = await client.query(statement(text, params as unknown[]));
        return { rows: r.rows as R[], rowCount: r.rowCount ?? 0 };
      } catch (err) {
        throw translatePgError(err);
      }
    },
    async exec(text: string): Promise<void> {
      try {
        await client.query(text);
      } catch (err) {
        throw translatePgError(err);
      }
    },
    // Nested transaction: run inline in the outer one.
    transaction: (fn) => fn(sql),
    close: async () => {},
  };
  return sql;
}

function wrapPool(pool: pg.Pool): Sql {
  return {
    kind: "postgres",
    poolStats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
    maxConnections: pool.options.max,
    async query<R>(text: string, params?: readonly unknown[]): Promise<QueryResult<R>> {
      for (let attempt = 1; ; attempt++) {
        try {
          const r = await pool.query(statement(text, params as unknown[]));
          return { rows: r.rows as R[], rowCount: r.rowCount ?? 0 };
        } catch (err) {
          if (attempt === 1 && isConnectionLoss(err) && isPlainRead(text)) continue;
          throw translatePgError(err);
        }
      }
    },
    async exec(text: string): Promise<void> {
      try {
        await pool.query(text);
      } catch (err) {
        throw translatePgError(err);
      }
    },
    async transaction<T>(fn: (tx: Sql) => Promise<T>): Promise<T> {
      let client: pg.PoolClient;
      try {
        client = await pool.connect();
      } catch (err) {
        throw translatePgError(err);
      }
      // While a client is checked out the pool's own 'error' listener is
      // detached: a connection that dies now (restart, failover,
      // pg_terminate_backend) emits 'error' on the client, an uncaught
      // exception without this listener. The statement in flight (or the
      // next one) fails with the loss and is handled below.
      let lost: Error | undefined;
      const onError = (err: Error) => {
        lost ??= err;
      };
      client.on("error", onError);
      let broken = false;
      let committing = false;
      try {
        await client.query("BEGIN");
        const out = await fn(wrapClient(client));
        // Lost already: COMMIT would not even be sent.
        if (lost) throw lost;
        committing = true;
        await client.query("COMMIT");
        return out;
      } catch (err) {
        // The failure itself is the lost connection (a failure of fn's own,
        // on a connection that also died, is reported as it is).
        const connectionLost = isConnectionLoss(err);
        if (connectionLost || lost) broken = true;
        else {
          try {
            await client.query("ROLLBACK");
          } catch {
            broken = true;
          }
        }
        const e = translatePgError(err);
        if (!connectionLost) throw e;
        // A client already known to be broken refuses to send COMMIT.
        if (committing && !notSent.test((err as Error | undefined)?.message ?? "")) {
          // COMMIT was sent: the server may have committed before the
          // connection went. Not retryable; the caller must not assume
          // either outcome.
          throw appError("unavailable", COMMIT_UNKNOWN_MESSAGE, {
            cause: err,
            retryAfterSeconds: 1,
          });
        }
        // The server rolls back a session that ends inside a transaction.
        throw markRetryableTx(e);
      } finally {
        client.removeListener("error", onError);
        // release(err) makes the pool discard the connection instead of
        // lending it out again (it re-attaches its idle listener first).
        client.release(lost ?? broken);
      }
    },
    close: () => pool.end(),
  };
}
