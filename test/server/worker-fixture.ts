// Shared by the worker tests (worker.test.ts, worker-same-env.test.ts): a
// server child process with its in-process workers off and two `npm run
// worker` child processes beside it, all on this file's PostgreSQL schema and
// NATS namespace; a consumer token; the analytics consumer as JetStream sees
// it; and breadcrumb batches held by both workers while one of them is killed.
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { connect } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { afterAll, beforeAll, expect } from "vitest";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { Agent, fetch } from "undici";
import { IdentityService } from "../../gen/pulsebase/admin/v1/identity_pb.js";
import { spawnServer, type ChildServer } from "../helpers/child-server.js";
import { databaseUrlFor, metricValue, spawnWorker, type ChildWorker } from "../helpers/child-worker.js";
import { createTestDb, TEST_NATS_URL, type TestDb } from "../helpers/db.js";
import { deleteStreamsWithPrefix } from "../helpers/nats-streams.js";
import { until } from "../helpers/until.js";

export const BATCHES = 100;
export const PER_BATCH = 10;

/**
 * Registers this file's beforeAll and afterAll: a test database, a server
 * (operator token `operator`, data in a temporary folder named from
 * `tmpPrefix`) and two workers started one after the other, every process on
 * the same environment (`env` added to it).
 */
export function useWorkerDrain(opts: { operator: string; tmpPrefix: string; env?: Record<string, string> }) {
  let db: TestDb;
  let dataDir: string;
  let server: ChildServer;
  let env: Record<string, string>;
  const workers: ChildWorker[] = [];
  const ns = `t${randomBytes(5).toString("hex")}`;
  const dispatcher = new Agent({ connect: { rejectUnauthorized: false } });

  beforeAll(async () => {
    db = await createTestDb("postgres");
    dataDir = await mkdtemp(join(tmpdir(), opts.tmpPrefix));
    env = {
      DATABASE_URL: databaseUrlFor(db),
      NATS_URL: TEST_NATS_URL,
      PULSEBASE_NATS_NAMESPACE: ns,
      PULSEBASE_DATA_DIR: dataDir,
      ...opts.env,
    };
    server = await spawnServer({
      dataDir,
      env: { ...env, PULSEBASE_IN_PROCESS_WORKERS: "false", PULSEBASE_OPERATOR_TOKEN: opts.operator, PULSEBASE_ACCESS_LOG: "false" },
    });
    await server.ready();
    // one after the other: the second starts once the first runs
    workers.push(await spawnWorker(env));
    workers.push(await spawnWorker(env));
  }, 120_000);

  afterAll(async () => {
    for (const w of workers) await w.kill();
    await server?.stop();
    await deleteStreamsWithPrefix(TEST_NATS_URL, ns.toUpperCase());
    await dispatcher.close();
    await db?.drop();
    await rm(dataDir, { recursive: true, force: true });
  });

  /** A consumer token of a new application (team and app named `name`). */
  async function consumerToken(name: string): Promise<string> {
    const admin = createClient(
      IdentityService,
      createConnectTransport({
        baseUrl: `http://127.0.0.1:${server.admin}`,
        httpVersion: "1.1",
        interceptors: [(next) => (req) => {
          req.header.set("authorization", `Bearer ${opts.operator}`);
          return next(req);
        }],
      }),
    );
    const team = await admin.createTeam({ name });
    const app = await admin.createApp({ teamId: team.id, name });
    const res = await fetch(`https://127.0.0.1:${server.https}/api/consumer`, {
      method: "POST",
      dispatcher,
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ app_key: app.appKey, device_id: "d1", device_model: "m", user_id: "u1", os: "android", country: "DE", language: "de" }),
    });
    expect(res.status).toBe(200);
    return ((await res.json()) as { token: string }).token;
  }

  /** The analytics consumer shared by the workers, as JetStream sees it. */
  async function analyticsConsumer() {
    const nc = await connect({ servers: TEST_NATS_URL });
    try {
      const jsm = await jetstreamManager(nc);
      return await jsm.consumers.info(`${ns.toUpperCase()}_ANALYTICS`, "analytics-workers");
    } finally {
      await nc.close();
    }
  }

  const count = async (q: string) => Number((await db.sql.query<{ n: number }>(q)).rows[0]?.n ?? 0);

  /**
   * Posts BATCHES batches of PER_BATCH breadcrumbs named `tag` while a lock
   * keeps the workers from applying them (they take batches and wait on it,
   * so both hold some), kills `victim` (SIGKILL) once every batch is
   * delivered, runs `whileLocked`, then releases the lock. `killedAt`: just
   * before the release; `releasedAt`: just after it.
   */
  async function holdBatchesAndKill(token: string, tag: string, victim: ChildWorker, whileLocked?: () => Promise<void>): Promise<{ killedAt: number; releasedAt: number }> {
    let killedAt: number;
    const locker = new pg.Client({ connectionString: db.url, options: `-c search_path=${db.schema},public` });
    await locker.connect();
    try {
      await locker.query("BEGIN");
      await locker.query("LOCK TABLE analytics_breadcrumbs IN EXCLUSIVE MODE");
      for (let i = 0; i < BATCHES; i++) {
        const res = await fetch(`https://127.0.0.1:${server.https}/api/breadcrumbs/batch`, {
          method: "POST",
          dispatcher,
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json", "idempotency-key": `${tag}-${i}` },
          body: JSON.stringify({ breadcrumbs: Array.from({ length: PER_BATCH }, () => ({ name: tag })) }),
        });
        expect(res.status).toBe(202);
      }
      // All delivered; a worker holds at most 64, so both hold some.
      await until(async () => ((await analyticsConsumer()).num_ack_pending === BATCHES ? true : undefined), 30_000, 100);
      await victim.kill();
      await whileLocked?.();
    } finally {
      killedAt = Date.now();
      await locker.query("COMMIT").catch(() => {});
      await locker.end();
    }
    return { killedAt, releasedAt: Date.now() };
  }

  /** Waits until the analytics consumer has nothing pending or unacknowledged. */
  const consumerDrained = (ms: number, pollMs?: number) =>
    until(async () => {
      const c = await analyticsConsumer();
      return c.num_pending + c.num_ack_pending === 0 ? true : undefined;
    }, ms, pollMs);

  /** A worker's /metrics page (from `scrape`) once its sampled gauges show the analytics queue drained. */
  const metricsOnceDrained = (scrape: () => Promise<string>) =>
    until(async () => {
      const t = await scrape();
      return metricValue(t, "pulsebase_queue_lag_messages", { queue: "analytics" }) === 0 ? t : undefined;
    }, 10_000, 200);

  return {
    get db() {
      return db;
    },
    get server() {
      return server;
    },
    /** The environment every process got. */
    get env() {
      return env;
    },
    workers,
    consumerToken,
    analyticsConsumer,
    consumerDrained,
    count,
    holdBatchesAndKill,
    metricsOnceDrained,
  };
}
