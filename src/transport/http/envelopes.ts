// One envelope writer per interface. Platform (docs/devices.md, "Errors and
// what to retry"): { error, message }, and 422 { message, errors } (with the
// error code too when it is not validation_failed). CMS (docs/cms.md):
// { error: { status, code, message } }, the 429 without a code.
import type { FastifyReply } from "fastify";
import type { ConnectError } from "@connectrpc/connect";
import { catalogue, cmsCodeFor, errorDetail, isServerFault, restStatusOf, toAppError } from "../../kernel/errors.js";

export type Iface = "platform" | "cms";

export interface ErrorBody {
  status: number;
  body: unknown;
  retryAfter?: number;
}

export function errorBody(iface: Iface, error: ConnectError): ErrorBody {
  // (a ConnectError without a detail: the catalogue entry of its code)
  const err = toAppError(error);
  const detail = errorDetail(err);
  const status = restStatusOf(err);
  const code = detail?.code ?? "internal_error";
  const retryAfter = detail?.retryAfterSeconds || undefined;
  // Never leak internals: 500s carry the catalogue message only.
  const message = status >= 500 && (code === "internal_error" || code === "INTERNAL_ERROR")
    ? catalogue.internal_error.message
    : err.rawMessage;
  if (iface === "cms") {
    const cmsCode = /^[A-Z_]+$/.test(code) ? code : cmsCodeFor(status);
    const error: Record<string, unknown> = { status, code: cmsCode, message };
    if (status === 429) delete error.code;
    return { status, body: { error }, retryAfter };
  }
  if (status === 422) {
    const errors: Record<string, string[]> = {};
    for (const v of detail?.fieldViolations ?? []) errors[v.field] = [...v.messages];
    // A 422 that is not a plain validation failure also names its code.
    const body = code === "validation_failed" ? { message, errors } : { error: code, message, errors };
    return { status, body, retryAfter };
  }
  return { status, body: { error: code, message }, retryAfter };
}

/**
 * Writes the error in the interface's envelope. A server fault is logged
 * here unless the dispatcher (src/transport/call/dispatcher.ts) logged it
 * already (`logged`): a failed service call is logged there, once.
 */
export function sendError(reply: FastifyReply, iface: Iface, err: unknown, opts?: { logged: boolean }): FastifyReply {
  const e = toAppError(err);
  const { status, body, retryAfter } = errorBody(iface, e);
  // The translated error with its cause chain (down to the driver error, each with its stack; logger.ts).
  if (!opts?.logged && isServerFault(e, status)) reply.log.error({ err: e, status }, "request failed");
  if (retryAfter) reply.header("retry-after", String(retryAfter));
  return reply.code(status).type("application/json; charset=utf-8").send(body);
}
