// The table editor's calls and its state in the URL: ?table=T&page=N
// &size=N&sort=COL&desc=1&q=TEXT&f=[[col,op,value],...] (with the page's
// tab=tables), so a view of a table can be linked, reloaded and gone back to.
import { toJson, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { ListValueSchema } from "@bufbuild/protobuf/wkt";
import { api } from "../../api";

export interface Filter {
  column: string;
  op: string;
  value: string;
}

export const OPS: [string, string][] = [
  ["eq", "="],
  ["ne", "≠"],
  ["lt", "<"],
  ["le", "≤"],
  ["gt", ">"],
  ["ge", "≥"],
  ["like", "like"],
  ["is_null", "is null"],
  ["not_null", "is not null"],
];
export const NO_VALUE_OPS = new Set(["is_null", "not_null"]);
export const PAGE_SIZES = [25, 50, 100, 500];

export interface TableView {
  table: string;
  page: number;
  size: number;
  sort: string;
  desc: boolean;
  search: string;
  filters: Filter[];
}

export function readTableView(q: URLSearchParams): TableView {
  let filters: Filter[] = [];
  try {
    const raw = JSON.parse(q.get("f") ?? "[]") as unknown;
    if (Array.isArray(raw)) filters = raw.filter((f): f is string[] => Array.isArray(f) && f.length >= 2).map(([column, op, value]) => ({ column: String(column), op: String(op), value: String(value ?? "") }));
  } catch {
    // a hand-edited URL: no filters rather than a broken page
  }
  const size = Number(q.get("size"));
  return {
    table: q.get("table") ?? "",
    page: Math.max(1, Math.floor(Number(q.get("page")) || 1)),
    size: PAGE_SIZES.includes(size) ? size : 50,
    sort: q.get("sort") ?? "",
    desc: q.get("desc") === "1",
    search: q.get("q") ?? "",
    filters,
  };
}

/** The URL query changes for a view (undefined removes a parameter). */
export function tableViewPatch(v: Partial<TableView>): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = {};
  if ("table" in v) out.table = v.table || undefined;
  if ("page" in v) out.page = v.page && v.page > 1 ? String(v.page) : undefined;
  if ("size" in v) out.size = v.size && v.size !== 50 ? String(v.size) : undefined;
  if ("sort" in v) out.sort = v.sort || undefined;
  if ("desc" in v) out.desc = v.desc ? "1" : undefined;
  if ("search" in v) out.q = v.search || undefined;
  if ("filters" in v) out.f = v.filters?.length ? JSON.stringify(v.filters.map((f) => (NO_VALUE_OPS.has(f.op) ? [f.column, f.op] : [f.column, f.op, f.value]))) : undefined;
  return out;
}

export interface TablePage {
  columns: string[];
  rows: JsonValue[][];
  keys: JsonValue[][];
  keyColumns: string[];
  total: number;
  editable: boolean;
}

export async function browse(appId: bigint, v: TableView): Promise<TablePage> {
  const r = await api.sql.browseTable({
    appId,
    table: v.table,
    pageSize: v.size,
    offset: BigInt((v.page - 1) * v.size),
    orderBy: v.sort,
    descending: v.desc,
    search: v.search,
    filters: v.filters.map((f) => ({ column: f.column, op: f.op, value: f.value })),
  });
  return {
    columns: r.columns,
    rows: r.rows.map((l) => toJson(ListValueSchema, l) as JsonValue[]),
    keys: r.keys.map((l) => toJson(ListValueSchema, l) as JsonValue[]),
    keyColumns: r.keyColumns,
    total: Number(r.totalRows),
    editable: r.editable,
  };
}

const keyObject = (columns: string[], values: JsonValue[]): JsonObject => Object.fromEntries(columns.map((c, i) => [c, values[i] ?? null]));

export const insertRow = (appId: bigint, table: string, values: JsonObject) => api.sql.insertRow({ appId, table, values });
export const updateRow = (appId: bigint, table: string, keyColumns: string[], key: JsonValue[], values: JsonObject) =>
  api.sql.updateRow({ appId, table, key: keyObject(keyColumns, key), values });
export const deleteRow = (appId: bigint, table: string, keyColumns: string[], key: JsonValue[]) => api.sql.deleteRow({ appId, table, key: keyObject(keyColumns, key) });

/** The URL for the current path with query parameters changed (keeps ?app= and the rest). */
export function withParams(path: string, query: URLSearchParams, patch: Record<string, string | undefined>): string {
  const q = new URLSearchParams(query);
  for (const [k, v] of Object.entries(patch)) {
    if (v === undefined || v === "") q.delete(k);
    else q.set(k, v);
  }
  const qs = q.toString();
  return qs ? `${path}?${qs}` : path;
}
