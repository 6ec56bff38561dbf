// SQL over HTTP through the whole server: REST transcoding of the database
// service (params as JSON arrays/objects, rows as arrays, the 403/422/503
// envelopes) and the same call over Connect.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { DatabaseService as AdminDatabaseService } from "../../gen/pulsebase/admin/v1/database_pb.js";
import { DatabaseService } from "../../gen/pulsebase/platform/v1/database_pb.js";
import { createModules } from "../../src/server/modules.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

let s: TestServer;
let token: string;
let otherToken: string;

const post = (path: string, body: unknown, tok = token) =>
  s.fetch(path, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${tok}` }, body: JSON.stringify(body) });

beforeAll(async () => {
  s = await startTestServer({ modules: createModules });
  const app = await s.createApp("db e2e");
  token = (await s.register(app.appKey)).token;
  const other = await s.createApp("no db");
  otherToken = (await s.register(other.appKey)).token;
  const dbs = s.adminClient(AdminDatabaseService);
  const db = await dbs.createDatabase({ teamId: app.teamId, name: "main" });
  await dbs.linkDatabase({ databaseId: db.id, appId: app.appId });
});
afterAll(() => s.close());

describe("POST /api/db/query and /api/db/batch over REST", () => {
  it("runs several statements with positional and named params and returns the spec's shape", async () => {
    const create = await post("/api/db/query", { sql: "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT, score REAL, big INTEGER, raw BLOB)" });
    expect(create.status).toBe(200);
    const ins = await post("/api/db/query", { sql: "INSERT INTO notes (body, score, big, raw) VALUES (?, ?, ?, x'00ff')", params: ["hello", 1.5, 9007199254740993n.toString()] });
    expect(ins.status).toBe(200);
    expect((await ins.json()).results[0].rows_written).toBe(1);
    await post("/api/db/query", { sql: "INSERT INTO notes (body, big) VALUES (:b, 9007199254740993)", params: { b: "second" } });
    const res = await post("/api/db/query", { sql: "SELECT id, body, score, big, raw FROM notes ORDER BY id; SELECT count(*) AS n FROM notes;" });
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(body.request_id).toBe(res.headers.get("x-request-id"));
    expect(body.results).toHaveLength(2);
    expect(body.results[0].columns).toEqual(["id", "body", "score", "big", "raw"]);
    expect(body.results[0].rows[0]).toEqual([1, "hello", 1.5, "9007199254740993", "AP8="]);
    expect(body.results[0].rows[1]).toEqual([2, "second", null, "9007199254740993", null]);
    expect(body.results[1].rows).toEqual([[2]]);
    expect(body.results[0]).not.toHaveProperty("error");
  });

  it("reports statement errors inside the result with HTTP 200", async () => {
    const res = await post("/api/db/query", { sql: "SELECT * FROM missing_table" });
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(body.results[0].error).toMatch(/no such table/);
  });

  it("rolls back a failing transaction batch and refuses BEGIN inside it", async () => {
    const res = await post("/api/db/batch", { transaction: true, statements: [
      { sql: "INSERT INTO notes (body) VALUES ('tx')" },
      { sql: "INSERT INTO nope VALUES (1)" },
      { sql: "INSERT INTO notes (body) VALUES ('after')" },
    ] });
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(body.results).toHaveLength(2);
    expect(body.results[1].error).toBeTruthy();
    const count = await (await post("/api/db/query", { sql: "SELECT count(*) FROM notes WHERE body IN ('tx','after')" })).json();
    expect(count.results[0].rows).toEqual([[0]]);
    const begin = await post("/api/db/batch", { transaction: true, statements: [{ sql: "BEGIN" }, { sql: "SELECT 1" }] });
    expect(begin.status).toBe(422);
    expect((await begin.json()).errors).toHaveProperty("statements.0.sql");
  });

  it("answers the documented errors in order", async () => {
    expect((await post("/api/db/query", { sql: "SELECT 1" }, "bad")).status).toBe(401);
    const missing = await post("/api/db/query", {});
    expect(missing.status).toBe(422);
    expect((await missing.json()).errors).toHaveProperty("sql");
    const empty = await post("/api/db/batch", { statements: [] });
    expect(empty.status).toBe(422);
    const notLinked = await post("/api/db/query", { sql: "SELECT 1" }, otherToken);
    expect(notLinked.status).toBe(403);
    expect(await notLinked.json()).toMatchObject({ error: "database_not_linked" });
    const forbidden = await post("/api/db/batch", { statements: [{ sql: "SELECT 1" }, { sql: "PRAGMA table_info(notes)" }] });
    expect(forbidden.status).toBe(403);
    expect(await forbidden.json()).toMatchObject({ error: "forbidden_query" });
  });

  it("gives bodies outside the plain shape the transcoder's 422 and keeps request_id = X-Request-Id", async () => {
    for (const [path, body, field] of [
      ["/api/db/query", { sql: "SELECT 1", extra: 1 }, "extra"],
      ["/api/db/query", { sql: ["SELECT 1"] }, "sql"],
      ["/api/db/batch", { statements: [{ sql: "SELECT 1" }], transaction: "yes" }, "transaction"],
      ["/api/db/batch", { statements: [{ sql: "SELECT 1", note: "x" }] }, "statements.0.note"],
    ] as const) {
      const r = await post(path, body);
      expect(r.status, JSON.stringify(body)).toBe(422);
      expect((await r.json()).errors).toHaveProperty([field]);
    }
    const ok = await post("/api/db/query", { sql: "SELECT ? AS v", params: [7] });
    expect(ok.status).toBe(200);
    const j = await ok.json();
    expect(j).toEqual({ results: [{ columns: ["v"], rows: [[7]], rows_read: 1, rows_written: 0 }], request_id: ok.headers.get("x-request-id") });
    expect(ok.headers.get("content-type")).toBe("application/json; charset=utf-8");
  });

  it("refuses a multipart body (taken only by the upload routes) with 415 in the envelope", async () => {
    const boundary = "----pb";
    const body = `--${boundary}\r\nContent-Disposition: form-data; name="sql"\r\n\r\nSELECT 1\r\n--${boundary}--\r\n`;
    const r = await s.fetch("/api/db/query", { method: "POST", headers: { "content-type": `multipart/form-data; boundary=${boundary}`, authorization: `Bearer ${token}` }, body });
    expect(r.status).toBe(415);
    expect(await r.json()).toMatchObject({ error: "unsupported_media_type" });
    expect(r.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    expect((await post("/api/db/query", { sql: "SELECT 1 AS one" })).status).toBe(200);
  });

  it("gives each of many concurrent point reads its own row, request id and errors (answers are batched per loop turn)", async () => {
    await post("/api/db/query", { sql: "CREATE TABLE kv (id INTEGER PRIMARY KEY, v TEXT)" });
    await post("/api/db/query", { sql: "INSERT INTO kv (id, v) SELECT value, 'v' || value FROM (WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < 200) SELECT value FROM s)" });
    // undici opens several connections: many requests land in one loop turn
    const ids = Array.from({ length: 120 }, (_, i) => i + 1);
    const sends = ids.map((id) => (id % 10 === 0
      ? post("/api/db/query", { sql: "SELECT id, v FROM kv WHERE id = ?", params: [id] }, "not-a-token")
      : post("/api/db/query", { sql: "SELECT id, v FROM kv WHERE id = ?", params: [id] })));
    const answers = await Promise.all(sends.map(async (p) => {
      const r = await p;
      return { status: r.status, header: r.headers.get("x-request-id"), body: await r.json() };
    }));
    answers.forEach((a, i) => {
      const id = ids[i]!;
      if (id % 10 === 0) {
        expect(a.status).toBe(401);
        expect(a.body.error).toBe("unauthenticated");
        return;
      }
      expect(a.status).toBe(200);
      expect(a.body.results[0].rows).toEqual([[id, `v${id}`]]);
      expect(a.body.request_id).toBe(a.header);
    });
    expect(new Set(answers.map((a) => a.header)).size).toBe(ids.length);
  });

  it("is reachable over Connect with the same results", async () => {
    const client = createClient(DatabaseService, createConnectTransport({ baseUrl: s.httpsUrl, httpVersion: "2", nodeOptions: { rejectUnauthorized: false } }));
    const r = await client.query({ sql: "SELECT count(*) AS n FROM notes" }, { headers: { authorization: `Bearer ${token}` } });
    expect(r.results[0]!.columns).toEqual(["n"]);
    expect(r.results[0]!.rows[0]!.values[0]!.kind).toEqual({ case: "numberValue", value: 2 });
  });
});
