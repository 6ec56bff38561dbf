// Starts the whole service on random ports (TLS public listener, admin,
// plain HTTP) over a per-file database, for end-to-end tests over real sockets.
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { DescService } from "@bufbuild/protobuf";
import { createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { PassThrough } from "node:stream";
import pino from "pino";
import { Agent, fetch as undiciFetch, type RequestInit as UndiciRequestInit } from "undici";
import { FunctionService } from "../../gen/pulsebase/admin/v1/functions_pb.js";
import { IdentityService } from "../../gen/pulsebase/admin/v1/identity_pb.js";
import { build, type Deps, type Pulsebase } from "../../src/server/build.js";
import { loadOrCreateTls } from "../../src/server/tls.js";
import { loadConfig, type Config } from "../../src/kernel/config.js";
import { loadOrCreateKeys } from "../../src/capabilities/identity/token-keys.js";
import { createTestDb, type TestDb } from "./db.js";
import { deleteStreamsWithPrefix } from "./nats-streams.js";

/** A fetch Response whose json() is loosely typed, for terse assertions. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type TestResponse = Omit<Response, "json"> & { json(): Promise<any> };

export interface TestServer {
  app: Pulsebase;
  db: TestDb;
  config: Config;
  dataDir: string;
  httpsUrl: string;
  httpUrl: string;
  adminUrl: string;
  operatorToken: string;
  admin: Client<typeof IdentityService>;
  /** fetch against the TLS listener, trusting the self-signed certificate. */
  fetch(path: string, init?: RequestInit): Promise<TestResponse>;
  /** Creates a team and an app; returns the app key and id. */
  createApp(name?: string): Promise<{ appKey: string; appId: bigint; teamId: bigint }>;
  /** A client of any admin service, with the operator token. */
  adminClient<S extends DescService>(service: S): Client<S>;
  /** Registers a consumer over REST; returns its id and token. */
  register(appKey: string, overrides?: Record<string, unknown>): Promise<{ id: number; token: string; body: Record<string, unknown> }>;
  close(): Promise<void>;
}

const OPERATOR = "op_test_operator_token_0123456789";

export async function startTestServer(opts: {
  kind?: "postgres" | "pglite";
  env?: Record<string, string>;
  modules?: Deps["modules"];
  /** The server's logger (default: silent), e.g. one writing to a stream the test reads. */
  logger?: Deps["logger"];
} = {}): Promise<TestServer> {
  const db = await createTestDb(opts.kind ?? "postgres");
  const dataDir = await mkdtemp(join(tmpdir(), "pulsebase-test-"));
  const config = loadConfig({
    PULSEBASE_DATA_DIR: dataDir,
    PULSEBASE_HOST: "127.0.0.1",
    PULSEBASE_HTTPS_PORT: "0",
    PULSEBASE_HTTP_PORT: "0",
    PULSEBASE_ADMIN_PORT: "0",
    PULSEBASE_LOG_LEVEL: "silent",
    // Streams and subjects of this test file only (parallel files share NATS).
    PULSEBASE_NATS_NAMESPACE: `t${randomBytes(5).toString("hex")}`,
    ...opts.env,
  });
  const tls = await loadOrCreateTls({ dataDir });
  const signingKeys = await loadOrCreateKeys(join(dataDir, "jwt-keys.json"), true);
  const app = await build(config, {
    sql: db.sql,
    signingKeys,
    operatorToken: OPERATOR,
    tls,
    logger: opts.logger ?? pino({ level: "silent" }),
    modules: opts.modules,
  });
  const ports = await app.listen();
  const httpsUrl = `https://127.0.0.1:${ports.https}`;
  const adminUrl = `http://127.0.0.1:${ports.admin}`;
  const dispatcher = new Agent({ connect: { rejectUnauthorized: false } });
  const adminTransport = createConnectTransport({
    baseUrl: adminUrl,
    httpVersion: "1.1",
    interceptors: [(next) => (req) => {
      req.header.set("authorization", `Bearer ${OPERATOR}`);
      return next(req);
    }],
  });
  const admin = createClient(IdentityService, adminTransport);
  const f = (path: string, init?: RequestInit) =>
    undiciFetch(httpsUrl + path, { ...(init as UndiciRequestInit), dispatcher }) as unknown as Promise<TestResponse>;
  const server: TestServer = {
    app,
    db,
    config,
    dataDir,
    httpsUrl,
    httpUrl: `http://127.0.0.1:${ports.http}`,
    adminUrl,
    operatorToken: OPERATOR,
    admin,
    fetch: f,
    adminClient: (service) => createClient(service, adminTransport),
    async createApp(name = "test app") {
      const team = await admin.createTeam({ name: `${name} team` });
      const a = await admin.createApp({ teamId: team.id, name });
      return { appKey: a.appKey, appId: a.id, teamId: team.id };
    },
    async register(appKey, overrides = {}) {
      const res = await f("/api/consumer", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          app_key: appKey,
          device_id: `dev-${Math.random().toString(36).slice(2)}`,
          device_model: "Pixel 9",
          user_id: "user-1",
          os: "android",
          country: "DE",
          language: "de",
          ...overrides,
        }),
      });
      const body = (await res.json()) as Record<string, unknown>;
      if (res.status !== 200) throw new Error(`register failed ${res.status}: ${JSON.stringify(body)}`);
      return { id: body.id as number, token: body.token as string, body };
    },
    async close() {
      await app.close();
      if (config.natsUrl) await deleteStreamsWithPrefix(config.natsUrl, config.natsNamespace.toUpperCase());
      await dispatcher.close();
      await db.drop();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
  return server;
}

/**
 * Deploys a function named `slug` (its first version `code`, active; a 5 s
 * timeout) with an enabled HTTP trigger for consumers at /api/fn/<slug>,
 * through the admin API with the operator token. Returns the function's id.
 */
export async function deployHttpFunction(server: TestServer, appId: bigint, slug: string, code: string): Promise<bigint> {
  const fns = server.adminClient(FunctionService);
  const fn = await fns.createFunction({ appId, name: slug, code, timeoutMs: 5000 });
  await fns.createHttpTrigger({ functionId: fn.id, slug, enabled: true, auth: "consumer" });
  return fn.id;
}

/** A server logger (pino at `info`) whose JSON lines the test reads, parsed, in `lines`. */
export function capturedLogger(): { logger: NonNullable<Deps["logger"]>; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new PassThrough();
  stream.on("data", (chunk: Buffer) => {
    for (const line of chunk.toString("utf8").split("\n")) if (line.trim()) lines.push(JSON.parse(line) as Record<string, unknown>);
  });
  return { logger: pino({ level: "info" }, stream) as NonNullable<Deps["logger"]>, lines };
}
