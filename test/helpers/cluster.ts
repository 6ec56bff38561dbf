// Several real server processes (test/helpers/child-server.ts) on one
// PostgreSQL schema and one private nats-server that the test stops and
// starts: what a scaled-out deployment is. The servers share a data
// directory (keys, certificate) and an operator token, as servers on one
// host may with DATABASE_URL set.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import type { ChildProcess } from "node:child_process";
import type { DescService } from "@bufbuild/protobuf";
import { createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { Agent, fetch } from "undici";
import { spawnServer, type ChildServer } from "./child-server.js";
import { createTestDb, type TestDb } from "./db.js";
import { freePort } from "./ports.js";
import { startNatsServer, stopProcess } from "../infra/queue/jetstream-helpers.js";

export const OPERATOR_TOKEN = "op_cluster_test_token_0123456789";

export interface ClusterServer extends ChildServer {
  name: string;
  /** A client of an operator service on this server's admin listener. */
  client<S extends DescService>(service: S): Client<S>;
  /** GET on the public listener (self-signed certificate trusted). */
  get(path: string, headers?: Record<string, string>): Promise<{ status: number; headers: Headers; body: string }>;
  request(path: string, init: { method: string; headers?: Record<string, string>; body?: string }): Promise<{ status: number; headers: Headers; body: string }>;
  /** The Prometheus text of the admin listener's /metrics. */
  metrics(): Promise<string>;
}

export interface Cluster {
  db: TestDb;
  dataDir: string;
  namespace: string;
  natsUrl: string;
  servers: ClusterServer[];
  /** Starts one more server (on the same database, NATS and data directory). */
  startServer(name: string): Promise<ClusterServer>;
  stopNats(): Promise<void>;
  startNats(): Promise<void>;
  close(): Promise<void>;
}

const dispatcher = new Agent({ connect: { rejectUnauthorized: false } });

export async function startCluster(names: string[], opts: { env?: Record<string, string> } = {}): Promise<Cluster> {
  const db = await createTestDb("postgres");
  const dataDir = await mkdtemp(join(tmpdir(), "pb-cluster-"));
  const natsDir = await mkdtemp(join(tmpdir(), "pb-cluster-nats-"));
  const natsPort = await freePort();
  const natsUrl = `nats://127.0.0.1:${natsPort}`;
  let nats: ChildProcess | undefined = await startNatsServer(natsPort, natsDir);
  const namespace = `c${randomBytes(5).toString("hex")}`;
  const url = new URL(db.url!);
  url.searchParams.set("application_name", db.schema!);
  url.searchParams.set("options", `-c search_path=${db.schema},public`);
  const servers: ClusterServer[] = [];

  async function startServer(name: string): Promise<ClusterServer> {
    const child = await spawnServer({
      dataDir,
      env: {
        DATABASE_URL: url.toString(),
        NATS_URL: natsUrl,
        PULSEBASE_NATS_NAMESPACE: namespace,
        PULSEBASE_OPERATOR_TOKEN: OPERATOR_TOKEN,
        PULSEBASE_IN_PROCESS_WORKERS: "false",
        PULSEBASE_ACCESS_LOG: "off",
        PULSEBASE_LOG_LEVEL: "warn",
        PULSEBASE_PG_POOL_SIZE: "4",
        ...opts.env,
      },
    });
    const transport = createConnectTransport({
      baseUrl: `http://127.0.0.1:${child.admin}`,
      httpVersion: "1.1",
      interceptors: [
        (next) => (req) => {
          req.header.set("authorization", `Bearer ${OPERATOR_TOKEN}`);
          return next(req);
        },
      ],
    });
    const request = async (path: string, init: { method: string; headers?: Record<string, string>; body?: string }) => {
      const res = await fetch(`https://127.0.0.1:${child.https}${path}`, { ...init, dispatcher });
      return { status: res.status, headers: res.headers as unknown as Headers, body: await res.text() };
    };
    const s: ClusterServer = {
      ...child,
      name,
      client: (service) => createClient(service, transport),
      request,
      get: (path, headers = {}) => request(path, { method: "GET", headers }),
      metrics: async () => (await fetch(`http://127.0.0.1:${child.admin}/metrics`)).text(),
    };
    try {
      await s.ready();
    } catch (err) {
      await s.stop();
      throw err;
    }
    servers.push(s);
    return s;
  }

  try {
    await Promise.all(names.map((n) => startServer(n)));
  } catch (err) {
    await Promise.all(servers.map((s) => s.stop()));
    if (nats) await stopProcess(nats, "SIGKILL");
    await db.drop();
    throw err;
  }
  // Stable order: as named.
  servers.sort((a, b) => names.indexOf(a.name) - names.indexOf(b.name));

  return {
    db,
    dataDir,
    namespace,
    natsUrl,
    servers,
    startServer,
    async stopNats() {
      if (nats) await stopProcess(nats, "SIGKILL");
      nats = undefined;
    },
    async startNats() {
      if (!nats) nats = await startNatsServer(natsPort, natsDir);
    },
    async close() {
      await Promise.all(servers.map((s) => s.stop()));
      if (nats) await stopProcess(nats, "SIGKILL");
      await db.drop();
      await rm(dataDir, { recursive: true, force: true });
      await rm(natsDir, { recursive: true, force: true });
    },
  };
}

/**
 * Polls check() on every server until it holds on each; returns the
 * milliseconds each took from `since` (rejects after timeoutMs naming the
 * servers still failing, with their last value).
 */
export async function untilEverywhere<T>(
  servers: readonly ClusterServer[],
  check: (s: ClusterServer) => Promise<T>,
  accept: (v: T) => boolean,
  opts: { since?: number; timeoutMs?: number; pollMs?: number } = {},
): Promise<Record<string, number>> {
  const since = opts.since ?? Date.now();
  const deadline = since + (opts.timeoutMs ?? 10_000);
  const took: Record<string, number> = {};
  const last: Record<string, unknown> = {};
  await Promise.all(
    servers.map(async (s) => {
      for (;;) {
        const v = await check(s).catch((err: unknown) => err as T);
        last[s.name] = v;
        if (accept(v)) {
          took[s.name] = Date.now() - since;
          return;
        }
        if (Date.now() > deadline) return;
        await new Promise((r) => setTimeout(r, opts.pollMs ?? 20));
      }
    }),
  );
  const failing = servers.filter((s) => took[s.name] === undefined);
  if (failing.length) {
    throw new Error(`not seen within ${opts.timeoutMs ?? 10_000} ms on ${failing.map((s) => `${s.name} (last: ${JSON.stringify(last[s.name])})`).join(", ")}`);
  }
  return took;
}
