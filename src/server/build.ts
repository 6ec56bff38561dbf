// The app factory: build(config, deps) wires stores, services and the three
// listeners; listen() binds them. Tests build on random ports and drive the
// result over real sockets or fastify.inject.
import type { FastifyInstance } from "fastify";
import type { AddressInfo } from "node:net";
import type { Logger } from "pino";
import type { Config } from "../kernel/config.js";
import type { Sql } from "../infra/storage/sql.js";
import { ObservedLogController } from "./access-log.js";
import { buildAdminApp } from "./admin-app.js";
import { createConsoleModule, type ConsoleModule } from "../capabilities/console/console-module.js";
import { createLogger, withErrorSerializers } from "../infra/logging/logger.js";
import { createMetrics, registerChangeBusMetrics, registerMetricsRoute, registerModuleGauges, registerNatsMetrics, registerPgPoolMetrics, type Metrics } from "./metrics.js";
import type { PulsebaseModule, QueueStatsSource } from "../kernel/module.js";
import { buildPlainApp } from "./plain-app.js";
import { buildPublicApp } from "./public-app.js";
import type { TlsMaterial } from "./tls.js";
import type { SigningKey } from "../capabilities/identity/token-keys.js";
import { createIdentityModule } from "../capabilities/identity/identity-module.js";
import { ChangeBus } from "../infra/cluster/change-bus.js";
import type { NatsLink } from "../infra/nats/nats-link.js";
import type { ConsumerPrincipal } from "../kernel/principal.js";
import { openNats } from "./open-storage.js";
import { addOwnListeners } from "../infra/sandbox/egress-address.js";

/** 4 MiB (docs/devices.md, "Limits"): the largest file part a device may send. */
export const MAX_FILE_BYTES = 4 * 1024 * 1024;

export interface Deps {
  sql: Sql;
  signingKeys: SigningKey[];
  operatorToken: string;
  tls?: TlsMaterial;
  logger?: Logger;
  /** The capability modules besides identity (modules.ts), given the shared parts. */
  modules?: (shared: Shared) => Promise<PulsebaseModule[]> | PulsebaseModule[];
}

/** What every module may use. */
export interface Shared {
  config: Config;
  sql: Sql;
  logger: Logger;
  /**
   * The process's one NATS connection (NATS_URL set), shared by every user:
   * the analytics queue, the function-event transport, the change bus.
   */
  nats?: NatsLink;
  /**
   * Changes that caches in every process must follow (CMS content, consumer
   * revocation, app key and plan, functions): cluster/change-bus.ts.
   */
  changes: ChangeBus;
  /**
   * A consumer's Bearer header to its principal (the identity module's, whose
   * cache follows consumer and app changes): for connections that outlive a
   * request (realtime), which check it again when those change.
   */
  authenticate(authorization: string | undefined): ConsumerPrincipal | Promise<ConsumerPrincipal>;
}

export interface Pulsebase {
  config: Config;
  /** Operator accounts, roles and the audit log (src/capabilities/console). */
  console: ConsoleModule;
  shared: Shared;
  public: FastifyInstance;
  admin: FastifyInstance;
  plain?: FastifyInstance;
  metrics: Metrics;
  modules: PulsebaseModule[];
  listen(): Promise<{ https: number; http?: number; admin: number }>;
  close(): Promise<void>;
}

export async function build(config: Config, deps: Deps): Promise<Pulsebase> {
  // Errors log as {type, message, code, stack, cause} whatever logger was given (logger.ts).
  const logger = withErrorSerializers(deps.logger ?? createLogger(config.logLevel));
  // Per server, not prom-client's global registry: tests build several servers in one process.
  // (The process defaults are collected once per process: metrics.ts.)
  const metrics = createMetrics();
  const observed = (listener: string) =>
    new ObservedLogController({ listener, metrics: metrics.http, accessLog: config.accessLog ? logger.child({ listener }) : undefined });
  const consoleParts = createConsoleModule({
    sql: deps.sql,
    logger,
    operatorToken: deps.operatorToken,
    config: config.console,
    mediaBaseUrl: config.mediaBaseUrl ?? `https://localhost:${config.httpsPort}`,
    // The console's home page and media previews read the other modules (made below).
    dataDir: config.dataDir,
    queues: () => Object.assign({}, ...modules.map((m) => m.gauges?.queues ?? {})) as Record<string, QueueStatsSource>,
    mediaRoute: () => modules.flatMap((m) => m.routes ?? []).find((r) => r.iface === "cms" && r.method === "GET" && r.path.endsWith("/cms/media/:fileId")),
  });
  const nats = openNats(config, logger, "pulsebase-server");
  const changes = new ChangeBus({
    sql: deps.sql,
    nats,
    subject: `${config.natsNamespace}.changes`,
    pollMs: config.changePollMs,
    onError: (err) => logger.warn({ err }, "change bus: PostgreSQL or NATS failed (retrying)"),
  });
  const identity = createIdentityModule({ sql: deps.sql, signingKeys: deps.signingKeys, tokenTtlSeconds: config.tokenTtlSeconds, changes, cacheTtlMs: config.cacheTtlMs });
  const shared: Shared = { config, sql: deps.sql, logger, nats, changes, authenticate: identity.authenticate };
  const modules = [identity, ...((await deps.modules?.(shared)) ?? [])];

  // Readiness: the storage answers (/readyz and grpc.health.v1 on both listeners).
  const ready = async () => {
    await deps.sql.query("SELECT 1");
  };
  const publicLog = observed("public");
  const { app: publicApp } = await buildPublicApp({
    logger,
    logController: publicLog,
    tls: deps.tls,
    bodyLimitBytes: config.bodyLimitBytes,
    bodyBudget: {
      limitBytes: config.bodyBudgetBytes,
      shareBytes: config.bodyAppShareBytes,
      anonymousShareBytes: config.bodyAnonymousShareBytes,
      addressShareBytes: config.bodyAddressShareBytes,
      timeoutMs: config.bodyTimeoutSeconds * 1000,
      minBytesPerSecond: config.bodyMinRateBytes,
    },
    http2MaxStreams: config.http2MaxStreams,
    idleTimeoutMs: config.idleTimeoutSeconds * 1000,
    maxFileBytes: MAX_FILE_BYTES,
    trustedProxies: config.trustedProxies,
    publicUrl: config.publicUrl,
    mediaBaseUrl: config.mediaBaseUrl ?? `https://localhost:${config.httpsPort}`,
    corsOrigins: config.corsOrigins,
    rpcPipeline: config.rpcPipeline,
    services: modules.flatMap((m) => m.device ?? []),
    authenticate: identity.authenticate,
    ready,
    routes: modules.flatMap((m) => m.routes ?? []),
    upgrades: modules.flatMap((m) => m.upgrades ?? []),
    onClosing: () => {
      for (const m of modules) m.closing?.();
    },
  });
  const admin = await buildAdminApp({
    logger,
    logController: observed("admin"),
    operatorToken: deps.operatorToken,
    services: [...modules, consoleParts].flatMap((m) => m.admin ?? []),
    bodyLimitBytes: config.bodyLimitBytes,
    ready,
    policy: consoleParts.policy,
    rpcPipeline: config.rpcPipeline,
    trustedProxies: config.trustedProxies,
    // DNS rebinding (docs/console.md): localhost and IP literals, plus these names.
    allowedHosts: [config.adminHost, ...config.adminHosts, ...(config.console.publicUrl ? [new URL(config.console.publicUrl).hostname] : [])],
    extraRoutes: [
      (app) => registerMetricsRoute(app, metrics, { metricsToken: config.metricsToken, operatorToken: deps.operatorToken }),
      (app) => consoleParts.adminRoutes(app),
    ],
  });
  const redirectBase = () => config.publicUrl ?? `https://localhost:${(publicApp.server.address() as AddressInfo | null)?.port ?? config.httpsPort}`;
  const plain = config.httpPort > 0 || deps.tls ? buildPlainApp({ logger, redirectBase, logController: observed("http") }) : undefined;
  const poolStats = deps.sql.poolStats?.bind(deps.sql);
  if (poolStats) registerPgPoolMetrics(metrics.registry, poolStats);
  if (nats) registerNatsMetrics(metrics.registry, nats);
  registerChangeBusMetrics(metrics.registry, changes);
  for (const m of modules) {
    if (m.gauges) registerModuleGauges(metrics.registry, m.gauges, (what) => (err) => logger.warn({ err }, `metrics: ${what} statistics unavailable`));
  }
  // The access log and request metrics read Fastify internals: a Fastify
  // that no longer matches fails here, not by silently labelling every
  // request "(unmatched)". (Readies the public app: nothing is added to it later.)
  await publicLog.selfCheck(publicApp, "/healthz");

  let started = false;
  // A function's fetch never reaches this server's listeners (nor a worker's
  // metrics port on this machine): the configured ports from the start, the
  // bound addresses once bound (issue #28; egress-address.ts).
  const ownListeners: Array<() => void> = [];
  const markOwn = (l: Array<{ address: string; port: number }>) => ownListeners.push(addOwnListeners(l));
  return {
    config,
    console: consoleParts,
    shared,
    public: publicApp,
    admin,
    metrics,
    plain,
    modules,
    async listen() {
      markOwn([
        { address: config.host, port: config.httpsPort }, { address: config.adminHost, port: config.adminPort },
        { address: config.host, port: config.httpPort }, { address: config.adminHost, port: config.workerMetricsPort },
      ]);
      await changes.start();
      for (const m of [...modules, consoleParts]) await m.start?.();
      started = true;
      await publicApp.listen({ host: config.host, port: config.httpsPort });
      await admin.listen({ host: config.adminHost, port: config.adminPort });
      let http: number | undefined;
      if (plain) {
        await plain.listen({ host: config.host, port: config.httpPort });
        http = (plain.server.address() as AddressInfo).port;
      }
      markOwn([publicApp, admin, plain].flatMap((a) => a?.addresses() ?? []).filter((a) => typeof a === "object"));
      return {
        https: (publicApp.server.address() as AddressInfo).port,
        admin: (admin.server.address() as AddressInfo).port,
        http,
      };
    },
    async close() {
      // Stop taking requests, drain in-flight ones, then stop background work.
      await Promise.all([publicApp.close(), admin.close(), plain?.close()]);
      for (const release of ownListeners.splice(0)) release();
      if (started) for (const m of [consoleParts, ...modules].reverse()) await m.stop?.();
      await changes.stop();
      await nats?.close();
    },
  };
}
