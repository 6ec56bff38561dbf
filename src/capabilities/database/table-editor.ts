// The console's table editor over an application's linked database: pages
// of a table's rows sorted, filtered and searched, and row inserts, updates
// and deletes. Every statement is built here from the table's own column
// names (read from the database, then quoted) and the caller's values are
// only ever bound as arguments, never put into the SQL text. A row is named
// by its primary key, or by its rowid in a table without one.
import { appError } from "../../kernel/errors.js";
import type { EngineResult, EngineValue } from "../../infra/libsql/engine-protocol.js";
import { quoteIdent as ident } from "../../infra/libsql/sql-tokenizer.js";
import type { BuiltStatement, OperatorSql } from "./operator-sql.js";

export const MAX_FILTERS = 10;
export const MAX_FILTER_CHARS = 1000;
export const MAX_BROWSE_PAGE = 500;

export interface TableShape {
  name: string;
  type: "table" | "view";
  withoutRowid: boolean;
  columns: string[];
  /**
   * Primary key columns in key order; for a rowid table without one, the
   * first of rowid, oid and _rowid_ that no column of the table shadows (a
   * column named rowid would make a bare `rowid` name the column, and a
   * delete by it hit every row with that value); [] for a view, or a table
   * whose columns shadow all three.
   */
  key: string[];
  /** How this table's rowid is named (rowid, oid or _rowid_: the first no column shadows); unset without a rowid. */
  rowidAlias?: string;
  /** The editor may change its rows. */
  editable: boolean;
}

export interface Filter {
  column: string;
  op: string;
  value: string;
}

export interface BrowseRequest {
  table: string;
  pageSize: number;
  offset: number;
  orderBy: string;
  descending: boolean;
  filters: Filter[];
  search: string;
}

export interface BrowsePage {
  shape: TableShape;
  columns: string[];
  rows: EngineValue[][];
  keys: EngineValue[][];
  total: number;
}

export interface RowChanged {
  rowid: number;
  rowsWritten: number;
  columns: string[];
  row: EngineValue[] | undefined;
}

/** The names SQLite answers with a rowid table's rowid, unless a column has taken the name. */
const ROWID_ALIASES = ["rowid", "oid", "_rowid_"];

const OPS: Record<string, string> = { eq: "=", ne: "!=", lt: "<", le: "<=", gt: ">", ge: ">=", like: "LIKE", is_null: "IS NULL", not_null: "IS NOT NULL" };

function check(results: EngineResult[], field = "sql"): EngineResult[] {
  for (const r of results) {
    if (r.error) {
      // A constraint, type or syntax refusal from the database is the caller's data: a 4xx naming the field.
      throw appError("validation_failed", r.error, { fields: { [field]: [r.error] } });
    }
  }
  return results;
}

const likeEscape = (s: string) => s.replace(/[\\%_]/g, (c) => `\\${c}`);

/** A JSON value of a request as a bound argument: booleans as 1/0, objects and arrays as their JSON text. */
export function argOf(v: unknown): EngineValue {
  if (v === null || v === undefined) return null;
  if (typeof v === "number" || typeof v === "string") return v;
  if (typeof v === "boolean") return v ? 1 : 0;
  return JSON.stringify(v);
}

export function createTableEditor(operator: OperatorSql) {
  async function shapeOf(appId: number, table: string): Promise<TableShape> {
    if (!table) throw appError("validation_failed", "The table is required.", { fields: { table: ["Required."] } });
    const [info, cols] = check(
      await operator.runBuilt(appId, [
        {
          sql: `SELECT m.type, COALESCE((SELECT l.wr FROM pragma_table_list AS l WHERE l.schema = 'main' AND l.name = m.name), 0)
                FROM sqlite_schema AS m WHERE m.type IN ('table', 'view') AND m.name = ?`,
          args: [table],
        },
        { sql: "SELECT name, pk FROM pragma_table_info(?) ORDER BY cid", args: [table] },
      ]),
    );
    const row = info!.rows[0];
    if (!row) throw appError("not_found", `No table or view named ${table}.`);
    const type = row[0] === "view" ? "view" : "table";
    const columns = cols!.rows.map((r) => String(r[0]));
    const pk = cols!.rows.filter((r) => Number(r[1]) > 0).sort((a, b) => Number(a[1]) - Number(b[1])).map((r) => String(r[0]));
    const withoutRowid = Number(row[1]) === 1;
    const taken = new Set(columns.map((c) => c.toLowerCase()));
    const rowidAlias = type === "view" || withoutRowid ? undefined : ROWID_ALIASES.find((a) => !taken.has(a));
    const key = type === "view" ? [] : pk.length ? pk : rowidAlias ? [rowidAlias] : [];
    const lower = table.toLowerCase();
    const editable = type === "table" && key.length > 0 && !lower.startsWith("sqlite_") && !lower.startsWith("_pulsebase_");
    return { name: table, type, withoutRowid, columns, key, editable, ...(rowidAlias ? { rowidAlias } : {}) };
  }

  const isRowid = (shape: TableShape, k: string) => !shape.columns.some((c) => c.toLowerCase() === k.toLowerCase()) && k === shape.rowidAlias;
  const keySql = (shape: TableShape) => shape.key.map((k) => (isRowid(shape, k) ? k : ident(k)));

  function where(shape: TableShape, req: Pick<BrowseRequest, "filters" | "search">): { sql: string; args: EngineValue[] } {
    if (req.filters.length > MAX_FILTERS) throw appError("validation_failed", `At most ${MAX_FILTERS} filters.`, { fields: { filters: [`At most ${MAX_FILTERS}.`] } });
    const parts: string[] = [];
    const args: EngineValue[] = [];
    req.filters.forEach((f, i) => {
      if (!shape.columns.includes(f.column)) throw appError("validation_failed", `No column ${f.column} in ${shape.name}.`, { fields: { [`filters.${i}.column`]: ["No such column."] } });
      const op = Object.hasOwn(OPS, f.op) ? OPS[f.op] : undefined;
      if (!op) throw appError("validation_failed", `Unknown filter operator ${f.op}.`, { fields: { [`filters.${i}.op`]: [`One of ${Object.keys(OPS).join(", ")}.`] } });
      if (f.value.length > MAX_FILTER_CHARS) throw appError("validation_failed", "The filter value is too long.", { fields: { [`filters.${i}.value`]: [`At most ${MAX_FILTER_CHARS} characters.`] } });
      if (op.startsWith("IS")) parts.push(`${ident(f.column)} ${op}`);
      else {
        parts.push(`${ident(f.column)} ${op} ?`);
        args.push(f.value);
      }
    });
    const term = req.search.trim();
    if (term) {
      if (term.length > MAX_FILTER_CHARS) throw appError("validation_failed", "The search is too long.", { fields: { search: [`At most ${MAX_FILTER_CHARS} characters.`] } });
      parts.push(`(${shape.columns.map((c) => `CAST(${ident(c)} AS TEXT) LIKE ? ESCAPE '\\'`).join(" OR ") || "0"})`);
      for (let i = 0; i < shape.columns.length; i++) args.push(`%${likeEscape(term)}%`);
    }
    return { sql: parts.length ? ` WHERE ${parts.join(" AND ")}` : "", args };
  }

  /** The row's key as bound arguments, checked against the table's key columns. */
  function keyMatch(shape: TableShape, key: Record<string, unknown>): { sql: string; args: EngineValue[] } {
    if (!shape.key.length) throw appError("failed_precondition", `${shape.name} is a view: its rows cannot be edited.`);
    const missing = shape.key.filter((k) => !Object.hasOwn(key, k));
    const extra = Object.keys(key).filter((k) => !shape.key.includes(k));
    if (missing.length || extra.length) {
      throw appError("validation_failed", `The key must name exactly ${shape.key.join(", ")}.`, { fields: { key: [`Expected ${shape.key.join(", ")}.`] } });
    }
    return { sql: shape.key.map((k) => `${isRowid(shape, k) ? k : ident(k)} IS ?`).join(" AND "), args: shape.key.map((k) => argOf(key[k])) };
  }

  function assignments(shape: TableShape, values: Record<string, unknown>): { columns: string[]; args: EngineValue[] } {
    const columns = Object.keys(values);
    const unknown = columns.filter((c) => !shape.columns.includes(c));
    if (unknown.length) {
      throw appError("validation_failed", `No column ${unknown.join(", ")} in ${shape.name}.`, { fields: Object.fromEntries(unknown.map((c) => [`values.${c}`, ["No such column."]])) });
    }
    return { columns, args: columns.map((c) => argOf(values[c])) };
  }

  async function editable(appId: number, table: string): Promise<TableShape> {
    const shape = await shapeOf(appId, table);
    if (!shape.editable) {
      throw appError("forbidden_query", shape.type === "view" ? `${table} is a view: its rows cannot be edited.` : `${table} belongs to the service: its rows cannot be edited.`);
    }
    return shape;
  }

  /** RETURNING the rowid first (when the table has one), then the row. */
  const returning = (shape: TableShape) => (shape.rowidAlias ? ` RETURNING ${shape.rowidAlias}, *` : " RETURNING 0, *");

  async function change(appId: number, shape: TableShape, stmt: BuiltStatement, field: string): Promise<RowChanged> {
    const [r] = check(await operator.runBuilt(appId, [stmt]), field);
    const row = r!.rows[0];
    return { rowid: row ? Number(row[0]) || 0 : 0, rowsWritten: r!.rowsWritten || r!.rows.length, columns: r!.columns.slice(1), row: row?.slice(1) };
  }

  return {
    shapeOf,
    async browse(appId: number, req: BrowseRequest): Promise<BrowsePage> {
      if (req.offset < 0) throw appError("validation_failed", "The offset must not be negative.", { fields: { offset: ["must not be negative"] } });
      const pageSize = req.pageSize <= 0 ? 50 : Math.min(req.pageSize, MAX_BROWSE_PAGE);
      const shape = await shapeOf(appId, req.table);
      if (req.orderBy && !shape.columns.includes(req.orderBy)) throw appError("validation_failed", `No column ${req.orderBy} in ${shape.name}.`, { fields: { order_by: ["No such column."] } });
      const w = where(shape, req);
      const keys = keySql(shape);
      const dir = req.descending ? " DESC" : "";
      // The key breaks ties, so pages of a sort with repeated values neither repeat nor skip rows.
      const order = [...(req.orderBy ? [`${ident(req.orderBy)}${dir}`] : []), ...keys.map((k) => `${k}${req.orderBy ? "" : dir}`)];
      const from = ident(shape.name);
      const [count, page] = check(
        await operator.runBuilt(appId, [
          { sql: `SELECT count(*) FROM ${from}${w.sql}`, args: w.args },
          {
            sql: `SELECT ${[...keys, "*"].join(", ")} FROM ${from}${w.sql}${order.length ? ` ORDER BY ${order.join(", ")}` : ""} LIMIT ? OFFSET ?`,
            args: [...w.args, pageSize, req.offset],
          },
        ]),
        req.search ? "search" : "filters",
      );
      const k = keys.length;
      return {
        shape,
        columns: page!.columns.slice(k),
        rows: page!.rows.map((r) => r.slice(k)),
        keys: page!.rows.map((r) => r.slice(0, k)),
        total: Number(count!.rows[0]?.[0] ?? 0),
      };
    },
    async insert(appId: number, table: string, values: Record<string, unknown>): Promise<RowChanged> {
      const shape = await editable(appId, table);
      const a = assignments(shape, values);
      const sql = a.columns.length
        ? `INSERT INTO ${ident(shape.name)} (${a.columns.map(ident).join(", ")}) VALUES (${a.columns.map(() => "?").join(", ")})`
        : `INSERT INTO ${ident(shape.name)} DEFAULT VALUES`;
      return change(appId, shape, { sql: sql + returning(shape), args: a.args }, "values");
    },
    async update(appId: number, table: string, key: Record<string, unknown>, values: Record<string, unknown>): Promise<RowChanged> {
      const shape = await editable(appId, table);
      const m = keyMatch(shape, key);
      const a = assignments(shape, values);
      if (!a.columns.length) throw appError("validation_failed", "Nothing to change.", { fields: { values: ["Name at least one column."] } });
      const sql = `UPDATE ${ident(shape.name)} SET ${a.columns.map((c) => `${ident(c)} = ?`).join(", ")} WHERE ${m.sql}`;
      const out = await change(appId, shape, { sql: sql + returning(shape), args: [...a.args, ...m.args] }, "values");
      if (!out.row) throw appError("not_found", "No row has this key (it may have been deleted).");
      return out;
    },
    async remove(appId: number, table: string, key: Record<string, unknown>): Promise<RowChanged> {
      const shape = await editable(appId, table);
      const m = keyMatch(shape, key);
      const out = await change(appId, shape, { sql: `DELETE FROM ${ident(shape.name)} WHERE ${m.sql}${returning(shape)}`, args: m.args }, "key");
      if (!out.row) throw appError("not_found", "No row has this key (it may have been deleted).");
      return out;
    },
  };
}

export type TableEditor = ReturnType<typeof createTableEditor>;
