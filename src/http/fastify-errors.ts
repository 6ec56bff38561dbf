// Fastify-level failures (body parsing, limits, unknown routes, wrong
// methods) answered in the envelope of the interface the path belongs to,
// never as a 500 or an HTML page.
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { appError } from "../internal/errors.js";
import { sendError, type Iface } from "./envelopes.js";
import type { RouteTable } from "./route-table.js";

export function ifaceOf(url: string): Iface {
  return url.startsWith("/api/v1/") || url === "/api/v1" ? "cms" : "platform";
}

function translate(err: FastifyError) {
  switch (err.code) {
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      return appError("payload_too_large");
    case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
    case "FST_ERR_CTP_INVALID_TYPE":
      return appError("unsupported_media_type");
    case "FST_ERR_CTP_EMPTY_JSON_BODY":
    case "FST_ERR_CTP_INVALID_JSON_BODY":
      return appError("bad_request", "Malformed JSON body.");
    case "FST_ERR_CTP_INVALID_CONTENT_LENGTH":
      return appError("bad_request", "Invalid Content-Length.");
    case "FST_INVALID_MULTIPART_CONTENT_TYPE":
      return appError("unsupported_media_type");
    default:
      if (err instanceof SyntaxError) return appError("bad_request", "Malformed JSON body.");
      if (err.statusCode === 413) return appError("payload_too_large");
      if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500) return appError("bad_request", err.message);
      return err;
  }
}

export function installErrorHandlers(app: FastifyInstance, table: RouteTable): void {
  const matchers = table.routes.map((r) => ({
    verb: r.verb,
    re: new RegExp("^" + r.path.replace(/:[a-z_][a-z0-9_]*/g, "[^/]+") + "/?$"),
  }));
  app.setErrorHandler((err: FastifyError, req: FastifyRequest, reply: FastifyReply) => {
    return sendError(reply, ifaceOf(req.url), translate(err));
  });
  app.setNotFoundHandler((req: FastifyRequest, reply: FastifyReply) => {
    const path = req.url.split("?")[0]!;
    const iface = ifaceOf(path);
    if (iface === "cms" && !["GET", "HEAD", "OPTIONS"].includes(req.method)) {
      return sendError(reply, iface, appError("METHOD_NOT_ALLOWED"));
    }
    const allowed = matchers.filter((m) => m.re.test(path)).map((m) => m.verb);
    if (allowed.length > 0) {
      reply.header("allow", [...new Set(allowed)].join(", "));
      return sendError(reply, iface, appError(iface === "cms" ? "METHOD_NOT_ALLOWED" : "method_not_allowed"));
    }
    return sendError(reply, iface, appError(iface === "cms" ? "NOT_FOUND" : "not_found", "No such endpoint."));
  });
}

/** JSON parser that takes an empty body as no body and answers bad JSON with 400. */
export function installJsonParser(app: FastifyInstance): void {
  const parse = app.getDefaultJsonParser("error", "error");
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "string" }, (req, body, done) => {
    // (trim() copies the body: only when it may start with white space)
    const text = body as string;
    const c0 = text.charCodeAt(0);
    if (text === "" || ((c0 <= 32 || c0 > 127) && text.trim() === "")) return done(null, undefined);
    parse(req, text, (err, value) => {
      if (err) return done(appError("bad_request", "Malformed JSON body.") as unknown as Error, undefined);
      done(null, value);
    });
  });
}
