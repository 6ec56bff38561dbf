// One error class per envelope the server answers with (platform, 422
// validation, CMS), plus the two the client itself produces (no answer at
// all, and a statement error inside a 200 SQL result). Every one carries the
// HTTP status and the request id of the answer. Each class names itself with
// a string literal (`err.name === "NetworkError"`): a minifier renames classes,
// so a name taken from the constructor would read "ee" in a bundled app.

/** Codes of the platform envelope `{ "error": code, "message" }`. */
export type PlatformErrorCode =
  | "unauthenticated" | "bad_request" | "not_found" | "method_not_allowed" | "conflict"
  | "failed_precondition" | "payload_too_large" | "unsupported_media_type" | "rate_limited"
  | "internal_error" | "unavailable" | "timeout" | "database_not_linked" | "forbidden_query"
  | "database_unavailable" | "query_error" | "plan_required" | "function_error"
  | "no_active_version" | "function_timeout" | (string & {});

/** Codes of the CMS envelope `{ "error": { status, code, message } }`. */
export type CmsErrorCode =
  | "MISSING_APP_KEY" | "INVALID_APP_KEY" | "INVALID_FILTER" | "INVALID_OPERATOR" | "INVALID_SORT"
  | "TOO_MANY_FILTERS" | "QUERY_TOO_SHORT" | "QUERY_TOO_LONG" | "INVALID_PAGINATION" | "INVALID_PARAMETER"
  | "CONTENT_TYPE_NOT_FOUND" | "ENTRY_NOT_FOUND" | "QUERY_TIMEOUT" | "METHOD_NOT_ALLOWED"
  | "INTERNAL_ERROR" | "RATE_LIMITED" | (string & {});

export class PulsebaseError extends Error {
  override name: string = "PulsebaseError";
  /** HTTP status; 0 when no answer arrived. */
  readonly status: number;
  readonly code: string;
  /** The answer's X-Request-Id (quote it in a support request). */
  readonly requestId: string | undefined;
  /** Seconds the server asked to wait (Retry-After), if it did. */
  readonly retryAfter: number | undefined;
  constructor(message: string, status: number, code: string, requestId?: string, retryAfter?: number) {
    super(message);
    this.status = status;
    this.code = code;
    this.requestId = requestId;
    this.retryAfter = retryAfter;
  }
}

/** The platform envelope: every non-2xx of `/api/...` except 422. */
export class PlatformError extends PulsebaseError {
  override name = "PlatformError" as const;
  declare readonly code: PlatformErrorCode;
}

/** 422 `{ "message", "errors": { "<field path>": ["..."] } }`; paths like `events.3.name`. */
export class ValidationError extends PulsebaseError {
  override name = "ValidationError" as const;
  readonly fields: Record<string, string[]>;
  constructor(message: string, fields: Record<string, string[]>, requestId?: string) {
    super(message, 422, "validation_failed", requestId);
    this.fields = fields;
  }
}

/** The CMS envelope of `/api/v1/...`; the 429 (which has no code) is `RATE_LIMITED`. */
export class CmsError extends PulsebaseError {
  override name = "CmsError" as const;
  declare readonly code: CmsErrorCode;
}

/** No answer: the network failed, the server was unreachable, or the request timed out. */
export class NetworkError extends PulsebaseError {
  override name = "NetworkError" as const;
  constructor(message: string, cause?: unknown) {
    super(message, 0, "network_error");
    (this as { cause?: unknown }).cause = cause;
  }
}

/** A statement's own error inside a 200 SQL result (syntax, constraint). */
export class StatementError extends PulsebaseError {
  override name = "StatementError" as const;
  /** Index of the statement in the request. */
  readonly index: number;
  constructor(message: string, index: number, requestId?: string) {
    super(message, 200, "statement_error", requestId);
    this.index = index;
  }
}

/**
 * True when sending the same request again later can succeed: no answer,
 * 408, 429, and 5xx other than a function's own failure. Safe to retry as is
 * for reads and for batches with their Idempotency-Key.
 */
export function isRetryable(err: unknown): boolean {
  if (!(err instanceof PulsebaseError)) return false;
  const s = err.status;
  return s === 0 || s === 408 || s === 429 || (s >= 500 && s !== 501 && err.code !== "function_error");
}

/** Builds the error of a non-2xx answer from its envelope. */
export function errorFromResponse(status: number, body: unknown, requestId?: string, retryAfter?: number): PulsebaseError {
  const b = (body && typeof body === "object" ? body : {}) as Record<string, unknown>;
  const err = b.error;
  if (err && typeof err === "object") {
    const e = err as { code?: string; message?: string };
    return new CmsError(e.message ?? `HTTP ${status}`, status, e.code ?? (status === 429 ? "RATE_LIMITED" : `HTTP_${status}`), requestId, retryAfter);
  }
  if (status === 422 && b.errors && typeof b.errors === "object") {
    return new ValidationError(String(b.message ?? "The given data was invalid."), b.errors as Record<string, string[]>, requestId);
  }
  const msg = typeof b.message === "string" ? b.message : typeof body === "string" && body ? body.slice(0, 500) : `HTTP ${status}`;
  return new PlatformError(msg, status, typeof err === "string" ? err : `http_${status}`, requestId, retryAfter);
}
