// The SQL editor's calls: run statements (read results come a page at a
// time, see docs/database.md "Paged results"), read the next pages of one
// result, export a whole result as CSV, and the account's history and saved
// queries.
import { toJson } from "@bufbuild/protobuf";
import { ListValueSchema, type ListValue } from "@bufbuild/protobuf/wkt";
import type { SqlResult } from "../../../../../gen/pulsebase/admin/v1/sql_pb.js";
import { api } from "../../api";
import { csvChunk, csvLine, saveFile } from "./csv";

export type Cell = unknown;
export type Row = Cell[];

/** The first page is small, so the grid shows something at once; later pages are larger. */
export const FIRST_PAGE = 1000;
export const NEXT_PAGE = 5000;
/** Rows the grid loads by itself; past this the user asks for more (memory of the tab). */
export const GRID_AUTO_ROWS = 200_000;
/** Rows one CSV export writes at most. */
export const CSV_MAX_ROWS = 1_000_000;

export interface ResultView {
  sql: string;
  columns: string[];
  rows: Row[];
  error: string;
  rowsWritten: number;
  /** The next page's token: "" once every row is here. */
  next: string;
}

export const rowsOf = (rows: ListValue[]): Row[] => rows.map((r) => toJson(ListValueSchema, r) as Row);

const view = (r: SqlResult): ResultView => ({
  sql: r.sql,
  columns: r.columns,
  rows: rowsOf(r.rows),
  error: r.error,
  rowsWritten: Number(r.rowsWritten),
  next: r.nextPageToken,
});

export async function runSql(appId: bigint, sql: string): Promise<{ results: ResultView[]; durationMs: number }> {
  const res = await api.sql.runSql({ appId, sql, pageSize: FIRST_PAGE });
  return { results: res.results.map(view), durationMs: res.durationMs };
}

export async function readPage(appId: bigint, sql: string, token: string, pageSize = NEXT_PAGE, signal?: AbortSignal): Promise<{ rows: Row[]; next: string }> {
  const r = await api.sql.readSqlPage({ appId, sql, pageToken: token, pageSize }, { signal });
  if (r.error) throw new Error(r.error);
  return { rows: rowsOf(r.rows), next: r.nextPageToken };
}

/**
 * The whole result as a CSV file: the rows already loaded, then the rest
 * page by page from the token. `onProgress` gets the rows written so far.
 */
export async function exportCsv(
  appId: bigint,
  r: Pick<ResultView, "sql" | "columns" | "rows" | "next">,
  name: string,
  onProgress: (rows: number) => void,
  signal?: AbortSignal,
): Promise<{ rows: number; cut: boolean }> {
  const parts: string[] = [csvLine(r.columns)];
  let n = 0;
  // Chunks of the loaded rows, so no single string is huge.
  for (let i = 0; i < r.rows.length && n < CSV_MAX_ROWS; i += NEXT_PAGE) {
    const chunk = r.rows.slice(i, Math.min(i + NEXT_PAGE, CSV_MAX_ROWS));
    parts.push(csvChunk(chunk));
    n += chunk.length;
  }
  let next = r.next;
  while (next && n < CSV_MAX_ROWS) {
    const page = await readPage(appId, r.sql, next, 10_000, signal);
    parts.push(csvChunk(page.rows));
    n += page.rows.length;
    next = page.next;
    onProgress(n);
  }
  saveFile(name, "text/csv;charset=utf-8", parts);
  return { rows: n, cut: Boolean(next) };
}

export const listHistory = (appId: bigint) => api.sql.listSqlHistory({ appId }).then((r) => r.entries);
export const listSaved = (appId: bigint) => api.sql.listSavedQueries({ appId }).then((r) => r.queries);
export const saveQuery = (appId: bigint, name: string, sql: string) => api.sql.saveQuery({ appId, name, sql });
export const deleteSaved = (appId: bigint, id: bigint) => api.sql.deleteSavedQuery({ appId, id });
