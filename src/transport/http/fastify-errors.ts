// Fastify-level failures (body parsing, limits, unknown routes, wrong
// methods) answered in the envelope of the interface the path belongs to,
// never as a 500 or an HTML page. Which catalogue error a Fastify error is:
// transport/edge/fastify-errors.ts, shared with the RPC routes and the lane.
import { randomUUID } from "node:crypto";
import type { ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { ConnectionError, FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { appError } from "../../kernel/errors.js";
import { fromFastify } from "../edge/fastify-errors.js";
import { errorBody, sendError, type Iface } from "./envelopes.js";
import type { RouteTable } from "./route-table.js";

export function ifaceOf(url: string): Iface {
  return url.startsWith("/api/v1/") || url === "/api/v1" ? "cms" : "platform";
}

export function installErrorHandlers(app: FastifyInstance, table: RouteTable): void {
  app.setErrorHandler((err: FastifyError, req: FastifyRequest, reply: FastifyReply) => {
    return sendError(reply, ifaceOf(req.url), fromFastify(err));
  });
  app.setNotFoundHandler(notFoundHandler(table));
}

/**
 * The answer for a path no route takes: 405 naming the allowed methods when
 * the path exists, else 404. Also called before a body is read (a request
 * to no route has no business sending one).
 */
export function notFoundHandler(table: RouteTable): (req: FastifyRequest, reply: FastifyReply) => FastifyReply {
  const matchers = table.routes.map((r) => ({
    verb: r.verb,
    re: new RegExp("^" + r.path.replace(/:[a-z_][a-z0-9_]*/g, "[^/]+") + "/?$"),
  }));
  return (req: FastifyRequest, reply: FastifyReply) => {
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
  };
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

const answeredClientErrors = new WeakSet<Socket>();
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * Node's HTTP/1 parser refuses bytes it cannot parse (control characters in a
 * header, what is left after a body shorter than its Content-Length) before
 * Fastify sees a request. As Fastify's `clientErrorHandler`: answer 400 in
 * the platform (or CMS) envelope instead of Fastify's own JSON, then close
 * the connection, since nothing after the error can be parsed. A complete
 * request still being answered on the connection keeps its own answer,
 * written in full, and the connection closes after it.
 */
export function answerClientError(err: ConnectionError, socket: Socket): void {
  if (err.code === "ECONNRESET" || socket.destroyed || answeredClientErrors.has(socket)) return;
  // Node calls again for every later chunk on a connection whose parser failed.
  answeredClientErrors.add(socket);
  const inFlight = (socket as Socket & { _httpMessage?: ServerResponse })._httpMessage;
  if (inFlight) {
    // A body cut short (the client closed, or what followed could not be
    // parsed) can never complete: drop the connection as Node does, which
    // aborts the request (nothing of it is processed).
    if (!inFlight.req.complete) {
      // Its body cannot be read past this point (an invalid chunk size, a
      // Transfer-Encoding the parser refuses, the client's end mid-body):
      // unless its answer has started, the client gets the 400 (the request
      // id it sent, else a new one), then the connection closes (issue #28,
      // point 6). The handler's own answer, if any comes, is dropped.
      if (inFlight.headersSent || inFlight.writableEnded || !socket.writable) {
        socket.destroy();
        return;
      }
      const { status, body } = errorBody(ifaceOf(inFlight.req.url ?? ""), appError("bad_request", "Malformed HTTP request."));
      const text = JSON.stringify(body);
      const sent = inFlight.req.headers["x-request-id"];
      inFlight.shouldKeepAlive = false;
      inFlight.writeHead(status, {
        "content-type": "application/json; charset=utf-8",
        "x-request-id": typeof sent === "string" && UUID_RE.test(sent) ? sent.toLowerCase() : randomUUID(),
        "content-length": Buffer.byteLength(text),
        connection: "close",
      });
      inFlight.end(text);
      inFlight.once("finish", () => socket.destroySoon());
      return;
    }
    // A complete request before the unparseable bytes gets its answer.
    if (!inFlight.headersSent) inFlight.shouldKeepAlive = false;
    inFlight.once("finish", () => socket.destroySoon());
    return;
  }
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  // (400 for all: the catalogue has no 408 or 431)
  const message = err.code === "HPE_HEADER_OVERFLOW"
    ? "The request headers are too large."
    : err.code === "ERR_HTTP_REQUEST_TIMEOUT" ? "The request did not arrive in time." : "Malformed HTTP request.";
  // (typed as the JSON of a Buffer, it is the Buffer the parser was given)
  const raw = err.rawPacket as unknown;
  const head = Buffer.isBuffer(raw) ? raw.toString("latin1", 0, 2048) : "";
  const path = /^[A-Z]+ (\S+) HTTP\//.exec(head)?.[1] ?? "";
  const { status, body } = errorBody(ifaceOf(path), appError("bad_request", message));
  const text = JSON.stringify(body);
  // Every answer has a request id (docs/devices.md), this one too (a new
  // one: the request's headers could not be read).
  const id = randomUUID();
  socket.write(
    `HTTP/1.1 ${status} Bad Request\r\nContent-Type: application/json; charset=utf-8\r\nX-Request-Id: ${id}\r\n`
      + `Content-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`,
  );
  // end, then destroy once the answer is flushed (not before: it would be lost)
  socket.destroySoon();
}
