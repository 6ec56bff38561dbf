// Paging of list calls. A page token is opaque to clients (docs/analytics.md):
// the base64url JSON of the cursor where the previous page stopped (a row id,
// an offset, or a time and id), one format for every list. A list reads one
// row more than the page to know whether a next page exists.
import { appError } from "./errors.js";

export const DEFAULT_PAGE_SIZE = 50;
export const MAX_PAGE_SIZE = 500;

/** page_size: 0 means the default, more than `max` means `max`, a negative one is a 400. */
export function pageLimit(pageSize: number, max = MAX_PAGE_SIZE): number {
  if (pageSize < 0) throw appError("validation_failed", "page_size must not be negative.", { fields: { page_size: ["Must not be negative."] } });
  return Math.min(pageSize || DEFAULT_PAGE_SIZE, max);
}

export const isRowId = (c: unknown): c is number => Number.isSafeInteger(c) && (c as number) >= 0;

/** The cursor a page token carries, undefined for a malformed one. */
export function readPageToken(token: string): unknown {
  try {
    return JSON.parse(Buffer.from(token, "base64url").toString("utf8"));
  } catch {
    return undefined;
  }
}

/** The cursor in a page token, undefined for "" (the first page); a token that is not one `valid` accepts is a 400. */
export function decodePageToken<C = number>(token: string, valid: (c: unknown) => c is C = isRowId as (c: unknown) => c is C): C | undefined {
  if (!token) return undefined;
  const cursor = readPageToken(token);
  if (cursor === undefined || !valid(cursor)) throw appError("validation_failed", "Invalid page_token.", { fields: { page_token: ["Invalid page token."] } });
  return cursor;
}

export const encodePageToken = (cursor: unknown): string => Buffer.from(JSON.stringify(cursor)).toString("base64url");

/** Splits the up to size + 1 rows read into the page and the token of the next one (the cursor of the page's last row). */
export function pageOf<R>(rows: R[], size: number, cursorOf: (last: R) => unknown): { rows: R[]; next: string } {
  if (rows.length <= size) return { rows, next: "" };
  const page = rows.slice(0, size);
  return { rows: page, next: encodePageToken(cursorOf(page[size - 1]!)) };
}

/** One page of a list ordered by row id: `read` gets the id the token carries (0 for the first page) and the rows to read. */
export async function pageById<R extends { id: number }>(
  req: { pageSize: number; pageToken: string },
  read: (afterId: number, limit: number) => Promise<R[]>,
  max?: number,
): Promise<{ rows: R[]; next: string }> {
  const size = pageLimit(req.pageSize, max);
  return pageOf(await read(decodePageToken(req.pageToken) ?? 0, size + 1), size, (r) => Number(r.id));
}

/** One page of a list read by offset: `read` gets the rows to read and the offset the token carries (0 for the first page). */
export async function pageByOffset<R>(
  req: { pageSize: number; pageToken: string },
  read: (limit: number, offset: number) => Promise<R[]>,
): Promise<{ rows: R[]; next: string }> {
  const size = pageLimit(req.pageSize);
  const offset = decodePageToken(req.pageToken) ?? 0;
  return pageOf(await read(size + 1, offset), size, () => offset + size);
}
