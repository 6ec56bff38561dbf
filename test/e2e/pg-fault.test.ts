// PostgreSQL dropping in-use connections (restart, failover,
// pg_terminate_backend) while a backlog of batches drains through JetStream
// to the in-process workers and to a separate `worker` process. Every
// connection of this file (server pool and worker process) carries
// application_name = the file's schema, so only they are terminated.
// Holds: neither process exits, requests during the fault answer 503 (or
// succeed), never 500 or a dropped socket; afterwards every accepted event is
// stored exactly once and the server answers normally.
import { spawn, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { COMMIT_UNKNOWN_MESSAGE } from "../../src/infra/storage/pg-sql.js";
import { STORED_NOT_READ_MESSAGE } from "../../src/capabilities/analytics/analytics-service.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import pg from "pg";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { createModules } from "../../src/server/modules.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { TEST_DATABASE_URL, TEST_NATS_URL } from "../helpers/db.js";
import { until } from "../helpers/until.js";

let s: TestServer;
let token: string;
let sessionId: number;
let appId: number;
let worker: ChildProcess;
let workerOutput = "";
let workerExit: { code: number | null; signal: string | null } | undefined;
const killer = new pg.Client({ connectionString: TEST_DATABASE_URL, application_name: "pbtest_fault_killer" });

const auth = () => ({ authorization: `Bearer ${token}` });
const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  s.fetch(path, { method: "POST", headers: { ...auth(), "content-type": "application/json", ...headers }, body: JSON.stringify(body) });

beforeAll(async () => {
  s = await startTestServer({ modules: createModules, env: { NATS_URL: TEST_NATS_URL } });
  const app = await s.createApp("pg fault");
  appId = Number(app.appId);
  token = (await s.register(app.appKey)).token;
  sessionId = (await (await s.fetch("/api/session/start", { method: "POST", headers: auth() })).json()).session_id;
  await killer.connect();

  // A separate worker process on the same schema and queue (`npm run worker`).
  const schema = s.db.schema!;
  const url = new URL(s.db.url!);
  url.searchParams.set("application_name", schema);
  url.searchParams.set("options", `-c search_path=${schema},public`);
  worker = spawn("node_modules/.bin/node", ["--import", "tsx", "src/server/worker.ts"], {
    env: {
      ...process.env,
      DATABASE_URL: url.toString(),
      NATS_URL: TEST_NATS_URL,
      PULSEBASE_NATS_NAMESPACE: s.config.natsNamespace,
      PULSEBASE_DATA_DIR: s.dataDir,
      PULSEBASE_LOG_LEVEL: "info",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  worker.stdout!.on("data", (d) => (workerOutput += String(d)));
  worker.stderr!.on("data", (d) => (workerOutput += String(d)));
  worker.on("exit", (code, signal) => (workerExit = { code, signal }));
  // Faults start once the worker consumes (its start-up survives them too).
  for (let i = 0; i < 300 && !workerOutput.includes("pulsebase workers running"); i++) {
    if (workerExit) throw new Error(`worker exited: ${workerOutput}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  expect(workerOutput).toContain("pulsebase workers running");
}, 60_000);

afterAll(async () => {
  if (worker && worker.exitCode === null && worker.signalCode === null) worker.kill("SIGKILL");
  await killer.end();
  await s?.close();
});

/** Terminates every connection of this file's server and worker. */
async function terminateAll(): Promise<number> {
  const r = await killer.query(
    "SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid()",
    [s.db.schema],
  );
  return r.rows[0].n as number;
}

async function storedEvents(prefix: string): Promise<{ occurrences: number; rows: number }> {
  const r = await s.db.sql.query<{ occ: number; rows: number }>(
    `SELECT (SELECT coalesce(sum(occurrences), 0)::int FROM analytics_events WHERE app_id = $1 AND name LIKE $2) AS occ,
            (SELECT count(*)::int FROM analytics_event_occurrences o JOIN analytics_events e ON e.id = o.event_id
              WHERE e.app_id = $1 AND e.name LIKE $2) AS rows`,
    [appId, `${prefix}%`],
  );
  return { occurrences: r.rows[0]!.occ, rows: r.rows[0]!.rows };
}

/** The analytics consumer the server's and the worker's workers share, as JetStream sees it. */
async function analyticsConsumer() {
  const nc = await connect({ servers: TEST_NATS_URL });
  try {
    return await (await jetstreamManager(nc)).consumers.info(`${s.config.natsNamespace.toUpperCase()}_ANALYTICS`, "analytics-workers");
  } finally {
    await nc.close();
  }
}

describe("PostgreSQL terminating connections while a backlog drains", () => {
  it("keeps server and worker running, answers 503 or success, and stores every accepted event exactly once", async () => {
    const PER_BATCH = 20;
    const statuses = new Map<string, number>();
    const count = (k: string) => statuses.set(k, (statuses.get(k) ?? 0) + 1);
    let acceptedEvents = 0;
    let singleOk = 0;
    let singleUnknown = 0;

    // A client that retries a batch on 503 with the same Idempotency-Key
    // (the queue drops the duplicate if the first try was stored after all).
    const sendBatch = async (n: number) => {
      const key = randomUUID();
      const events = Array.from({ length: PER_BATCH }, (_, i) => ({ name: `fault_${(n + i) % 7}`, metadata: { n: String(i % 3) }, session_id: sessionId }));
      for (;;) {
        let res;
        try {
          res = await post("/api/events/batch", { events }, { "idempotency-key": key });
        } catch (err) {
          count(`batch socket error: ${(err as Error).message}`);
          return;
        }
        count(`batch ${res.status}`);
        const body = await res.json();
        if (res.status === 202) {
          acceptedEvents += PER_BATCH;
          return;
        }
        if (res.status !== 503) {
          count(`batch body ${JSON.stringify(body)}`);
          return;
        }
        expect(body.error).toBe("unavailable");
        expect(res.headers.get("retry-after")).toBe("1");
        await new Promise((r) => setTimeout(r, 50));
      }
    };
    const sendSingle = async () => {
      let res;
      try {
        res = await post("/api/events", { name: "single_fault", metadata: {} });
      } catch (err) {
        count(`single socket error: ${(err as Error).message}`);
        return;
      }
      count(`single ${res.status}`);
      const body = await res.json();
      if (res.status === 200) singleOk++;
      else if (res.status === 503) {
        expect(body.error).toBe("unavailable");
        // The connection died during COMMIT, or after it before the record
        // was read back: the event may have been (or was) stored.
        if (body.message === COMMIT_UNKNOWN_MESSAGE || body.message === STORED_NOT_READ_MESSAGE) singleUnknown++;
      } else count(`single body ${JSON.stringify(body)}`);
    };

    // A backlog first, then faults while it drains and while more arrives.
    let n = 0;
    await Promise.all(Array.from({ length: 8 }, async () => {
      for (let i = 0; i < 15; i++) await sendBatch(n++);
    }));
    let faulting = true;
    let kills = 0;
    // Faults until enough connections were killed under enough traffic (a
    // count, not a duration: a slow machine gets the same amount of faults).
    let duringFaults = 0;
    const fault = (async () => {
      while (kills <= 40 || duringFaults < 60) {
        kills += await terminateAll();
        await new Promise((r) => setTimeout(r, 40 + Math.random() * 40));
      }
      faulting = false;
    })();
    const traffic = Promise.all([
      ...Array.from({ length: 3 }, async () => {
        while (faulting) {
          await sendBatch(n++);
          duringFaults++;
        }
      }),
      ...Array.from({ length: 2 }, async () => {
        while (faulting) {
          await sendSingle();
          duringFaults++;
        }
      }),
    ]);
    await fault;
    await traffic;

    expect(kills).toBeGreaterThan(20);
    // Only success or 503 was ever answered.
    expect([...statuses.keys()].filter((k) => !/^(batch (202|503)|single (200|503))$/.test(k))).toEqual([]);
    expect(workerExit, workerOutput).toBeUndefined();

    // Everything accepted is applied, once: the counts reach the number sent
    // and stay there (a redelivered batch must not add again).
    const deadline = Date.now() + 90_000;
    let stored = await storedEvents("fault_");
    while (stored.occurrences < acceptedEvents && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 250));
      stored = await storedEvents("fault_");
    }
    expect(stored).toEqual({ occurrences: acceptedEvents, rows: acceptedEvents });
    // Nothing left in flight on the queue (no message pending or unacknowledged):
    // nothing can be redelivered any more.
    await until(async () => {
      const c = await analyticsConsumer();
      return c.num_pending === 0 && c.num_ack_pending === 0 ? true : undefined;
    }, 60_000, 100);
    expect(await storedEvents("fault_")).toEqual({ occurrences: acceptedEvents, rows: acceptedEvents });
    // A single event answered 200 is stored once; one answered 503 is not,
    // unless its connection died during COMMIT (then it may be).
    const single = await storedEvents("single_fault");
    expect(single.occurrences).toBeGreaterThanOrEqual(singleOk);
    expect(single.occurrences).toBeLessThanOrEqual(singleOk + singleUnknown);

    // The server answers normally again, and the worker is still running
    // and stops cleanly.
    const after = await post("/api/events", { name: "after_fault", metadata: {} });
    expect(after.status).toBe(200);
    expect((await after.json()).occurrences).toBe(1);
    expect(workerExit, workerOutput).toBeUndefined();
    const exited = new Promise<number | null>((r) => worker.once("exit", (code) => r(code)));
    worker.kill("SIGTERM");
    expect(await exited).toBe(0);
  }, 180_000);
});
