// pulsebase.admin.v1.SqlService: operator SQL (paged reads), the schema, the
// table editor (table-editor.ts) and the SQL editor's history and saved
// queries (sql-query-store.ts) over an application's linked database
// (operator-sql.ts).
import { create, fromJson, type JsonValue } from "@bufbuild/protobuf";
import { ListValueSchema, timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { SqlResultSchema, SqlService, type SavedQuery, type TableInfo } from "../../../gen/pulsebase/admin/v1/sql_pb.js";
import { appError } from "../../kernel/errors.js";
import type { EngineResult, EngineValue } from "../../infra/libsql/engine-protocol.js";
import type { OperatorResult, OperatorSql } from "./operator-sql.js";
import { pageOffset, pageToken, sqlPageSize } from "./sql-paging.js";
import { SAVED_NAME_MAX, type SavedQueryRow, type SqlQueryStore } from "./sql-query-store.js";
import { createTableEditor, type RowChanged } from "./table-editor.js";

const listOf = (row: EngineValue[]) => fromJson(ListValueSchema, row as JsonValue[]);
const rowsOf = (r: { rows: EngineValue[][] }) => r.rows.map(listOf);

function sqlResult(r: OperatorResult) {
  return create(SqlResultSchema, {
    columns: r.columns,
    rows: rowsOf(r),
    rowsRead: BigInt(r.rowsRead),
    rowsWritten: BigInt(r.rowsWritten),
    error: r.error ?? "",
    sql: r.sql.trim(),
    nextPageToken: r.nextOffset ? pageToken(r.sql, r.nextOffset) : "",
  });
}

const savedOut = (q: SavedQueryRow) =>
  ({ id: BigInt(q.id), name: q.name, sql: q.sql, createdAt: timestampFromDate(q.createdAt), updatedAt: timestampFromDate(q.updatedAt) }) as SavedQuery;

const changeOut = (c: RowChanged) => ({ id: BigInt(c.rowid), rowsWritten: BigInt(c.rowsWritten), columns: c.columns, row: c.row ? listOf(c.row) : undefined });

function firstOk(results: EngineResult[]): EngineResult[] {
  for (const r of results) if (r.error) throw appError("query_error", r.error);
  return results;
}


const TABLES_SQL = `SELECT name, type, COALESCE(sql, '') FROM sqlite_schema
  WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%' ORDER BY name`;
const COLUMNS_SQL = `SELECT m.name, p.name, p.type, p."notnull", p.pk, COALESCE(p.dflt_value, '')
  FROM sqlite_schema m JOIN pragma_table_info(m.name) p
  WHERE m.type IN ('table', 'view') AND m.name NOT LIKE 'sqlite_%' ORDER BY m.name, p.cid`;
const INDEXES_SQL = `SELECT m.name, il.name, il."unique", ii.name
  FROM sqlite_schema m JOIN pragma_index_list(m.name) il JOIN pragma_index_info(il.name) ii
  WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' ORDER BY m.name, il.name, ii.seqno`;

export interface SqlServiceDeps {
  operator: OperatorSql;
  /** History and saved queries; without it those calls answer failed_precondition. */
  queries?: SqlQueryStore;
  /** The console account making the call (0 for the operator token), from the admin listener's policy. */
  callerId?: (ctx: HandlerContext) => number;
}

export function createSqlServiceImpl(deps: SqlServiceDeps): ServiceImpl<typeof SqlService> {
  const { operator } = deps;
  const editor = createTableEditor(operator);
  /** The account whose history and saved queries these are: console users only. */
  const account = (ctx: HandlerContext): { store: SqlQueryStore; userId: number } => {
    const userId = deps.callerId?.(ctx) ?? 0;
    if (!deps.queries || !userId) throw appError("failed_precondition", "History and saved queries are kept for console accounts, not for the operator token.");
    return { store: deps.queries, userId };
  };
  return {
    async runSql(req, ctx) {
      const started = performance.now();
      const pageSize = sqlPageSize(req.pageSize);
      let results: OperatorResult[] | undefined;
      let failure: unknown;
      try {
        results = await operator.run(Number(req.appId), req.sql, { pageSize });
      } catch (e) {
        failure = e;
      }
      const durationMs = Math.round(performance.now() - started);
      // The history keeps what was run, failures included; it never fails the run.
      const userId = deps.callerId?.(ctx) ?? 0;
      if (deps.queries && userId && req.sql.trim()) {
        const error = failure ? (failure instanceof Error ? failure.message : String(failure)) : (results?.find((r) => r.error)?.error ?? "");
        await deps.queries.addHistory(userId, Number(req.appId), req.sql, durationMs, error).catch(() => {});
      }
      if (failure) throw failure;
      return { results: results!.map(sqlResult), durationMs };
    },
    async readSqlPage(req) {
      const pageSize = sqlPageSize(req.pageSize);
      const offset = pageOffset(req.sql, req.pageToken);
      const [r] = await operator.run(Number(req.appId), req.sql, { pageSize, offset });
      return sqlResult(r!);
    },
    async insertRow(req) {
      return changeOut(await editor.insert(Number(req.appId), req.table, req.values ?? {}));
    },
    async updateRow(req) {
      return changeOut(await editor.update(Number(req.appId), req.table, req.key ?? {}, req.values ?? {}));
    },
    async deleteRow(req) {
      return changeOut(await editor.remove(Number(req.appId), req.table, req.key ?? {}));
    },
    async listSqlHistory(req, ctx) {
      const { store, userId } = account(ctx);
      const entries = await store.history(userId, Number(req.appId));
      return { entries: entries.map((e) => ({ id: BigInt(e.id), sql: e.sql, ranAt: timestampFromDate(e.ranAt), durationMs: e.durationMs, error: e.error })) };
    },
    async listSavedQueries(req, ctx) {
      const { store, userId } = account(ctx);
      return { queries: (await store.saved(userId, Number(req.appId))).map(savedOut) };
    },
    async saveQuery(req, ctx) {
      const { store, userId } = account(ctx);
      const name = req.name.trim();
      if (!name || name.length > SAVED_NAME_MAX) throw appError("validation_failed", `The name must be 1 to ${SAVED_NAME_MAX} characters.`, { fields: { name: [`1 to ${SAVED_NAME_MAX} characters.`] } });
      if (!req.sql.trim() || req.sql.length > 100_000) throw appError("validation_failed", "The sql must be 1 to 100000 characters.", { fields: { sql: ["1 to 100000 characters."] } });
      return savedOut(await store.save(userId, Number(req.appId), name, req.sql));
    },
    async deleteSavedQuery(req, ctx) {
      const { store, userId } = account(ctx);
      if (!(await store.deleteSaved(userId, Number(req.appId), Number(req.id)))) throw appError("not_found", "No saved query with this id.");
      return {};
    },
    async getSchema(req) {
      const [tables, columns, indexes] = firstOk(await operator.run(Number(req.appId), `${TABLES_SQL};\n${COLUMNS_SQL};\n${INDEXES_SQL}`));
      const byName = new Map<string, TableInfo>();
      const out: TableInfo[] = [];
      for (const [name, type, sql] of tables!.rows) {
        const t = { name: String(name), type: String(type), sql: String(sql), columns: [], indexes: [] } as unknown as TableInfo;
        byName.set(t.name, t);
        out.push(t);
      }
      for (const [table, name, type, notNull, pk, dflt] of columns!.rows) {
        byName.get(String(table))?.columns.push({ name: String(name), type: String(type), notNull: Number(notNull) === 1, primaryKey: Number(pk) > 0, defaultValue: String(dflt) } as never);
      }
      for (const [table, name, unique, column] of indexes!.rows) {
        const t = byName.get(String(table));
        if (!t) continue;
        let idx = t.indexes.find((i) => i.name === String(name));
        if (!idx) {
          idx = { name: String(name), unique: Number(unique) === 1, columns: [] } as never;
          t.indexes.push(idx!);
        }
        idx!.columns.push(String(column));
      }
      return { tables: out };
    },
    async browseTable(req) {
      const page = await editor.browse(Number(req.appId), {
        table: req.table,
        pageSize: req.pageSize,
        offset: Number(req.offset),
        orderBy: req.orderBy,
        descending: req.descending,
        filters: req.filters.map((f) => ({ column: f.column, op: f.op, value: f.value })),
        search: req.search,
      });
      return {
        columns: page.columns,
        rows: rowsOf(page),
        totalRows: BigInt(page.total),
        keyColumns: page.shape.key,
        keys: page.keys.map(listOf),
        editable: page.shape.editable,
      };
    },
  };
}
