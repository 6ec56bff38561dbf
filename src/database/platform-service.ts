// pulsebase.platform.v1.DatabaseService: POST /api/db/query and
// /api/db/batch. The token's application decides the database.
import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import {
  DatabaseService,
  QueryResponseSchema,
  StatementResultSchema,
  type QueryResponse,
} from "../../gen/pulsebase/platform/v1/database_pb.js";
import { consumerOf, requestIdOf } from "../internal/principal.js";
import type { EngineResult } from "./engine-protocol.js";
import { rowToListValue, valueToJson } from "./proto-values.js";
import type { QueryRunner } from "./query-runner.js";

function response(results: EngineResult[], requestId: string): QueryResponse {
  return create(QueryResponseSchema, {
    requestId,
    results: results.map((r) =>
      create(StatementResultSchema, {
        columns: r.columns,
        rows: r.rows.map(rowToListValue),
        rowsRead: r.rowsRead,
        rowsWritten: r.rowsWritten,
        ...(r.error !== undefined ? { error: r.error } : {}),
      }),
    ),
  });
}

export function createDatabaseServiceImpl(deps: { runner: QueryRunner }): ServiceImpl<typeof DatabaseService> {
  const { runner } = deps;
  return {
    async query(req, ctx) {
      const { appId } = consumerOf(ctx);
      const results = await runner.query(appId, { sql: req.sql, params: valueToJson(req.params) });
      return response(results, requestIdOf(ctx));
    },
    async batch(req, ctx) {
      const { appId } = consumerOf(ctx);
      const statements = req.statements.map((s) => ({ sql: s.sql, params: valueToJson(s.params) }));
      const results = await runner.batch(appId, statements, req.transaction);
      return response(results, requestIdOf(ctx));
    },
  };
}
