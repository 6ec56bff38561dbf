// The SDK's SQL, functions and CMS reader against a real server, and the
// error envelopes as typed errors with the request id.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CmsService } from "../../gen/pulsebase/admin/v1/cms_pb.js";
import { DatabaseService as AdminDatabaseService } from "../../gen/pulsebase/admin/v1/database_pb.js";
import { FunctionService as AdminFunctionService } from "../../gen/pulsebase/admin/v1/functions_pb.js";
import {
  CmsError, createCms, createDatabase, createFunctions, isRetryable, PlatformError, StatementError, ValidationError,
  type Cms, type Database, type Functions,
} from "../../packages/client/src/index.js";
import { createModules } from "../../src/server/modules.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { insecureFetch, sdkClient } from "./sdk-fixture.js";

let s: TestServer;
let db: Database;
let fns: Functions;
let cms: Cms;
let noDb: Database;

interface Todo {
  id: number;
  title: string;
  done: number;
}
interface Article {
  title: string;
  views: number;
  category: string;
  author: string | Author;
}
interface Author {
  name: string;
}

const ECHO = `export default async function (req, ctx) {
  if (req.query.status) return { status: Number(req.query.status), body: { error: "teapot", message: "short and stout" } };
  if (req.query.text) return { body: "plain words" };
  return { method: req.method, query: req.query, payload: req.body, consumer: ctx.consumer.id };
}`;

beforeAll(async () => {
  s = await startTestServer({ modules: createModules });
  const app = await s.createApp("sdk platform");
  const client = sdkClient(s, app.appKey);
  db = createDatabase(client);
  fns = createFunctions(client);
  cms = createCms(client);
  noDb = createDatabase(sdkClient(s, (await s.createApp("sdk no db")).appKey));

  const dbs = s.adminClient(AdminDatabaseService);
  const d = await dbs.createDatabase({ teamId: app.teamId, name: "main" });
  await dbs.linkDatabase({ databaseId: d.id, appId: app.appId });

  const f = s.adminClient(AdminFunctionService);
  const fn = await f.createFunction({ appId: app.appId, name: "echo" });
  await f.deployVersion({ functionId: fn.id, code: ECHO, activate: true });
  await f.createHttpTrigger({ functionId: fn.id, slug: "echo" });

  const c = s.adminClient(CmsService);
  await c.createContentType({ appId: app.appId, contentType: { slug: "author", name: "Author", fields: [{ name: "name", type: "text", required: true, label: "Name" }] } });
  await c.createContentType({
    appId: app.appId,
    contentType: {
      slug: "article", name: "Article",
      fields: [
        { name: "title", type: "text", required: true, label: "Title", searchable: true },
        { name: "views", type: "number", label: "Views" },
        { name: "category", type: "text", label: "Category" },
        { name: "author", type: "relation", label: "Author", target: "author" } as never,
      ],
      filterableFields: ["views", "category"],
      sortableFields: ["views"],
      searchableFields: ["title"],
    },
  });
  const author = await c.createEntry({ appId: app.appId, contentType: "author", publish: true, data: { name: "Ada" } });
  for (let i = 0; i < 25; i++) {
    await c.createEntry({
      appId: app.appId, contentType: "article", publish: true,
      data: { title: i % 5 === 0 ? `Rockets ${i}` : `Story ${i}`, views: i * 10, category: i % 2 ? "sport" : "news", author: author.id },
    });
  }
}, 60_000);
afterAll(() => s.close());

describe("db", () => {
  it("query<T>() returns typed rows, batch() runs statements in a transaction", async () => {
    await db.batch([
      { sql: "CREATE TABLE todos (id INTEGER PRIMARY KEY, title TEXT NOT NULL, done INTEGER DEFAULT 0)" },
      { sql: "INSERT INTO todos (title) VALUES (?), (?)", params: ["buy milk", "ship it"] },
    ], { transaction: true });
    const r = await db.query<Todo>("SELECT id, title, done FROM todos WHERE title = :t", { t: "ship it" });
    expect(r.requestId).toMatch(/^[0-9a-f-]{36}$/);
    expect(r.results[0]).toMatchObject({ columns: ["id", "title", "done"], rows: [{ id: 2, title: "ship it", done: 0 }], values: [[2, "ship it", 0]], rowsRead: 1 });
    expect(r.results[0]!.error).toBeUndefined();
    const rows: Todo[] = await db.rows<Todo>("SELECT * FROM todos ORDER BY id");
    expect(rows.map((t) => t.title)).toEqual(["buy milk", "ship it"]);
  });

  it("surfaces each statement's error on its own result", async () => {
    const r = await db.batch([
      { sql: "INSERT INTO todos (title) VALUES (NULL)" },
      { sql: "SELECT count(*) AS n FROM todos" },
    ]);
    expect(r.results[0]!.error).toBeInstanceOf(StatementError);
    expect(r.results[0]!.error).toMatchObject({ index: 0, requestId: r.requestId, message: expect.stringMatching(/NOT NULL/) });
    expect(r.results[1]!.rows).toEqual([{ n: 2 }]); // without a transaction the next statement still runs
    await expect(db.rows("SELECT * FROM missing_table")).rejects.toBeInstanceOf(StatementError);
  });

  it("turns the database envelopes into PlatformError and ValidationError", async () => {
    const forbidden = await db.query("PRAGMA table_info(todos)").catch((e: unknown) => e);
    expect(forbidden).toBeInstanceOf(PlatformError);
    expect(forbidden).toMatchObject({ status: 403, code: "forbidden_query", requestId: expect.stringMatching(/^[0-9a-f-]{36}$/) });
    expect(isRetryable(forbidden)).toBe(false);
    const notLinked = await noDb.query("SELECT 1").catch((e: unknown) => e);
    expect(notLinked).toMatchObject({ status: 403, code: "database_not_linked" });
    const shape = await db.batch([{ sql: "BEGIN" }, { sql: "SELECT 1" }], { transaction: true }).catch((e: unknown) => e);
    expect(shape).toBeInstanceOf(ValidationError);
    expect((shape as ValidationError).fields).toHaveProperty(["statements.0.sql"]);
  });
});

describe("functions", () => {
  it("call() sends method, query and body and returns the function's answer", async () => {
    const r = await fns.call<{ method: string; query: Record<string, string>; payload: unknown; consumer: number }>("echo", {
      method: "PUT", query: { page: 2 }, body: { n: 1 },
    });
    expect(r.status).toBe(200);
    expect(r.requestId).toMatch(/^[0-9a-f-]{36}$/);
    expect(r.data).toMatchObject({ method: "PUT", query: { page: "2" }, payload: { n: 1 } });
    expect((await fns.call("echo")).data).toMatchObject({ method: "GET" });
    expect((await fns.call("echo", { body: { x: 1 } })).data).toMatchObject({ method: "POST" });
    expect((await fns.call<string>("echo", { query: { text: "1" } })).data).toBe("plain words");
  });

  it("a missing slug is a PlatformError not_found; a function's own error status keeps its body's code", async () => {
    await expect(fns.call("nope")).rejects.toMatchObject({ status: 404, code: "not_found" });
    const own = await fns.call("echo", { query: { status: 418 } }).catch((e: unknown) => e);
    expect(own).toBeInstanceOf(PlatformError);
    expect(own).toMatchObject({ status: 418, code: "teapot", message: "short and stout" });
  });
});

describe("cms", () => {
  it("reads schemas", async () => {
    const list = await cms.schemas();
    expect(list.map((t) => t.slug).sort()).toEqual(["article", "author"]);
    const schema = await cms.schema("article");
    expect(schema.fields.map((f) => f.name)).toEqual(["title", "views", "category", "author"]);
  });

  it("filters, sorts, selects fields and pages with the typed builder", async () => {
    const q = cms.from<Article>("article").where("category", "news").where("views", "gte", 100).sort("-views").fields("title", "views").perPage(2);
    const page = await q.fetch();
    expect(page.meta).toMatchObject({ current_page: 1, per_page: 2, total: 8, last_page: 4 });
    expect(page.data.map((a) => a.views)).toEqual([240, 220]);
    expect(Object.keys(page.data[0]!).sort()).toEqual(["id", "title", "views"]);
    const inList = await cms.from<Article>("article").where("views", "in", [10, 20, 30]).sort("views").fetch();
    expect(inList.data.map((a) => a.views)).toEqual([10, 20, 30]);
  });

  it("iterates every matching entry across pages", async () => {
    const seen: number[] = [];
    for await (const a of cms.from<Article>("article").sort("views").perPage(4)) seen.push(a.views);
    expect(seen).toEqual(Array.from({ length: 25 }, (_, i) => i * 10));
    const pages: number[] = [];
    for await (const p of cms.from<Article>("article").where("category", "sport").perPage(5).pages()) pages.push(p.data.length);
    expect(pages).toEqual([5, 5, 2]);
  });

  it("searches and reads one entry with populate", async () => {
    const found = await cms.from<Article>("article").search("rockets").perPage(10).fetch();
    expect(found.meta).toMatchObject({ total: 5, query: "rockets" });
    expect(found.data.every((a) => a.title.startsWith("Rockets"))).toBe(true);
    const id = found.data[0]!.id;
    const plain = await cms.entry<Article>("article", id);
    expect(typeof plain.author).toBe("string");
    const full = await cms.entry<Article>("article", id, { populate: ["author"] });
    expect((full.author as Author & { id: string }).name).toBe("Ada");
  });

  it("turns the CMS envelope into CmsError with its code", async () => {
    const bad = await cms.from<Article>("article").where("title" as never, "x").fetch().catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(CmsError);
    expect(bad).toMatchObject({ status: 400, code: "INVALID_FILTER", requestId: expect.stringMatching(/^[0-9a-f-]{36}$/) });
    await expect(cms.from("article").where("views", "between" as never, 1 as never).fetch()).rejects.toMatchObject({ code: "INVALID_OPERATOR" });
    await expect(cms.from("article").search("a").fetch()).rejects.toMatchObject({ code: "QUERY_TOO_SHORT" });
    await expect(cms.from("article").perPage(101).fetch()).rejects.toMatchObject({ code: "INVALID_PAGINATION" });
    await expect(cms.entry("article", "00000000-0000-4000-8000-000000000000")).rejects.toMatchObject({ status: 404, code: "ENTRY_NOT_FOUND" });
    await expect(cms.from("nothing").fetch()).rejects.toMatchObject({ code: "CONTENT_TYPE_NOT_FOUND" });
    const noKey = createCms({ baseUrl: s.httpsUrl, appKey: "pk_unknown", fetch: insecureFetch });
    await expect(noKey.schemas()).rejects.toMatchObject({ code: "INVALID_APP_KEY" });
  });
});
