// A batch transaction whose connection is terminated before COMMIT (the
// server rolls it back) is run again on a fresh connection and counted once;
// a batch applied again after it committed (a redelivery after a crash
// between commit and ack) changes nothing.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import pg from "pg";
import { applyBatches } from "../../../src/capabilities/analytics/apply-batch.js";
import { PAYLOAD_VERSION, type BatchPayload } from "../../../src/capabilities/analytics/batch-payload.js";
import { createTestDb, type TestDb } from "../../helpers/db.js";
import { until } from "../../helpers/until.js";
import { countOf, seedApp, type TestConsumer } from "./fixtures.js";

let db: TestDb;
let user: TestConsumer;
// Holds a lock and terminates backends; its own application_name, so it is
// never among the connections it terminates.
let other: pg.Client;

beforeAll(async () => {
  db = await createTestDb("postgres");
  user = (await seedApp(db.sql, ["alice"])).consumers[0]!;
  other = new pg.Client({ connectionString: db.url, application_name: "pbtest_batch_loss_admin" });
  await other.connect();
  await other.query(`SET search_path = ${db.schema}, public`);
});
afterAll(async () => {
  await other?.end();
  await db.drop();
});

const batch = (batchId: string, n: number): BatchPayload => ({
  v: PAYLOAD_VERSION,
  batchId,
  acceptedAt: new Date().toISOString(),
  appId: user.appId,
  consumerId: user.consumerId,
  userId: user.userId,
  kind: "events",
  items: Array.from({ length: n }, () => ({ name: "loss", metadata: { k: "v" }, session_id: null, created_at: new Date().toISOString() })),
});

describe("applying a batch when the connection is lost", () => {
  it("re-runs the transaction after its connection died before COMMIT and counts the batch once", async () => {
    // The batch's transaction blocks on this lock (after it has written its
    // processed-batch record), and is terminated while it waits.
    await other.query("BEGIN");
    await other.query("LOCK TABLE analytics_events IN SHARE MODE");
    const applying = applyBatches(db.sql, [batch("b-loss-1", 5)]);
    const pid = await until(async () => {
      const r = await other.query(
        "SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'",
        [db.schema],
      );
      return r.rows[0]?.pid as number | undefined;
    });
    await other.query("SELECT pg_terminate_backend($1)", [pid]);
    await other.query("COMMIT");

    expect(await applying).toEqual(["applied"]);
    const occurrences = () => countOf(db.sql, "SELECT coalesce(sum(occurrences), 0) AS n FROM analytics_events WHERE app_id = $1 AND name = 'loss'", [user.appId]);
    expect(await occurrences()).toBe(5);
    expect(await countOf(db.sql, "SELECT count(*) AS n FROM analytics_processed_batches WHERE batch_id = 'b-loss-1'")).toBe(1);

    // Delivered again (the worker died between COMMIT and ack): no change.
    expect(await applyBatches(db.sql, [batch("b-loss-1", 5)])).toEqual(["duplicate"]);
    expect(await occurrences()).toBe(5);
  });
});
