// The public listener: REST gateway + Connect handlers of the device
// services (Connect, gRPC, gRPC-Web; HTTP/1.1 and HTTP/2 through ALPN), TLS.
import type { AddressInfo } from "node:net";
import { getOption } from "@bufbuild/protobuf";
import { createContextValues } from "@connectrpc/connect";
import { fastifyConnectPlugin } from "@connectrpc/connect-fastify";
import corsPlugin from "@fastify/cors";
import Fastify, { LogController, type FastifyInstance, type FastifyServerOptions } from "fastify";
import type { Logger } from "pino";
import { auth as authOption, Auth } from "../../gen/pulsebase/common/v1/options_pb.js";
import type { Http2SecureServer } from "node:http2";
import { observeUnrouted, ObservedLogController } from "./access-log.js";
import { lazyChildLogger } from "../infra/logging/lazy-child-logger.js";
import { errorLogInterceptor } from "../transport/connect-node/error-log.js";
import { registerGrpcInfra } from "../transport/connect-node/grpc-infra.js";
import { consumerAuthInterceptor } from "../transport/connect-node/interceptors.js";
import { BodyBudget, hasBody, type BodyBudgetOptions } from "../transport/call/body-budget.js";
import { Dispatcher } from "../transport/call/dispatcher.js";
import { registerRpcRoutes } from "../transport/rpc/rpc-routes.js";
import { installStreamLane } from "../transport/rpc/stream-lane.js";
import { connectBodyGate } from "../transport/connect-node/connect-body-gate.js";
import { sendError } from "../transport/http/envelopes.js";
import { forwardedValue, isHost, ProxyTrust } from "../transport/http/forwarded.js";
import { answerClientError, ifaceOf, installErrorHandlers, installJsonParser, notFoundHandler } from "../transport/http/fastify-errors.js";
import { registerGateway, registerRawRoute } from "../transport/http/gateway.js";
import { buildOpenApi } from "../transport/http/openapi.js";
import { grpcMessageEncoding } from "../transport/connect-node/grpc-message.js";
import { RouteTable } from "../transport/http/route-table.js";
import { appError } from "../kernel/errors.js";
import { fromFastify } from "../transport/edge/fastify-errors.js";
import { corsPolicy, requestIdOf } from "../transport/edge/response-head.js";
import { kClientAddress, kConsumer, kRequestId, type ConsumerPrincipal } from "../kernel/principal.js";
import type { RawRoute, ServiceBinding, UpgradeRoute } from "../kernel/module.js";
import { installUpgrades } from "../transport/edge/upgrade.js";
import type { TlsMaterial } from "./tls.js";

export interface PublicAppOptions {
  logger: Logger;
  /** Fastify's per-request log hooks (access log and request metrics, access-log.ts). */
  logController?: LogController;
  tls?: TlsMaterial;
  bodyLimitBytes: number;
  /** The process's budget of request bodies and the pace they must arrive at (body-budget.ts). */
  bodyBudget: BodyBudgetOptions;
  /** Concurrent streams of one HTTP/2 connection (more are refused). */
  http2MaxStreams: number;
  /** Inactivity limit of a connection (no bytes either way), 0 for none. */
  idleTimeoutMs?: number;
  maxFileBytes: number;
  trustedProxies: string[];
  /** Where redirects to HTTPS point (PULSEBASE_PUBLIC_URL); unset: the trusted proxy's X-Forwarded-Host, else localhost. */
  publicUrl?: string;
  /** {media_base_url}, for the media path in /openapi.json. */
  mediaBaseUrl?: string;
  corsOrigins: string[];
  /** Who serves unary Connect, gRPC and gRPC-Web calls (PULSEBASE_RPC_PIPELINE); default "fast". */
  rpcPipeline?: "fast" | "connect-node";
  services: ServiceBinding[];
  /** The principal at once when it is known (cached), else a promise of it. */
  authenticate(h: string | undefined): ConsumerPrincipal | Promise<ConsumerPrincipal>;
  ready(): Promise<void>;
  /** The modules' raw routes (media files). */
  routes?: RawRoute[];
  /** The modules' HTTP/1.1 Upgrade routes (the realtime WebSocket). */
  upgrades?: UpgradeRoute[];
  /** Told when the listener starts closing (modules end their WebSockets and event streams). */
  onClosing?(): void;
}

/**
 * Largest body of a route that takes no consumer token (registration, token
 * issue, CMS reads, health and reflection): what those requests need, with
 * room to spare; clients without a token cannot make the server buffer more.
 */
export const ANONYMOUS_BODY_LIMIT_BYTES = 64 * 1024;

/**
 * Largest HTTP/2 header list (the sum of name + value + 32 per header, RFC
 * 9113 6.5.2), advertised in SETTINGS; HTTP/1.1 has Node's 16 KiB.
 */
export const MAX_HEADER_LIST_BYTES = 16 * 1024;

export async function buildPublicApp(opts: PublicAppOptions): Promise<{ app: FastifyInstance; table: RouteTable }> {
  const base: FastifyServerOptions = {
    loggerInstance: opts.logger,
    bodyLimit: opts.bodyLimitBytes,
    genReqId: (req) => requestIdOf(req.headers["x-request-id"]),
    logController: opts.logController ?? new LogController({ disableRequestLogging: true }),
    childLoggerFactory: lazyChildLogger,
    return503OnClosing: true,
    forceCloseConnections: "idle",
    // Socket inactivity limit (HTTP/1.1 and HTTP/2 sessions alike): a client
    // that stops sending mid-request is cut off, not kept for ever.
    connectionTimeout: opts.idleTimeoutMs ?? 120_000,
    // unparseable HTTP/1 requests: 400 in the envelope (fastify-errors.ts)
    clientErrorHandler: answerClientError,
    // req.ip is the proxy's client only for configured proxies.
    trustProxy: opts.trustedProxies.length ? opts.trustedProxies : false,
    // The router refuses malformed URL encoding and over-long path segments
    // before any hook runs, in Fastify's own format: answer them in the
    // interface's envelope with X-Request-Id (docs/devices.md, "Errors and what to retry").
    frameworkErrors: (err, req, reply) => {
      observeUnrouted(reply);
      reply.header("x-request-id", req.id);
      return sendError(reply, ifaceOf(req.url), fromFastify(err));
    },
  };
  // HTTP/2 limits, advertised in the server's SETTINGS (Node's defaults
  // advertise none): streams a client opens past the limit are refused
  // (REFUSED_STREAM while it has not acknowledged the settings, a connection
  // error once it has); a header list over the limit resets its stream.
  const http2 = { settings: { maxConcurrentStreams: opts.http2MaxStreams, maxHeaderListSize: MAX_HEADER_LIST_BYTES } };
  const app = (opts.tls
    ? Fastify({ ...base, http2: true, http2SessionTimeout: opts.idleTimeoutMs ?? 120_000, https: { allowHTTP1: true, key: opts.tls.key, cert: opts.tls.cert, ...http2 } } as unknown as FastifyServerOptions)
    : Fastify(base)) as unknown as FastifyInstance;
  const proxies = new ProxyTrust(opts.trustedProxies);
  // Clients without a token have a share per address: behind a trusted
  // proxy, the client it forwards for (as req.ip), else the peer.
  const budget = new BodyBudget({
    ...opts.bodyBudget,
    clientAddress: (peer, headers) => (proxies.trusts(peer) ? (forwardedValue(headers["x-forwarded-for"]) ?? peer) : peer),
  });
  app.addHook("onClose", (_app, done) => {
    budget.close();
    done();
  });

  // A callback hook, not an async one: no promise per request on the hot path.
  app.addHook("onRequest", (req, reply, done) => {
    reply.header("x-request-id", req.id);
    // Behind a TLS-terminating proxy, its X-Forwarded-Proto decides; without
    // TLS on this listener, only a trusted proxy saying https gets through.
    const fromProxy = proxies.trusts(req.socket.remoteAddress);
    const xfp = fromProxy ? (forwardedValue(req.headers["x-forwarded-proto"]) ?? "").toLowerCase() : "";
    const plain = xfp ? xfp === "http" : !opts.tls;
    if (!plain) {
      // No route takes it: answered before its body is read (Fastify would parse it first).
      if (req.is404 && hasBody(req.raw)) return void notFound(req, reply);
      return done();
    }
    if (ifaceOf(req.url) === "cms" && (req.method === "GET" || req.method === "HEAD")) {
      // Never a Host the client chose: the configured address, else what the trusted proxy says.
      const host = fromProxy ? forwardedValue(req.headers["x-forwarded-host"]) : undefined;
      const base = opts.publicUrl ?? (host && isHost(host) ? `https://${host}` : `https://localhost:${(app.server.address() as AddressInfo | null)?.port ?? 443}`);
      reply.code(308).header("location", `${base}${req.url}`).send();
      return;
    }
    sendError(reply, ifaceOf(req.url), appError("unauthenticated", "HTTPS is required."));
  });

  // (the same policy gives the stream lane its headers, below)
  const cors = corsPolicy(opts.corsOrigins);
  await app.register(corsPlugin, cors.plugin);
  installJsonParser(app);
  // Only JSON bodies are accepted (415 otherwise); multipart only on the
  // routes that take it (the gateway scopes the parser to them).
  app.removeContentTypeParser("text/plain");

  const table = new RouteTable();
  for (const s of opts.services) table.addService(s);
  installErrorHandlers(app, table);
  const notFound = notFoundHandler(table);
  // Every unary call, whatever its protocol, goes through the one dispatcher
  // (docs/architecture.md, "One request through each protocol").
  const dispatcher = new Dispatcher({
    services: opts.services,
    authenticate: opts.authenticate,
    budget,
    bodyLimitBytes: opts.bodyLimitBytes,
    anonymousBodyLimitBytes: ANONYMOUS_BODY_LIMIT_BYTES,
    logger: opts.logger,
  });
  await registerGateway(app, {
    table,
    dispatcher,
    maxFileBytes: opts.maxFileBytes,
    bodyLimitBytes: opts.bodyLimitBytes,
    anonymousBodyLimitBytes: ANONYMOUS_BODY_LIMIT_BYTES,
    budget,
  });

  const openapi = JSON.stringify(buildOpenApi(table, { title: "Pulsebase device and content API", version: "1.0.0" }, opts));
  app.get("/openapi.json", (_req, reply) => reply.type("application/json").send(openapi));
  app.get("/healthz", (_req, reply) => reply.send({ status: "ok" }));
  app.get("/readyz", async (_req, reply) => {
    try {
      await opts.ready();
      return reply.send({ status: "ready" });
    } catch (err) {
      return sendError(reply, "platform", err);
    }
  });
  for (const r of opts.routes ?? []) registerRawRoute(app, r);
  // WebSocket upgrades (HTTP/1.1 only) go to the modules' routes, under the
  // listener's HTTPS rule; closing the listener refuses new ones and ends the
  // open ones (the server's close would otherwise wait for them).
  const upgrades = installUpgrades(app.server as unknown as import("node:http").Server, {
    routes: opts.upgrades ?? [],
    secure: (req) => {
      const xfp = proxies.trusts(req.socket.remoteAddress) ? (forwardedValue(req.headers["x-forwarded-proto"]) ?? "").toLowerCase() : "";
      return xfp ? xfp !== "http" : Boolean(opts.tls);
    },
    requestId: (req) => requestIdOf(req.headers["x-request-id"]),
  });
  app.addHook("preClose", (done) => {
    upgrades.close();
    opts.onClosing?.();
    done();
  });

  // PULSEBASE_RPC_PIPELINE=fast (the default): unary Connect POSTs, gRPC
  // and gRPC-Web through the project's codecs and the dispatcher
  // (src/transport/rpc/rpc-routes.ts). connect-node's router keeps what
  // they do not take: Connect GETs of idempotent methods, 405s for other
  // methods, and everything with PULSEBASE_RPC_PIPELINE=connect-node.
  const fastPaths = (opts.rpcPipeline ?? "fast") === "fast" ? await registerRpcRoutes(app, { dispatcher, readMaxBytes: opts.bodyLimitBytes }) : new Set<string>();
  // HTTP/2 calls to those routes are taken off the stream before Node's
  // compatibility layer and Fastify (src/transport/rpc/stream-lane.ts), with
  // the headers and records the routes would give them. Left to the routes:
  // calls through a trusted proxy (its forwarded client address), with an
  // Origin the CORS list must check, and any call once the server closes
  // (Fastify's 503).
  if (opts.tls && fastPaths.size > 0) {
    let closing = false;
    app.addHook("preClose", (done) => {
      closing = true;
      done();
    });
    const observed = opts.logController instanceof ObservedLogController ? opts.logController : undefined;
    installStreamLane(app.server as unknown as Http2SecureServer, {
      dispatcher,
      readMaxBytes: opts.bodyLimitBytes,
      cors,
      takes: (stream) => !closing && !proxies.trusts(stream.session?.socket?.remoteAddress),
      observe: observed?.recordCall.bind(observed),
      logger: opts.logger,
    });
  }

  // The Connect plugin installs its own parsers (application/json included);
  // it may only do so in a scope without ours.
  const consumerPaths = new Set<string>();
  for (const s of opts.services) {
    for (const m of s.service.methods) {
      if (getOption(m, authOption) === Auth.CONSUMER_UNSPECIFIED) consumerPaths.add(`/${s.service.typeName}/${m.name}`);
    }
  }
  const gate = { budget, authenticate: opts.authenticate, bodyLimitBytes: opts.bodyLimitBytes, anonymousBodyLimitBytes: ANONYMOUS_BODY_LIMIT_BYTES };
  await app.register(async (scope) => {
    scope.removeContentTypeParser("application/json");
    // The fast routes own POST on their paths.
    scope.addHook("onRoute", (route) => {
      if (fastPaths.has(route.url)) route.method = (Array.isArray(route.method) ? route.method : [route.method]).filter((x) => x !== "POST");
    });
    connectBodyGate(scope, { ...gate, needsConsumer: (path) => consumerPaths.has(path) });
    grpcMessageEncoding(scope);
    await scope.register(fastifyConnectPlugin, {
      routes: (router) => {
        for (const s of opts.services) s.mount(router);
      },
      interceptors: [errorLogInterceptor(opts.logger), consumerAuthInterceptor(opts.authenticate)],
      contextValues: (req) => {
        const values = createContextValues().set(kRequestId, String(req.id)).set(kClientAddress, req.ip);
        return req.pulsebaseConsumer ? values.set(kConsumer, req.pulsebaseConsumer) : values;
      },
      readMaxBytes: opts.bodyLimitBytes,
    });
  });
  // grpc.health.v1 and reflection, without a consumer token: the device
  // schemas are public (like /openapi.json).
  await registerGrpcInfra(app, {
    services: opts.services,
    ready: opts.ready,
    readMaxBytes: opts.bodyLimitBytes,
    gate: (scope) => connectBodyGate(scope, { ...gate, needsConsumer: () => false }),
  });
  return { app, table };
}
