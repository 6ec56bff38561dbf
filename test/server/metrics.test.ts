// GET /metrics on the admin listener: request counters and latency
// histograms by route template and status for REST (fast paths included),
// Connect and admin calls, the scrape-time gauges, and who may scrape.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DatabaseService as AdminDatabaseService } from "../../gen/pulsebase/admin/v1/database_pb.js";
import { FunctionService as AdminFunctionService } from "../../gen/pulsebase/admin/v1/functions_pb.js";
import { connect } from "@nats-io/transport-node";
import { jetstream } from "@nats-io/jetstream";
import { TEST_NATS_URL } from "../helpers/db.js";
import { createModules } from "../../src/server/modules.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { until } from "../helpers/until.js";

const METRICS_TOKEN = "metrics_token_0123456789abcdef";

let s: TestServer;
let token: string;

const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  s.fetch(path, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${token}`, ...headers }, body: JSON.stringify(body) });

async function scrape(auth = `Bearer ${METRICS_TOKEN}`, server = s): Promise<string> {
  const res = await fetch(`${server.adminUrl}/metrics`, { headers: { authorization: auth } });
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
  return res.text();
}

/** The value of one series (labels in any order), or undefined when absent. */
function sample(text: string, name: string, labels: Record<string, string>): number | undefined {
  for (const line of text.split("\n")) {
    if (!line.startsWith(name + "{") && !(line.startsWith(name + " ") && Object.keys(labels).length === 0)) continue;
    const m = /^([^{ ]+)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const got: Record<string, string> = {};
    for (const p of (m[2] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) got[p[1]!] = p[2]!;
    if (Object.keys(got).length !== Object.keys(labels).length) continue;
    if (Object.entries(labels).every(([k, v]) => got[k] === v)) return Number(m[3]);
  }
  return undefined;
}

const pkRead = { listener: "public", method: "POST", route: "/api/db/query", status: "200" };

beforeAll(async () => {
  s = await startTestServer({ modules: createModules, env: { PULSEBASE_METRICS_TOKEN: METRICS_TOKEN } });
  const app = await s.createApp("metrics");
  token = (await s.register(app.appKey)).token;
  const dbs = s.adminClient(AdminDatabaseService);
  const db = await dbs.createDatabase({ teamId: app.teamId, name: "main" });
  await dbs.linkDatabase({ databaseId: db.id, appId: app.appId });
  expect((await post("/api/db/query", { sql: "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)" })).status).toBe(200);
  expect((await post("/api/db/query", { sql: "INSERT INTO notes (body) VALUES ('a')" })).status).toBe(200);
});
afterAll(() => s?.close());

describe("request metrics", () => {
  it("counts PK reads answered on the turn-batched fast path, with their latency histogram", async () => {
    const before = await scrape();
    const count0 = sample(before, "pulsebase_http_requests_total", pkRead) ?? 0;
    const hist0 = sample(before, "pulsebase_http_request_duration_seconds_count", pkRead) ?? 0;
    for (let i = 0; i < 3; i++) {
      const res = await post("/api/db/query", { sql: "SELECT id, body FROM notes WHERE id = ?", params: [1] });
      expect(res.status).toBe(200);
      expect((await res.json()).results[0].rows).toEqual([[1, "a"]]);
    }
    const after = await scrape();
    expect(sample(after, "pulsebase_http_requests_total", pkRead)).toBe(count0 + 3);
    expect(sample(after, "pulsebase_http_request_duration_seconds_count", pkRead)).toBe(hist0 + 3);
    expect(sample(after, "pulsebase_http_request_duration_seconds_bucket", { ...pkRead, le: "+Inf" })).toBe(hist0 + 3);
    // cumulative buckets, a positive sum
    expect(sample(after, "pulsebase_http_request_duration_seconds_bucket", { ...pkRead, le: "10" })).toBe(hist0 + 3);
    expect(sample(after, "pulsebase_http_request_duration_seconds_sum", pkRead)).toBeGreaterThan(0);
  });

  it("labels a 404 as the unmatched route (never the raw path) and a body-parser 400 with its route", async () => {
    const notFound = await s.fetch(`/api/no-such-thing-${Date.now()}`);
    expect(notFound.status).toBe(404);
    const bad = await s.fetch("/api/consumer", { method: "POST", headers: { "content-type": "application/json" }, body: "{not json" });
    expect(bad.status).toBe(400);
    const text = await scrape();
    expect(sample(text, "pulsebase_http_requests_total", { listener: "public", method: "GET", route: "(unmatched)", status: "404" })).toBeGreaterThanOrEqual(1);
    expect(text).not.toContain("no-such-thing");
    expect(sample(text, "pulsebase_http_requests_total", { listener: "public", method: "POST", route: "/api/consumer", status: "400" })).toBe(1);
  });

  it("counts Connect calls on the public listener by procedure and admin calls on the admin listener", async () => {
    const res = await s.fetch("/pulsebase.platform.v1.DatabaseService/Query", {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
      body: JSON.stringify({ sql: "SELECT 1 AS one" }),
    });
    expect(res.status).toBe(200);
    const unauth = await s.fetch("/pulsebase.platform.v1.DatabaseService/Query", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ sql: "SELECT 1" }),
    });
    expect(unauth.status).toBe(401);
    await s.admin.listApps({});
    const text = await scrape();
    const route = "/pulsebase.platform.v1.DatabaseService/Query";
    expect(sample(text, "pulsebase_http_requests_total", { listener: "public", method: "POST", route, status: "200" })).toBe(1);
    expect(sample(text, "pulsebase_http_requests_total", { listener: "public", method: "POST", route, status: "401" })).toBe(1);
    expect(sample(text, "pulsebase_http_requests_total", { listener: "admin", method: "POST", route: "/pulsebase.admin.v1.IdentityService/ListApps", status: "200" })).toBe(1);
  });

  it("reports pool, queue, isolate and process gauges", async () => {
    const text = await scrape();
    expect(sample(text, "pulsebase_pg_pool_connections", { state: "idle" })).toBeGreaterThanOrEqual(0);
    expect(sample(text, "pulsebase_pg_pool_connections", { state: "idle" })! + sample(text, "pulsebase_pg_pool_connections", { state: "busy" })!).toBeGreaterThanOrEqual(1);
    expect(sample(text, "pulsebase_pg_pool_waiting_requests", {})).toBe(0);
    expect(sample(text, "pulsebase_queue_stats_up", { queue: "analytics", backend: "embedded" })).toBe(1);
    expect(sample(text, "pulsebase_queue_lag_messages", { queue: "analytics", backend: "embedded" })).toBe(0);
    expect(sample(text, "pulsebase_queue_dead_letter_messages", { queue: "analytics", backend: "embedded" })).toBe(0);
    expect(sample(text, "pulsebase_isolates", { state: "busy" })).toBe(0);
    expect(sample(text, "pulsebase_isolate_heap_bytes", {})).toBeGreaterThanOrEqual(0);
    expect(sample(text, "process_cpu_user_seconds_total", {})).toBeGreaterThan(0);
    expect(text).toContain("nodejs_eventloop_lag_seconds");
  });

  it("reports the function-event transport: lag, in flight and dead letters (table backend)", async () => {
    const labels = { queue: "function-events", backend: "embedded" };
    const before = await scrape();
    expect(sample(before, "pulsebase_queue_stats_up", labels)).toBe(1);
    expect(sample(before, "pulsebase_queue_lag_messages", labels)).toBe(0);
    expect(sample(before, "pulsebase_queue_in_flight_messages", labels)).toBe(0);
    expect(sample(before, "pulsebase_queue_dead_letter_messages", labels)).toBe(0);
    await s.db.sql.query(
      `INSERT INTO queue_dead_letters (queue, dead_key, msg_id, topic, payload, attempts, error)
       VALUES ('function-events', 'db:999:1~dead~1', 'db:999:1', 'db.999', convert_to('{"id":"db:999:1"}', 'UTF8'), 5, 'boom')`,
    );
    expect(sample(await scrape(), "pulsebase_queue_dead_letter_messages", labels)).toBe(1);
    await s.db.sql.query("DELETE FROM queue_dead_letters WHERE msg_id = 'db:999:1'");
  });
});

describe("sandbox metrics", () => {
  it("shows the warm isolate a function call left, its heap, and the call under its route template", async () => {
    const fns = s.adminClient(AdminFunctionService);
    const appId = (await s.admin.listApps({})).apps.find((a) => a.name === "metrics")!.id;
    const fn = await fns.createFunction({ appId, name: "hello" });
    await fns.deployVersion({ functionId: fn.id, code: "export default async function () { return { hello: 'world' }; }", activate: true });
    await fns.createHttpTrigger({ functionId: fn.id, slug: "hello" });
    const res = await s.fetch("/api/fn/hello", { headers: { authorization: `Bearer ${token}` } });
    expect(res.status).toBe(200);
    const text = await scrape();
    expect(sample(text, "pulsebase_isolates", { state: "idle" })).toBe(1);
    expect(sample(text, "pulsebase_isolates", { state: "busy" })).toBe(0);
    expect(sample(text, "pulsebase_isolate_versions", {})).toBe(1);
    expect(sample(text, "pulsebase_isolate_waiting_calls", {})).toBe(0);
    expect(sample(text, "pulsebase_isolate_heap_bytes", {})).toBeGreaterThan(100_000);
    expect(sample(text, "pulsebase_http_requests_total", { listener: "public", method: "GET", route: "/api/fn/:slug", status: "200" })).toBe(1);
  });
});

describe("JetStream queue", () => {
  it("reads lag from the JetStream consumer", async () => {
    const js = await startTestServer({ modules: createModules, env: { NATS_URL: TEST_NATS_URL } });
    try {
      // The function-event stream is set up in the background after start: its gauges are up once it exists.
      const events = { queue: "function-events", backend: "jetstream" };
      const text = await until(async () => {
        const t = await scrape("", js);
        return sample(t, "pulsebase_queue_stats_up", events) === 1 ? t : undefined;
      });
      expect(sample(text, "pulsebase_queue_stats_up", { queue: "analytics", backend: "jetstream" })).toBe(1);
      expect(sample(text, "pulsebase_queue_lag_messages", { queue: "analytics", backend: "jetstream" })).toBe(0);
      expect(sample(text, "pulsebase_queue_in_flight_messages", { queue: "analytics", backend: "jetstream" })).toBe(0);
      expect(sample(text, "pulsebase_queue_stats_up", events)).toBe(1);
      expect(sample(text, "pulsebase_queue_lag_messages", events)).toBe(0);
      expect(sample(text, "pulsebase_queue_dead_letter_messages", events)).toBe(0);
      // A dead letter of the transport's stream is counted.
      const nc = await connect({ servers: TEST_NATS_URL });
      try {
        await jetstream(nc).publish(`${js.config.natsNamespace}.fn.dead.db.999`, JSON.stringify({ id: "db:999:1" }));
      } finally {
        await nc.close();
      }
      expect(sample(await scrape("", js), "pulsebase_queue_dead_letter_messages", events)).toBe(1);
    } finally {
      await js.close();
    }
  });
});

describe("embedded database", () => {
  it("scrapes without pool series on PGlite (it has no pool)", async () => {
    const pg = await startTestServer({ kind: "pglite" });
    try {
      const text = await scrape("", pg);
      expect(text).not.toContain("pulsebase_pg_pool_connections");
      expect(text).toContain("pulsebase_http_requests_total");
    } finally {
      await pg.close();
    }
  });
});

describe("who may scrape", () => {
  it("serves /metrics on the admin listener only, never on the public one", async () => {
    const res = await s.fetch("/metrics");
    expect(res.status).toBe(404);
    expect(await res.text()).not.toContain("pulsebase_http_requests_total");
  });

  it("takes the metrics token or the operator token, and refuses none or a device token", async () => {
    for (const auth of ["", `Bearer ${token}`, "Bearer wrong_token_0123456789"]) {
      const res = await fetch(`${s.adminUrl}/metrics`, { headers: auth ? { authorization: auth } : {} });
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual({ error: "unauthenticated", message: "A valid metrics token is required." });
    }
    expect(await scrape(`Bearer ${s.operatorToken}`)).toContain("pulsebase_http_requests_total");
  });
});
