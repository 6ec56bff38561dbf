import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import { ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AnalyticsService } from "../../../gen/pulsebase/platform/v1/analytics_pb.js";
import { FileSchema } from "../../../gen/pulsebase/common/v1/options_pb.js";
import { createAnalyticsServiceImpl } from "../../../src/capabilities/analytics/analytics-service.js";
import { logHash } from "../../../src/capabilities/analytics/log-hash.js";
import { createDirBlobStore } from "../../../src/infra/blobs/dir-blob-store.js";
import { errorDetail } from "../../../src/kernel/errors.js";
import { createSqlQueue } from "../../../src/infra/queue/sql-queue.js";
import { createTestDb, type TestDb } from "../../helpers/db.js";
import { clientFor, seedApp, type TestConsumer } from "./fixtures.js";

function fieldsOf(err: unknown): Record<string, string[]> {
  const d = errorDetail(err);
  return Object.fromEntries((d?.fieldViolations ?? []).map((f) => [f.field, f.messages]));
}

for (const kind of ["postgres", "pglite"] as const) {
  describe(`single analytics endpoints on ${kind}`, () => {
    let db: TestDb;
    let blobDir: string;
    let api: ReturnType<typeof clientFor<typeof AnalyticsService>>;
    let alice1: TestConsumer, alice2: TestConsumer, bob: TestConsumer;

    beforeAll(async () => {
      db = await createTestDb(kind);
      blobDir = await mkdtemp(join(tmpdir(), "pb-blobs-"));
      const impl = createAnalyticsServiceImpl({ sql: db.sql, queue: createSqlQueue({ name: "analytics", sql: db.sql }), blobs: createDirBlobStore(blobDir) });
      api = clientFor(AnalyticsService, impl);
      [alice1, alice2, bob] = (await seedApp(db.sql, ["alice", "alice", "bob"])).consumers as [TestConsumer, TestConsumer, TestConsumer];
    });
    afterAll(async () => {
      await db.drop();
      await rm(blobDir, { recursive: true, force: true });
    });

    it("aggregates events per name: occurrences, unique users (one person on two devices counts once), event data", async () => {
      const first = await api.as(alice1).recordEvent({ name: "purchase", metadata: { plan: "pro", screen: "home" } });
      expect(first.occurrences).toBe(1n);
      expect(first.uniqueUsers).toBe(1n);
      await api.as(alice2).recordEvent({ name: "purchase", metadata: { plan: "pro" } });
      const third = await api.as(bob).recordEvent({ name: "purchase", metadata: { plan: "free" } });
      expect(third.id).toBe(first.id);
      expect(third.occurrences).toBe(3n);
      expect(third.uniqueUsers).toBe(2n);
      expect(third.createdAt).toEqual(first.createdAt);
      const data = Object.fromEntries(third.eventData.map((d) => [`${d.key}=${d.value}`, d.occurrences]));
      expect(data).toEqual({ "plan=pro": 2n, "plan=free": 1n, "screen=home": 1n });
      const other = await api.as(bob).recordEvent({ name: "signup", metadata: {} });
      expect(other.id).not.toBe(first.id);
      expect(other.eventData).toEqual([]);
      const raw = await db.sql.query("SELECT count(*)::int AS n FROM analytics_event_occurrences WHERE event_id = $1", [Number(first.id)]);
      expect(raw.rows[0]!.n).toBe(3);
    });

    it("refuses an event without metadata, a long name and non-string metadata values", async () => {
      const err = await api.as(bob).recordEvent({ name: "x".repeat(256), metadata: undefined }).catch((e) => e);
      expect(err).toBeInstanceOf(ConnectError);
      expect(errorDetail(err)?.httpStatus).toBe(422);
      expect(Object.keys(fieldsOf(err)).sort()).toEqual(["metadata", "name"]);
      const err2 = await api.as(bob).recordEvent({ name: "ok", metadata: { n: 3 } }).catch((e) => e);
      expect(Object.keys(fieldsOf(err2))).toEqual(["metadata.n"]);
      const err3 = await api.as(undefined).recordEvent({ name: "ok", metadata: {} }).catch((e) => e);
      expect(errorDetail(err3)?.httpStatus).toBe(401);
    });

    it("refuses NUL characters (which PostgreSQL cannot store) with 422 naming the field, not a 500", async () => {
      const ev = await api.as(bob).recordEvent({ name: "a\u0000", metadata: { "k\u0000": "v" } }).catch((e) => e);
      expect(errorDetail(ev)?.httpStatus).toBe(422);
      expect(Object.keys(fieldsOf(ev)).sort()).toEqual(["metadata.k\u0000", "name"]);
      const bc = await api.as(bob).recordBreadcrumb({ name: "\u0000" }).catch((e) => e);
      expect(Object.keys(fieldsOf(bc))).toEqual(["name"]);
      const log = await api.as(bob).recordLog({ appVersion: "\u0000", classFqn: "A", message: "m", type: "error", stackTrace: "s\u0000" }).catch((e) => e);
      expect(errorDetail(log)?.httpStatus).toBe(422);
      expect(Object.keys(fieldsOf(log)).sort()).toEqual(["app_version", "stack_trace"]);
    });

    it("groups logs by hash, lists versions, counts affected users and keeps the latest details", async () => {
      const base = { appVersion: "1.2.0", classFqn: "com.app.Boom", message: "boom", type: "crash", createdAt: "" };
      const a = await api.as(alice1).recordLog({ ...base, stackTrace: "trace-1", lineNumber: 10n, fileName: "A.kt", context: { kind: { case: "structValue", value: { fields: {} } } } as never });
      expect(a.hash).toBe(logHash("1.2.0", "com.app.Boom", "boom", "crash"));
      expect(a.occurrences).toBe(1n);
      const b = await api.as(alice2).recordLog({ ...base, stackTrace: "trace-2", lineNumber: 11n });
      const c = await api.as(bob).recordLog({
        ...base,
        stackTrace: "trace-old",
        createdAt: "2020-01-01T00:00:00Z",
        file: create(FileSchema, { filename: "dump.txt", contentType: "text/plain", data: new TextEncoder().encode("hello") }),
      });
      expect(c.id).toBe(a.id);
      expect(b.usersAffected).toBe(1n);
      expect(c.occurrences).toBe(3n);
      expect(c.usersAffected).toBe(2n);
      expect(c.appVersions).toBe("1.2.0");
      // an older occurrence does not replace the latest details
      expect(c.stackTrace).toBe("trace-2");
      expect(c.lineNumber).toBe(11n);
      const other = await api.as(bob).recordLog({ ...base, appVersion: "1.3.0" });
      expect(other.id).not.toBe(a.id);
      const occ = await db.sql.query<{ attachment_key: string | null }>(
        "SELECT attachment_key FROM analytics_log_occurrences WHERE log_id = $1 ORDER BY id",
        [Number(a.id)],
      );
      expect(occ.rows.map((r) => r.attachment_key !== null)).toEqual([false, false, true]);
    });

    it("refuses a log file over 4 MiB naming the field, and stores nothing", async () => {
      const before = await db.sql.query("SELECT count(*)::int AS n FROM analytics_log_occurrences");
      const big = new Uint8Array(4 * 1024 * 1024 + 1);
      const err = await api
        .as(bob)
        .recordLog({ appVersion: "1", classFqn: "X", message: "m", type: "error", createdAt: "", file: create(FileSchema, { filename: "big.bin", data: big }) })
        .catch((e) => e);
      expect(errorDetail(err)?.httpStatus).toBe(422);
      expect(Object.keys(fieldsOf(err))).toEqual(["file"]);
      const bad = await api.as(bob).recordLog({ appVersion: "", classFqn: "", message: "", type: "fatal", createdAt: "yesterday" }).catch((e) => e);
      expect(Object.keys(fieldsOf(bad)).sort()).toEqual(["app_version", "classFQN", "created_at", "message", "type"]);
      const after = await db.sql.query("SELECT count(*)::int AS n FROM analytics_log_occurrences");
      expect(after.rows[0]!.n).toBe(before.rows[0]!.n);
    });

    it("returns the same breadcrumb record per name with its first created_at, and checks the session", async () => {
      const a = await api.as(alice1).recordBreadcrumb({ name: "home", createdAt: "2026-01-01T10:00:00Z", sessionId: BigInt(alice1.sessions[0]!) });
      const b = await api.as(bob).recordBreadcrumb({ name: "home", createdAt: "" });
      expect(b.id).toBe(a.id);
      expect(b.appId).toBe(BigInt(alice1.appId));
      expect(b.createdAt).toEqual(a.createdAt);
      const foreign = await api.as(bob).recordBreadcrumb({ name: "home", createdAt: "", sessionId: BigInt(alice1.sessions[0]!) }).catch((e) => e);
      expect(Object.keys(fieldsOf(foreign))).toEqual(["session_id"]);
      const future = new Date(Date.now() + 3600_000).toISOString();
      const late = await api.as(bob).recordBreadcrumb({ name: "home", createdAt: future }).catch((e) => e);
      expect(Object.keys(fieldsOf(late))).toEqual(["created_at"]);
      const occ = await db.sql.query("SELECT consumer_id, session_id FROM analytics_breadcrumb_occurrences WHERE breadcrumb_id = $1 ORDER BY id", [Number(a.id)]);
      expect(occ.rows).toEqual([
        { consumer_id: alice1.consumerId, session_id: alice1.sessions[0] },
        { consumer_id: bob.consumerId, session_id: null },
      ]);
    });

    it("keeps counts exact under parallel writers", async () => {
      const writers = [alice1, alice2, bob];
      const perWriter = kind === "postgres" ? 40 : 15;
      await Promise.all(
        writers.flatMap((w, wi) =>
          Array.from({ length: perWriter }, (_, i) =>
            api.as(w).recordEvent({ name: `race-${i % 3}`, metadata: { w: String(wi), k: String(i % 2) } }),
          ),
        ),
      );
      const { rows } = await db.sql.query<{ name: string; occurrences: number; unique_users: number }>(
        "SELECT name, occurrences, unique_users FROM analytics_events WHERE app_id = $1 AND name LIKE 'race-%' ORDER BY name",
        [bob.appId],
      );
      const total = rows.reduce((s, r) => s + r.occurrences, 0);
      expect(total).toBe(writers.length * perWriter);
      for (const r of rows) expect(r.unique_users).toBe(2);
      const data = await db.sql.query<{ n: number }>(
        `SELECT sum(d.occurrences)::int AS n FROM analytics_event_data d JOIN analytics_events e ON e.id = d.event_id
         WHERE e.app_id = $1 AND e.name LIKE 'race-%' AND d.key = 'k'`,
        [bob.appId],
      );
      expect(data.rows[0]!.n).toBe(writers.length * perWriter);
    });
  });
}
