// `Authorization: Bearer <token>` headers: read by consumer authentication and
// by every operator check (admin listener, console, metrics).
import { timingSafeEqual } from "node:crypto";

/** Extracts the token of an `Authorization: Bearer <token>` header. */
export function bearerToken(header: string | null | undefined): string | undefined {
  if (!header) return undefined;
  const m = /^Bearer\s+([A-Za-z0-9._~+/=-]+)\s*$/i.exec(header);
  return m?.[1];
}

/** Compares two tokens in constant time. */
export function sameToken(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
