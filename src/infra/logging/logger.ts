// The process logger and how errors appear in it. pino's standard error
// serializer copies every enumerable property of an error; a ConnectError's
// `details` hold protobuf descriptors (`"desc":{...}`, about 2 KB of schema
// per line) and its `metadata` a Headers object. Errors are written as
// { type, message, code, stack, ...scalar properties, cause: {...} } instead:
// the chain of causes down to the driver error, each with its stack, and no
// object-valued property besides `cause` (and AggregateError's `errors`).
import { Code, ConnectError } from "@connectrpc/connect";
import pino, { type Logger } from "pino";
import { errorDetail } from "../../kernel/errors.js";

/** Causes followed below the logged error (a cycle or a very deep chain stops here). */
const MAX_DEPTH = 5;
/** Longest scalar property kept (a driver's `detail` or `where` may be long). */
const MAX_STRING = 4000;
/** Own properties never copied: written explicitly, or noise. */
const SKIP = new Set(["name", "message", "stack", "cause", "errors", "code", "rawMessage", "details", "metadata", "isWireError"]);

export interface SerializedError {
  type: string;
  message: string;
  code?: string | number;
  /** The catalogue code of a domain error (internal_error, query_error, ...). */
  appCode?: string;
  stack?: string;
  cause?: SerializedError | unknown;
  errors?: unknown[];
  [prop: string]: unknown;
}

export function serializeError(err: unknown): unknown {
  return serialize(err, 0, new Set());
}

function serialize(err: unknown, depth: number, seen: Set<unknown>): unknown {
  if (err === null || typeof err !== "object") return err;
  if (seen.has(err)) return "[circular]";
  seen.add(err);
  if (!(err instanceof Error)) {
    // Something thrown that is not an Error: its scalars, or its text.
    const e = err as Record<string, unknown>;
    if (typeof e.message !== "string") return scalarCopy(e) ?? String(err);
  }
  const e = err as Error & Record<string, unknown>;
  const out: SerializedError = {
    type: typeName(e),
    message: err instanceof ConnectError ? err.rawMessage : String(e.message ?? ""),
  };
  if (err instanceof ConnectError) {
    out.code = Code[err.code] ?? err.code;
    const detail = errorDetail(err);
    if (detail) out.appCode = detail.code;
  } else if (typeof e.code === "string" || typeof e.code === "number") {
    out.code = e.code;
  }
  if (typeof e.stack === "string") out.stack = e.stack;
  for (const k of Object.keys(e)) {
    if (SKIP.has(k)) continue;
    const v = e[k];
    if (typeof v === "string") out[k] = v.length > MAX_STRING ? v.slice(0, MAX_STRING) + "…" : v;
    else if (typeof v === "number" || typeof v === "boolean" || typeof v === "bigint") out[k] = typeof v === "bigint" ? v.toString() : v;
  }
  if (e.cause !== undefined) out.cause = depth < MAX_DEPTH ? serialize(e.cause, depth + 1, seen) : "[truncated]";
  if (Array.isArray(e.errors) && depth < MAX_DEPTH) out.errors = e.errors.slice(0, 10).map((x) => serialize(x, depth + 1, seen));
  return out;
}

function typeName(e: Error): string {
  const ctor = (e as { constructor?: { name?: string } }).constructor?.name;
  return ctor && ctor !== "Object" ? ctor : e.name || "Error";
}

function scalarCopy(o: Record<string, unknown>): Record<string, unknown> | undefined {
  const out: Record<string, unknown> = {};
  let any = false;
  for (const k of Object.keys(o)) {
    const v = o[k];
    if (typeof v === "string" || typeof v === "number" || typeof v === "boolean") {
      out[k] = v;
      any = true;
    }
  }
  return any ? out : undefined;
}

/** The serializers every logger of the service uses. */
export const logSerializers = { err: serializeError, error: serializeError };

/** The process logger (server and worker entry points). */
export function createLogger(level: string): Logger {
  return pino({ level, serializers: logSerializers });
}

/**
 * A logger given by the caller (tests, embedding), with the error
 * serializers on top of whatever it has. A child logger costs nothing per
 * line: it is made once, here.
 */
export function withErrorSerializers(logger: Logger): Logger {
  return logger.child({}, { serializers: logSerializers });
}
