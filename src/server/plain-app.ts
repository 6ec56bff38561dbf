// The plain-HTTP listener exists only to refuse (DECISIONS 1): CMS GET/HEAD
// requests are redirected (308) to HTTPS, every other /api/ request is 401.
// Health probes answer here too, for load balancers. Redirects point at the
// configured public address, never at the Host the client sent.
import { randomUUID } from "node:crypto";
import Fastify, { LogController, type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import type { Logger } from "pino";
import { sendError } from "../transport/http/envelopes.js";
import { ifaceOf } from "../transport/http/fastify-errors.js";
import { appError } from "../kernel/errors.js";
import { observeUnrouted } from "./access-log.js";

export function buildPlainApp(opts: {
  logger: Logger;
  /** The HTTPS origin redirects point at (PULSEBASE_PUBLIC_URL, else https://localhost:<https port>). */
  redirectBase: () => string;
  logController?: LogController;
}): FastifyInstance {
  const refuse = (req: FastifyRequest, reply: FastifyReply) => {
    reply.header("x-request-id", req.id);
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
