// pulsebase.admin.v1.SqlService: operator SQL, the schema and a table
// browser over an application's linked database (operator-sql.ts).
import { create, fromJson, type JsonValue } from "@bufbuild/protobuf";
import { ListValueSchema } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import { SqlResultSchema, SqlService, type TableInfo } from "../../../gen/pulsebase/admin/v1/sql_pb.js";
import { appError } from "../../kernel/errors.js";
import type { EngineResult } from "../../infra/libsql/engine-protocol.js";
import type { OperatorSql } from "./operator-sql.js";
import { quoteIdent as ident } from "../../infra/libsql/sql-tokenizer.js";

const rowsOf = (r: EngineResult) => r.rows.map((row) => fromJson(ListValueSchema, row as JsonValue[]));

function firstOk(results: EngineResult[]): EngineResult[] {
  for (const r of results) if (r.error) throw appError("query_error", r.error);
  return results;
}

/** SQLite string literal. */
const lit = (s: string) => `'${s.replace(/'/g, "''")}'`;
/** SQLite identifier. */

const TABLES_SQL = `SELECT name, type, COALESCE(sql, '') FROM sqlite_schema
  WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%' ORDER BY name`;
const COLUMNS_SQL = `SELECT m.name, p.name, p.type, p."notnull", p.pk, COALESCE(p.dflt_value, '')
  FROM sqlite_schema m JOIN pragma_table_info(m.name) p
  WHERE m.type IN ('table', 'view') AND m.name NOT LIKE 'sqlite_%' ORDER BY m.name, p.cid`;
const INDEXES_SQL = `SELECT m.name, il.name, il."unique", ii.name
  FROM sqlite_schema m JOIN pragma_index_list(m.name) il JOIN pragma_index_info(il.name) ii
  WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' ORDER BY m.name, il.name, ii.seqno`;

export function createSqlServiceImpl(deps: { operator: OperatorSql }): ServiceImpl<typeof SqlService> {
  const { operator } = deps;
  return {
    async runSql(req) {
      const started = performance.now();
      const results = await operator.run(Number(req.appId), req.sql);
      return {
        results: results.map((r) =>
          create(SqlResultSchema, {
            columns: r.columns,
            rows: rowsOf(r),
            rowsRead: BigInt(r.rowsRead),
            rowsWritten: BigInt(r.rowsWritten),
            error: r.error ?? "",
            sql: r.sql.trim(),
          }),
        ),
        durationMs: Math.round(performance.now() - started),
      };
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
      const pageSize = req.pageSize <= 0 ? 50 : Math.min(req.pageSize, 500);
      if (req.offset < 0n) throw appError("validation_failed", "The offset must not be negative.", { fields: { offset: ["must not be negative"] } });
      const appId = Number(req.appId);
      const [exists] = firstOk(await operator.run(appId, `SELECT 1 FROM sqlite_schema WHERE type IN ('table', 'view') AND name = ${lit(req.table)}`));
      if (!exists!.rows.length) throw appError("not_found", `No table or view named ${req.table}.`);
      const [count, page] = firstOk(
        await operator.run(appId, `SELECT count(*) FROM ${ident(req.table)};\nSELECT * FROM ${ident(req.table)} LIMIT ${pageSize} OFFSET ${req.offset}`),
      );
      return { columns: page!.columns, rows: rowsOf(page!), totalRows: BigInt(Number(count!.rows[0]?.[0] ?? 0)) };
    },
  };
}
