// The admin listener: the pulsebase.admin.v1 Connect services behind the
// operator token (Connect and gRPC-Web over HTTP/1.1, and gRPC too over
// cleartext HTTP/2 with prior knowledge on the same port; bound to 127.0.0.1
// by default). A device token never works here. gRPC health is open (load
// balancers probe it without credentials); reflection needs the token.
// With PULSEBASE_RPC_PIPELINE=fast (the default) the unary calls go through
// the same codecs and dispatcher as the public listener's, the access policy
// (operator token, or the console's roles and audit) run by the dispatcher;
// connect-node's router keeps Connect GETs, the streaming methods and
// everything with connect-node, the same policy run by an interceptor
// (docs/architecture.md, "One request through each protocol").
import { createContextValues } from "@connectrpc/connect";
import { fastifyConnectPlugin } from "@connectrpc/connect-fastify";
import Fastify, { LogController, type FastifyInstance } from "fastify";
import type { Logger } from "pino";
import { errorLogInterceptor } from "../transport/connect-node/error-log.js";
import { registerGrpcInfra } from "../transport/connect-node/grpc-infra.js";
import { operatorTokenPolicy, policyInterceptor } from "../transport/connect-node/interceptors.js";
import { Dispatcher } from "../transport/call/dispatcher.js";
import { registerRpcRoutes } from "../transport/rpc/rpc-routes.js";
import type { CallPolicy } from "../kernel/call-policy.js";
import { sendError } from "../transport/http/envelopes.js";
import { answerClientError } from "../transport/http/fastify-errors.js";
import { appError } from "../kernel/errors.js";
import { kClientAddress, kRequestId } from "../kernel/principal.js";
import { kUserAgent } from "../capabilities/console/principal.js";
import { h2cServerFactory } from "./h2c-server.js";
import { grpcMessageEncoding } from "../transport/connect-node/grpc-message.js";
import type { ServiceBinding } from "../kernel/module.js";
import { requestIdOf } from "../transport/edge/response-head.js";
import { isIP } from "node:net";

/**
 * Whether the admin listener answers a request with this Host (issue #28,
 * DNS rebinding: a web page whose host name the attacker points at
 * 127.0.0.1 would otherwise reach the listener as a same-origin page).
 * Accepted: no Host at all (not a browser), any IP literal (a page can only
 * have that origin by being served from that address), `localhost`, and the
 * configured names (PULSEBASE_ADMIN_HOST, PULSEBASE_ADMIN_HOSTS, the host
 * of PULSEBASE_CONSOLE_URL), with any port.
 */
export function adminHostAllowed(host: string | undefined, names: ReadonlySet<string>): boolean {
  if (host === undefined || host === "") return true;
  let name = host.trim().toLowerCase();
  if (name.startsWith("[")) {
    const end = name.indexOf("]");
    if (end < 0) return false;
    name = name.slice(1, end);
  } else {
    const colon = name.lastIndexOf(":");
    if (colon >= 0) name = name.slice(0, colon);
  }
  if (name.endsWith(".")) name = name.slice(0, -1);
  return isIP(name) !== 0 || name === "localhost" || names.has(name);
}

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
  /** Access control for the admin services (the console's roles and audit); the operator token alone when unset. */
  policy?: CallPolicy;
  /** Who serves unary Connect, gRPC and gRPC-Web calls (PULSEBASE_RPC_PIPELINE); default "fast". */
  rpcPipeline?: "fast" | "connect-node";
  /** Proxies whose X-Forwarded-For gives the client's address (audit log, sign-in limits). */
  trustedProxies?: string[];
  /** Host names answered besides localhost and IP literals (adminHostAllowed); others get 421. */
  allowedHosts?: string[];
}): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: opts.logger,
    bodyLimit: opts.bodyLimitBytes,
    genReqId: (req) => requestIdOf(req.headers["x-request-id"]),
    logController: opts.logController ?? new LogController({ disableRequestLogging: true }),
    forceCloseConnections: "idle",
    serverFactory: h2cServerFactory,
    trustProxy: opts.trustedProxies?.length ? opts.trustedProxies : false,
    // Unparseable requests and URLs: 400 in the envelope with X-Request-Id,
    // as on the public listener (issue #28, point 6), not Fastify's own JSON.
    clientErrorHandler: answerClientError,
    frameworkErrors: (err, req, reply) => {
      reply.header("x-request-id", req.id);
      return sendError(reply, "platform", err.code === "FST_ERR_MAX_PARAM_LENGTH" ? appError("not_found", "No such endpoint.") : appError("bad_request", "Malformed URL."));
    },
  }) as unknown as FastifyInstance;
  const hostNames = new Set((opts.allowedHosts ?? []).map((h) => h.trim().toLowerCase().replace(/^\[|\]$/g, "")).filter(Boolean));
  app.addHook("onRequest", async (req, reply) => {
    reply.header("x-request-id", req.id);
    const host = req.headers.host ?? (req.headers[":authority"] as string | undefined);
    if (!adminHostAllowed(host, hostNames)) {
      return sendError(reply, "platform", appError("misdirected_request", "This listener does not answer for this host name; add it to PULSEBASE_ADMIN_HOSTS if it is yours."));
    }
  });
  grpcMessageEncoding(app);
  app.get("/healthz", (_req, reply) => reply.send({ status: "ok" }));
  app.setNotFoundHandler((_req, reply) => sendError(reply, "platform", appError("not_found", "No such endpoint.")));
  for (const r of opts.extraRoutes ?? []) await r(app);
  const policy = opts.policy ?? operatorTokenPolicy(opts.operatorToken);
  // No consumer tokens and no body budget here: every method takes the
  // listener's body limit, as connect-node's router does.
  const dispatcher = new Dispatcher({
    services: opts.services,
    bodyLimitBytes: opts.bodyLimitBytes,
    anonymousBodyLimitBytes: opts.bodyLimitBytes,
    logger: opts.logger,
    policy,
    contextValues: (req, values) => values.set(kUserAgent, String(req.headers["user-agent"] ?? "")),
  });
  const fastPaths = (opts.rpcPipeline ?? "fast") === "fast" ? await registerRpcRoutes(app, { dispatcher, readMaxBytes: opts.bodyLimitBytes }) : new Set<string>();
  await app.register(async (scope) => {
    // The fast routes own POST on their paths.
    scope.addHook("onRoute", (route) => {
      if (fastPaths.has(route.url)) route.method = (Array.isArray(route.method) ? route.method : [route.method]).filter((x) => x !== "POST");
    });
    await scope.register(fastifyConnectPlugin, {
      routes: (router) => {
        for (const s of opts.services) s.mount(router);
      },
      interceptors: [errorLogInterceptor(opts.logger), policyInterceptor(policy)],
      contextValues: (req) =>
        createContextValues()
          .set(kRequestId, String(req.id))
          .set(kClientAddress, req.ip)
          .set(kUserAgent, String(req.headers["user-agent"] ?? "")),
      readMaxBytes: opts.bodyLimitBytes,
    });
  });
  await registerGrpcInfra(app, {
    services: opts.services,
    ready: opts.ready ?? (async () => {}),
    reflectionInterceptors: [policyInterceptor(operatorTokenPolicy(opts.operatorToken))],
    readMaxBytes: opts.bodyLimitBytes,
  });
  return app;
}
