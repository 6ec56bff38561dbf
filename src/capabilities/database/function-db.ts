// ctx.db: a function's own libSQL database (docs/functions.md), the database
// module's host capability, run by its query runner: the same checks as
// /api/db (linked database, guard, status), results in the SDK's shape (rows
// as objects by column name, the raw rows in `values`; docs/functions.md), so
// `const { rows } = await ctx.db.query(...)` reads the same in a function as in
// an app. Refusals are catalogue errors (database_not_linked, forbidden_query,
// database_unavailable, query_error, validation_failed); statement-level errors
// come back in the result's `error`, as on /api/db.
// Each call carries its run's signal down to the database, so what an ended
// run left waiting or running is cancelled.
import { appError } from "../../kernel/errors.js";
import type { HostCall, HostCapability } from "../../kernel/host-capability.js";
import type { AccessCaller } from "../../infra/libsql/access-rules.js";
import type { QueryRunner } from "./query-runner.js";

/** One result per executed statement in the /api/db/query JSON shape (the service's own batches: change capture). */
export interface FunctionDbResult {
  columns: string[];
  rows: unknown[][];
  rows_read: number;
  rows_written: number;
  error?: string;
}

/** One statement's result as ctx.db gives it: the shape of the SDK's DbResult (packages/client/src/database.ts). */
export interface CtxDbResult {
  columns: string[];
  /** Each row as an object keyed by column name (a repeated name keeps its last value: see `values`). */
  rows: Record<string, unknown>[];
  /** Each row as the database sent it: values in column order. */
  values: unknown[][];
  rowsRead: number;
  rowsWritten: number;
  /** This statement's own error (syntax, constraint); the other results stand. */
  error?: string;
}

/**
 * What ctx.db.query and ctx.db.batch answer: the last statement's result,
 * `error` set when any statement failed (the first such error), and every
 * statement's result in `results`.
 */
export interface CtxDbAnswer extends CtxDbResult {
  results: CtxDbResult[];
}

export interface FunctionDbStatement {
  sql: string;
  /** Positional (array) or named (object) parameters, as on /api/db. */
  params?: unknown[] | Record<string, unknown>;
}

/** What ctx.db runs on: the database module's query runner. */
export type FunctionDb = Pick<QueryRunner, "query" | "batch">;

function toResult(r: Awaited<ReturnType<QueryRunner["query"]>>[number]): CtxDbResult {
  const rows = r.rows.map((row) => {
    // No prototype: a column named __proto__ or constructor is just a key.
    const o: Record<string, unknown> = Object.create(null);
    r.columns.forEach((c, i) => (o[c] = row[i]));
    return o;
  });
  const out: CtxDbResult = { columns: r.columns, rows, values: r.rows, rowsRead: r.rowsRead, rowsWritten: r.rowsWritten };
  if (r.error !== undefined) out.error = r.error;
  return out;
}

function toAnswer(rs: Awaited<ReturnType<QueryRunner["query"]>>): CtxDbAnswer {
  const results = rs.map(toResult);
  const last = results[results.length - 1] ?? { columns: [], rows: [], values: [], rowsRead: 0, rowsWritten: 0 };
  const answer: CtxDbAnswer = { ...last, results };
  const error = results.find((r) => r.error !== undefined)?.error;
  if (error === undefined) delete answer.error;
  else answer.error = error;
  return answer;
}

/**
 * ctx.db.query(sql, params?) and ctx.db.batch([{ sql, params? }], { transaction }) (each answering a
 * CtxDbAnswer) for the calling
 * application only; the runner checks the request's shape as it does /api/db's (sql, params, at
 * most 100 statements).
 */
export function dbCapability(db: FunctionDb): HostCapability {
  function batch({ appId, signal }: HostCall, statements: unknown, opts: unknown, caller?: AccessCaller) {
    if (!Array.isArray(statements) || !statements.every((x) => x !== null && typeof x === "object")) {
      throw appError("validation_failed", "statements must be an array of { sql, params } objects");
    }
    const transaction = !!(opts && (opts as { transaction?: unknown }).transaction);
    return db.batch(appId, statements as FunctionDbStatement[], transaction, { signal, ...(caller ? { caller } : {}) }).then(toAnswer);
  }
  return {
    name: "db",
    busyCode: "database_unavailable",
    failureCode: "query_error",
    methods: {
      // the operator's rights: a function is the application's own code
      query: ({ appId, signal }, sql, params) => db.query(appId, { sql: sql as string, params }, { signal }).then(toAnswer),
      batch: (call, statements, opts) => batch(call, statements, opts),
      // ctx.db.asConsumer(): the run's consumer's rights, under the access rules as its device would run
      queryAsConsumer: (call, sql, params) => db.query(call.appId, { sql: sql as string, params }, { signal: call.signal, caller: callerOf(call) }).then(toAnswer),
      batchAsConsumer: (call, statements, opts) => batch(call, statements, opts, callerOf(call)),
    },
  };
}

function callerOf(call: HostCall): AccessCaller {
  if (!call.consumer) {
    throw appError("failed_precondition", "ctx.db.asConsumer() needs the consumer of the run: only a run started by an HTTP trigger with a consumer token has one");
  }
  return { consumerId: call.consumer.consumerId, userId: call.consumer.userId, appId: call.appId };
}
