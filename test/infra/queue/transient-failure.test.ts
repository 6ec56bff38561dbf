// A message whose handler fails because the database is unreachable
// (`unavailable`) is retried for as long as that lasts, past maxAttempts,
// and never dead-lettered: an outage longer than a few backoffs must not
// move accepted batches aside. A failure of the message itself still is
// dead-lettered after maxAttempts.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { appError } from "../../../src/kernel/errors.js";
import { createJetStreamQueue } from "../../../src/infra/queue/jetstream-queue.js";
import { createSqlQueue } from "../../../src/infra/queue/sql-queue.js";
import type { Queue, QueueMessage } from "../../../src/infra/queue/queue.js";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { createTestDb, TEST_NATS_URL, type TestDb } from "../../helpers/db.js";
import { until } from "../../helpers/until.js";
import { deleteStreams, uniqueStream } from "./jetstream-helpers.js";

const retry = { maxAttempts: 2, baseBackoffMs: 20, maxBackoffMs: 100 };
let db: TestDb;
let nc: NatsConnection;
const names = uniqueStream();

beforeAll(async () => {
  db = await createTestDb("postgres");
  nc = await connect({ servers: TEST_NATS_URL });
});
afterAll(async () => {
  await nc.close();
  await deleteStreams(TEST_NATS_URL, names.stream);
  await db.drop();
});

const backends: Array<[string, () => Promise<Queue>]> = [
  ["embedded table", async () => createSqlQueue({ name: "transient", sql: db.sql, retry, pollMs: 20 })],
  [
    "JetStream",
    async () => {
      const q = createJetStreamQueue({ name: "transient", nats: nc, jetstream: names, retry });
      await q.ready();
      return q;
    },
  ],
];

describe.each(backends)("%s queue", (_, open) => {
  it("retries a message that failed on an unavailable database beyond maxAttempts and applies it once the database is back; a broken one is still dead-lettered", async () => {
    const queue = await open();
    const deadBefore = (await queue.stats()).deadLetters;
    const seen: QueueMessage[] = [];
    let applied = 0;
    const consumer = queue.consume(async (m) => {
      seen.push(m);
      if (m.id === "broken") throw new Error("cannot apply");
      // Five deliveries in a row meet a database outage, then it is back.
      if (seen.filter((s) => s.id === "outage").length <= 5) {
        throw appError("unavailable", "The database is unreachable.", { retryAfterSeconds: 1 });
      }
      applied++;
    }, { concurrency: 2 });
    try {
      await queue.publish("outage", new Uint8Array([1]));
      await queue.publish("broken", new Uint8Array([2]));
      await until(async () => (applied === 1 ? true : undefined), 20_000);
      expect(seen.filter((s) => s.id === "outage").length).toBe(6);
      const stats = await until(async () => {
        const s = await queue.stats();
        return s.lag === 0 ? s : undefined;
      });
      // Only the message that failed by itself went to the dead letters.
      expect(stats.deadLetters).toBe(deadBefore + 1);
      expect(seen.filter((s) => s.id === "broken").length).toBe(retry.maxAttempts);
    } finally {
      await consumer.stop();
      await queue.close();
    }
  }, 30_000);
});
