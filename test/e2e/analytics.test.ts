// Analytics through the whole server over REST: JSON and multipart (bracket
// convention, file parts), synchronous records, asynchronous batches through
// the real NATS JetStream to the in-process workers, and the 4 MiB limit.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
// The npm undici's fetch (used by the test server helper) takes its own FormData.
import { FormData } from "undici";
import { AnalyticsService as AdminAnalyticsService } from "../../gen/pulsebase/admin/v1/analytics_pb.js";
import { createModules } from "../../src/server/modules.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { TEST_NATS_URL } from "../helpers/db.js";

let s: TestServer;
let token: string;
let token2: string;
let appId: bigint;
let sessionId: number;

const auth = (t = token) => ({ authorization: `Bearer ${t}` });
const postJson = (path: string, body: unknown, t = token) =>
  s.fetch(path, { method: "POST", headers: { ...auth(t), "content-type": "application/json" }, body: JSON.stringify(body) });
const postForm = (path: string, form: FormData, t = token) => s.fetch(path, { method: "POST", headers: auth(t), body: form as unknown as RequestInit["body"] });

async function until<T>(fn: () => Promise<T>, ok: (v: T) => boolean, ms = 15_000): Promise<T> {
  const end = Date.now() + ms;
  let v = await fn();
  while (!ok(v) && Date.now() < end) {
    await new Promise((r) => setTimeout(r, 200));
    v = await fn();
  }
  return v;
}

beforeAll(async () => {
  s = await startTestServer({ modules: createModules, env: { NATS_URL: TEST_NATS_URL } });
  const app = await s.createApp("analytics e2e");
  appId = app.appId;
  token = (await s.register(app.appKey, { user_id: "alice", device_id: "phone" })).token;
  token2 = (await s.register(app.appKey, { user_id: "alice", device_id: "tablet" })).token;
  sessionId = (await (await s.fetch("/api/session/start", { method: "POST", headers: auth() })).json()).session_id;
});
afterAll(() => s.close());

describe("single records", () => {
  it("records an event and aggregates occurrences and unique users", async () => {
    const a = await postJson("/api/events", { name: "purchase", metadata: { sku: "A1" } });
    expect(a.status).toBe(200);
    const b = await postJson("/api/events", { name: "purchase", metadata: { sku: "A1" } }, token2);
    const ev = await b.json();
    expect(ev).toMatchObject({ name: "purchase", occurrences: 2, unique_users: 1 });
    expect(ev.id).toBe((await a.json()).id);
    expect(ev.event_data).toEqual([expect.objectContaining({ key: "sku", value: "A1", occurrences: 2 })]);
    const bad = await postJson("/api/events", { name: "x".repeat(256), metadata: { n: 1 } });
    expect(bad.status).toBe(422);
    expect(Object.keys((await bad.json()).errors).sort()).toEqual(["metadata.n", "name"]);
  });

  it("records a log from multipart with an attachment, and refuses a file over 4 MiB", async () => {
    const form = new FormData();
    form.set("app_version", "1.2.3");
    form.set("classFQN", "com.example.Crash");
    form.set("message", "boom");
    form.set("type", "crash");
    form.set("line_number", "42");
    form.set("context", JSON.stringify({ screen: "home" }));
    form.set("file", new Blob([new Uint8Array(1024)]), "dump.bin");
    const res = await postForm("/api/logs", form);
    expect(res.status).toBe(200);
    const log = await res.json();
    expect(log).toMatchObject({ classFQN: "com.example.Crash", message: "boom", type: "crash", line_number: 42, occurrences: 1, users_affected: 1, app_versions: "1.2.3", context: { screen: "home" } });
    expect(log.hash).toMatch(/^[0-9a-f]{64}$/);

    const big = new FormData();
    for (const [k, v] of [["app_version", "1"], ["classFQN", "C"], ["message", "m"], ["type", "error"]]) big.set(k!, v!);
    big.set("file", new Blob([new Uint8Array(4 * 1024 * 1024 + 1)]), "big.bin");
    const tooBig = await postForm("/api/logs", big);
    expect(tooBig.status).toBe(422);
    expect((await tooBig.json()).errors).toHaveProperty("file");

    const wrongType = new FormData();
    for (const [k, v] of [["app_version", "1"], ["classFQN", "C"], ["message", "m"], ["type", "error"], ["line_number", "x"]]) wrongType.set(k!, v!);
    const r = await postForm("/api/logs", wrongType);
    expect(r.status).toBe(422);
    expect(Object.keys((await r.json()).errors)).toEqual(["line_number"]);
    const badKind = new FormData();
    for (const [k, v] of [["app_version", "1"], ["classFQN", "C"], ["message", "m"], ["type", "warning"]]) badKind.set(k!, v!);
    const k = await postForm("/api/logs", badKind);
    expect(k.status).toBe(422);
    expect(Object.keys((await k.json()).errors)).toEqual(["type"]);
  });

  it("records a breadcrumb", async () => {
    const res = await postJson("/api/breadcrumbs", { name: "opened settings" });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ name: "opened settings", app_id: Number(appId) });
    const future = await postJson("/api/breadcrumbs", { name: "x", created_at: new Date(Date.now() + 3_600_000).toISOString() });
    expect(future.status).toBe(422);
  });
});

describe("batches", () => {
  it("accepts a multipart event batch with 202 and applies it asynchronously", async () => {
    const form = new FormData();
    for (let i = 0; i < 3; i++) {
      form.set(`events[${i}][name]`, "level_up");
      form.set(`events[${i}][metadata][level]`, String(i));
      form.set(`events[${i}][session_id]`, String(sessionId));
      form.set(`events[${i}][created_at]`, "2026-01-01T10:00:00Z");
    }
    const res = await postForm("/api/events/batch", form);
    expect(res.status).toBe(202);
    expect(typeof (await res.json()).message).toBe("string");
    const admin = s.adminClient(AdminAnalyticsService);
    const list = await until(
      () => admin.listEvents({ filter: { appId, name: "level_up" } }),
      (r) => r.events.length === 1 && Number(r.events[0]!.occurrences) === 3,
    );
    expect(Number(list.events[0]!.occurrences)).toBe(3);
  });

  it("refuses a whole batch when one item is bad, naming its index", async () => {
    const res = await postJson("/api/events/batch", { events: [
      { name: "ok", metadata: {}, session_id: sessionId },
      { name: "", metadata: {}, session_id: sessionId },
    ] });
    expect(res.status).toBe(422);
    expect(Object.keys((await res.json()).errors)).toEqual(["events.1.name"]);
    // another consumer's session, or one that does not exist
    const other = await (await s.fetch("/api/session/start", { method: "POST", headers: auth(token2) })).json();
    const foreign = await postJson("/api/events/batch", { events: [
      { name: "ok", metadata: {}, session_id: other.session_id },
      { name: "ok", metadata: {}, session_id: "999999" },
    ] });
    expect(foreign.status).toBe(422);
    expect(Object.keys((await foreign.json()).errors).sort()).toEqual(["events.0.session_id", "events.1.session_id"]);
    const tooMany = await postJson("/api/breadcrumbs/batch", { breadcrumbs: Array.from({ length: 101 }, () => ({ name: "b" })) });
    expect(tooMany.status).toBe(422);
    const empty = await postJson("/api/breadcrumbs/batch", { breadcrumbs: [] });
    expect(empty.status).toBe(422);
  });

  it("accepts log batches with files per item and breadcrumb batches", async () => {
    const form = new FormData();
    for (let i = 0; i < 2; i++) {
      form.set(`logs[${i}][app_version]`, "2.0.0");
      form.set(`logs[${i}][classFQN]`, "com.example.Batch");
      form.set(`logs[${i}][message]`, "batched");
      form.set(`logs[${i}][type]`, "error");
      form.set(`logs[${i}][session_id]`, String(sessionId));
      form.set(`logs[${i}][file]`, new Blob([new Uint8Array(10)]), `f${i}.txt`);
    }
    expect((await postForm("/api/log/batch", form)).status).toBe(202);
    const crumbs = await postJson("/api/breadcrumbs/batch", { breadcrumbs: [{ name: "tap", session_id: sessionId }, { name: "tap" }] });
    expect(crumbs.status).toBe(202);
    const admin = s.adminClient(AdminAnalyticsService);
    const logs = await until(
      () => admin.listLogs({ filter: { appId, name: "com.example.Batch" } }),
      (r) => r.logs.length === 1 && Number(r.logs[0]!.occurrences) === 2,
    );
    expect(Number(logs.logs[0]!.occurrences)).toBe(2);
  });

  it("does not process a batch twice for the same Idempotency-Key", async () => {
    const body = JSON.stringify({ breadcrumbs: [{ name: "idem" }] });
    const h = { ...auth(), "content-type": "application/json", "idempotency-key": "k-123" };
    expect((await s.fetch("/api/breadcrumbs/batch", { method: "POST", headers: h, body })).status).toBe(202);
    expect((await s.fetch("/api/breadcrumbs/batch", { method: "POST", headers: h, body })).status).toBe(202);
    const admin = s.adminClient(AdminAnalyticsService);
    await until(() => admin.listBreadcrumbs({ filter: { appId, name: "idem" } }), (r) => r.breadcrumbs.length === 1);
    // every batch the queue accepted, the second post's included if it was
    // queued at all, has been processed: the queue's lag is back to 0
    const drained = await until(
      async () => (await (await fetch(`${s.adminUrl}/metrics`)).text()).match(/^pulsebase_queue_lag_messages\{queue="analytics"[^}]*\} (\d+)$/m)?.[1],
      (lag) => lag === "0",
    );
    expect(drained).toBe("0");
    const r = await admin.listBreadcrumbs({ filter: { appId, name: "idem" } });
    expect(Number(r.breadcrumbs[0]!.occurrences)).toBe(1);
  });

  it("refuses an Idempotency-Key sent again with a different body (422 idempotency_key_reused), and keeps the first body", async () => {
    const h = { ...auth(), "content-type": "application/json", "idempotency-key": "k-reused" };
    const first = JSON.stringify({ breadcrumbs: [{ name: "idem-first" }] });
    expect((await s.fetch("/api/breadcrumbs/batch", { method: "POST", headers: h, body: first })).status).toBe(202);
    const other = await s.fetch("/api/breadcrumbs/batch", { method: "POST", headers: h, body: JSON.stringify({ breadcrumbs: [{ name: "idem-second" }] }) });
    expect(other.status).toBe(422);
    expect(await other.json()).toEqual({
      error: "idempotency_key_reused",
      message: "This Idempotency-Key was already used with a different body; send a new key for a new batch.",
      errors: { "Idempotency-Key": ["The Idempotency-Key was already used with a different body."] },
    });
    // The same body again is still the harmless retry.
    expect((await s.fetch("/api/breadcrumbs/batch", { method: "POST", headers: h, body: first })).status).toBe(202);
    const admin = s.adminClient(AdminAnalyticsService);
    await until(() => admin.listBreadcrumbs({ filter: { appId, name: "idem-first" } }), (r) => r.breadcrumbs.length === 1);
    expect((await admin.listBreadcrumbs({ filter: { appId, name: "idem-second" } })).breadcrumbs).toHaveLength(0);
  });

  it("takes the same batch as JSON and as multipart for the same body under one Idempotency-Key", async () => {
    const key = { "idempotency-key": "k-json-or-form" };
    const json = await s.fetch("/api/events/batch", {
      method: "POST",
      headers: { ...auth(), ...key, "content-type": "application/json" },
      body: JSON.stringify({ events: [{ name: "idem-form", metadata: { level: "3" }, session_id: sessionId }] }),
    });
    expect(json.status).toBe(202);
    const form = new FormData();
    form.set("events[0][name]", "idem-form");
    form.set("events[0][metadata][level]", "3");
    form.set("events[0][session_id]", String(sessionId));
    const multipart = await s.fetch("/api/events/batch", { method: "POST", headers: { ...auth(), ...key }, body: form as unknown as RequestInit["body"] });
    expect(multipart.status).toBe(202);
    form.set("events[0][metadata][level]", "4");
    const changed = await s.fetch("/api/events/batch", { method: "POST", headers: { ...auth(), ...key }, body: form as unknown as RequestInit["body"] });
    expect(changed.status).toBe(422);
    expect((await changed.json()).error).toBe("idempotency_key_reused");
  });
});
