// The app factory: build(config, deps) wires stores, services and the three
// listeners; listen() binds them. Tests build on random ports and drive the
// result over real sockets or fastify.inject.
import { join } from "node:path";
import type { FastifyInstance } from "fastify";
import type { AddressInfo } from "node:net";
import pino, { type Logger } from "pino";
import type { Config } from "../config/config.js";
import { createIdentityModule } from "../identity/identity-module.js";
import type { Sql } from "../storage/sql.js";
import { buildAdminApp } from "./admin-app.js";
import type { PulsebaseModule } from "./module.js";
import { buildPlainApp } from "./plain-app.js";
import { buildPublicApp } from "./public-app.js";
import type { TlsMaterial } from "./tls.js";
import type { SigningKey } from "../identity/token-keys.js";
import { Authenticator } from "../identity/authenticator.js";
import { IdentityStore } from "../identity/identity-store.js";
import { TokenService } from "../identity/tokens.js";

/** 4 MiB (DECISIONS 12): the largest file part a device may send. */
export const MAX_FILE_BYTES = 4 * 1024 * 1024;

export interface Deps {
  sql: Sql;
  signingKeys: SigningKey[];
  operatorToken: string;
  tls?: TlsMaterial;
  logger?: Logger;
  /** Extra capability modules, given the shared parts. */
  modules?: (shared: Shared) => Promise<PulsebaseModule[]> | PulsebaseModule[];
}

/** What every module may use. */
export interface Shared {
  config: Config;
  sql: Sql;
  logger: Logger;
  identity: IdentityStore;
  auth: Authenticator;
  tokens: TokenService;
}

export interface Pulsebase {
  config: Config;
  shared: Shared;
  public: FastifyInstance;
  admin: FastifyInstance;
  plain?: FastifyInstance;
  modules: PulsebaseModule[];
  listen(): Promise<{ https: number; http?: number; admin: number }>;
  close(): Promise<void>;
}

export async function build(config: Config, deps: Deps): Promise<Pulsebase> {
  const logger = deps.logger ?? pino({ level: config.logLevel });
  const identity = new IdentityStore(deps.sql);
  const tokens = new TokenService(deps.signingKeys, config.tokenTtlSeconds);
  const auth = new Authenticator(identity, tokens);
  const shared: Shared = { config, sql: deps.sql, logger, identity, auth, tokens };
  const modules = [createIdentityModule(shared), ...((await deps.modules?.(shared)) ?? [])];

  const authenticate = (h: string | undefined) => auth.known(h) ?? auth.fromAuthorization(h);
  const { app: publicApp } = await buildPublicApp({
    logger,
    tls: deps.tls,
    bodyLimitBytes: config.bodyLimitBytes,
    maxFileBytes: MAX_FILE_BYTES,
    trustedProxies: config.trustedProxies,
    corsOrigins: config.corsOrigins,
    services: modules.flatMap((m) => m.device ?? []),
    authenticate,
    ready: async () => {
      await deps.sql.query("SELECT 1");
    },
    extraRoutes: modules.flatMap((m) => (m.publicRoutes ? [m.publicRoutes.bind(m)] : [])),
  });
  const admin = await buildAdminApp({
    logger,
    operatorToken: deps.operatorToken,
    services: modules.flatMap((m) => m.admin ?? []),
    bodyLimitBytes: config.bodyLimitBytes,
  });
  const plain = config.httpPort > 0 || deps.tls ? buildPlainApp({ logger, httpsPort: config.httpsPort }) : undefined;

  let started = false;
  return {
    config,
    shared,
    public: publicApp,
    admin,
    plain,
    modules,
    async listen() {
      for (const m of modules) await m.start?.();
      started = true;
      await publicApp.listen({ host: config.host, port: config.httpsPort });
      await admin.listen({ host: config.adminHost, port: config.adminPort });
      let http: number | undefined;
      if (plain) {
        await plain.listen({ host: config.host, port: config.httpPort });
        http = (plain.server.address() as AddressInfo).port;
      }
      return {
        https: (publicApp.server.address() as AddressInfo).port,
        admin: (admin.server.address() as AddressInfo).port,
        http,
      };
    },
    async close() {
      // Stop taking requests, drain in-flight ones, then stop background work.
      await Promise.all([publicApp.close(), admin.close(), plain?.close()]);
      if (started) for (const m of [...modules].reverse()) await m.stop?.();
    },
  };
}

export function dataPath(config: Config, ...parts: string[]): string {
  return join(config.dataDir, ...parts);
}
