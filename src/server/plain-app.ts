// The plain-HTTP listener exists only to refuse: CMS GET/HEAD
// requests are redirected (308) to HTTPS, every other /api/ request is 401,
// a gRPC call (HTTP/2 with prior knowledge, h2c) gets UNAUTHENTICATED.
// Health probes answer here too, for load balancers. Redirects point at the
// configured public address, never at the Host the client sent.
import { randomUUID } from "node:crypto";
import type { ServerHttp2Stream } from "node:http2";
import Fastify, { LogController, type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import type { Logger } from "pino";
import { sendError } from "../transport/http/envelopes.js";
import { ifaceOf } from "../transport/http/fastify-errors.js";
import { appError } from "../kernel/errors.js";
import { observeUnrouted } from "./access-log.js";
import { h2cServerFactory } from "./h2c-server.js";

export function buildPlainApp(opts: {
  logger: Logger;
  /** The HTTPS origin redirects point at (PULSEBASE_PUBLIC_URL, else https://localhost:<https port>). */
  redirectBase: () => string;
  logController?: LogController;
}): FastifyInstance {
  const refuse = (req: FastifyRequest, reply: FastifyReply) => {
    reply.header("x-request-id", req.id);
    const type = req.headers["content-type"];
    const stream = (req.raw as { stream?: ServerHttp2Stream }).stream;
    if (stream && typeof type === "string" && type.startsWith("application/grpc")) {
      // A trailers-only gRPC answer (one HEADERS frame ending the stream): 16, unauthenticated.
      reply.hijack();
      stream.respond({ ":status": 200, "content-type": type, "grpc-status": "16", "grpc-message": "HTTPS is required.", "x-request-id": String(req.id) }, { endStream: true });
      return;
    }
    if (ifaceOf(req.url) === "cms" && (req.method === "GET" || req.method === "HEAD")) {
      return reply.code(308).header("location", `${opts.redirectBase()}${req.url}`).send();
    }
    return sendError(reply, "platform", appError("unauthenticated", "HTTPS is required."));
  };
  const app = Fastify({
    loggerInstance: opts.logger,
    genReqId: () => randomUUID(),
    logController: opts.logController ?? new LogController({ disableRequestLogging: true }),
    forceCloseConnections: "idle",
    // gRPC clients speak HTTP/2 without TLS here: answer them in HTTP/2.
    serverFactory: h2cServerFactory,
    // Malformed URL encoding or an over-long segment is refused by the router
    // before any route: refuse it the same way (not in Fastify's own format).
    frameworkErrors: (_err, req, reply) => {
      observeUnrouted(reply);
      return refuse(req, reply);
    },
  }) as unknown as FastifyInstance;
  // Nothing is parsed: the request is refused whatever it carries.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", (_req, _payload, done) => done(null, undefined));
  app.get("/healthz", (_req, reply) => reply.header("x-request-id", _req.id).send({ status: "ok" }));
  app.all("/*", refuse);
  return app;
}
