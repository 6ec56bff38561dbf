// The one SQL interface every store uses. Two implementations run the same
// SQL: node-postgres (a pool, when DATABASE_URL is set) and PGlite (embedded).
// Driver errors are translated into catalogue errors at this boundary and kept
// only as `cause`.
export interface QueryResult<R> {
  rows: R[];
  rowCount: number;
}

export interface Sql {
  readonly kind: "postgres" | "pglite";
  /**
   * Runs one statement with $1..$n parameters. On PostgreSQL a statement
   * starting with SELECT whose connection is lost is run once more on a
   * fresh connection (pg-sql.ts, isPlainRead): a SELECT must therefore not
   * write. Only this service's own SQL comes here; a function with side
   * effects called from a SELECT must be added to pg-sql.ts's list.
   */
  query<R = Record<string, unknown>>(text: string, params?: readonly unknown[]): Promise<QueryResult<R>>;
  /** Runs a script of several statements without parameters (migrations). */
  exec(text: string): Promise<void>;
  /** Runs fn inside BEGIN/COMMIT on one connection; rolls back when fn throws. */
  transaction<T>(fn: (tx: Sql) => Promise<T>): Promise<T>;
  close(): Promise<void>;
  /** Connection pool counts, for metrics (node-postgres; PGlite has no pool). */
  poolStats?(): { total: number; idle: number; waiting: number };
  /** The pool's connection limit (node-postgres); unset when there is no pool (PGlite, a transaction's connection). */
  readonly maxConnections?: number;
}

/**
 * What a failed statement means to its caller, decided where the driver's
 * error is translated (pg-errors.ts), so callers never read driver codes:
 * - "retry": nothing was committed (deadlock, serialization failure, or the
 *   connection was lost before COMMIT); running it again is safe.
 * - "refused": the database refused the data itself (a data exception or an
 *   integrity violation); the same statement fails the same way again.
 * - "timeout": the statement ran past its statement_timeout.
 */
export interface StorageFailure {
  kind: "retry" | "refused" | "timeout";
  /** The driver's code (SQLSTATE), for messages only. */
  code: string;
}

const failures = new WeakMap<object, StorageFailure>();

/** Records what a translated error means (pg-errors.ts, pg-sql.ts). */
export function markStorageFailure<E extends object>(err: E, failure: StorageFailure): E {
  failures.set(err, failure);
  return err;
}

/** What a failed Sql call means, when the storage layer knows. */
export function storageFailure(err: unknown): StorageFailure | undefined {
  return typeof err === "object" && err !== null ? failures.get(err) : undefined;
}
