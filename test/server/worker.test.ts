// `npm run worker` processes beside a server process, all as child
// processes on this machine's PostgreSQL and NATS: a worker killed with
// SIGKILL while it holds batches hands them to the other worker within a few
// seconds (JetStream ack_wait, kept short by in-progress marks), nothing is
// lost or counted twice; each worker serves /metrics.
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { connect } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { Agent, fetch } from "undici";
import { IdentityService } from "../../gen/pulsebase/admin/v1/identity_pb.js";
import { DEFAULT_ACK_WAIT_MS } from "../../src/infra/queue/queue.js";
import { spawnServer, type ChildServer } from "../helpers/child-server.js";
import { databaseUrlFor, metricValue, spawnWorker, type ChildWorker } from "../helpers/child-worker.js";
import { createTestDb, TEST_NATS_URL, type TestDb } from "../helpers/db.js";
import { deleteStreamsWithPrefix } from "../helpers/nats-streams.js";
import { until } from "../helpers/until.js";

const OPERATOR = "op_worker_test_token_0123456789";
const BATCHES = 100;
const PER_BATCH = 10;

let db: TestDb;
let dataDir: string;
let server: ChildServer;
const workers: ChildWorker[] = [];
const ns = `t${randomBytes(5).toString("hex")}`;
const dispatcher = new Agent({ connect: { rejectUnauthorized: false } });
let env: Record<string, string>;

beforeAll(async () => {
  db = await createTestDb("postgres");
  dataDir = await mkdtemp(join(tmpdir(), "pb-worker-"));
  env = {
    DATABASE_URL: databaseUrlFor(db.schema!),
    NATS_URL: TEST_NATS_URL,
    PULSEBASE_NATS_NAMESPACE: ns,
    PULSEBASE_DATA_DIR: dataDir,
  };
  server = await spawnServer({
    dataDir,
    env: { ...env, PULSEBASE_IN_PROCESS_WORKERS: "false", PULSEBASE_OPERATOR_TOKEN: OPERATOR, PULSEBASE_ACCESS_LOG: "false" },
  });
  await server.ready();
  workers.push(await spawnWorker(env), await spawnWorker(env));
}, 120_000);

afterAll(async () => {
  for (const w of workers) await w.kill();
  await server?.stop();
  await deleteStreamsWithPrefix(TEST_NATS_URL, ns.toUpperCase());
  await dispatcher.close();
  await db?.drop();
  await rm(dataDir, { recursive: true, force: true });
});

async function consumerToken(): Promise<string> {
  const admin = createClient(
    IdentityService,
    createConnectTransport({
      baseUrl: `http://127.0.0.1:${server.admin}`,
      httpVersion: "1.1",
      interceptors: [(next) => (req) => {
        req.header.set("authorization", `Bearer ${OPERATOR}`);
        return next(req);
      }],
    }),
  );
  const team = await admin.createTeam({ name: "workers" });
  const app = await admin.createApp({ teamId: team.id, name: "workers" });
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
const processed = () => count("SELECT count(*)::int AS n FROM analytics_processed_batches");

describe("worker processes", () => {
  it("hand a killed worker's batches to the other within a few seconds, each counted once", async () => {
    const token = await consumerToken();
    const [a, b] = workers as [ChildWorker, ChildWorker];
    // Both workers take batches and then wait on this lock, so both hold
    // some when one of them is killed.
    const locker = new pg.Client({ connectionString: db.url, options: `-c search_path=${db.schema},public` });
    await locker.connect();
    try {
      await locker.query("BEGIN");
      await locker.query("LOCK TABLE analytics_breadcrumbs IN EXCLUSIVE MODE");
      for (let i = 0; i < BATCHES; i++) {
        const res = await fetch(`https://127.0.0.1:${server.https}/api/breadcrumbs/batch`, {
          method: "POST",
          dispatcher,
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json", "idempotency-key": `takeover-${i}` },
          body: JSON.stringify({ breadcrumbs: Array.from({ length: PER_BATCH }, () => ({ name: "takeover" })) }),
        });
        expect(res.status).toBe(202);
      }
      // All delivered, more than one worker holds (64): both hold some.
      await until(async () => ((await analyticsConsumer()).num_ack_pending === BATCHES ? true : undefined), 30_000, 100);
      await a.kill();
      // Checked while the lock still holds: the survivor applies its batches
      // the moment it is released.
      expect(await processed()).toBe(0);
    } finally {
      await locker.query("COMMIT").catch(() => {});
      await locker.end();
    }
    const killedAt = Date.now();

    // The survivor applies its own and the waiting ones at once, then the
    // killed worker's once their ack_wait after the last in-progress mark
    // has passed.
    const changes: { at: number; n: number }[] = [{ at: killedAt, n: 0 }];
    await until(async () => {
      const n = await processed();
      if (n !== changes[changes.length - 1]!.n) changes.push({ at: Date.now(), n });
      return n === BATCHES ? true : undefined;
    }, 45_000, 50);
    const takeoverMs = changes[changes.length - 1]!.at - killedAt;
    // The longest stretch with nothing applied: the survivor idle, waiting for the killed worker's batches.
    const gap = changes.slice(1).reduce((g, c, i) => (c.at - changes[i]!.at > g.ms ? { ms: c.at - changes[i]!.at, done: changes[i]!.n } : g), { ms: 0, done: 0 });
    console.log(
      `takeover: all ${BATCHES} batches applied ${takeoverMs} ms after the SIGKILL (ack_wait ${DEFAULT_ACK_WAIT_MS} ms); ` +
        `the survivor stood idle ${gap.ms} ms after ${gap.done} batches, waiting for the killed worker's ${BATCHES - gap.done}`,
    );
    expect(takeoverMs).toBeLessThan(DEFAULT_ACK_WAIT_MS + 5000);

    // Nothing lost, nothing counted twice.
    expect(await count("SELECT occurrences::int AS n FROM analytics_breadcrumbs WHERE name = 'takeover'")).toBe(BATCHES * PER_BATCH);
    await until(async () => {
      const c = await analyticsConsumer();
      return c.num_pending + c.num_ack_pending === 0 ? true : undefined;
    }, 10_000);
    expect(b.child.exitCode).toBeNull();
  }, 90_000);

  it("serve /metrics: the analytics queue, the function-event transport, the PostgreSQL pool, the process", async () => {
    // The gauges are sampled; wait for a sample taken after the drain.
    const text = await until(async () => {
      const t = await workers[1]!.metrics();
      return metricValue(t, "pulsebase_queue_lag_messages", { queue: "analytics" }) === 0 ? t : undefined;
    }, 10_000, 200);
    expect(metricValue(text, "pulsebase_queue_stats_up", { queue: "analytics", backend: "jetstream" })).toBe(1);
    expect(metricValue(text, "pulsebase_queue_in_flight_messages", { queue: "analytics" })).toBe(0);
    expect(metricValue(text, "pulsebase_queue_dead_letter_messages", { queue: "analytics" })).toBe(0);
    // The server created the function-event stream and its lanes at start.
    expect(metricValue(text, "pulsebase_queue_stats_up", { queue: "function-events", backend: "jetstream" })).toBe(1);
    expect(metricValue(text, "pulsebase_queue_lag_messages", { queue: "function-events" })).toBe(0);
    expect(metricValue(text, "pulsebase_queue_dead_letter_messages", { queue: "function-events" })).toBe(0);
    expect(metricValue(text, "pulsebase_pg_pool_connections", { state: "idle" })).toBeGreaterThanOrEqual(0);
    expect(text).toMatch(/^process_cpu_user_seconds_total /m);
    expect(text).toMatch(/^nodejs_eventloop_lag_seconds /m);
  });
});
