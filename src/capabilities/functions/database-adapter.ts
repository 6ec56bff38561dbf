// FunctionDb over the database module's query runner (src/capabilities/database): the
// same checks as /api/db (linked database, guard, status), results in the
// /api/db JSON shape (rows_read, rows_written).
import type { QueryRunner } from "../database/query-runner.js";
import type { FunctionDb, FunctionDbResult } from "./function-db.js";

type RunnerResult = Awaited<ReturnType<QueryRunner["query"]>>[number];

function toResult(r: RunnerResult): FunctionDbResult {
  const out: FunctionDbResult = { columns: r.columns, rows: r.rows as unknown[][], rows_read: r.rowsRead, rows_written: r.rowsWritten };
  if (r.error !== undefined) out.error = r.error;
  return out;
}

export function functionDbFromQueryRunner(runner: Pick<QueryRunner, "query" | "batch">): FunctionDb {
  return {
    async query(appId, sql, params, opts) {
      return (await runner.query(appId, { sql, params }, opts)).map(toResult);
    },
    async batch(appId, statements, { transaction, signal }) {
      return (await runner.batch(appId, statements, transaction, { signal })).map(toResult);
    },
  };
}
