// ctx.db: a function's own libSQL database (docs/functions.md), the database
// module's host capability, run by its query runner: the same checks as
// /api/db (linked database, guard, status), results in the /api/db JSON shape
// (rows_read, rows_written). Refusals are catalogue errors (database_not_linked,
// forbidden_query, database_unavailable, query_error, validation_failed);
// statement-level errors come back in the result's `error`, as on /api/db.
// Each call carries its run's signal down to the database, so what an ended
// run left waiting or running is cancelled.
import { appError } from "../../kernel/errors.js";
import type { HostCapability } from "../../kernel/host-capability.js";
import type { QueryRunner } from "./query-runner.js";

/** One result per executed statement, the same shape as /api/db/query results. */
export interface FunctionDbResult {
  columns: string[];
  rows: unknown[][];
  rows_read: number;
  rows_written: number;
  error?: string;
}

export interface FunctionDbStatement {
  sql: string;
  /** Positional (array) or named (object) parameters, as on /api/db. */
  params?: unknown[] | Record<string, unknown>;
}

/** What ctx.db runs on: the database module's query runner. */
export type FunctionDb = Pick<QueryRunner, "query" | "batch">;

const toResults = (rs: Awaited<ReturnType<QueryRunner["query"]>>) =>
  rs.map((r): FunctionDbResult => {
    const out: FunctionDbResult = { columns: r.columns, rows: r.rows, rows_read: r.rowsRead, rows_written: r.rowsWritten };
    if (r.error !== undefined) out.error = r.error;
    return out;
  });

/**
 * ctx.db.query(sql, params?) and ctx.db.batch([{ sql, params? }], { transaction }) for the calling
 * application only; the runner checks the request's shape as it does /api/db's (sql, params, at
 * most 100 statements).
 */
export function dbCapability(db: FunctionDb): HostCapability {
  return {
    name: "db",
    busyCode: "database_unavailable",
    failureCode: "query_error",
    methods: {
      query: ({ appId, signal }, sql, params) => db.query(appId, { sql: sql as string, params }, { signal }).then(toResults),
      batch({ appId, signal }, statements, opts) {
        if (!Array.isArray(statements) || !statements.every((x) => x !== null && typeof x === "object")) {
          throw appError("validation_failed", "statements must be an array of { sql, params } objects");
        }
        const transaction = !!(opts && (opts as { transaction?: unknown }).transaction);
        return db.batch(appId, statements as FunctionDbStatement[], transaction, { signal }).then(toResults);
      },
    },
  };
}
