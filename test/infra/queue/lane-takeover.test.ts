// A laned queue's claim on a message (the function events'): kept while the
// message is being handled however long that takes (marked in progress every
// third of ackWaitMs), handed to another process ackWaitMs after the holder
// died. Each "process" is its own queue with its own NATS connection or
// PostgreSQL pool, on real JetStream and PostgreSQL.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { createJetStreamQueue } from "../../../src/infra/queue/jetstream-queue.js";
import { createSqlQueue } from "../../../src/infra/queue/sql-queue.js";
import type { Queue, QueueMessage } from "../../../src/infra/queue/queue.js";
import { createPgSql } from "../../../src/infra/storage/pg-sql.js";
import type { Sql } from "../../../src/infra/storage/sql.js";
import { createTestDb, TEST_NATS_URL, uniqueName, type TestDb } from "../../helpers/db.js";
import { until } from "../../helpers/until.js";

// Short, so the waits of two and a half of them below stay short.
const ACK_WAIT_MS = 1000;
const stream = uniqueName("PBFT").toUpperCase();
const cfg = {
  name: "lanes",
  lanes: { count: 2, of: () => 0 },
  ackWaitMs: ACK_WAIT_MS,
  jetstream: { stream, subjectPrefix: `test.${stream.toLowerCase()}`, durable: "lanes", retentionMs: 3600_000 },
};

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

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A process: its queue and the messages its consumer got; hold() keeps every one in hand, release() acknowledges them. */
function processOn(q: Queue) {
  const got: QueueMessage[] = [];
  let holding = true;
  const consumer = q.consume(async (m) => {
    got.push(m);
    while (holding) await sleep(50);
  }, { concurrency: 1 });
  return { got, release: () => (holding = false), stop: () => consumer.stop() };
}

/** Two processes on one queue: the first takes a message and holds it, then dies. */
async function holdThenDie(kind: string, open: () => Promise<{ q: Queue; close(): Promise<void> }>) {
  const first = await open();
  const second = await open();
  const a = processOn(first.q);
  try {
    await first.q.ready();
    await first.q.publish(`${kind}:1`, new TextEncoder().encode("{}"), { topic: "db.1" });
    await until(async () => (a.got.length > 0 ? true : undefined), 10_000, 20);
    expect(a.got[0]!.id).toBe(`${kind}:1`);
    // Handled for two and a half ack waits: the other process gets nothing of
    // this lane. (A minimum duration: the claim must outlast ack_wait. A slow
    // machine only makes it longer.)
    const b = processOn(second.q);
    try {
      await sleep(2.5 * ACK_WAIT_MS);
      expect(b.got).toEqual([]);
      // The holder dies (its connection goes, nothing is acknowledged): the
      // message goes to the other process once ack_wait has passed (the
      // queue's only way to hand it over; a hang is this test's timeout).
      await first.close();
      await until(async () => (b.got.length > 0 ? true : undefined), 60_000, 20);
      expect(b.got[0]?.id).toBe(`${kind}:1`);
      b.release();
      // acknowledged: not delivered again, also after a further ack_wait and more (a minimum, as above)
      await sleep(2 * ACK_WAIT_MS);
      expect(b.got).toHaveLength(1);
    } finally {
      b.release();
      await b.stop();
    }
  } finally {
    a.release();
    await a.stop();
    await first.close().catch(() => {});
    await second.close();
  }
}

describe("a message in hand on a lane", () => {
  it("stays with its JetStream consumer while handled, and goes to another one ack_wait after it died", async () => {
    await holdThenDie("js", async () => {
      const nc: NatsConnection = await connect({ servers: TEST_NATS_URL });
      return { q: createJetStreamQueue({ ...cfg, nats: nc }), close: () => nc.close() };
    });
  });

  it("stays claimed in the table while handled, and goes to another process ackWaitMs after it died", async () => {
    await holdThenDie("sql", async () => {
      // (the file's own database: db.url; test/helpers/db.ts)
      const sql: Sql = createPgSql({ connectionString: db.url!, schema: db.schema!, max: 2 });
      return { q: createSqlQueue({ ...cfg, sql }), close: () => sql.close() };
    });
  });
});
