// NATS goes away and comes back: the batch endpoint answers 503 meanwhile
// (never 500, never 202 for something not stored), recovers by itself, and
// everything accepted is applied exactly once.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ChildProcess } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AnalyticsService } from "../../../gen/pulsebase/platform/v1/analytics_pb.js";
import { createAnalyticsServiceImpl } from "../../../src/capabilities/analytics/analytics-service.js";
import { createDirBlobStore } from "../../../src/infra/blobs/dir-blob-store.js";
import { errorDetail } from "../../../src/kernel/errors.js";
import { createJetStreamQueue } from "../../../src/infra/queue/jetstream-queue.js";
import type { Queue } from "../../../src/infra/queue/queue.js";
import { NatsLink } from "../../../src/infra/nats/nats-link.js";
import { startWorkers, type Workers } from "../../../src/capabilities/analytics/analytics-worker.js";
import { createTestDb, type TestDb } from "../../helpers/db.js";
import { clientFor, countOf, seedApp, waitFor } from "../../capabilities/analytics/fixtures.js";
import { freePort, NATS_SERVER_BIN, startNatsServer, stopProcess } from "./jetstream-helpers.js";

describe.skipIf(!NATS_SERVER_BIN)("NATS outage", () => {
  let db: TestDb;
  let dir: string;
  let port: number;
  let server: ChildProcess | undefined;
  let queue: Queue;
  let link: NatsLink;
  let workers: Workers;

  beforeAll(async () => {
    db = await createTestDb("postgres");
    dir = await mkdtemp(join(tmpdir(), "pb-nats-"));
    port = await freePort();
    server = await startNatsServer(port, join(dir, "store"));
    // Short ack wait: messages prefetched before the outage come back quickly.
    link = new NatsLink({ servers: `nats://127.0.0.1:${port}`, name: "outage" });
    queue = createJetStreamQueue({ name: "analytics", nats: link, jetstream: { stream: "PB_ANALYTICS", subjectPrefix: "pulsebase.analytics", publishTimeoutMs: 2000 }, ackWaitMs: 2000 });
    await queue.ready();
    workers = startWorkers({ sql: db.sql, queue, concurrency: 2 });
  });
  afterAll(async () => {
    await workers.stop();
    await queue.close();
    await link.close();
    if (server) await stopProcess(server);
    await db.drop();
    await rm(dir, { recursive: true, force: true });
  });

  it("answers 503 while NATS is down and loses nothing across the restart", async () => {
    const api = clientFor(AnalyticsService, createAnalyticsServiceImpl({ sql: db.sql, queue, blobs: createDirBlobStore(join(dir, "blobs")) }));
    const [u] = (await seedApp(db.sql, ["x"])).consumers;
    const send = () => api.as(u).batchBreadcrumbs({ breadcrumbs: [{ name: "outage" }, { name: "outage" }] });

    let accepted = 0;
    for (let i = 0; i < 5; i++) {
      await send();
      accepted++;
    }
    await stopProcess(server!);
    server = undefined;
    await waitFor(async () => {
      const err = await send().then(() => undefined, (e: unknown) => e);
      if (!err) accepted++; // raced the disconnect: it was stored
      return err !== undefined;
    }, 10_000, "503 after stop");
    const during = await send().then(() => undefined, (e: unknown) => e);
    expect(errorDetail(during)?.code).toBe("unavailable");
    expect(errorDetail(during)?.httpStatus).toBe(503);

    server = await startNatsServer(port, join(dir, "store"));
    await waitFor(async () => {
      const ok = await send().then(() => true, () => false);
      if (ok) accepted++;
      return ok;
    }, 15_000, "recovery");
    for (let i = 0; i < 3; i++) {
      await send();
      accepted++;
    }
    await waitFor(async () => (await countOf(db.sql, "SELECT occurrences AS n FROM analytics_breadcrumbs WHERE name = 'outage'")) === accepted * 2, 20_000, "all applied");
    await waitFor(async () => (await queue.stats()).lag === 0, 10_000, "drained");
    expect(await countOf(db.sql, "SELECT occurrences AS n FROM analytics_breadcrumbs WHERE name = 'outage'")).toBe(accepted * 2);
  });
});
