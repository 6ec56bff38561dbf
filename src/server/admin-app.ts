// The admin listener: the pulsebase.admin.v1 Connect services behind the
// operator token (Connect and gRPC-Web over HTTP/1.1, and gRPC too over
// cleartext HTTP/2 with prior knowledge on the same port; bound to 127.0.0.1
// by default). A device token never works here. gRPC health is open (load
// balancers probe it without credentials); reflection needs the token.
import { createContextValues, type Interceptor } from "@connectrpc/connect";
import { fastifyConnectPlugin } from "@connectrpc/connect-fastify";
import Fastify, { LogController, type FastifyInstance } from "fastify";
import type { Logger } from "pino";
import { errorLogInterceptor } from "../transport/connect/error-log.js";
import { registerGrpcInfra } from "../transport/connect/grpc-infra.js";
import { operatorAuthInterceptor } from "../transport/connect/interceptors.js";
import { sendError } from "../transport/http/envelopes.js";
import { appError } from "../kernel/errors.js";
import { kClientAddress, kRequestId } from "../kernel/principal.js";
import { kUserAgent } from "../capabilities/console/principal.js";
import { h2cServerFactory } from "./h2c-server.js";
import { grpcMessageEncoding } from "../transport/connect/grpc-message.js";
import type { ServiceBinding } from "../kernel/module.js";
import { requestIdOf } from "./public-app.js";

export async function buildAdminApp(opts: {
  logger: Logger;
  /** Fastify's per-request log hooks (access log and request metrics, access-log.ts). */
  logController?: LogController;
  operatorToken: string;
  services: ServiceBinding[];
  bodyLimitBytes: number;
  /** The readiness probe behind grpc.health.v1 (always serving when absent). */
  ready?(): Promise<void>;
  extraRoutes?: ((app: FastifyInstance) => Promise<void> | void)[];
  /** Access control for the admin services (the console's roles); the operator token alone when unset. */
  authInterceptor?: Interceptor;
  /** Proxies whose X-Forwarded-For gives the client's address (audit log, sign-in limits). */
  trustedProxies?: string[];
}): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: opts.logger,
    bodyLimit: opts.bodyLimitBytes,
    genReqId: (req) => requestIdOf(req.headers["x-request-id"]),
    logController: opts.logController ?? new LogController({ disableRequestLogging: true }),
    forceCloseConnections: "idle",
    serverFactory: h2cServerFactory,
    trustProxy: opts.trustedProxies?.length ? opts.trustedProxies : false,
  }) as unknown as FastifyInstance;
  app.addHook("onRequest", async (req, reply) => {
    reply.header("x-request-id", req.id);
  });
  grpcMessageEncoding(app);
  app.get("/healthz", (_req, reply) => reply.send({ status: "ok" }));
  app.setNotFoundHandler((_req, reply) => sendError(reply, "platform", appError("not_found", "No such endpoint.")));
  for (const r of opts.extraRoutes ?? []) await r(app);
  await app.register(fastifyConnectPlugin, {
    routes: (router) => {
      for (const s of opts.services) router.service(s.service, s.impl as never);
    },
    interceptors: [errorLogInterceptor(opts.logger), opts.authInterceptor ?? operatorAuthInterceptor(opts.operatorToken)],
    contextValues: (req) =>
      createContextValues()
        .set(kRequestId, String(req.id))
        .set(kClientAddress, req.ip)
        .set(kUserAgent, String(req.headers["user-agent"] ?? "")),
    readMaxBytes: opts.bodyLimitBytes,
  });
  await registerGrpcInfra(app, {
    services: opts.services,
    ready: opts.ready ?? (async () => {}),
    reflectionInterceptors: [operatorAuthInterceptor(opts.operatorToken)],
    readMaxBytes: opts.bodyLimitBytes,
  });
  return app;
}
