// A worker process killed (SIGKILL) in the middle of a stream of batches:
// its unacknowledged batches are redelivered to another worker after
// ack_wait, and every count stays exact (no loss, no double counting).
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { encodePayload, PAYLOAD_VERSION, type EventRow } from "../../../src/capabilities/analytics/batch-payload.js";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { createJetStreamQueue } from "../../../src/infra/queue/jetstream-queue.js";
import type { Queue } from "../../../src/infra/queue/queue.js";
import { startWorkers } from "../../../src/capabilities/analytics/analytics-worker.js";
import { createTestDb, TEST_NATS_URL, type TestDb } from "../../helpers/db.js";
import { countOf, seedApp, waitFor } from "../../capabilities/analytics/fixtures.js";
import { deleteStreams, stopProcess, uniqueStream } from "./jetstream-helpers.js";

describe("worker killed mid-batch (JetStream)", () => {
  let db: TestDb;
  let queue: Queue;
  let nc: NatsConnection;
  const names = uniqueStream();

  beforeAll(async () => {
    db = await createTestDb("postgres");
    nc = await connect({ servers: TEST_NATS_URL });
    queue = createJetStreamQueue({ name: "analytics", nats: nc, jetstream: names, ackWaitMs: 1500 });
    await queue.ready();
  });
  afterAll(async () => {
    await queue.close();
    await nc.close();
    await deleteStreams(TEST_NATS_URL, names.stream);
    await db.drop();
  });

  it("keeps occurrences and unique users exact after a SIGKILL and redelivery", async () => {
    const { consumers } = await seedApp(db.sql, ["a", "b", "c", "a"]);
    const batches = 150;
    const perBatch = 100;
    const now = new Date().toISOString();
    for (let b = 0; b < batches; b++) {
      const c = consumers[b % consumers.length]!;
      const items: EventRow[] = Array.from({ length: perBatch }, (_, i) => ({
        name: `crash-${i % 10}`,
        metadata: { k: String(i % 3) },
        session_id: c.sessions[0]!,
        created_at: now,
      }));
      await queue.publish(`crash-${b}`, encodePayload({
        v: PAYLOAD_VERSION, kind: "events", batchId: `crash-${b}`, appId: c.appId, consumerId: c.consumerId, userId: c.userId, acceptedAt: now, items,
      }));
    }

    const child = spawn(
      process.execPath,
      ["--import", "tsx", fileURLToPath(new URL("./worker-child.ts", import.meta.url)), JSON.stringify({
        dbUrl: db.url, schema: db.schema, natsUrl: TEST_NATS_URL, ...names, ackWaitMs: 1500, concurrency: 4,
      })],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    try {
      // Kill it once it has applied some batches but not all.
      await waitFor(async () => (await countOf(db.sql, "SELECT count(*)::int AS n FROM analytics_processed_batches")) >= 5, 15_000, "child progress");
      await stopProcess(child, "SIGKILL");
    } finally {
      await stopProcess(child, "SIGKILL");
    }
    const doneAtKill = await countOf(db.sql, "SELECT count(*)::int AS n FROM analytics_processed_batches");
    expect(doneAtKill).toBeLessThan(batches);

    const w = startWorkers({ sql: db.sql, queue, concurrency: 4 });
    try {
      await waitFor(async () => (await countOf(db.sql, "SELECT count(*)::int AS n FROM analytics_processed_batches")) === batches, 20_000, "all batches");
      await waitFor(async () => (await queue.stats()).lag === 0, 10_000, "queue drained");
    } finally {
      await w.stop();
    }
    expect(await countOf(db.sql, "SELECT sum(occurrences)::int AS n FROM analytics_events")).toBe(batches * perBatch);
    expect(await countOf(db.sql, "SELECT count(*)::int AS n FROM analytics_event_occurrences")).toBe(batches * perBatch);
    expect(await countOf(db.sql, "SELECT sum(occurrences)::int AS n FROM analytics_event_data")).toBe(batches * perBatch);
    expect(await countOf(db.sql, "SELECT min(unique_users)::int AS n FROM analytics_events")).toBe(3);
    expect(await countOf(db.sql, "SELECT max(unique_users)::int AS n FROM analytics_events")).toBe(3);
  });
});
