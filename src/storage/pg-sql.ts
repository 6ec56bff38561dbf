// Sql over node-postgres with a pool (the scale-out backend).
import pg from "pg";
import type { QueryResult, Sql } from "./sql.js";
import { translatePgError } from "./pg-errors.js";

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
}

export function createPgSql(opts: PgSqlOptions): Sql {
  const options: string[] = [];
  if (opts.schema) options.push(`-c search_path=${opts.schema},public`);
  if (opts.statementTimeoutMs) options.push(`-c statement_timeout=${opts.statementTimeoutMs}`);
  const pool = new pg.Pool({
    connectionString: opts.connectionString,
    max: opts.max ?? 10,
    options: options.length ? options.join(" ") : undefined,
    connectionTimeoutMillis: 5000,
    idleTimeoutMillis: 30000,
  });
  // An idle client losing its connection must not crash the process.
  pool.on("error", () => {});
  return wrapPool(pool);
}

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
    async query<R>(text: string, params?: readonly unknown[]): Promise<QueryResult<R>> {
      try {
        const r = await pool.query(statement(text, params as unknown[]));
        return { rows: r.rows as R[], rowCount: r.rowCount ?? 0 };
      } catch (err) {
        throw translatePgError(err);
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
      let broken = false;
      try {
        await client.query("BEGIN");
        const out = await fn(wrapClient(client));
        await client.query("COMMIT");
        return out;
      } catch (err) {
        try {
          await client.query("ROLLBACK");
        } catch {
          broken = true;
        }
        throw translatePgError(err);
      } finally {
        client.release(broken);
      }
    },
    close: () => pool.end(),
  };
}
