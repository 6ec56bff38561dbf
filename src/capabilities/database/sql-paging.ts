// Paging of the operator's read statements (the SQL editor, `pulsebase db
// query`): a SELECT, VALUES or WITH ... SELECT is run as
// `SELECT * FROM (<statement>) LIMIT n+1 OFFSET o`, so a result of any size
// comes a page at a time, each page under the request's row, byte and time
// limits. The next page runs the statement again at the next offset: no
// cursor is held open on the server between calls (a page reflects the data
// when it was read). The page token carries the offset and a hash of the
// statement, so a token cannot be replayed against another statement.
import { createHash } from "node:crypto";
import { appError } from "../../kernel/errors.js";
import { decodePageToken, encodePageToken } from "../../kernel/paging.js";
import type { Token } from "../../infra/libsql/sql-tokenizer.js";

// The default is the old whole-result cap: a result that fitted before comes whole, as before.
export const DEFAULT_SQL_PAGE = 10_000;
export const MAX_SQL_PAGE = 10_000;

export function sqlPageSize(pageSize: number): number {
  if (pageSize < 0) throw appError("validation_failed", "page_size must not be negative.", { fields: { page_size: ["Must not be negative."] } });
  return Math.min(pageSize || DEFAULT_SQL_PAGE, MAX_SQL_PAGE);
}

const MAIN_VERBS = new Set(["select", "values", "insert", "update", "delete", "replace"]);

/**
 * Whether the statement only reads and can be wrapped as a subquery: its
 * first word is SELECT or VALUES, or WITH whose main statement (the first
 * verb outside the parentheses of the common table expressions) is SELECT
 * or VALUES. A WITH ... INSERT, PRAGMA, EXPLAIN or RETURNING write is not.
 */
export function isPageableRead(tokens: readonly Token[]): boolean {
  const code = tokens.filter((t) => t.kind !== "space" && t.kind !== "comment");
  const first = code[0]?.kind === "word" ? code[0].text.toLowerCase() : "";
  if (first === "select" || first === "values") return true;
  if (first !== "with") return false;
  let depth = 0;
  for (const t of code.slice(1)) {
    if (t.kind === "punct" && t.text === "(") depth++;
    else if (t.kind === "punct" && t.text === ")") depth--;
    else if (depth === 0 && t.kind === "word") {
      const w = t.text.toLowerCase();
      if (MAIN_VERBS.has(w)) return w === "select" || w === "values";
    }
  }
  return false;
}

/** The page's statement: the newline before ")" ends a trailing line comment. */
export const wrapPage = (sql: string, limit: number, offset: number): string => `SELECT * FROM (\n${sql}\n) LIMIT ${limit} OFFSET ${offset}`;

const hashOf = (sql: string) => createHash("sha256").update(sql.trim()).digest("base64url").slice(0, 16);

interface Cursor {
  o: number;
  h: string;
}
const isCursor = (c: unknown): c is Cursor =>
  typeof c === "object" && c !== null && Number.isSafeInteger((c as Cursor).o) && (c as Cursor).o > 0 && typeof (c as Cursor).h === "string";

export const pageToken = (sql: string, offset: number): string => encodePageToken({ o: offset, h: hashOf(sql) });

/** The offset a token names for this statement; a token of another statement is a 400 naming page_token. */
export function pageOffset(sql: string, token: string): number {
  const c = decodePageToken<Cursor>(token, isCursor);
  if (!c) throw appError("validation_failed", "page_token is required.", { fields: { page_token: ["Required."] } });
  if (c.h !== hashOf(sql)) throw appError("validation_failed", "The page_token belongs to another statement.", { fields: { page_token: ["Belongs to another statement."] } });
  return c.o;
}
