// Operator read API: filters, time ranges, paging limits and errors.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { createClient, createRouterTransport } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AnalyticsService } from "../../../gen/pulsebase/platform/v1/analytics_pb.js";
import { AnalyticsService as AdminAnalyticsService } from "../../../gen/pulsebase/admin/v1/analytics_pb.js";
import { createAnalyticsServiceImpl } from "../../../src/capabilities/analytics/analytics-service.js";
import { createAdminAnalyticsServiceImpl } from "../../../src/capabilities/analytics/admin-analytics-service.js";
import { createDirBlobStore } from "../../../src/infra/blobs/dir-blob-store.js";
import { errorDetail } from "../../../src/kernel/errors.js";
import { createSqlQueue } from "../../../src/infra/queue/sql-queue.js";
import { createTestDb, type TestDb } from "../../helpers/db.js";
import { clientFor, seedApp, type TestConsumer } from "./fixtures.js";

const at = (iso: string) => timestampFromDate(new Date(iso));

describe("operator analytics API", () => {
  let db: TestDb;
  let blobDir: string;
  let admin: ReturnType<typeof createClient<typeof AdminAnalyticsService>>;
  let u: TestConsumer;
  let otherApp: number;

  beforeAll(async () => {
    db = await createTestDb("postgres");
    blobDir = await mkdtemp(join(tmpdir(), "pb-blobs-"));
    const queue = createSqlQueue({ name: "analytics", sql: db.sql });
    const blobs = createDirBlobStore(blobDir);
    const api = clientFor(AnalyticsService, createAnalyticsServiceImpl({ sql: db.sql, queue, blobs }));
    admin = createClient(AdminAnalyticsService, createRouterTransport((r) => r.service(AdminAnalyticsService, createAdminAnalyticsServiceImpl({ sql: db.sql, queue, blobs }))));
    [u] = (await seedApp(db.sql, ["ann"])).consumers as [TestConsumer];
    const [v] = (await seedApp(db.sql, ["bo"])).consumers as [TestConsumer];
    otherApp = v.appId;
    await api.as(u).recordBreadcrumb({ name: "old", createdAt: "2025-01-10T00:00:00Z" });
    await api.as(u).recordBreadcrumb({ name: "new", createdAt: "2026-06-10T00:00:00Z" });
    await api.as(u).recordLog({ appVersion: "1", classFqn: "A", message: "m", type: "error", createdAt: "2026-06-01T00:00:00Z" });
    await api.as(u).recordLog({ appVersion: "1", classFqn: "B", message: "m", type: "crash", createdAt: "2026-06-02T00:00:00Z" });
    await api.as(u).recordEvent({ name: "mine", metadata: {} });
    await api.as(v).recordEvent({ name: "theirs", metadata: {} });
  });
  afterAll(async () => {
    await db.drop();
    await rm(blobDir, { recursive: true, force: true });
  });

  it("lists one application's records, filtered by name, time range and log type", async () => {
    const mine = await admin.listEvents({ filter: { appId: BigInt(u.appId) } });
    expect(mine.events.map((e) => e.name)).toEqual(["mine"]);
    const theirs = await admin.listEvents({ filter: { appId: BigInt(otherApp) } });
    expect(theirs.events.map((e) => e.name)).toEqual(["theirs"]);

    const in2026 = await admin.listBreadcrumbs({ filter: { appId: BigInt(u.appId), from: at("2026-01-01T00:00:00Z"), to: at("2027-01-01T00:00:00Z") } });
    expect(in2026.breadcrumbs.map((b) => b.name)).toEqual(["new"]);
    const named = await admin.listBreadcrumbs({ filter: { appId: BigInt(u.appId), name: "old" } });
    expect(named.breadcrumbs.map((b) => b.name)).toEqual(["old"]);

    const crashes = await admin.listLogs({ filter: { appId: BigInt(u.appId) }, type: "crash" });
    expect(crashes.logs.map((l) => l.classFqn)).toEqual(["B"]);
    const byClass = await admin.listLogs({ filter: { appId: BigInt(u.appId), name: "A" } });
    expect(byClass.logs.map((l) => l.type)).toEqual(["error"]);
  });

  it("reports missing records and bad arguments clearly", async () => {
    const missing = await admin.getEvent({ id: 987_654_321n }).catch((e: unknown) => e);
    expect(errorDetail(missing)?.code).toBe("not_found");
    const noApp = await admin.listEvents({}).catch((e: unknown) => e);
    expect(errorDetail(noApp)?.fieldViolations.map((f) => f.field)).toEqual(["filter.app_id"]);
    const bigPage = await admin.listEvents({ filter: { appId: BigInt(u.appId), pageSize: 501 } }).catch((e: unknown) => e);
    expect(errorDetail(bigPage)?.fieldViolations.map((f) => f.field)).toEqual(["page_size"]);
    const badToken = await admin.listEvents({ filter: { appId: BigInt(u.appId), pageToken: "nope" } }).catch((e: unknown) => e);
    expect(errorDetail(badToken)?.fieldViolations.map((f) => f.field)).toEqual(["page_token"]);
    const ev = (await admin.listEvents({ filter: { appId: BigInt(u.appId) } })).events[0]!;
    const noRange = await admin.getEventDailyCounts({ eventId: ev.id }).catch((e: unknown) => e);
    expect(errorDetail(noRange)?.fieldViolations.map((f) => f.field).sort()).toEqual(["from", "to"]);
    const tooLong = await admin
      .getEventDailyCounts({ eventId: ev.id, from: at("2024-01-01T00:00:00Z"), to: at("2026-01-01T00:00:00Z") })
      .catch((e: unknown) => e);
    expect(errorDetail(tooLong)?.httpStatus).toBe(422);
    const log = (await admin.listLogs({ filter: { appId: BigInt(u.appId) } })).logs[0]!;
    const occ = await admin.listLogOccurrences({ logId: log.id });
    const noFile = await admin.getLogAttachment({ occurrenceId: occ.occurrences[0]!.id }).catch((e: unknown) => e);
    expect(errorDetail(noFile)?.code).toBe("not_found");
  });

  it("shows an empty queue and no dead letters", async () => {
    const stats = await admin.getQueueStats({});
    expect(stats).toMatchObject({ backend: "embedded", lag: 0n, deadLetters: 0n });
    expect((await admin.listDeadLetters({})).deadLetters).toEqual([]);
    expect((await admin.replayDeadLetters({})).replayed).toBe(0);
  });
});
