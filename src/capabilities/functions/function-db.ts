// ctx.db: a function's own libSQL database (docs/functions.md), as a host
// capability of the sandbox, run by the database module's query runner
// (src/capabilities/database): the same checks as /api/db (linked database,
// guard, status), results in the /api/db JSON shape (rows_read,
// rows_written). Refusals are catalogue errors (database_not_linked,
// forbidden_query, database_unavailable, query_error, validation_failed);
// statement-level errors come back in the result's `error`, as on /api/db.
// Each call carries its run's signal down to the database, so what an ended
// run left waiting or running is cancelled (issue 15 point 1).
import { appError } from "../../kernel/errors.js";
import type { HostCapability } from "../../infra/sandbox/types.js";
import type { QueryRunner } from "../database/query-runner.js";

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

/** What ctx.db runs on: the database module's query runner. */
export type FunctionDb = Pick<QueryRunner, "query" | "batch">;

const toResults = (rs: Awaited<ReturnType<QueryRunner["query"]>>) =>
  rs.map((r): FunctionDbResult => {
    const out: FunctionDbResult = { columns: r.columns, rows: r.rows, rows_read: r.rowsRead, rows_written: r.rowsWritten };
    if (r.error !== undefined) out.error = r.error;
    return out;
  });

const MAX_SQL_CHARS = 100_000;
const MAX_STATEMENTS = 100;

const bad = (message: string) => appError("validation_failed", message);

function checkSql(v: unknown, field: string): string {
  if (typeof v !== "string" || v.trim() === "") throw bad(`${field} must be a non-empty string`);
  if (v.length > MAX_SQL_CHARS) throw bad(`${field} is longer than ${MAX_SQL_CHARS} characters`);
  return v;
}

function checkParams(v: unknown, field: string): FunctionDbParams | undefined {
  if (v === null || v === undefined) return undefined;
  if (Array.isArray(v)) return v;
  if (typeof v === "object") return v as Record<string, unknown>;
  throw bad(`${field} must be an array or an object`);
}

/** ctx.db.query(sql, params?) and ctx.db.batch([{ sql, params? }], { transaction }) for the calling application only. */
export function dbCapability(db: FunctionDb): HostCapability {
  return {
    name: "db",
    busyCode: "database_unavailable",
    failureCode: "query_error",
    methods: {
      query: ({ appId, signal }, sql, params) => db.query(appId, { sql: checkSql(sql, "sql"), params: checkParams(params, "params") }, { signal }).then(toResults),
      batch({ appId, signal }, list, opts) {
        if (!Array.isArray(list) || list.length === 0) throw bad("statements must be a non-empty array");
        if (list.length > MAX_STATEMENTS) throw bad(`at most ${MAX_STATEMENTS} statements in a batch`);
        const statements = list.map((s: unknown, i): FunctionDbStatement => {
          if (s === null || typeof s !== "object") throw bad(`statements.${i} must be an object { sql, params }`);
          const st = s as { sql?: unknown; params?: unknown };
          const params = checkParams(st.params, `statements.${i}.params`);
          return params === undefined ? { sql: checkSql(st.sql, `statements.${i}.sql`) } : { sql: checkSql(st.sql, `statements.${i}.sql`), params };
        });
        const transaction = !!(opts && (opts as { transaction?: unknown }).transaction);
        return db.batch(appId, statements, transaction, { signal }).then(toResults);
      },
    },
  };
}
