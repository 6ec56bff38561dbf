// Translates PostgreSQL / PGlite driver errors into catalogue errors.
import { ConnectError } from "@connectrpc/connect";
import { appError } from "../internal/errors.js";

const connectionCodes = new Set(["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EPIPE", "ENOTFOUND", "EHOSTUNREACH"]);

export function translatePgError(err: unknown): ConnectError {
  if (err instanceof ConnectError) return err;
  const e = err as { code?: string; message?: string };
  const code = e?.code ?? "";
  if (code === "23505") return appError("conflict", undefined, { cause: err });
  if (code === "23503") return appError("not_found", "A referenced record does not exist.", { cause: err });
  if (code === "57014") return appError("timeout", "The database statement timed out.", { cause: err });
  // U+0000 in a text or jsonb value (PostgreSQL cannot store it): the client's
  // input, not a server fault. Services refuse it earlier, naming the field;
  // this covers any path that does not.
  if (code === "22021" || code === "22P05") return appError("bad_request", "Text must not contain NUL (U+0000) characters.", { cause: err });
  if (code === "40001" || code === "40P01") return appError("unavailable", "Concurrent update, retry.", { cause: err, retryAfterSeconds: 1 });
  if (connectionCodes.has(code) || code.startsWith("08") || code === "57P01" || code === "57P03" || code === "53300") {
    return appError("unavailable", "The database is unreachable.", { cause: err, retryAfterSeconds: 1 });
  }
  if (/Connection terminated|connect ECONNREFUSED|timeout exceeded when trying to connect/i.test(e?.message ?? "")) {
    return appError("unavailable", "The database is unreachable.", { cause: err, retryAfterSeconds: 1 });
  }
  return appError("internal_error", undefined, { cause: err });
}

/** SQLSTATE of a translated or raw driver error, for callers that branch on it. */
export function sqlState(err: unknown): string | undefined {
  const raw = err instanceof ConnectError ? err.cause : err;
  return (raw as { code?: string } | undefined)?.code;
}
