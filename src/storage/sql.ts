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
  /** Runs one statement with $1..$n parameters. */
  query<R = Record<string, unknown>>(text: string, params?: readonly unknown[]): Promise<QueryResult<R>>;
  /** Runs a script of several statements without parameters (migrations). */
  exec(text: string): Promise<void>;
  /** Runs fn inside BEGIN/COMMIT on one connection; rolls back when fn throws. */
  transaction<T>(fn: (tx: Sql) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}
