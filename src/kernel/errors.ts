// One catalogue of domain errors. Every error a service raises is a
// ConnectError built here, carrying an ErrorDetail (machine code, HTTP status,
// field violations). Connect/gRPC clients read the detail; the REST gateway
// turns it into the envelope of its interface (platform or CMS).
import { Code, ConnectError } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import {
  ErrorDetailSchema,
  type ErrorDetail,
} from "../../gen/pulsebase/common/v1/error_pb.js";

export interface CatalogueEntry {
  grpc: Code;
  http: number;
  message: string;
}

export const catalogue = {
  // --- platform interface (lower-case codes) ---
  unauthenticated: { grpc: Code.Unauthenticated, http: 401, message: "Missing, invalid or expired token." },
  permission_denied: { grpc: Code.PermissionDenied, http: 403, message: "Not allowed." },
  bad_request: { grpc: Code.InvalidArgument, http: 400, message: "Malformed request." },
  not_found: { grpc: Code.NotFound, http: 404, message: "Not found." },
  method_not_allowed: { grpc: Code.Unimplemented, http: 405, message: "Method not allowed." },
  conflict: { grpc: Code.AlreadyExists, http: 409, message: "Already exists." },
  failed_precondition: { grpc: Code.FailedPrecondition, http: 409, message: "The resource is not in a state that allows this." },
  payload_too_large: { grpc: Code.ResourceExhausted, http: 413, message: "Request body too large." },
  unsupported_media_type: { grpc: Code.InvalidArgument, http: 415, message: "Unsupported content type." },
  validation_failed: { grpc: Code.InvalidArgument, http: 422, message: "The given data was invalid." },
  // A batch's Idempotency-Key sent again with a different body (docs/analytics.md).
  idempotency_key_reused: { grpc: Code.FailedPrecondition, http: 422, message: "This Idempotency-Key was already used with a different body." },
  rate_limited: { grpc: Code.ResourceExhausted, http: 429, message: "Too many requests." },
  // The admin listener refuses a Host it does not serve (DNS rebinding; RFC 9110 15.5.20).
  misdirected_request: { grpc: Code.PermissionDenied, http: 421, message: "This listener does not answer for this host name." },
  internal_error: { grpc: Code.Internal, http: 500, message: "Internal error." },
  unavailable: { grpc: Code.Unavailable, http: 503, message: "Service temporarily unavailable." },
  timeout: { grpc: Code.DeadlineExceeded, http: 504, message: "The operation timed out." },
  // database (docs/database.md)
  database_not_linked: { grpc: Code.FailedPrecondition, http: 403, message: "The application has no linked database." },
  forbidden_query: { grpc: Code.PermissionDenied, http: 403, message: "The statement is not allowed." },
  database_unavailable: { grpc: Code.Unavailable, http: 503, message: "The linked database is not active." },
  query_error: { grpc: Code.Internal, http: 500, message: "The database backend failed." },
  query_too_large: { grpc: Code.ResourceExhausted, http: 400, message: "The query needed more memory than the database engine allows." },
  // functions (docs/functions.md)
  plan_required: { grpc: Code.FailedPrecondition, http: 402, message: "The application's plan does not include functions." },
  function_error: { grpc: Code.Internal, http: 500, message: "The function failed." },
  no_active_version: { grpc: Code.Unavailable, http: 503, message: "The function has no active version." },
  function_timeout: { grpc: Code.DeadlineExceeded, http: 504, message: "The function exceeded its timeout." },
  // A function's fetch (docs/functions.md, "Calling other services: fetch"): codes of the errors it rejects with.
  egress_refused: { grpc: Code.PermissionDenied, http: 403, message: "The application's egress policy does not allow this destination." },
  fetch_limit: { grpc: Code.ResourceExhausted, http: 429, message: "A fetch limit of the invocation was reached." },
  fetch_failed: { grpc: Code.Unavailable, http: 502, message: "The fetch failed." },
  // An application's stored data (ctx.kv) at its quota.
  quota_exceeded: { grpc: Code.ResourceExhausted, http: 403, message: "The application's storage quota is used up." },
  // --- CMS interface (upper-case codes, docs/cms.md) ---
  MISSING_APP_KEY: { grpc: Code.InvalidArgument, http: 400, message: "The X-App-Key header is required." },
  INVALID_APP_KEY: { grpc: Code.InvalidArgument, http: 400, message: "No application for this key." },
  INVALID_FILTER: { grpc: Code.InvalidArgument, http: 400, message: "Invalid filter." },
  INVALID_OPERATOR: { grpc: Code.InvalidArgument, http: 400, message: "Unsupported filter operator." },
  INVALID_SORT: { grpc: Code.InvalidArgument, http: 400, message: "Invalid sort field." },
  TOO_MANY_FILTERS: { grpc: Code.InvalidArgument, http: 400, message: "At most 10 filter fields are allowed." },
  QUERY_TOO_SHORT: { grpc: Code.InvalidArgument, http: 400, message: "The search query must be at least 2 characters." },
  QUERY_TOO_LONG: { grpc: Code.InvalidArgument, http: 400, message: "The search query must be at most 200 characters." },
  INVALID_PAGINATION: { grpc: Code.InvalidArgument, http: 400, message: "Invalid pagination parameters." },
  INVALID_PARAMETER: { grpc: Code.InvalidArgument, http: 400, message: "Invalid query parameter." },
  CONTENT_TYPE_NOT_FOUND: { grpc: Code.NotFound, http: 404, message: "Content type not found." },
  ENTRY_NOT_FOUND: { grpc: Code.NotFound, http: 404, message: "Entry not found." },
  NOT_FOUND: { grpc: Code.NotFound, http: 404, message: "No such endpoint." },
  UNAUTHENTICATED: { grpc: Code.Unauthenticated, http: 401, message: "HTTPS is required." },
  PAYLOAD_TOO_LARGE: { grpc: Code.ResourceExhausted, http: 413, message: "Request too large." },
  METHOD_NOT_ALLOWED: { grpc: Code.Unimplemented, http: 405, message: "Method not allowed." },
  RATE_LIMITED: { grpc: Code.ResourceExhausted, http: 429, message: "Rate limit exceeded. Retry with exponential backoff." },
  QUERY_TIMEOUT: { grpc: Code.DeadlineExceeded, http: 504, message: "The query ran longer than 5 seconds." },
  INTERNAL_ERROR: { grpc: Code.Internal, http: 500, message: "Internal error." },
} as const satisfies Record<string, CatalogueEntry>;

export type ErrorCode = keyof typeof catalogue;

export interface AppErrorOptions {
  cause?: unknown;
  retryAfterSeconds?: number;
  fields?: Record<string, string[]>;
}

/** Builds the ConnectError for a catalogue code. */
export function appError(code: ErrorCode, message?: string, opts: AppErrorOptions = {}): ConnectError {
  const entry: CatalogueEntry = catalogue[code];
  const detail = create(ErrorDetailSchema, {
    code,
    httpStatus: entry.http,
    retryAfterSeconds: opts.retryAfterSeconds ?? 0,
    fieldViolations: Object.entries(opts.fields ?? {}).map(([field, messages]) => ({ field, messages })),
  });
  return new ConnectError(
    message ?? entry.message,
    entry.grpc,
    undefined,
    [{ desc: ErrorDetailSchema, value: detail }],
    opts.cause,
  );
}

/** A 422 naming the offending fields (paths like "sessions.0.started_at"). */
export function validationError(fields: Record<string, string[]>, message?: string): ConnectError {
  return appError("validation_failed", message ?? firstMessage(fields), { fields });
}

function firstMessage(fields: Record<string, string[]>): string {
  const all = Object.values(fields).flat();
  if (all.length === 0) return catalogue.validation_failed.message;
  return all.length === 1 ? all[0]! : `${all[0]} (and ${all.length - 1} more error${all.length > 2 ? "s" : ""})`;
}

/** Collects field errors; throws one validation error at the end. */
export class Violations {
  // Field paths may be client-chosen names ("constructor", "__proto__"): no
  // prototype, so they never resolve to Object.prototype members.
  readonly fields: Record<string, string[]> = Object.create(null) as Record<string, string[]>;
  add(field: string, message: string): this {
    (this.fields[field] ??= []).push(message);
    return this;
  }
  get empty(): boolean {
    return Object.keys(this.fields).length === 0;
  }
  throwIfAny(): void {
    if (!this.empty) throw validationError(this.fields);
  }
}

/** Reads the ErrorDetail of any error; undefined for non-domain errors. */
export function errorDetail(err: unknown): ErrorDetail | undefined {
  if (!(err instanceof ConnectError)) return undefined;
  return err.findDetails(ErrorDetailSchema)[0];
}

// One Code -> HTTP table for ConnectErrors that carry no detail.
const codeToHttp: Record<Code, number> = {
  [Code.Canceled]: 499,
  [Code.Unknown]: 500,
  [Code.InvalidArgument]: 400,
  [Code.DeadlineExceeded]: 504,
  [Code.NotFound]: 404,
  [Code.AlreadyExists]: 409,
  [Code.PermissionDenied]: 403,
  [Code.ResourceExhausted]: 429,
  [Code.FailedPrecondition]: 412,
  [Code.Aborted]: 409,
  [Code.OutOfRange]: 400,
  [Code.Unimplemented]: 501,
  [Code.Internal]: 500,
  [Code.Unavailable]: 503,
  [Code.DataLoss]: 500,
  [Code.Unauthenticated]: 401,
};

export function httpStatusOf(code: Code): number {
  return codeToHttp[code] ?? 500;
}

/**
 * 5xx codes that report the user's code failing, not the service: a
 * function's throw or timeout is logged at warn by the functions runtime
 * (with app, function and version), never as a server error.
 */
const USER_FAULTS: ReadonlySet<string> = new Set(["function_error", "function_timeout"]);

/** Whether an error (5xx or not) is the service's own failure, to be logged at error level. */
export function isServerFault(err: unknown, status: number): boolean {
  return status >= 500 && !USER_FAULTS.has(errorDetail(err)?.code ?? "");
}

/** Normalises anything thrown into a ConnectError with a detail. */
export function toAppError(err: unknown): ConnectError {
  if (err instanceof ConnectError && errorDetail(err)) return err;
  if (err instanceof ConnectError) {
    const fallback: ErrorCode =
      err.code === Code.Unauthenticated ? "unauthenticated"
      : err.code === Code.NotFound ? "not_found"
      : err.code === Code.Unavailable ? "unavailable"
      : err.code === Code.DeadlineExceeded ? "timeout"
      : err.code === Code.ResourceExhausted ? "rate_limited"
      : err.code === Code.InvalidArgument ? "validation_failed"
      : "internal_error";
    return appError(fallback, fallback === "internal_error" ? undefined : err.rawMessage, { cause: err });
  }
  return appError("internal_error", undefined, { cause: err });
}
