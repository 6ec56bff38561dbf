// The batch pipeline on the real NATS JetStream server: publish, shared
// consumers, idempotency, redelivery, dead letters and replay.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { AnalyticsService, type EventItemSchema } from "../../../gen/pulsebase/platform/v1/analytics_pb.js";
import { createAnalyticsServiceImpl } from "../../../src/capabilities/analytics/analytics-service.js";
import { applyBatch } from "../../../src/capabilities/analytics/apply-batch.js";
import { decodePayload } from "../../../src/capabilities/analytics/batch-payload.js";
import { createDirBlobStore } from "../../../src/infra/blobs/dir-blob-store.js";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { createJetStreamQueue } from "../../../src/infra/queue/jetstream-queue.js";
import type { Queue } from "../../../src/infra/queue/queue.js";
import { startWorkers, type Workers } from "../../../src/capabilities/analytics/analytics-worker.js";
import { NatsLink } from "../../../src/infra/nats/nats-link.js";
import { createTestDb, TEST_NATS_URL, type TestDb } from "../../helpers/db.js";
import { clientFor, countOf, seedApp, waitFor, type TestConsumer } from "../../capabilities/analytics/fixtures.js";
import { deleteStreams, uniqueStream } from "./jetstream-helpers.js";

const ev = (name: string, sessionId: number, metadata: Record<string, string> = {}): MessageInitShape<typeof EventItemSchema> => ({
  name,
  metadata,
  sessionId: BigInt(sessionId),
});

describe("JetStream batch queue", () => {
  let db: TestDb;
  let blobDir: string;
  let queue: Queue;
  let nc: NatsConnection;
  const names = uniqueStream();
  let api: ReturnType<typeof clientFor<typeof AnalyticsService>>;
  let users: TestConsumer[];
  const workers: Workers[] = [];

  beforeAll(async () => {
    db = await createTestDb("postgres");
    blobDir = await mkdtemp(join(tmpdir(), "pb-blobs-"));
    nc = await connect({ servers: TEST_NATS_URL });
    queue = createJetStreamQueue({ name: "analytics", nats: nc, jetstream: names, retry: { maxAttempts: 2, baseBackoffMs: 20 }, ackWaitMs: 2000 });
    await queue.ready();
    api = clientFor(AnalyticsService, createAnalyticsServiceImpl({ sql: db.sql, queue, blobs: createDirBlobStore(blobDir) }));
    users = (await seedApp(db.sql, ["u1", "u2", "u3", "u1"])).consumers;
  });
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop()));
    await queue.close();
    await nc.close();
    await deleteStreams(TEST_NATS_URL, names.stream);
    await db.drop();
    await rm(blobDir, { recursive: true, force: true });
  });

  it("answers 202 only after JetStream stored the batch; two worker instances share the work with exact totals", async () => {
    const batches = 40;
    await Promise.all(
      Array.from({ length: batches }, (_, b) => {
        const u = users[b % users.length]!;
        return api.as(u).batchEvents({
          events: Array.from({ length: 25 }, (_, i) => ev(`js-${i % 4}`, u.sessions[i % 2]!, { i: String(i % 5) })),
        });
      }),
    );
    expect(Number((await queue.stats()).lag)).toBe(batches);
    let byA = 0;
    let byB = 0;
    workers.push(startWorkers({ sql: db.sql, queue, concurrency: 2, onApplied: () => byA++ }));
    workers.push(startWorkers({ sql: db.sql, queue, concurrency: 2, onApplied: () => byB++ }));
    await waitFor(async () => (await queue.stats()).lag === 0, 20_000, "drained");
    expect(byA + byB).toBe(batches);
    const total = await countOf(db.sql, "SELECT sum(occurrences)::int AS n FROM analytics_events WHERE name LIKE 'js-%'");
    expect(total).toBe(batches * 25);
    // u1 has two devices: three distinct users
    expect(await countOf(db.sql, "SELECT max(unique_users)::int AS n FROM analytics_events WHERE name LIKE 'js-%'")).toBe(3);
    expect(await countOf(db.sql, "SELECT count(*)::int AS n FROM analytics_event_occurrences")).toBe(batches * 25);
  });

  it("de-duplicates an Idempotency-Key within the window and never applies a redelivered batch twice", async () => {
    const u = users[1]!;
    const headers = { "Idempotency-Key": "same-batch" };
    for (let i = 0; i < 3; i++) await api.as(u, headers).batchBreadcrumbs({ breadcrumbs: [{ name: "idem-js" }, { name: "idem-js" }] });
    await waitFor(async () => (await countOf(db.sql, "SELECT occurrences AS n FROM analytics_breadcrumbs WHERE name = 'idem-js'")) === 2);
    await waitFor(async () => (await queue.stats()).lag === 0);
    expect(await countOf(db.sql, "SELECT occurrences AS n FROM analytics_breadcrumbs WHERE name = 'idem-js'")).toBe(2);

    // A redelivery (same payload handled again) changes nothing.
    let captured: Uint8Array | undefined;
    const probe = createJetStreamQueue({ name: "probe", nats: nc, jetstream: { stream: `${names.stream}_P`, subjectPrefix: `${names.subjectPrefix}.p` } });
    try {
      await probe.ready();
      await probe.publish("redeliver-me", new TextEncoder().encode(JSON.stringify({
        v: 1, kind: "breadcrumbs", batchId: "b-redelivery", appId: u.appId, consumerId: u.consumerId, userId: u.userId,
        acceptedAt: new Date().toISOString(), items: [{ name: "redelivered", session_id: null, created_at: new Date().toISOString() }],
      })));
      let deliveries = 0;
      const c = probe.consume(async (m) => {
        deliveries++;
        captured = m.data;
        await applyBatch(db.sql, decodePayload(m.data));
        if (deliveries === 1) throw new Error("simulated crash after commit, before ack");
      }, { concurrency: 1 });
      await waitFor(async () => deliveries >= 2, 10_000, "redelivery");
      await c.stop();
    } finally {
      await probe.close();
      await deleteStreams(TEST_NATS_URL, `${names.stream}_P`);
    }
    expect(captured).toBeDefined();
    expect(await countOf(db.sql, "SELECT occurrences AS n FROM analytics_breadcrumbs WHERE name = 'redelivered'")).toBe(1);
  });

  it("moves a batch that cannot be applied to the dead-letter stream, lists it and replays it", async () => {
    const u = users[2]!;
    await queue.publish("poison-1", new TextEncoder().encode('{"v":99}'));
    await waitFor(async () => (await queue.stats()).deadLetters === 1, 10_000, "dead letter");
    await db.sql.exec("ALTER TABLE analytics_breadcrumb_occurrences RENAME TO js_bc_hidden");
    try {
      await api.as(u).batchBreadcrumbs({ breadcrumbs: [{ name: "dlq-js" }] });
      await waitFor(async () => (await queue.stats()).deadLetters === 2, 15_000, "second dead letter");
    } finally {
      await db.sql.exec("ALTER TABLE js_bc_hidden RENAME TO analytics_breadcrumb_occurrences");
    }
    const page1 = await queue.listDeadLetters({ pageSize: 1, pageToken: "" });
    expect(page1.entries).toHaveLength(1);
    expect(page1.entries[0]!.lastError).toMatch(/version/);
    expect(page1.nextPageToken).not.toBe("");
    const page2 = await queue.listDeadLetters({ pageSize: 1, pageToken: page1.nextPageToken });
    expect(page2.entries).toHaveLength(1);
    expect(page2.entries[0]!.attempts).toBe(2);
    expect(page2.nextPageToken).toBe("");
    expect(await queue.replayDeadLetters({ ids: [page2.entries[0]!.id] })).toBe(1);
    await waitFor(async () => (await countOf(db.sql, "SELECT occurrences AS n FROM analytics_breadcrumbs WHERE name = 'dlq-js'")) === 1);
    expect((await queue.stats()).deadLetters).toBe(1);
  });

  it("answers 503 unavailable when NATS cannot be reached, never 202", async () => {
    const link = new NatsLink({ servers: "nats://127.0.0.1:1", name: "unreachable" });
    const dead = createJetStreamQueue({ name: "analytics", nats: link, jetstream: { stream: `${names.stream}_X`, subjectPrefix: `${names.subjectPrefix}.x` } });
    const api2 = clientFor(AnalyticsService, createAnalyticsServiceImpl({ sql: db.sql, queue: dead, blobs: createDirBlobStore(blobDir) }));
    const u = users[0]!;
    const err = await api2.as(u).batchEvents({ events: [ev("never", u.sessions[0]!)] }).catch((e: unknown) => e);
    const { errorDetail } = await import("../../../src/kernel/errors.js");
    expect(errorDetail(err)?.code).toBe("unavailable");
    expect(errorDetail(err)?.httpStatus).toBe(503);
    await dead.close();
    await link.close();
  });
});
