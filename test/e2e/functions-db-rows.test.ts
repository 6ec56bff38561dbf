// One row shape for SQL results (issue 30 point 8): a deployed function's
// `const { rows } = await ctx.db.query(...)` gets rows as objects by column
// name, with `columns`, the raw rows in `values` and every statement in
// `results`, the same as the SDK's db.query on a device; /api/db/query keeps
// the spec's arrays.
import { afterAll, beforeAll, expect, it } from "vitest";
import { DatabaseService } from "../../gen/pulsebase/admin/v1/database_pb.js";
import { createModules } from "../../src/server/modules.js";
import { sdkClient } from "../client/sdk-fixture.js";
import { createDatabase } from "../../packages/client/src/index.js";
import { deployHttpFunction, startTestServer, type TestServer } from "../helpers/server.js";

let s: TestServer;
let appKey: string;
let token: string;

// The README's function example, as written there.
const README_FN = `export default async function (req, ctx) {
  await ctx.db.query("CREATE TABLE IF NOT EXISTS todos (id INTEGER PRIMARY KEY, title TEXT NOT NULL, done INTEGER DEFAULT 0)");
  if (req.method === "POST") await ctx.db.query("INSERT INTO todos (title) VALUES (?)", [req.body.title]);
  const { rows } = await ctx.db.query("SELECT id, title, done FROM todos ORDER BY id");
  return { todos: rows };
}`;

const SHAPE_FN = `export default async function (req, ctx) {
  const q = await ctx.db.query("SELECT 1 AS n; SELECT id, title FROM todos WHERE id = :id", { id: 1 });
  const b = await ctx.db.batch([{ sql: "UPDATE todos SET done = 1 WHERE id = ?", params: [1] }, { sql: "SELECT * FROM nowhere" }]);
  return {
    query: { rows: q.rows, columns: q.columns, values: q.values, rowsRead: q.rowsRead, results: q.results.map((r) => r.rows) },
    batch: { error: b.error, written: b.results[0].rowsWritten, last: b.results[1].error },
  };
}`;

beforeAll(async () => {
  s = await startTestServer({ modules: createModules });
  const app = await s.createApp("db rows");
  appKey = app.appKey;
  token = (await s.register(app.appKey)).token;
  const dbs = s.adminClient(DatabaseService);
  const db = await dbs.createDatabase({ teamId: app.teamId, name: "rows" });
  await dbs.linkDatabase({ databaseId: db.id, appId: app.appId });
  await deployHttpFunction(s, app.appId, "todos", README_FN);
  await deployHttpFunction(s, app.appId, "shape", SHAPE_FN);
}, 60_000);
afterAll(() => s?.close());

const call = async (slug: string, body?: unknown) => {
  const res = await s.fetch(`/api/fn/${slug}`, {
    method: body === undefined ? "GET" : "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  expect(res.status).toBe(200);
  return res.json();
};

it("runs the README's function example: rows by column name", async () => {
  await call("todos", { title: "buy milk" });
  expect(await call("todos", { title: "ship it" })).toEqual({
    todos: [{ id: 1, title: "buy milk", done: 0 }, { id: 2, title: "ship it", done: 0 }],
  });
});

it("gives ctx.db the SDK's shape: the last statement's rows, columns and raw values, every statement in results, errors on them", async () => {
  const got = await call("shape");
  expect(got.query).toEqual({
    rows: [{ id: 1, title: "buy milk" }], columns: ["id", "title"], values: [[1, "buy milk"]], rowsRead: 1,
    results: [[{ n: 1 }], [{ id: 1, title: "buy milk" }]],
  });
  expect(got.batch).toMatchObject({ written: 1, error: expect.stringMatching(/no such table: nowhere/), last: expect.stringMatching(/no such table/) });

  // The device's SDK reads the same statement the same way.
  const sdk = await createDatabase(sdkClient(s, appKey)).query("SELECT 1 AS n; SELECT id, title FROM todos WHERE id = :id", { id: 1 });
  expect({ rows: sdk.rows, columns: sdk.columns, values: sdk.values, rowsRead: sdk.rowsRead, results: sdk.results.map((r) => r.rows) }).toEqual(got.query);
  // REST keeps the spec's arrays.
  const rest = await s.fetch("/api/db/query", { method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, body: JSON.stringify({ sql: "SELECT id, title FROM todos WHERE id = 1" }) });
  expect((await rest.json()).results[0]).toMatchObject({ columns: ["id", "title"], rows: [[1, "buy milk"]] });
});
