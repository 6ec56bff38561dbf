// pulsebase.platform.v1.DatabaseService: POST /api/db/query and
// /api/db/batch. The token's application decides the database.
import type { ServiceImpl } from "@connectrpc/connect";
import {
  DatabaseService,
  type QueryResponse,
  type StatementResult,
} from "../../../gen/pulsebase/platform/v1/database_pb.js";
import { consumerOf, requestIdOf } from "../../kernel/principal.js";
import type { EngineResult } from "../../infra/libsql/engine-protocol.js";
import { rowToListValue, valueToJson } from "./proto-values.js";
import type { QueryRunner } from "./query-runner.js";
import type { RestJsonPath } from "../../kernel/module.js";

/**
 * The QueryResponse of the results, built as the plain objects create()
 * would return (every field set, `error` only when present) without its
 * reflection: it runs for every answer.
 */
export function response(results: EngineResult[], requestId: string): QueryResponse {
  return {
    $typeName: "pulsebase.platform.v1.QueryResponse",
    results: results.map((r): StatementResult => {
      const out: StatementResult = {
        $typeName: "pulsebase.platform.v1.StatementResult",
        columns: r.columns,
        rows: r.rows.map(rowToListValue),
        rowsRead: r.rowsRead,
        rowsWritten: r.rowsWritten,
      };
      if (r.error !== undefined) out.error = r.error;
      return out;
    }),
    requestId,
  };
}

/**
 * The REST JSON of a QueryResponse, written straight from the results: what
 * the gateway's generic encoding of response() gives, field for field
 * (implicit-presence numbers always, `error` only when set).
 */
export function restResultsJson(results: readonly EngineResult[], requestId: string): string {
  return JSON.stringify({
    results: results.map((r) =>
      r.error !== undefined
        ? { columns: r.columns, rows: r.rows, rows_read: r.rowsRead, rows_written: r.rowsWritten, error: r.error }
        : { columns: r.columns, rows: r.rows, rows_read: r.rowsRead, rows_written: r.rowsWritten },
    ),
    request_id: requestId,
  });
}

/** A statement entry of the plain shape the JSON path takes; anything else goes the generic way. */
function plainStatement(x: unknown): x is { sql: string; params?: unknown } {
  if (typeof x !== "object" || x === null || Array.isArray(x)) return false;
  for (const k in x) if (k !== "sql" && k !== "params") return false;
  return typeof (x as { sql?: unknown }).sql === "string";
}

/** /api/db/* without proto messages (RestJsonPath, src/kernel/module.ts): the same runner with the same plain JSON the generic path would hand it. */
export function createDatabaseJsonPaths(runner: QueryRunner): Record<"query" | "batch", RestJsonPath> {
  return {
    query({ body, appId, consumerId, userId, requestId }) {
      if (!plainStatement(body)) return undefined;
      const input = { sql: body.sql, params: body.params };
      const r = runner.queryNow(appId, input, { caller: { consumerId, userId, appId } });
      return Array.isArray(r) ? restResultsJson(r, requestId) : r.then((x) => restResultsJson(x, requestId));
    },
    async batch({ body, appId, consumerId, userId, requestId }) {
      for (const k in body) if (k !== "statements" && k !== "transaction") return undefined;
      const { statements, transaction } = body;
      if (!Array.isArray(statements) || !statements.every(plainStatement)) return undefined;
      if (transaction !== undefined && typeof transaction !== "boolean") return undefined;
      const entries = statements.map((e) => ({ sql: e.sql, params: e.params }));
      return restResultsJson(await runner.batch(appId, entries, transaction === true, { caller: { consumerId, userId, appId } }), requestId);
    },
  };
}

export function createDatabaseServiceImpl(deps: { runner: QueryRunner }): ServiceImpl<typeof DatabaseService> {
  const { runner } = deps;
  return {
    // Without a promise when the point reader answers at once (queryNow):
    // the transport then writes a PK read in the same turn (docs/database.md).
    query(req, ctx) {
      const { appId, consumerId, userId } = consumerOf(ctx);
      const requestId = requestIdOf(ctx);
      const results = runner.queryNow(appId, { sql: req.sql, params: valueToJson(req.params) }, { caller: { consumerId, userId, appId } });
      return Array.isArray(results) ? response(results, requestId) : results.then((r) => response(r, requestId));
    },
    async batch(req, ctx) {
      const { appId, consumerId, userId } = consumerOf(ctx);
      const statements = req.statements.map((s) => ({ sql: s.sql, params: valueToJson(s.params) }));
      const results = await runner.batch(appId, statements, req.transaction, { caller: { consumerId, userId, appId } });
      return response(results, requestIdOf(ctx));
    },
  };
}
