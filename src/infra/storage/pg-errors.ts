// Translates PostgreSQL / PGlite driver errors into catalogue errors, and
// records what a failure means to its caller (sql.ts, storageFailure).
import { ConnectError } from "@connectrpc/connect";
import { appError } from "../../kernel/errors.js";
import { markStorageFailure, type StorageFailure } from "./sql.js";

const connectionCodes = new Set(["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EPIPE", "ENOTFOUND", "EHOSTUNREACH"]);

export function translatePgError(err: unknown): ConnectError {
  if (err instanceof ConnectError) return err;
  const code = (err as { code?: string } | undefined)?.code ?? "";
  const kind: StorageFailure["kind"] | undefined =
    code === "40001" || code === "40P01" ? "retry"
    : code === "57014" ? "timeout"
    : code.startsWith("22") || code.startsWith("23") ? "refused"
    : undefined;
  const translated = toCatalogue(err, code);
  return kind ? markStorageFailure(translated, { kind, code }) : translated;
}

function toCatalogue(err: unknown, code: string): ConnectError {
  const e = err as { message?: string } | undefined;
  if (code === "23505") return appError("conflict", undefined, { cause: err });
  if (code === "23503") return appError("not_found", "A referenced record does not exist.", { cause: err });
  if (code === "57014") return appError("timeout", "The database statement timed out.", { cause: err });
  // U+0000 in a text or jsonb value (PostgreSQL cannot store it): the client's
  // input, not a server fault. Services refuse it earlier, naming the field;
  // this covers any path that does not.
  if (code === "22021" || code === "22P05") return appError("bad_request", "Text must not contain NUL (U+0000) characters.", { cause: err });
  if (code === "40001" || code === "40P01") return appError("unavailable", "Concurrent update, retry.", { cause: err, retryAfterSeconds: 1 });
  // 57P01/57P02/57P05/25P03: the server ended the session (shutdown, crash,
  // pg_terminate_backend, idle timeouts); 57P03: it is starting up or
  // recovering; 53300: too many connections; 08xxx: connection exceptions.
  if (connectionCodes.has(code) || code.startsWith("08") || sessionEnded.has(code) || code === "57P03" || code === "53300") {
    return appError("unavailable", "The database is unreachable.", { cause: err, retryAfterSeconds: 1 });
  }
  if (connectionLostText.test(e?.message ?? "") || /connect ECONNREFUSED|timeout exceeded when trying to connect/i.test(e?.message ?? "")) {
    return appError("unavailable", "The database is unreachable.", { cause: err, retryAfterSeconds: 1 });
  }
  return appError("internal_error", undefined, { cause: err });
}

const sessionEnded = new Set(["57P01", "57P02", "57P05", "25P03"]);
// node-postgres' own errors for a connection that went away under it.
const connectionLostText = /Connection terminated|is not queryable|Client has encountered a connection error/i;

/**
 * True when an established connection went away under a statement (the
 * server ended the session or the socket broke), as opposed to a server that
 * refuses new connections. Such a statement either never ran or was cut
 * short; whether a write in it committed is not known.
 */
export function isConnectionLoss(err: unknown): boolean {
  const raw = err instanceof ConnectError ? err.cause : err;
  const e = raw as { code?: string; message?: string } | undefined;
  const code = e?.code ?? "";
  // A connection that could not be opened in time was never established.
  if (/connection timeout|trying to connect/i.test(e?.message ?? "")) return false;
  return sessionEnded.has(code) || code === "ECONNRESET" || code === "EPIPE" || code.startsWith("08") || connectionLostText.test(e?.message ?? "");
}

/**
 * Marks a transaction that failed because its connection was lost BEFORE
 * COMMIT was sent: the server rolled it back, so running the same
 * transaction again on a fresh connection cannot apply it twice.
 */
export function markRetryableTx(err: ConnectError): ConnectError {
  return markStorageFailure(err, { kind: "retry", code: (err.cause as { code?: string } | undefined)?.code ?? "" });
}
