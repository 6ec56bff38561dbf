// Batch endpoints at the service level, with the embedded (table) queue and
// the in-process workers; plus the operator API over what they recorded.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { createClient, createRouterTransport } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { AnalyticsService, type EventItemSchema } from "../../../gen/pulsebase/platform/v1/analytics_pb.js";
import { AnalyticsService as AdminAnalyticsService } from "../../../gen/pulsebase/admin/v1/analytics_pb.js";
import { FileSchema } from "../../../gen/pulsebase/common/v1/options_pb.js";
import { createAnalyticsServiceImpl } from "../../../src/capabilities/analytics/analytics-service.js";
import { createAdminAnalyticsServiceImpl } from "../../../src/capabilities/analytics/admin-analytics-service.js";
import { createDirBlobStore } from "../../../src/infra/blobs/dir-blob-store.js";
import { errorDetail } from "../../../src/kernel/errors.js";
import { createSqlQueue } from "../../../src/infra/queue/sql-queue.js";
import type { Queue } from "../../../src/infra/queue/queue.js";
import { startWorkers, type Workers } from "../../../src/capabilities/analytics/analytics-worker.js";
import { createTestDb, type TestDb } from "../../helpers/db.js";
import { clientFor, countOf, seedApp, waitFor, type TestConsumer } from "./fixtures.js";

function fieldsOf(err: unknown): string[] {
  return (errorDetail(err)?.fieldViolations ?? []).map((f) => f.field).sort();
}

const ev = (name: string, sessionId: number, metadata: Record<string, string> = {}, createdAt = ""): MessageInitShape<typeof EventItemSchema> => ({
  name,
  metadata,
  sessionId: BigInt(sessionId),
  createdAt,
});

for (const kind of ["postgres", "pglite"] as const) {
  describe(`batch analytics endpoints on ${kind} (embedded queue)`, () => {
    let db: TestDb;
    let blobDir: string;
    let queue: Queue;
    let workers: Workers | undefined;
    let api: ReturnType<typeof clientFor<typeof AnalyticsService>>;
    let admin: ReturnType<typeof createClient<typeof AdminAnalyticsService>>;
    let alice1: TestConsumer, alice2: TestConsumer, bob: TestConsumer;
    let appId: number;

    beforeAll(async () => {
      db = await createTestDb(kind);
      blobDir = await mkdtemp(join(tmpdir(), "pb-blobs-"));
      queue = createSqlQueue({ name: "analytics", sql: db.sql, retry: { maxAttempts: 2, baseBackoffMs: 20, maxBackoffMs: 50 }, pollMs: 50 });
      const blobs = createDirBlobStore(blobDir);
      api = clientFor(AnalyticsService, createAnalyticsServiceImpl({ sql: db.sql, queue, blobs }));
      admin = createClient(
        AdminAnalyticsService,
        createRouterTransport((r) => r.service(AdminAnalyticsService, createAdminAnalyticsServiceImpl({ sql: db.sql, queue, blobs }))),
      );
      const seeded = await seedApp(db.sql, ["alice", "alice", "bob"]);
      appId = seeded.appId;
      [alice1, alice2, bob] = seeded.consumers as [TestConsumer, TestConsumer, TestConsumer];
    });
    afterAll(async () => {
      await workers?.stop();
      await db.drop();
      await rm(blobDir, { recursive: true, force: true });
    });

    const lag = async () => Number((await admin.getQueueStats({})).lag);

    it("refuses bad batches with 422 naming item and field, and queues nothing", async () => {
      const s = bob.sessions[0]!;
      const cases: Array<[() => Promise<unknown>, string[]]> = [
        [() => api.as(bob).batchEvents({ events: [] }), ["events"]],
        [() => api.as(bob).batchEvents({ events: Array.from({ length: 101 }, () => ev("e", s)) }), ["events"]],
        [() => api.as(bob).batchBreadcrumbs({ breadcrumbs: Array.from({ length: 101 }, () => ({ name: "b" })) }), ["breadcrumbs"]],
        [() => api.as(bob).batchLogs({ logs: [] }), ["logs"]],
        [
          () => api.as(bob).batchEvents({
            events: [ev("ok", s), { name: "", metadata: {}, sessionId: BigInt(s) }, ev("x", s), { name: "nometa", sessionId: BigInt(s) }],
          }),
          ["events.1.name", "events.3.metadata"],
        ],
        [() => api.as(bob).batchEvents({ events: [ev("ok", s), ev("no-session", 0)] }), ["events.1.session_id"]],
        [() => api.as(bob).batchEvents({ events: [{ name: "n", metadata: {} }] }), ["events.0.session_id"]],
        [() => api.as(bob).batchEvents({ events: [ev("ok", s), ev("ok", s), ev("ok", s), ev("theirs", alice1.sessions[0]!)] }), ["events.3.session_id"]],
        [() => api.as(bob).batchEvents({ events: [ev("ok", s), { ...ev("n", s), metadata: { count: 3 } as never }] }), ["events.1.metadata.count"]],
        [() => api.as(bob).batchEvents({ events: [ev("late", s, {}, "not a date"), ev("x".repeat(256), s)] }), ["events.0.created_at", "events.1.name"]],
        [() => api.as(bob).batchBreadcrumbs({ breadcrumbs: [{ name: "a", createdAt: new Date(Date.now() + 3_600_000).toISOString() }] }), ["breadcrumbs.0.created_at"]],
        [() => api.as(bob).batchBreadcrumbs({ breadcrumbs: [{ name: "a", sessionId: 999_999_999n }] }), ["breadcrumbs.0.session_id"]],
        // U+0000 cannot be stored: refused up front, not queued for a worker that can never apply it.
        [() => api.as(bob).batchEvents({ events: [ev("ok", s), ev("nul\u0000", s), ev("m", s, { k: "v\u0000" })] }), ["events.1.name", "events.2.metadata.k"]],
        [() => api.as(bob).batchBreadcrumbs({ breadcrumbs: [{ name: "a\u0000b" }] }), ["breadcrumbs.0.name"]],
        [
          () => api.as(bob).batchLogs({
            logs: [
              { appVersion: "1", classFqn: "A", message: "m", type: "error", sessionId: BigInt(s) },
              { appVersion: "1", classFqn: "A", message: "m", type: "warning", sessionId: BigInt(s), lineNumber: -1n },
              {
                appVersion: "1", classFqn: "A", message: "m", type: "crash", sessionId: BigInt(s),
                file: create(FileSchema, { filename: "big", data: new Uint8Array(4 * 1024 * 1024 + 1) }),
              },
              { classFqn: "A", message: "m", type: "crash", sessionId: BigInt(s), context: { kind: { case: "numberValue", value: 3 } } as never },
              { appVersion: "1", classFqn: "A\u0000", message: "m", type: "error", sessionId: BigInt(s), context: { kind: { case: "stringValue", value: '{"a":{"b":"\\u0000"}}' } } as never },
            ],
          }),
          ["logs.1.line_number", "logs.1.type", "logs.2.file", "logs.3.app_version", "logs.3.context", "logs.4.classFQN", "logs.4.context"],
        ],
      ];
      for (const [call, fields] of cases) {
        const err = await call().then(() => undefined, (e: unknown) => e);
        expect(errorDetail(err)?.httpStatus, fields.join()).toBe(422);
        expect(fieldsOf(err)).toEqual(fields);
      }
      expect(await lag()).toBe(0);
      expect(await countOf(db.sql, "SELECT count(*) AS n FROM queue_messages WHERE queue = 'analytics'")).toBe(0);
    });

    it("queues valid batches, answers with a message, and the workers apply them exactly", async () => {
      const a = await api.as(alice1).batchEvents({
        events: [ev("open", alice1.sessions[0]!, { src: "push" }, "2026-01-01T08:00:00Z"), ev("open", alice1.sessions[1]!, { src: "icon" }, "2026-01-02T08:00:00Z")],
      });
      expect(a.message).toMatch(/queued/i);
      await api.as(alice2).batchEvents({ events: [ev("open", alice2.sessions[0]!, { src: "push" }, "2026-01-02T09:00:00Z")] });
      await api.as(bob).batchEvents({ events: [ev("open", bob.sessions[0]!, { src: "push" }), ev("close", bob.sessions[0]!)] });
      await api.as(bob).batchBreadcrumbs({ breadcrumbs: [{ name: "home", sessionId: BigInt(bob.sessions[0]!) }, { name: "home" }, { name: "cart", createdAt: "2025-12-31T00:00:00Z" }] });
      await api.as(alice1).batchLogs({
        logs: [
          {
            appVersion: "2.0", classFqn: "X.Err", message: "oops", type: "error", sessionId: BigInt(alice1.sessions[0]!),
            stackTrace: "st", context: { kind: { case: "stringValue", value: '{"screen":"cart"}' } } as never,
            file: create(FileSchema, { filename: "log.txt", contentType: "text/plain", data: new TextEncoder().encode("file body") }),
          },
          { appVersion: "2.0", classFqn: "X.Err", message: "oops", type: "error", sessionId: BigInt(alice1.sessions[1]!) },
        ],
      });
      expect(await lag()).toBe(5);
      workers = startWorkers({ sql: db.sql, queue, concurrency: 2 });
      await waitFor(async () => (await lag()) === 0, 15_000, "queue drained");

      const events = await admin.listEvents({ filter: { appId: BigInt(appId), name: "open" } });
      expect(events.events).toHaveLength(1);
      const open = events.events[0]!;
      expect(open.occurrences).toBe(4n);
      expect(open.uniqueUsers).toBe(2n);
      expect(Object.fromEntries(open.eventData.map((d) => [d.value, d.occurrences]))).toEqual({ push: 3n, icon: 1n });
      expect(open.createdAt?.seconds).toBe(BigInt(Date.parse("2026-01-01T08:00:00Z") / 1000));

      const daily = await admin.getEventDailyCounts({
        eventId: open.id,
        from: timestampFromDate(new Date("2026-01-01T00:00:00Z")),
        to: timestampFromDate(new Date("2026-01-04T00:00:00Z")),
      });
      expect(daily.days.map((d) => [d.day, d.occurrences, d.uniqueUsers])).toEqual([
        ["2026-01-01", 1n, 1n],
        ["2026-01-02", 2n, 1n],
        ["2026-01-03", 0n, 0n],
      ]);

      const crumbs = await admin.listBreadcrumbs({ filter: { appId: BigInt(appId) } });
      const home = crumbs.breadcrumbs.find((b) => b.name === "home")!;
      expect(home.occurrences).toBe(2n);
      const occ = await admin.listBreadcrumbOccurrences({ breadcrumbId: home.id });
      expect(occ.occurrences.map((o) => o.sessionId).sort()).toEqual([0n, BigInt(bob.sessions[0]!)]);

      const logs = await admin.listLogs({ filter: { appId: BigInt(appId) }, type: "error" });
      expect(logs.logs).toHaveLength(1);
      expect(logs.logs[0]!.occurrences).toBe(2n);
      expect(logs.logs[0]!.usersAffected).toBe(1n);
      const logOcc = await admin.listLogOccurrences({ logId: logs.logs[0]!.id });
      const withFile = logOcc.occurrences.find((o) => o.attachment)!;
      expect(withFile.context).toEqual({ screen: "cart" });
      const file = await admin.getLogAttachment({ occurrenceId: withFile.id });
      expect(new TextDecoder().decode(file.data)).toBe("file body");
      expect(file.filename).toBe("log.txt");
    });

    it("processes a batch sent twice with the same Idempotency-Key once", async () => {
      const headers = { "Idempotency-Key": `key-${kind}-1` };
      const body = { events: [ev("idem", bob.sessions[0]!), ev("idem", bob.sessions[0]!)] };
      await api.as(bob, headers).batchEvents(body);
      await waitFor(async () => (await countOf(db.sql, "SELECT occurrences AS n FROM analytics_events WHERE name = 'idem'")) === 2);
      await api.as(bob, headers).batchEvents(body);
      await api.as(bob, headers).batchEvents(body);
      // another consumer using the same key is a different batch
      await api.as(alice1, headers).batchEvents({ events: [ev("idem", alice1.sessions[0]!)] });
      await waitFor(async () => (await lag()) === 0);
      expect(await countOf(db.sql, "SELECT occurrences AS n FROM analytics_events WHERE name = 'idem'")).toBe(3);
    });

    it("pages through records with a page token", async () => {
      for (let i = 0; i < 5; i++) await api.as(bob).recordEvent({ name: `paged-${i}`, metadata: {} });
      const seen: string[] = [];
      let token = "";
      do {
        const page = await admin.listEvents({ filter: { appId: BigInt(appId), pageSize: 2, pageToken: token } });
        expect(page.events.length).toBeLessThanOrEqual(2);
        seen.push(...page.events.map((e) => e.name));
        token = page.nextPageToken;
      } while (token);
      expect(new Set(seen).size).toBe(seen.length);
      expect(seen.filter((n) => n.startsWith("paged-")).sort()).toEqual(["paged-0", "paged-1", "paged-2", "paged-3", "paged-4"]);
    });

    it("dead-letters a batch that keeps failing and replays it once fixed", async () => {
      await db.sql.exec("ALTER TABLE analytics_breadcrumb_occurrences RENAME TO analytics_bc_occ_hidden");
      try {
        await api.as(bob).batchBreadcrumbs({ breadcrumbs: [{ name: "doomed" }] });
        await waitFor(async () => Number((await admin.getQueueStats({})).deadLetters) === 1, 15_000, "dead letter");
      } finally {
        await db.sql.exec("ALTER TABLE analytics_bc_occ_hidden RENAME TO analytics_breadcrumb_occurrences");
      }
      const list = await admin.listDeadLetters({});
      expect(list.deadLetters).toHaveLength(1);
      expect(list.deadLetters[0]).toMatchObject({ kind: "breadcrumbs", itemCount: 1, attempts: 2, consumerId: BigInt(bob.consumerId) });
      expect(list.deadLetters[0]!.lastError).not.toBe("");
      expect(await countOf(db.sql, "SELECT count(*) AS n FROM analytics_breadcrumbs WHERE name = 'doomed'")).toBe(0);
      const r = await admin.replayDeadLetters({ ids: [list.deadLetters[0]!.id] });
      expect(r.replayed).toBe(1);
      await waitFor(async () => (await countOf(db.sql, "SELECT occurrences AS n FROM analytics_breadcrumbs WHERE name = 'doomed'")) === 1);
      expect(Number((await admin.getQueueStats({})).deadLetters)).toBe(0);
    });
  });
}
