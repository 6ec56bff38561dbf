// Keyset paging for operator list calls: page_token is the opaque last id.
import { appError } from "./errors.js";

export const DEFAULT_PAGE_SIZE = 50;
export const MAX_PAGE_SIZE = 500;

export function pageOf(pageSize: number, pageToken: string): { limit: number; afterId: number } {
  if (pageSize < 0) throw appError("validation_failed", "page_size must not be negative.", { fields: { page_size: ["must not be negative"] } });
  const limit = Math.min(pageSize || DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE);
  let afterId = 0;
  if (pageToken) {
    const raw = Buffer.from(pageToken, "base64url").toString();
    if (!/^\d+$/.test(raw)) throw appError("validation_failed", "Invalid page_token.", { fields: { page_token: ["is invalid"] } });
    afterId = Number(raw);
  }
  return { limit, afterId };
}

export function nextToken(rows: { id: number }[], limit: number): string {
  return rows.length === limit ? Buffer.from(String(rows[rows.length - 1]!.id)).toString("base64url") : "";
}
