// One catalogue of domain errors. Every error a service raises is a
// ConnectError built here, carrying an ErrorDetail (machine code, REST
// status, field violations). Connect/gRPC clients read the detail; the REST
// gateway turns it into the envelope of its interface (platform or CMS).
//
// This file is the one status table of the project. An entry carries two
// things and everything else derives from them:
// - `code`, the Connect code (= gRPC status): gRPC and gRPC-Web send it as
//   grpc-status; Connect sends its name, with the HTTP status the Connect
//   protocol fixes for it (connectrpc.com/docs/protocol, "Error codes";
//   connect-es's own `codeToHttpStatus`, `connectHttpStatus` below), never a
//   table of ours;
// - `rest`, the status of the REST envelope (the spec's or docs/devices.md's),
//   also sent to Connect and gRPC clients as ErrorDetail.http_status.
// A ConnectError without a detail (connect-es's own, a library's) is read as
// the catalogue entry its code names (`codeFallback`), so it has no other
// status either. test/kernel/errors.test.ts and
// test/transport/rpc/error-catalogue.test.ts hold every entry to this over
// REST, Connect, gRPC and gRPC-Web.
//
// failed_precondition: REST 409, Connect 400, grpc-status 9. REST says 409
// (docs/devices.md "Errors and what to retry", docs/cms.md, docs/database.md;
// the spec states no status for it): the request conflicts with the current
// state of the resource (RFC 9110 15.5.10). 412 (RFC 9110 15.5.13) is about
// the request's own conditional headers (If-Match, If-Unmodified-Since),
// which no operation here takes; a Code -> 412 table that disagreed with the
// entry was removed. Over Connect the HTTP status is the protocol's (400 for
// failed_precondition), and the client reads 409 in the detail.
import { Code, ConnectError } from "@connectrpc/connect";
import { codeToHttpStatus } from "@connectrpc/connect/protocol-connect";
import { create } from "@bufbuild/protobuf";
import {
  ErrorDetailSchema,
  type ErrorDetail,
} from "../../gen/pulsebase/common/v1/error_pb.js";

export interface CatalogueEntry {
  /** The Connect code (gRPC status). */
  code: Code;
  /** The REST envelope's HTTP status (ErrorDetail.http_status). */
  rest: number;
  message: string;
  /** CMS codes only: the code the CMS envelope gives a lower-case code with this status (cmsCodeFor). */
  cmsFallback?: true;
}

export const catalogue = {
  // --- platform interface (lower-case codes) ---
  unauthenticated: { code: Code.Unauthenticated, rest: 401, message: "Missing, invalid or expired token." },
  permission_denied: { code: Code.PermissionDenied, rest: 403, message: "Not allowed." },
  bad_request: { code: Code.InvalidArgument, rest: 400, message: "Malformed request." },
  not_found: { code: Code.NotFound, rest: 404, message: "Not found." },
  method_not_allowed: { code: Code.Unimplemented, rest: 405, message: "Method not allowed." },
  conflict: { code: Code.AlreadyExists, rest: 409, message: "Already exists." },
  failed_precondition: { code: Code.FailedPrecondition, rest: 409, message: "The resource is not in a state that allows this." },
  payload_too_large: { code: Code.ResourceExhausted, rest: 413, message: "Request body too large." },
  unsupported_media_type: { code: Code.InvalidArgument, rest: 415, message: "Unsupported content type." },
  validation_failed: { code: Code.InvalidArgument, rest: 422, message: "The given data was invalid." },
  // A batch's Idempotency-Key sent again with a different body (docs/analytics.md).
  idempotency_key_reused: { code: Code.FailedPrecondition, rest: 422, message: "This Idempotency-Key was already used with a different body." },
  rate_limited: { code: Code.ResourceExhausted, rest: 429, message: "Too many requests." },
  // The admin listener refuses a Host it does not serve (DNS rebinding; RFC 9110 15.5.20).
  misdirected_request: { code: Code.PermissionDenied, rest: 421, message: "This listener does not answer for this host name." },
  internal_error: { code: Code.Internal, rest: 500, message: "Internal error." },
  unavailable: { code: Code.Unavailable, rest: 503, message: "Service temporarily unavailable." },
  timeout: { code: Code.DeadlineExceeded, rest: 504, message: "The operation timed out." },
  // database (docs/database.md)
  database_not_linked: { code: Code.FailedPrecondition, rest: 403, message: "The application has no linked database." },
  forbidden_query: { code: Code.PermissionDenied, rest: 403, message: "The statement is not allowed." },
  database_unavailable: { code: Code.Unavailable, rest: 503, message: "The linked database is not active." },
  query_error: { code: Code.Internal, rest: 500, message: "The database backend failed." },
  query_too_large: { code: Code.ResourceExhausted, rest: 400, message: "The query needed more memory than the database engine allows." },
  // functions (docs/functions.md)
  plan_required: { code: Code.FailedPrecondition, rest: 402, message: "The application's plan does not include functions." },
  function_error: { code: Code.Internal, rest: 500, message: "The function failed." },
  no_active_version: { code: Code.Unavailable, rest: 503, message: "The function has no active version." },
  function_timeout: { code: Code.DeadlineExceeded, rest: 504, message: "The function exceeded its timeout." },
  // A function's fetch (docs/functions.md, "Calling other services: fetch"): codes of the errors it rejects with.
  egress_refused: { code: Code.PermissionDenied, rest: 403, message: "The application's egress policy does not allow this destination." },
  fetch_limit: { code: Code.ResourceExhausted, rest: 429, message: "A fetch limit of the invocation was reached." },
  fetch_failed: { code: Code.Unavailable, rest: 502, message: "The fetch failed." },
  // An application's stored data (ctx.kv) at its quota.
  quota_exceeded: { code: Code.ResourceExhausted, rest: 403, message: "The application's storage quota is used up." },
  // realtime (docs/realtime.md, "Limits"): a cap on connections, subscriptions, channels or presence members.
  limit_exceeded: { code: Code.ResourceExhausted, rest: 429, message: "A realtime limit of the application was reached." },
  // --- CMS interface (upper-case codes, docs/cms.md) ---
  MISSING_APP_KEY: { code: Code.InvalidArgument, rest: 400, message: "The X-App-Key header is required." },
  INVALID_APP_KEY: { code: Code.InvalidArgument, rest: 400, message: "No application for this key." },
  INVALID_FILTER: { code: Code.InvalidArgument, rest: 400, message: "Invalid filter." },
  INVALID_OPERATOR: { code: Code.InvalidArgument, rest: 400, message: "Unsupported filter operator." },
  INVALID_SORT: { code: Code.InvalidArgument, rest: 400, message: "Invalid sort field." },
  TOO_MANY_FILTERS: { code: Code.InvalidArgument, rest: 400, message: "At most 10 filter fields are allowed." },
  QUERY_TOO_SHORT: { code: Code.InvalidArgument, rest: 400, message: "The search query must be at least 2 characters." },
  QUERY_TOO_LONG: { code: Code.InvalidArgument, rest: 400, message: "The search query must be at most 200 characters." },
  INVALID_PAGINATION: { code: Code.InvalidArgument, rest: 400, message: "Invalid pagination parameters." },
  INVALID_PARAMETER: { code: Code.InvalidArgument, rest: 400, message: "Invalid query parameter.", cmsFallback: true },
  CONTENT_TYPE_NOT_FOUND: { code: Code.NotFound, rest: 404, message: "Content type not found." },
  ENTRY_NOT_FOUND: { code: Code.NotFound, rest: 404, message: "Entry not found." },
  NOT_FOUND: { code: Code.NotFound, rest: 404, message: "No such endpoint.", cmsFallback: true },
  UNAUTHENTICATED: { code: Code.Unauthenticated, rest: 401, message: "HTTPS is required.", cmsFallback: true },
  PAYLOAD_TOO_LARGE: { code: Code.ResourceExhausted, rest: 413, message: "Request too large.", cmsFallback: true },
  METHOD_NOT_ALLOWED: { code: Code.Unimplemented, rest: 405, message: "Method not allowed.", cmsFallback: true },
  RATE_LIMITED: { code: Code.ResourceExhausted, rest: 429, message: "Rate limit exceeded. Retry with exponential backoff.", cmsFallback: true },
  QUERY_TIMEOUT: { code: Code.DeadlineExceeded, rest: 504, message: "The query ran longer than 5 seconds.", cmsFallback: true },
  INTERNAL_ERROR: { code: Code.Internal, rest: 500, message: "Internal error.", cmsFallback: true },
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
    httpStatus: entry.rest,
    retryAfterSeconds: opts.retryAfterSeconds ?? 0,
    fieldViolations: Object.entries(opts.fields ?? {}).map(([field, messages]) => ({ field, messages })),
  });
  return new ConnectError(
    message ?? entry.message,
    entry.code,
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

/** The HTTP status of a Connect error response with this code (the Connect protocol's, not ours). */
export function connectHttpStatus(code: Code): number {
  return codeToHttpStatus(code);
}

/**
 * The catalogue entry a ConnectError without a detail stands for: the entry
 * that carries its code (so the code is kept); internal_error where no
 * entry carries it.
 */
export const codeFallback: Readonly<Record<Code, ErrorCode>> = {
  [Code.Canceled]: "internal_error",
  [Code.Unknown]: "internal_error",
  [Code.InvalidArgument]: "validation_failed",
  [Code.DeadlineExceeded]: "timeout",
  [Code.NotFound]: "not_found",
  [Code.AlreadyExists]: "conflict",
  [Code.PermissionDenied]: "permission_denied",
  [Code.ResourceExhausted]: "rate_limited",
  [Code.FailedPrecondition]: "failed_precondition",
  [Code.Aborted]: "internal_error",
  [Code.OutOfRange]: "internal_error",
  [Code.Unimplemented]: "internal_error",
  [Code.Internal]: "internal_error",
  [Code.Unavailable]: "unavailable",
  [Code.DataLoss]: "internal_error",
  [Code.Unauthenticated]: "unauthenticated",
};

/** The REST status of any error (its detail's, else its code's catalogue entry's, else 500). */
export function restStatusOf(err: unknown): number {
  if (!(err instanceof ConnectError)) return catalogue.internal_error.rest;
  return errorDetail(err)?.httpStatus || catalogue[codeFallback[err.code] ?? "internal_error"].rest;
}

/** The CMS envelope's code for a status (a platform code written in the CMS envelope). */
export function cmsCodeFor(status: number): ErrorCode {
  return cmsFallbacks.get(status) ?? (status >= 500 ? "INTERNAL_ERROR" : "INVALID_PARAMETER");
}

const cmsFallbacks: ReadonlyMap<number, ErrorCode> = new Map(
  (Object.entries(catalogue) as [ErrorCode, CatalogueEntry][]).filter(([, e]) => e.cmsFallback).map(([c, e]) => [e.rest, c]),
);

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
    const fallback = codeFallback[err.code] ?? "internal_error";
    return appError(fallback, fallback === "internal_error" ? undefined : err.rawMessage, { cause: err });
  }
  return appError("internal_error", undefined, { cause: err });
}
