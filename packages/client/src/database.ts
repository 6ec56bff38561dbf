// SQL over HTTP on the app's linked database: rows as objects typed by the
// caller, and each statement's own error on its result (the HTTP status of
// such an answer stays 200, so it is easy to miss without this). The answer
// has the shape ctx.db gives functions (docs/functions.md), so
// `const { rows } = await db.query(...)` reads the same on both sides.
import type { PulsebaseClient } from "./client.js";
import { StatementError } from "./errors.js";

/** Integers within ±(2^53−1) and floats are numbers, larger integers decimal strings, blobs base64, NULL null. */
export type SqlValue = number | string | null;
/** An array binds `?` in order; an object binds `:name`, `@name` or `$name`. */
export type SqlParams = readonly (SqlValue | boolean)[] | Readonly<Record<string, SqlValue | boolean>>;

export interface Statement {
  sql: string;
  params?: SqlParams;
}

export interface DbResult<T> {
  columns: string[];
  /** Each row as an object keyed by column name. */
  rows: T[];
  /** Each row as the server sent it: values in column order. */
  values: SqlValue[][];
  rowsRead: number;
  rowsWritten: number;
  /** This statement's own error (syntax, constraint); the other results stand. */
  error?: StatementError;
}

/**
 * The last statement's result (`rows`, `columns`, `values`, ...; `error`
 * set when any statement failed: the first such error), with every
 * statement's result in `results`.
 */
export interface DbResponse<T> extends DbResult<T> {
  results: DbResult<T>[];
  requestId: string;
}

export interface Database {
  /** One SQL string (it may hold several statements: one result each). */
  query<T = Record<string, SqlValue>>(sql: string, params?: SqlParams): Promise<DbResponse<T>>;
  /** Several statements; `transaction: true` wraps them in BEGIN/COMMIT and stops at the first failure. */
  batch<T = Record<string, SqlValue>>(statements: Statement[], o?: { transaction?: boolean }): Promise<DbResponse<T>>;
  /** The rows of a single statement; throws its StatementError. */
  rows<T = Record<string, SqlValue>>(sql: string, params?: SqlParams): Promise<T[]>;
}

interface Wire {
  results: { columns: string[]; rows: SqlValue[][]; rows_read: number; rows_written: number; error?: string }[];
  request_id: string;
}

function shape<T>(w: Wire): DbResponse<T> {
  const results = w.results.map((r, i): DbResult<T> => ({
    columns: r.columns,
    values: r.rows,
    rows: r.rows.map((row) => Object.fromEntries(r.columns.map((c, j) => [c, row[j]])) as T),
    rowsRead: r.rows_read,
    rowsWritten: r.rows_written,
    error: r.error === undefined ? undefined : new StatementError(r.error, i, w.request_id),
  }));
  const last = results[results.length - 1] ?? { columns: [], rows: [], values: [], rowsRead: 0, rowsWritten: 0 };
  return { ...last, error: results.find((r) => r.error)?.error, results, requestId: w.request_id };
}

export function createDatabase(client: PulsebaseClient): Database {
  const db: Database = {
    query: (sql, params) => client.request<Wire>("/api/db/query", { body: { sql, params } }).then((r) => shape(r.data)),
    batch: (statements, o = {}) =>
      client.request<Wire>("/api/db/batch", { body: { statements, transaction: o.transaction } }).then((r) => shape(r.data)),
    async rows<T>(sql: string, params?: SqlParams) {
      const r = (await db.query<T>(sql, params)).results[0];
      if (r?.error) throw r.error;
      return r?.rows ?? [];
    },
  };
  return db;
}
