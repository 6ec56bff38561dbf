// Issue #28, point 13: two `npm run worker` processes on one host, started
// as the README's Scale-out section says (same environment, so the same
// default metrics port 8445). The second must not exit because the first
// holds the port: it takes a next port, with a warning. With one of them
// killed (SIGKILL) while both hold batches, the other drains everything,
// each batch counted once. A port set explicitly and taken leaves a worker
// running without GET /metrics, with a warning.
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
import { spawnServer, type ChildServer } from "../helpers/child-server.js";
import { databaseUrlFor, metricValue, spawnWorker, type ChildWorker } from "../helpers/child-worker.js";
import { createTestDb, TEST_NATS_URL, type TestDb } from "../helpers/db.js";
import { deleteStreamsWithPrefix } from "../helpers/nats-streams.js";
import { until } from "../helpers/until.js";

const OPERATOR = "op_worker_same_env_token_0123456789";
const BATCHES = 100;
const PER_BATCH = 10;

let db: TestDb;
let dataDir: string;
let server: ChildServer;
const workers: ChildWorker[] = [];
const ns = `t${randomBytes(5).toString("hex")}`;
const dispatcher = new Agent({ connect: { rejectUnauthorized: false } });
/** One environment for every worker, as the README says; the metrics port left to its default. */
let env: Record<string, string>;

/** The metrics port a worker says it serves (its "pulsebase workers running" line), or undefined for none. */
function servedPort(w: ChildWorker): number | undefined {
  const line = w.output().split("\n").find((l) => l.includes("pulsebase workers running"));
  const parsed = JSON.parse(line!) as { metricsPort?: number };
  return parsed.metricsPort;
}

beforeAll(async () => {
  db = await createTestDb("postgres");
  dataDir = await mkdtemp(join(tmpdir(), "pb-worker-env-"));
  env = {
    DATABASE_URL: databaseUrlFor(db.schema!),
    NATS_URL: TEST_NATS_URL,
    PULSEBASE_NATS_NAMESPACE: ns,
    PULSEBASE_DATA_DIR: dataDir,
    // unset (the helper would give each worker its own port): the default, 8445
    PULSEBASE_WORKER_METRICS_PORT: "",
  };
  server = await spawnServer({
    dataDir,
    env: { ...env, PULSEBASE_IN_PROCESS_WORKERS: "false", PULSEBASE_OPERATOR_TOKEN: OPERATOR, PULSEBASE_ACCESS_LOG: "false" },
  });
  await server.ready();
  // one after the other: the second finds the first's port taken
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
  const team = await admin.createTeam({ name: "same env" });
  const app = await admin.createApp({ teamId: team.id, name: "same env" });
  const res = await fetch(`https://127.0.0.1:${server.https}/api/consumer`, {
    method: "POST",
    dispatcher,
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ app_key: app.appKey, device_id: "d1", device_model: "m", user_id: "u1", os: "android", country: "DE", language: "de" }),
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as { token: string }).token;
}

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

describe("two workers on one host with one environment", () => {
  it("both run: the second serves its metrics on another port, with a warning", async () => {
    const [a, b] = workers as [ChildWorker, ChildWorker];
    expect(a.child.exitCode).toBeNull();
    expect(b.child.exitCode).toBeNull();
    const pa = servedPort(a), pb = servedPort(b);
    expect(pa).toBeGreaterThanOrEqual(8445);
    expect(pb).toBeGreaterThan(pa!);
    expect(b.output()).toMatch(/worker metrics: port in use/);
    // each answers on its own port
    for (const p of [pa, pb]) expect((await fetch(`http://127.0.0.1:${p}/metrics`)).status).toBe(200);
  });

  it("with one killed mid-drain (SIGKILL), the other drains everything, each batch counted once", async () => {
    const token = await consumerToken();
    let killedAt: number;
    const [a, b] = workers as [ChildWorker, ChildWorker];
    // Both workers take batches and then wait on this lock, so both hold some when one is killed.
    const locker = new pg.Client({ connectionString: db.url, options: `-c search_path=${db.schema},public` });
    await locker.connect();
    try {
      await locker.query("BEGIN");
      await locker.query("LOCK TABLE analytics_breadcrumbs IN EXCLUSIVE MODE");
      for (let i = 0; i < BATCHES; i++) {
        const res = await fetch(`https://127.0.0.1:${server.https}/api/breadcrumbs/batch`, {
          method: "POST",
          dispatcher,
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json", "idempotency-key": `same-env-${i}` },
          body: JSON.stringify({ breadcrumbs: Array.from({ length: PER_BATCH }, () => ({ name: "same-env" })) }),
        });
        expect(res.status).toBe(202);
      }
      // All delivered; a worker holds at most 64, so both hold some.
      await until(async () => ((await analyticsConsumer()).num_ack_pending === BATCHES ? true : undefined), 30_000, 100);
      await a.kill();
    } finally {
      killedAt = Date.now();
      await locker.query("COMMIT").catch(() => {});
      await locker.end();
    }
    // The failure deadline (not a timing claim): 15 s after the kill.
    await until(async () => (await count("SELECT count(*)::int AS n FROM analytics_processed_batches")) === BATCHES ? true : undefined, 15_000, 100);
    await until(async () => {
      const c = await analyticsConsumer();
      return c.num_pending + c.num_ack_pending === 0 ? true : undefined;
    }, 15_000, 100);
    console.log(`same environment: all ${BATCHES} batches applied and acknowledged ${Date.now() - killedAt} ms after one worker's SIGKILL`);
    expect(await count("SELECT occurrences::int AS n FROM analytics_breadcrumbs WHERE name = 'same-env'")).toBe(BATCHES * PER_BATCH);
    expect(b.child.exitCode).toBeNull();
    // the survivor's metrics say so too
    const text = await until(async () => {
      const t = await (await fetch(`http://127.0.0.1:${servedPort(b)}/metrics`)).text();
      return metricValue(t, "pulsebase_queue_lag_messages", { queue: "analytics" }) === 0 ? t : undefined;
    }, 10_000, 200);
    expect(metricValue(text, "pulsebase_queue_in_flight_messages", { queue: "analytics" })).toBe(0);
  }, 90_000);

  it("a port set explicitly and taken: the worker runs on without metrics, with a warning", async () => {
    const taken = servedPort(workers[1]!)!;
    const c = await spawnWorker({ ...env, PULSEBASE_WORKER_METRICS_PORT: String(taken) });
    workers.push(c);
    expect(servedPort(c)).toBeUndefined();
    expect(c.output()).toMatch(new RegExp(`port ${taken} in use; running WITHOUT GET /metrics`));
    expect(await c.stop()).toBe(0);
  }, 60_000);
});
