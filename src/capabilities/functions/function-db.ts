// What a function's `db` object calls on the host. Implemented by the
// database module (src/capabilities/database, SQL over HTTP on the app's libSQL database)
// and injected into createFunctionsModule; the functions module never talks
// to libSQL itself. Errors are thrown as catalogue errors (database_not_linked,
// forbidden_query, database_unavailable, query_error, validation_failed);
// statement-level errors come back in the result's `error`, as on /api/db.

/** One result per executed statement, the same shape as /api/db/query results. */
export interface FunctionDbResult {
  columns: string[];
  rows: unknown[][];
  rows_read: number;
  rows_written: number;
  error?: string;
}

/** Positional (array) or named (object) parameters, as on /api/db. */
export type FunctionDbParams = unknown[] | Record<string, unknown>;

export interface FunctionDbStatement {
  sql: string;
  params?: FunctionDbParams;
}

/** Ties a call to the run that made it. */
export interface FunctionDbCallOptions {
  /** Fires when the run ends: the call is dropped if still waiting for the database, stopped if running. */
  signal?: AbortSignal;
}

export interface FunctionDb {
  query(appId: number, sql: string, params?: FunctionDbParams, opts?: FunctionDbCallOptions): Promise<FunctionDbResult[]>;
  batch(appId: number, statements: FunctionDbStatement[], opts: { transaction: boolean } & FunctionDbCallOptions): Promise<FunctionDbResult[]>;
}
