// The function-event transports' claim on a change: kept while the change is
// being handled however long that takes (marked in progress every third of
// ackWaitMs), handed to another process ackWaitMs after the holder died.
// Each "process" is its own transport with its own NATS connection or
// PostgreSQL pool, on real JetStream and PostgreSQL.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { jetStreamTransport, sqlTransport, type EventTransport } from "../../../src/capabilities/functions/events/event-transport.js";
import { DEFAULT_EVENT_WORKER_CONFIG, type EventWorkerConfig, type FunctionEvent } from "../../../src/capabilities/functions/events/event-worker.js";
import { createPgSql } from "../../../src/infra/storage/pg-sql.js";
import type { Sql } from "../../../src/infra/storage/sql.js";
import { createTestDb, TEST_DATABASE_URL, TEST_NATS_URL, uniqueName, type TestDb } from "../../helpers/db.js";

const ACK_WAIT_MS = 2000;
const stream = uniqueName("PBFT").toUpperCase();
const cfg: EventWorkerConfig = { ...DEFAULT_EVENT_WORKER_CONFIG, stream, subjectPrefix: `test.${stream.toLowerCase()}`, partitions: 2, ackWaitMs: ACK_WAIT_MS };

let db: TestDb;
beforeAll(async () => {
  db = await createTestDb("postgres");
});
afterAll(async () => {
  const nc = await connect({ servers: TEST_NATS_URL });
  await (await jetstreamManager(nc)).streams.delete(stream).catch(() => {});
  await nc.close();
  await db.drop();
});

const event = (id: string): FunctionEvent => ({ id, source: "db", app_id: 1, table: "t", operation: "insert", before: null, after: { id: 1 }, at: new Date().toISOString() });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Two processes on one transport: the first takes a change and holds it, then dies. */
async function holdThenDie(kind: string, open: () => Promise<{ t: EventTransport; close(): Promise<void> }>) {
  const first = await open();
  const second = await open();
  try {
    await first.t.ensure();
    await first.t.publish(event(`${kind}:1`), 0);
    const held = await first.t.next(0);
    expect(held?.deliveryId).toBe(`${kind}:1`);
    // Handled for two and a half ack waits: the other process gets nothing of this lane.
    const until = Date.now() + 2.5 * ACK_WAIT_MS;
    while (Date.now() < until) expect(await second.t.next(0)).toBeUndefined();
    // The holder dies (its connection goes, nothing is acknowledged).
    await first.close();
    const diedAt = Date.now();
    let taken = await second.t.next(0);
    while (!taken && Date.now() - diedAt < 10 * ACK_WAIT_MS) taken = await second.t.next(0);
    const takeoverMs = Date.now() - diedAt;
    expect(taken?.deliveryId).toBe(`${kind}:1`);
    expect(takeoverMs).toBeLessThan(ACK_WAIT_MS + 2500);
    await taken!.ack();
    await sleep(ACK_WAIT_MS + 200);
    expect(await second.t.next(0)).toBeUndefined(); // acknowledged: not delivered again
  } finally {
    await first.close().catch(() => {});
    await second.close();
  }
}

describe("a change in hand", () => {
  it("stays with its JetStream consumer while handled, and goes to another one ack_wait after it died", async () => {
    await holdThenDie("js", async () => {
      const nc: NatsConnection = await connect({ servers: TEST_NATS_URL });
      return { t: jetStreamTransport(nc, cfg), close: () => nc.close() };
    });
  });

  it("stays claimed in the table while handled, and goes to another process ackWaitMs after it died", async () => {
    await holdThenDie("sql", async () => {
      const sql: Sql = createPgSql({ connectionString: TEST_DATABASE_URL, schema: db.schema!, max: 2 });
      return { t: sqlTransport(sql, cfg), close: () => sql.close() };
    });
  });
});
