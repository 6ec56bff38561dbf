// The admin listener: the pulsebase.admin.v1 Connect services behind the
// operator token (Connect and gRPC-Web over HTTP/1.1; bound to 127.0.0.1 by
// default). A device token never works here.
import { createContextValues } from "@connectrpc/connect";
import { fastifyConnectPlugin } from "@connectrpc/connect-fastify";
import Fastify, { LogController, type FastifyInstance } from "fastify";
import type { Logger } from "pino";
import { operatorAuthInterceptor } from "../connect/interceptors.js";
import { sendError } from "../http/envelopes.js";
import { appError } from "../internal/errors.js";
import { kRequestId } from "../internal/principal.js";
import type { ServiceBinding } from "./module.js";
import { requestIdOf } from "./public-app.js";

export async function buildAdminApp(opts: {
  logger: Logger;
  operatorToken: string;
  services: ServiceBinding[];
  bodyLimitBytes: number;
  extraRoutes?: ((app: FastifyInstance) => Promise<void> | void)[];
}): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: opts.logger,
    bodyLimit: opts.bodyLimitBytes,
    genReqId: (req) => requestIdOf(req.headers["x-request-id"]),
    logController: new LogController({ disableRequestLogging: true }),
    forceCloseConnections: "idle",
  }) as unknown as FastifyInstance;
  app.addHook("onRequest", async (req, reply) => {
    reply.header("x-request-id", req.id);
  });
  app.get("/healthz", (_req, reply) => reply.send({ status: "ok" }));
  app.setNotFoundHandler((_req, reply) => sendError(reply, "platform", appError("not_found", "No such endpoint.")));
  for (const r of opts.extraRoutes ?? []) await r(app);
  await app.register(fastifyConnectPlugin, {
    routes: (router) => {
      for (const s of opts.services) router.service(s.service, s.impl as never);
    },
    interceptors: [operatorAuthInterceptor(opts.operatorToken)],
    contextValues: (req) => createContextValues().set(kRequestId, String(req.id)),
    readMaxBytes: opts.bodyLimitBytes,
  });
  return app;
}
