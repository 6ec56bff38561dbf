// The embedded queue is durable: a batch accepted before a restart (PGlite
// on a data directory, closed and reopened) is processed after it.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { AnalyticsService } from "../../../gen/pulsebase/platform/v1/analytics_pb.js";
import { createAnalyticsServiceImpl } from "../../../src/capabilities/analytics/analytics-service.js";
import { createDirBlobStore } from "../../../src/infra/blobs/dir-blob-store.js";
import { createSqlQueue } from "../../../src/infra/queue/sql-queue.js";
import { createPgliteSql } from "../../../src/infra/storage/pglite-sql.js";
import { migrate } from "../../../src/infra/storage/migrate.js";
import { startWorkers } from "../../../src/capabilities/analytics/analytics-worker.js";
import { clientFor, countOf, seedApp, waitFor } from "../../capabilities/analytics/fixtures.js";

describe("embedded queue across a restart", () => {
  let dir: string | undefined;
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("processes after a restart what was accepted before it", async () => {
    dir = await mkdtemp(join(tmpdir(), "pb-pglite-"));
    const blobs = createDirBlobStore(join(dir, "blobs"));
    let sql = await createPgliteSql(join(dir, "db"));
    await migrate(sql);
    const [u] = (await seedApp(sql, ["alice"])).consumers;
    const api = clientFor(AnalyticsService, createAnalyticsServiceImpl({ sql, queue: createSqlQueue({ name: "analytics", sql }), blobs }));
    await api.as(u).batchEvents({ events: [{ name: "before-restart", metadata: { a: "1" }, sessionId: BigInt(u!.sessions[0]!) }] });
    await api.as(u).batchLogs({ logs: [{ appVersion: "1", classFqn: "E", message: "m", type: "error", sessionId: BigInt(u!.sessions[1]!) }] });
    await sql.close();

    sql = await createPgliteSql(join(dir, "db"));
    try {
      await migrate(sql);
      const queue = createSqlQueue({ name: "analytics", sql, pollMs: 50 });
      expect((await queue.stats()).lag).toBe(2);
      const w = startWorkers({ sql, queue });
      await waitFor(async () => (await queue.stats()).lag === 0, 10_000, "drained");
      await w.stop();
      expect(await countOf(sql, "SELECT occurrences AS n FROM analytics_events WHERE name = 'before-restart'")).toBe(1);
      expect(await countOf(sql, "SELECT occurrences AS n FROM analytics_logs")).toBe(1);
    } finally {
      await sql.close();
    }
  });
});
