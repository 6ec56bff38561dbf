// Event triggers on the embedded default (PGlite, no NATS): changes wait in
// a PostgreSQL table between capture and delivery; a failing function is
// retried and then dead-lettered.
import { afterAll, beforeAll, expect, it } from "vitest";
import { FunctionService as AdminFunctionService } from "../../gen/pulsebase/admin/v1/functions_pb.js";
import { DatabaseService as AdminDatabaseService } from "../../gen/pulsebase/admin/v1/database_pb.js";
import { createModules } from "../../src/server/modules.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { until } from "../helpers/until.js";

let s: TestServer;
let token: string;
let appId: bigint;

beforeAll(async () => {
  s = await startTestServer({ kind: "pglite", modules: createModules, env: { NATS_URL: "" } });
  const app = await s.createApp("embedded events");
  appId = app.appId;
  token = (await s.register(app.appKey)).token;
  const dbs = s.adminClient(AdminDatabaseService);
  const db = await dbs.createDatabase({ teamId: app.teamId, name: "events" });
  await dbs.linkDatabase({ databaseId: db.id, appId });
});
afterAll(() => s.close());

const q = (sql: string, params?: unknown[]) =>
  s.fetch("/api/db/query", {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ sql, params }),
  }).then((r) => r.json());

it("delivers inserts and updates to the watching function in order, without NATS", async () => {
  await q("CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT)");
  await q("CREATE TABLE seen (n INTEGER PRIMARY KEY AUTOINCREMENT, op TEXT, before_item TEXT, after_item TEXT)");
  const fns = s.adminClient(AdminFunctionService);
  const fn = await fns.createFunction({ appId, name: "on-order" });
  await fns.deployVersion({
    functionId: fn.id,
    activate: true,
    code: `export default async function (req, ctx) {
      const e = ctx.event;
      await ctx.db.query("INSERT INTO seen (op, before_item, after_item) VALUES (?, ?, ?)",
        [e.operation, e.before ? e.before.item : null, e.after ? e.after.item : null]);
    }`,
  });
  await fns.createEventTrigger({ functionId: fn.id, source: "db", target: "orders", operations: ["insert", "update"] });
  // No wait: the capture is installed before CreateEventTrigger answers.
  await q("INSERT INTO orders (id, item) VALUES (1, 'apple')");
  await q("UPDATE orders SET item = 'pear' WHERE id = 1");
  const rows = await until(async () => {
    const r = (await q("SELECT op, before_item, after_item FROM seen ORDER BY n")).results[0].rows as unknown[];
    return r.length >= 2 ? r : undefined;
  }, 30_000, 100);
  expect(rows).toEqual([
    ["insert", null, "apple"],
    ["update", "apple", "pear"],
  ]);
}, 40_000);

it("retries a failing function and then dead-letters the change", async () => {
  await q("CREATE TABLE jobs (id INTEGER PRIMARY KEY, name TEXT)");
  const fns = s.adminClient(AdminFunctionService);
  const fn = await fns.createFunction({ appId, name: "always-fails" });
  await fns.deployVersion({ functionId: fn.id, activate: true, code: `export default async function () { throw new Error("nope"); }` });
  await fns.createEventTrigger({ functionId: fn.id, source: "db", target: "jobs", operations: ["insert"] });
  await q("INSERT INTO jobs (name) VALUES ('x')");
  const dead = await until(async () => {
    const r = (await s.db.sql.query<{ attempts: number; error: string }>(
      "SELECT attempts, error FROM queue_dead_letters WHERE queue = 'function-events' AND attrs->>'Pb-Function-Id' = $1", [String(fn.id)])).rows;
    return r.length ? r : undefined;
  }, 50_000, 100);
  expect(dead).toHaveLength(1);
  expect(dead[0]!.attempts).toBe(5);
  expect(dead[0]!.error).toMatch(/nope/);
  const invocations = await fns.listInvocations({ functionId: fn.id });
  expect(invocations.invocations.length).toBeGreaterThanOrEqual(5);
}, 60_000);
