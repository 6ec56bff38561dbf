// Invocation records: buffered writes, skipped rows of deleted functions,
// and retention (on PGlite, the embedded default).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDb, type TestDb } from "../../helpers/db.js";
import { createInvocationRecorder, type InvocationRecord } from "../../../src/capabilities/functions/invocation-recorder.js";
import { createApp } from "./fixtures.js";

let db: TestDb;
let fnId: number;
let appId: number;

beforeAll(async () => {
  db = await createTestDb("pglite");
  appId = await createApp(db.sql);
  const f = await db.sql.query<{ id: number }>("INSERT INTO functions (app_id, name, timeout_ms, memory_mb) VALUES ($1, 'f', 1000, 64) RETURNING id", [appId]);
  fnId = Number(f.rows[0]!.id);
});
afterAll(() => db.drop());

const rec = (over: Partial<InvocationRecord> = {}): InvocationRecord => ({
  appId, functionId: fnId, version: 1, triggerKind: "http", triggerId: null, status: 200, outcome: "ok",
  durationMs: 1.5, memoryBytes: 1000, error: null, logs: [{ level: "log", message: "it's \"quoted\" \\ ok" }], logsTruncated: false, requestId: "r", ...over,
});

describe("invocation recorder", () => {
  it("writes buffered records in one batch, keeping logs intact, and skips deleted functions", async () => {
    const r = createInvocationRecorder(db.sql, { flushMs: 10_000, retentionDays: 0 });
    for (let i = 0; i < 3; i++) r.record(rec({ requestId: `b${i}` }));
    r.record(rec({ functionId: 999_999, requestId: "gone" }));
    const before = await db.sql.query("SELECT count(*)::int AS n FROM function_invocations WHERE request_id LIKE 'b%'");
    expect(before.rows[0]).toEqual({ n: 0 });
    await r.flush();
    const rows = await db.sql.query<{ request_id: string; logs: unknown }>("SELECT request_id, logs FROM function_invocations ORDER BY id");
    expect(rows.rows.map((x) => x.request_id)).toEqual(["b0", "b1", "b2"]);
    expect(rows.rows[0]!.logs).toEqual([{ level: "log", message: "it's \"quoted\" \\ ok" }]);
  });

  it("deletes records older than the retention", async () => {
    // Ids follow time in real use: start from an empty table.
    await db.sql.query("DELETE FROM function_invocations");
    await db.sql.query(
      "INSERT INTO function_invocations (app_id, function_id, trigger_kind, status, outcome, duration_ms, created_at) VALUES ($1, $2, 'http', 200, 'ok', 1, now() - interval '3 days')",
      [appId, fnId],
    );
    const r = createInvocationRecorder(db.sql, { flushMs: 10_000, retentionDays: 2 });
    r.record(rec({ requestId: "fresh" }));
    await r.flush();
    const old = await db.sql.query("SELECT count(*)::int AS n FROM function_invocations WHERE created_at < now() - interval '2 days'");
    expect(old.rows[0]).toEqual({ n: 0 });
    const fresh = await db.sql.query("SELECT count(*)::int AS n FROM function_invocations WHERE request_id = 'fresh'");
    expect(fresh.rows[0]).toEqual({ n: 1 });
  });
});
