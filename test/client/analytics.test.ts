// The SDK's sessions and offline queue against a real server, through the
// example's dev server playing a bad network: batching at N items, the
// offline queue with sessions created by /api/session/batch, a lost response
// retried with the same Idempotency-Key and body (counted once, also across a
// restart), the bounded queue's drop policy, inactivity and shutdown ending
// sessions, errors as logs with their breadcrumbs, and a consumer deleted
// under queued items.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { IdentityService } from "../../gen/pulsebase/admin/v1/identity_pb.js";
import {
  createAnalytics, createClient, memoryStorage, NetworkError, type Analytics, type AnalyticsOptions, type StorageAdapter,
} from "../../packages/client/src/index.js";
import { createModules } from "../../src/server/modules.js";
import { startDevServer, type DevServer } from "../../examples/web/dev-server.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { eventCounts, waitFor } from "./sdk-fixture.js";

let s: TestServer;
let dev: DevServer;
let appKey: string;
let appId: bigint;
const open: Analytics[] = [];

beforeAll(async () => {
  s = await startTestServer({ modules: createModules });
  ({ appKey, appId } = await s.createApp("sdk analytics"));
  dev = await startDevServer({ upstream: s.httpsUrl, insecure: true });
});
afterAll(async () => {
  for (const a of open) await a.shutdown().catch(() => undefined);
  await dev.close();
  await s.close();
});
beforeEach(() => {
  dev.offline = false;
  dev.log.length = 0;
});

function sdk(o: AnalyticsOptions = {}, storage: StorageAdapter = memoryStorage(), userId = "user-1") {
  const client = createClient({
    baseUrl: dev.url,
    appKey,
    storage,
    userId,
    device: { deviceModel: "test", os: "node", country: "DE", language: "de" },
  });
  const a = createAnalytics(client, { flushAt: 1000, flushInterval: 60_000, retryBase: 50, retryMax: 200, lifecycle: false, ...o });
  open.push(a);
  return a;
}

const sessionsOf = async (consumerId: number) =>
  (await s.db.sql.query<{ id: string; started_at: Date; ended_at: Date | null }>("SELECT id, started_at, ended_at FROM sessions WHERE consumer_id = $1 ORDER BY id", [consumerId])).rows;
const batches = (path = "/api/events/batch") => dev.log.filter((r) => r.path === path);

describe("batching", () => {
  it("sends at flushAt in batches of batchSize, each with its own Idempotency-Key, all in one session", async () => {
    const a = sdk({ flushAt: 25, batchSize: 10 });
    for (let i = 0; i < 25; i++) a.track("batched", { i });
    await waitFor(async () => a.stats().sent.events, (n) => n === 25);
    expect(a.stats().sent.events).toBe(25);
    const sent = batches();
    expect(sent.map((r) => JSON.parse(r.body).events.length)).toEqual([10, 10, 5]);
    expect(new Set(sent.map((r) => r.idempotencyKey)).size).toBe(3);
    expect(sent.every((r) => r.status === 202)).toBe(true);
    await waitFor(() => eventCounts(s, appId, "batched"), (c) => c.occurrences === 25);
    expect(await eventCounts(s, appId, "batched")).toEqual({ rows: 25, occurrences: 25 });
    const sessionIds = new Set(sent.flatMap((r) => JSON.parse(r.body).events.map((e: { session_id: number }) => e.session_id)));
    expect(sessionIds.size).toBe(1);
    const sessions = await sessionsOf(a.client.identity!.consumerId);
    expect(sessions.map((x) => Number(x.id))).toEqual([...sessionIds]);
  });

  it("sends at flushInterval when fewer than flushAt are queued", async () => {
    const a = sdk({ flushInterval: 200 });
    a.track("interval", {});
    await waitFor(async () => a.stats().sent.events, (n) => n === 1, 5000);
    expect(a.stats().sent.events).toBe(1);
  });
});

/**
 * Waits until the server's analytics queue holds no message (a message stays
 * in the table until it has been applied): whatever was accepted, a
 * duplicate included, has been applied by then.
 */
async function queueDrained(): Promise<void> {
  // (waitFor fails the test if the queue never empties; a second count right
  // after could see a message the SDK's background retry added since)
  await waitFor(async () => Number((await s.db.sql.query<{ n: string }>("SELECT count(*) AS n FROM queue_messages WHERE queue = 'analytics'")).rows[0]!.n), (n) => n === 0, 20_000);
}

describe("offline", () => {
  it("keeps what is recorded offline, creates its session with /api/session/batch, and sends it once when back", async () => {
    dev.offline = true;
    const a = sdk();
    const t0 = Date.now();
    for (let i = 0; i < 30; i++) a.track("offline_queue", { i });
    await expect(a.flush()).rejects.toBeInstanceOf(NetworkError);
    expect(a.stats().queued.events).toBe(30);
    const t1 = Date.now();
    dev.offline = false;
    await a.flush();
    expect(a.stats()).toMatchObject({ queued: { events: 0 }, sent: { events: 30 }, dropped: 0 });
    await waitFor(() => eventCounts(s, appId, "offline_queue"), (c) => c.occurrences === 30);
    expect(await eventCounts(s, appId, "offline_queue")).toEqual({ rows: 30, occurrences: 30 });
    // The offline part of the session kept its true start; it ended when the server was back.
    const created = dev.log.filter((r) => r.path === "/api/session/batch" && r.status === 200);
    expect(created).toHaveLength(1);
    const [sess] = await sessionsOf(a.client.identity!.consumerId);
    expect(sess!.started_at.getTime()).toBeGreaterThanOrEqual(t0);
    expect(sess!.started_at.getTime()).toBeLessThanOrEqual(t1);
    expect(sess!.ended_at).not.toBeNull();
    // The next activity starts a new session, known to the server from its start.
    a.track("offline_queue_after", {});
    await a.flush();
    const after = await sessionsOf(a.client.identity!.consumerId);
    expect(after).toHaveLength(2);
    expect(after[1]!.ended_at).toBeNull();
  });

  it("a lost response is retried with the same key and body, and counts once", async () => {
    const a = sdk();
    for (let i = 0; i < 50; i++) a.track("lost_response", { i });
    dev.dropResponse((r) => r.path === "/api/events/batch");
    await expect(a.flush()).rejects.toBeInstanceOf(NetworkError);
    await a.flush();
    const sent = batches();
    expect(sent).toHaveLength(2);
    expect(sent[0]).toMatchObject({ status: 202, dropped: true });
    expect(sent[1]).toMatchObject({ status: 202, idempotencyKey: sent[0]!.idempotencyKey, body: sent[0]!.body });
    await waitFor(() => eventCounts(s, appId, "lost_response"), (c) => c.occurrences >= 50);
    await queueDrained(); // a second application would have been applied by now
    expect(await eventCounts(s, appId, "lost_response")).toEqual({ rows: 50, occurrences: 50 });
  });

  it("a restart resends the batch it had formed with the same key and body", async () => {
    const storage = memoryStorage(); // what survives the restart
    const first = sdk({}, storage, "restart-user");
    first.track("restart_online", {});
    await first.flush(); // registered, the session known to the server
    dev.offline = true;
    for (let i = 0; i < 40; i++) first.track("restart", { i });
    await expect(first.flush()).rejects.toBeInstanceOf(NetworkError);
    await first.shutdown().catch(() => undefined);
    const formed = batches().at(-1)!;
    expect(formed.idempotencyKey).toBeTruthy();

    dev.offline = false;
    dev.dropResponse((r) => r.path === "/api/events/batch");
    const second = sdk({}, storage, "restart-user");
    // It starts sending at once (the queue it loaded); that first answer is lost.
    await waitFor(async () => batches().some((r) => r.dropped), Boolean);
    await second.flush();
    const tries = batches().filter((r) => r.idempotencyKey === formed.idempotencyKey);
    expect(tries.length).toBeGreaterThanOrEqual(3);
    expect(new Set(tries.map((r) => r.body)).size).toBe(1);
    await waitFor(() => eventCounts(s, appId, "restart"), (c) => c.occurrences >= 40);
    await queueDrained();
    expect(await eventCounts(s, appId, "restart")).toEqual({ rows: 40, occurrences: 40 });
  });

  it("retries by itself with backoff until the server is back", async () => {
    dev.offline = true;
    const a = sdk({ retryBase: 100, retryMax: 400 });
    await a.loaded;
    for (let i = 0; i < 10; i++) a.track("auto_retry", { i });
    a.endSession();
    await waitFor(async () => dev.log.length, (n) => n >= 3, 5000);
    dev.offline = false;
    await waitFor(() => eventCounts(s, appId, "auto_retry"), (c) => c.occurrences === 10, 10_000);
    expect(await eventCounts(s, appId, "auto_retry")).toEqual({ rows: 10, occurrences: 10 });
  });

  it("a full queue drops its oldest unsent items and says so", async () => {
    dev.offline = true;
    const drops: [string, number, string][] = [];
    const a = sdk({ maxQueueSize: 40, batchSize: 10, onDrop: (k, n, why) => drops.push([k, n, why]) });
    for (let i = 0; i < 60; i++) a.track("bounded", { i: String(i) });
    expect(a.stats().queued.events).toBe(40);
    expect(a.stats().dropped).toBe(20);
    expect(drops.reduce((n, d) => n + d[1], 0)).toBe(20);
    expect(drops.every((d) => d[0] === "events" && d[2] === "queue full")).toBe(true);
    dev.offline = false;
    await a.flush();
    await waitFor(() => eventCounts(s, appId, "bounded"), (c) => c.occurrences === 40);
    const kept = await s.db.sql.query<{ i: string }>(
      `SELECT o.metadata->>'i' AS i FROM analytics_event_occurrences o JOIN analytics_events e ON e.id = o.event_id
        WHERE e.app_id = $1 AND e.name = 'bounded' ORDER BY (o.metadata->>'i')::int`, [Number(appId)]);
    expect(kept.rows.map((r) => Number(r.i))).toEqual(Array.from({ length: 40 }, (_, i) => i + 20));
  });
});

describe("sessions", () => {
  it("end after the inactivity timeout (at the last activity) and on shutdown", async () => {
    const a = sdk({ sessionTimeout: 300, flushInterval: 100 });
    a.track("session_a", {});
    await a.flush();
    const lastActivity = Date.now();
    const consumer = a.client.identity!.consumerId;
    await waitFor(() => sessionsOf(consumer), (l) => l[0]?.ended_at != null, 5000);
    const [first] = await sessionsOf(consumer);
    expect(dev.log.filter((r) => r.path === "/api/session/end").map((r) => r.status)).toEqual([200]);
    expect(first!.ended_at!.getTime()).toBeLessThanOrEqual(lastActivity + 50);
    a.track("session_b", {});
    await a.flush();
    const two = await sessionsOf(consumer);
    expect(two).toHaveLength(2);
    expect(two[1]!.ended_at).toBeNull();
    await a.shutdown();
    expect((await sessionsOf(consumer))[1]!.ended_at).not.toBeNull();
    a.track("after_shutdown", {}); // ignored
    expect(a.stats().queued.events).toBe(0);
  });
});

describe("logs and breadcrumbs", () => {
  it("captureError becomes a log with class, message, stack, file, line and the last breadcrumbs", async () => {
    const a = sdk({ appVersion: "2.0.0", maxBreadcrumbs: 2 });
    a.breadcrumb("opened cart");
    a.breadcrumb("tapped pay");
    a.breadcrumb("confirmed");
    a.captureError(new RangeError("amount out of range"), { context: { screen: "checkout" } });
    a.log({ classFQN: "PaymentDeclined", message: "card declined", lineNumber: 7 });
    await a.flush();
    await waitFor(async () => (await s.db.sql.query("SELECT 1 FROM analytics_logs WHERE app_id = $1", [Number(appId)])).rows.length, (n) => n === 2);
    const logs = await s.db.sql.query<{ class_fqn: string; message: string; type: string; stack_trace: string; file_name: string; line_number: string; context: Record<string, unknown>; app_versions: string }>(
      "SELECT class_fqn, message, type, stack_trace, file_name, line_number, context, app_versions FROM analytics_logs WHERE app_id = $1 ORDER BY class_fqn DESC", [Number(appId)]);
    const [err, declined] = logs.rows;
    expect(err).toMatchObject({ class_fqn: "RangeError", message: "amount out of range", type: "error", app_versions: "2.0.0" });
    expect(err!.stack_trace).toContain("analytics.test.ts");
    expect(err!.file_name).toMatch(/analytics\.test\.ts$/);
    expect(Number(err!.line_number)).toBeGreaterThan(0);
    expect(err!.context).toMatchObject({ screen: "checkout", breadcrumbs: [{ name: "tapped pay" }, { name: "confirmed" }] });
    expect(declined).toMatchObject({ class_fqn: "PaymentDeclined", message: "card declined", type: "error" });
    expect(Number(declined!.line_number)).toBe(7);
    await waitFor(async () => (await s.db.sql.query("SELECT 1 FROM analytics_breadcrumbs WHERE app_id = $1", [Number(appId)])).rows.length, (n) => n === 3);
    const crumbs = await s.db.sql.query<{ name: string; occ: string; with_session: string }>(
      `SELECT b.name, b.occurrences AS occ, (SELECT count(*) FROM analytics_breadcrumb_occurrences o WHERE o.breadcrumb_id = b.id AND o.session_id IS NOT NULL) AS with_session
         FROM analytics_breadcrumbs b WHERE b.app_id = $1 ORDER BY b.name`, [Number(appId)]);
    expect(crumbs.rows.map((r) => [r.name, Number(r.occ), Number(r.with_session)])).toEqual([["confirmed", 1, 1], ["opened cart", 1, 1], ["tapped pay", 1, 1]]);
  });
});

describe("a consumer deleted under queued items", () => {
  it("registers again and creates the sessions again, so nothing queued is lost", async () => {
    const a = sdk({}, memoryStorage(), "deleted-user");
    a.track("orphan", { n: "1" });
    await a.flush();
    const old = a.client.identity!.consumerId;
    dev.offline = true;
    for (let i = 0; i < 5; i++) a.track("orphan", { n: String(i) });
    await expect(a.flush()).rejects.toBeInstanceOf(NetworkError); // formed with the old session id
    await s.adminClient(IdentityService).deleteConsumer({ consumerId: BigInt(old) });
    dev.offline = false;
    await a.flush();
    expect(a.client.identity!.consumerId).not.toBe(old);
    const mine = async () => Number((await s.db.sql.query<{ n: string }>(
      `SELECT count(*) AS n FROM analytics_event_occurrences o JOIN analytics_events e ON e.id = o.event_id
        WHERE e.app_id = $1 AND e.name = 'orphan' AND o.consumer_id = $2`, [Number(appId), a.client.identity!.consumerId])).rows[0]!.n);
    expect(await waitFor(mine, (n) => n === 5)).toBe(5);
    expect(a.stats()).toMatchObject({ queued: { events: 0 }, dropped: 0 });
  });
});
