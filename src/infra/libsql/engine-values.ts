// Value handling shared by the engine processes and the in-process point
// reader: how arguments are bound and how row values are encoded and sized
// (docs/database.md). Imported by engine-process.ts under Node's type stripping,
// so erasable syntax only and no runtime imports.
import type { EngineValue } from "./engine-protocol.js";

/** Binds integers as INTEGER (the drivers bind every JS number as REAL). */
export function bindable(args: readonly EngineValue[]): unknown[] {
  return args.map((v) => (typeof v === "number" && Number.isSafeInteger(v) ? BigInt(v) : v));
}

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);
const MIN_SAFE = -MAX_SAFE;

/** Safe integers and floats are numbers, other integers decimal strings, blobs base64. */
export function encode(v: unknown): EngineValue {
  if (v === null || v === undefined) return null;
  if (typeof v === "bigint") return v >= MIN_SAFE && v <= MAX_SAFE ? Number(v) : v.toString();
  if (typeof v === "number") return Number.isFinite(v) ? v : v > 0 ? "Infinity" : v < 0 ? "-Infinity" : null;
  if (typeof v === "string") return v;
  if (v instanceof Uint8Array) return Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString("base64");
  return String(v);
}

/** Approximate JSON size of a raw value, known before encoding it (a huge blob is never base64-encoded). */
export function sizeOf(v: unknown): number {
  if (v === null || v === undefined) return 4;
  if (typeof v === "string") return v.length + 2;
  if (v instanceof Uint8Array) return Math.ceil(v.byteLength / 3) * 4 + 2;
  return 8;
}

/** A result limit was crossed: the statement's error, not a failure of the engine. */
export class LimitError extends Error {}

export function tooManyBytes(maxBytes: number): LimitError {
  return new LimitError(`result too large: more than ${maxBytes} bytes in this response; select fewer rows or columns`);
}

export interface ReadBudget {
  /** Bytes the response may still take. */
  bytes: number;
  /**
   * Set when a cursor was left before its last row. With libsql (the
   * engines' driver before node:sqlite) such a statement kept the
   * connection's read snapshot (later reads missed newer commits, a later
   * write failed with SQLITE_BUSY_SNAPSHOT) until it was garbage-collected;
   * the caller still drops the connection after the request, which costs
   * little and assumes nothing about the driver.
   */
  abandoned?: boolean;
}

/**
 * Reads every row of a raw (array-mode) statement, counting rows and bytes
 * while it reads, so a huge result stops at the limit instead of building up.
 */
export function readRows(cursor: Iterable<unknown>, maxRows: number, maxBytes: number, budget: ReadBudget): EngineValue[][] {
  const rows: EngineValue[][] = [];
  try {
    for (const raw of cursor as Iterable<unknown[]>) {
      if (rows.length >= maxRows) {
        throw new LimitError(`result too large: more than ${maxRows} rows; use LIMIT and OFFSET to page`);
      }
      for (const v of raw) budget.bytes -= sizeOf(v);
      if (budget.bytes < 0) {
        throw tooManyBytes(maxBytes);
      }
      rows.push(raw.map(encode));
    }
  } catch (e) {
    budget.abandoned = true;
    throw e;
  }
  return rows;
}
