// The console's data tools on a real server (issue #30, point 4): operator
// SQL results of any size come in pages (a 25,000-row result read to its
// end), the table editor sorts, filters, searches and pages a table and
// inserts, updates and deletes rows with bound values (audited; a viewer
// refused on the server), and the SQL editor's history and saved queries
// are kept per account, bounded.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Code } from "@connectrpc/connect";
import { toJson } from "@bufbuild/protobuf";
import { ListValueSchema } from "@bufbuild/protobuf/wkt";
import { AccountService } from "../../../gen/pulsebase/admin/v1/account_pb.js";
import { DatabaseService } from "../../../gen/pulsebase/admin/v1/database_pb.js";
import { SqlService, type SqlResult } from "../../../gen/pulsebase/admin/v1/sql_pb.js";
import { Role } from "../../../gen/pulsebase/common/v1/options_pb.js";
import { createModules } from "../../../src/server/modules.js";
import type { TestServer } from "../../helpers/server.js";
import { codeOf, invite, startWithOwner, type OperatorSession } from "../console/operator-session.js";

let s: TestServer;
let owner: OperatorSession;
let dev: OperatorSession;
let viewer: OperatorSession;
let teamId: bigint;
let appId: bigint;

const rows = (r: { rows: SqlResult["rows"] }) => r.rows.map((l) => toJson(ListValueSchema, l) as unknown[]);

beforeAll(async () => {
  ({ s, owner } = await startWithOwner({ modules: createModules }));
  teamId = owner.me.teams[0]!.teamId;
  const app = await s.admin.createApp({ teamId, name: "data" });
  appId = app.id;
  const dbs = s.adminClient(DatabaseService);
  const db = await dbs.createDatabase({ teamId, name: "main" });
  await dbs.linkDatabase({ databaseId: db.id, appId });
  dev = await invite(s, owner, teamId, "dev@example.com", Role.DEVELOPER);
  viewer = await invite(s, owner, teamId, "viewer@example.com", Role.VIEWER);
  await owner.client(SqlService).runSql({
    appId,
    sql: `CREATE TABLE people (id INTEGER PRIMARY KEY, name TEXT NOT NULL, age INTEGER, city TEXT);
          WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300)
          INSERT INTO people (id, name, age, city) SELECT i, printf('person %03d', i), i % 90, CASE i % 3 WHEN 0 THEN 'Oslo' WHEN 1 THEN 'Lima' ELSE NULL END FROM n;
          CREATE TABLE tags (a TEXT, b TEXT);
          INSERT INTO tags VALUES ('x', 'y');
          CREATE VIEW adults AS SELECT * FROM people WHERE age >= 18`,
  });
}, 60_000);
afterAll(() => s?.close());

const BIG = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 25000) SELECT i, 'row ' || i AS label FROM n";

describe("paged operator SQL", () => {
  it("returns a page and a token for a read past the old 10,000-row cap; ReadSqlPage reads it to the end", async () => {
    const sql = owner.client(SqlService);
    const first = await sql.runSql({ appId, sql: BIG, pageSize: 1000 });
    const r = first.results[0]!;
    expect(r.error).toBe("");
    expect(r.rows.length).toBe(1000);
    expect(r.nextPageToken).not.toBe("");
    const all = rows(r);
    let token = r.nextPageToken;
    while (token) {
      const page = await sql.readSqlPage({ appId, sql: r.sql, pageToken: token, pageSize: 5000 });
      all.push(...rows(page));
      token = page.nextPageToken;
    }
    expect(all.length).toBe(25_000);
    expect(all.at(-1)).toEqual([25000, "row 25000"]);
    expect(new Set(all.map((x) => x[0])).size).toBe(25_000);
    // Without a page size, a result up to 10,000 rows comes whole, as before paging.
    const whole = await sql.runSql({ appId, sql: "SELECT * FROM people" });
    expect(whole.results[0]!.rows.length).toBe(300);
    expect(whole.results[0]!.nextPageToken).toBe("");
  });

  it("pages only reads: writes, PRAGMA and WITH ... INSERT run as written; a token of another statement is a 400", async () => {
    const sql = owner.client(SqlService);
    const r = await sql.runSql({
      appId,
      pageSize: 2,
      sql: "CREATE TEMP TABLE t (v); INSERT INTO t VALUES (1), (2), (3) RETURNING v; WITH x AS (SELECT 4) INSERT INTO t SELECT * FROM x; PRAGMA table_info(people); SELECT v FROM t ORDER BY v -- trailing comment",
    });
    expect(r.results.map((x) => x.error)).toEqual(["", "", "", "", ""]);
    expect(rows(r.results[1]!)).toEqual([[1], [2], [3]]);
    expect(r.results[3]!.rows.length).toBe(4);
    expect(rows(r.results[4]!)).toEqual([[1], [2]]);
    const token = r.results[4]!.nextPageToken;
    expect(token).not.toBe("");
    expect(await codeOf(sql.readSqlPage({ appId, sql: "SELECT * FROM people", pageToken: token }))).toBe(Code.InvalidArgument);
    expect(await codeOf(sql.readSqlPage({ appId, sql: "SELECT 1", pageToken: "garbage!" }))).toBe(Code.InvalidArgument);
    expect(await codeOf(sql.readSqlPage({ appId, sql: "DELETE FROM people", pageToken: token }))).toBe(Code.InvalidArgument);
    expect(await codeOf(sql.runSql({ appId, sql: "SELECT 1", pageSize: -1 }))).toBe(Code.InvalidArgument);
    expect(await codeOf(viewer.client(SqlService).readSqlPage({ appId, sql: r.results[4]!.sql, pageToken: token }))).toBe(Code.PermissionDenied);
  });
});

describe("the table editor", () => {
  it("sorts, filters, searches and jumps to a page, with each row's key", async () => {
    const sql = viewer.client(SqlService);
    const byAge = await sql.browseTable({ appId, table: "people", pageSize: 10, orderBy: "age", descending: true });
    expect(Number(byAge.totalRows)).toBe(300);
    expect(rows(byAge).map((r) => r[2])).toEqual([89, 89, 89, 88, 88, 88, 87, 87, 87, 86]);
    // The key breaks ties: ids ascend within one age.
    expect(rows(byAge).slice(0, 3).map((r) => r[0])).toEqual([89, 179, 269]);
    expect(byAge.keyColumns).toEqual(["id"]);
    expect(rows({ rows: byAge.keys })[0]).toEqual([rows(byAge)[0]![0]]);
    expect(byAge.editable).toBe(true);
    const filtered = await sql.browseTable({ appId, table: "people", pageSize: 50, filters: [{ column: "city", op: "eq", value: "Oslo" }, { column: "age", op: "gt", value: "80" }] });
    expect(rows(filtered).every((r) => r[3] === "Oslo" && (r[2] as number) > 80)).toBe(true);
    expect(Number(filtered.totalRows)).toBe(rows(filtered).length);
    const nulls = await sql.browseTable({ appId, table: "people", filters: [{ column: "city", op: "is_null" }] });
    expect(Number(nulls.totalRows)).toBe(100);
    const search = await sql.browseTable({ appId, table: "people", search: "person 12" });
    expect(rows(search).map((r) => r[1])).toEqual(["person 120", "person 121", "person 122", "person 123", "person 124", "person 125", "person 126", "person 127", "person 128", "person 129"]);
    // "%" and "_" in a search are literal characters.
    expect(Number((await sql.browseTable({ appId, table: "people", search: "%" })).totalRows)).toBe(0);
    const page7 = await sql.browseTable({ appId, table: "people", pageSize: 25, offset: 150n });
    expect(rows(page7)[0]![0]).toBe(151);
    const rowidTable = await sql.browseTable({ appId, table: "tags" });
    expect(rowidTable.keyColumns).toEqual(["rowid"]);
    expect(rows(rowidTable)).toEqual([["x", "y"]]);
    const view = await sql.browseTable({ appId, table: "adults", pageSize: 5 });
    expect(view.editable).toBe(false);
    expect(view.keyColumns).toEqual([]);
    expect(await codeOf(sql.browseTable({ appId, table: "people", orderBy: "nope" }))).toBe(Code.InvalidArgument);
    expect(await codeOf(sql.browseTable({ appId, table: "people", filters: [{ column: 'name" OR 1=1 --', op: "eq", value: "x" }] }))).toBe(Code.InvalidArgument);
    expect(await codeOf(sql.browseTable({ appId, table: "people", filters: [{ column: "name", op: "; DROP", value: "x" }] }))).toBe(Code.InvalidArgument);
  });

  it("inserts, updates and deletes rows with bound values; each change is audited with the table and row id", async () => {
    const sql = dev.client(SqlService);
    const hostile = "O'Brien\"); DROP TABLE people; --";
    const ins = await sql.insertRow({ appId, table: "people", values: { name: hostile, age: 41, city: null } });
    const id = ins.id;
    expect(id).toBe(301n);
    expect(toJson(ListValueSchema, ins.row!)).toEqual([301, hostile, 41, null]);
    const up = await sql.updateRow({ appId, table: "people", key: { id: 301 }, values: { city: "Quito", age: "42" } });
    expect(toJson(ListValueSchema, up.row!)).toEqual([301, hostile, 42, "Quito"]);
    const found = await sql.browseTable({ appId, table: "people", filters: [{ column: "id", op: "eq", value: "301" }] });
    expect(rows(found)).toEqual([[301, hostile, 42, "Quito"]]);
    // A rowid table is edited by rowid.
    const tags = await sql.browseTable({ appId, table: "tags" });
    const rowid = toJson(ListValueSchema, tags.keys[0]!) as number[];
    await sql.updateRow({ appId, table: "tags", key: { rowid: rowid[0]! }, values: { b: "z" } });
    expect(rows(await sql.browseTable({ appId, table: "tags" }))).toEqual([["x", "z"]]);
    // A column named rowid (or oid) shadows the rowid: the key is the first
    // alias no column took, so a delete hits exactly the one row.
    await owner.client(SqlService).runSql({ appId, sql: "CREATE TABLE shadow (rowid TEXT, oid TEXT, v INTEGER); INSERT INTO shadow VALUES ('x', 'o', 1), ('x', 'o', 2), ('y', 'o', 3)" });
    const shadow = await sql.browseTable({ appId, table: "shadow" });
    expect(shadow.keyColumns).toEqual(["_rowid_"]);
    const second = toJson(ListValueSchema, shadow.keys[1]!) as number[];
    const gone = await sql.deleteRow({ appId, table: "shadow", key: { _rowid_: second[0]! } });
    expect(Number(gone.rowsWritten)).toBe(1);
    expect(rows(await sql.browseTable({ appId, table: "shadow" }))).toEqual([["x", "o", 1], ["y", "o", 3]]);
    // An operator named like an Object property is an unknown operator (400), not a 500.
    expect(await codeOf(sql.browseTable({ appId, table: "people", filters: [{ column: "age", op: "constructor", value: "1" }] }))).toBe(Code.InvalidArgument);
    const del = await sql.deleteRow({ appId, table: "people", key: { id: 301 } });
    expect(del.id).toBe(301n);
    expect(Number((await sql.browseTable({ appId, table: "people" })).totalRows)).toBe(300);
    expect(await codeOf(sql.deleteRow({ appId, table: "people", key: { id: 301 } }))).toBe(Code.NotFound);
    // The database's refusals are the caller's data: 4xx, not 500.
    expect(await codeOf(sql.insertRow({ appId, table: "people", values: { age: 3 } }))).toBe(Code.InvalidArgument);
    expect(await codeOf(sql.insertRow({ appId, table: "people", values: { id: 1, name: "dup" } }))).toBe(Code.InvalidArgument);
    expect(await codeOf(sql.insertRow({ appId, table: "people", values: { "name\" = 1; --": "x" } }))).toBe(Code.InvalidArgument);
    expect(await codeOf(sql.updateRow({ appId, table: "people", key: { name: "person 001" }, values: { age: 1 } }))).toBe(Code.InvalidArgument);
    expect(await codeOf(sql.insertRow({ appId, table: "adults", values: { name: "v" } }))).toBe(Code.PermissionDenied);
    expect(await codeOf(sql.insertRow({ appId, table: "nope", values: { name: "v" } }))).toBe(Code.NotFound);

    const log = await owner.client(AccountService).listAuditLog({ teamId, pageSize: 200 });
    const edits = log.entries.filter((e) => /SqlService\/(InsertRow|UpdateRow|DeleteRow)$/.test(e.method) && e.outcome === "ok" && e.resource.table === "people");
    expect(edits.map((e) => [e.method.split("/")[1], e.resource.id, e.actorEmail])).toEqual([
      ["DeleteRow", "301", "dev@example.com"],
      ["UpdateRow", "301", "dev@example.com"],
      ["InsertRow", "301", "dev@example.com"],
    ]);
  });

  it("refuses a viewer's edits on the server, and audits the refusal", async () => {
    const sql = viewer.client(SqlService);
    expect(await codeOf(sql.insertRow({ appId, table: "people", values: { name: "v" } }))).toBe(Code.PermissionDenied);
    expect(await codeOf(sql.updateRow({ appId, table: "people", key: { id: 1 }, values: { name: "v" } }))).toBe(Code.PermissionDenied);
    expect(await codeOf(sql.deleteRow({ appId, table: "people", key: { id: 1 } }))).toBe(Code.PermissionDenied);
    expect(rows(await sql.browseTable({ appId, table: "people", pageSize: 1 }))).toEqual([[1, "person 001", 1, "Lima"]]);
    const log = await owner.client(AccountService).listAuditLog({ teamId, pageSize: 200 });
    expect(log.entries.find((e) => e.method.endsWith("/DeleteRow") && e.actorEmail === "viewer@example.com")?.outcome).toBe("permission_denied");
  });
});

describe("history and saved queries", () => {
  it("keeps each account's runs, newest first, bounded to the last 100", async () => {
    const sql = dev.client(SqlService);
    for (let i = 1; i <= 105; i++) await sql.runSql({ appId, sql: `SELECT ${i} AS n` });
    await sql.runSql({ appId, sql: "SELECT * FROM nowhere" });
    const h = await sql.listSqlHistory({ appId });
    expect(h.entries.length).toBe(100);
    expect(h.entries[0]!.sql).toBe("SELECT * FROM nowhere");
    expect(h.entries[0]!.error).toMatch(/no such table/);
    expect(h.entries[1]!.sql).toBe("SELECT 105 AS n");
    expect(h.entries.at(-1)!.sql).toBe("SELECT 7 AS n");
    // Another account's history is its own.
    expect((await owner.client(SqlService).listSqlHistory({ appId })).entries.map((e) => e.sql)).not.toContain("SELECT 105 AS n");
    // The operator token has no account.
    expect(await codeOf(s.adminClient(SqlService).listSqlHistory({ appId }))).toBe(Code.FailedPrecondition);
  });

  it("saves, replaces by name, lists and deletes an account's queries", async () => {
    const sql = dev.client(SqlService);
    const a = await sql.saveQuery({ appId, name: "oldest", sql: "SELECT * FROM people ORDER BY age DESC" });
    await sql.saveQuery({ appId, name: "count", sql: "SELECT count(*) FROM people" });
    const replaced = await sql.saveQuery({ appId, name: "oldest", sql: "SELECT * FROM people ORDER BY age DESC LIMIT 1" });
    expect(replaced.id).toBe(a.id);
    const list = await sql.listSavedQueries({ appId });
    expect(list.queries.map((q) => [q.name, q.sql])).toEqual([
      ["count", "SELECT count(*) FROM people"],
      ["oldest", "SELECT * FROM people ORDER BY age DESC LIMIT 1"],
    ]);
    expect((await owner.client(SqlService).listSavedQueries({ appId })).queries).toEqual([]);
    expect(await codeOf(owner.client(SqlService).deleteSavedQuery({ appId, id: a.id }))).toBe(Code.NotFound);
    await sql.deleteSavedQuery({ appId, id: a.id });
    expect((await sql.listSavedQueries({ appId })).queries.map((q) => q.name)).toEqual(["count"]);
    expect(await codeOf(sql.saveQuery({ appId, name: "", sql: "SELECT 1" }))).toBe(Code.InvalidArgument);
    expect(await codeOf(sql.saveQuery({ appId, name: "x".repeat(101), sql: "SELECT 1" }))).toBe(Code.InvalidArgument);
    expect(await codeOf(viewer.client(SqlService).saveQuery({ appId, name: "v", sql: "SELECT 1" }))).toBe(Code.PermissionDenied);
  });

  it("refuses a saved query past 200 per account", async () => {
    const sql = owner.client(SqlService);
    await s.db.sql.query(
      "INSERT INTO sql_saved_queries (user_id, app_id, name, sql) SELECT $1, $2, 'q' || g, 'SELECT 1' FROM generate_series(1, 200) g",
      [Number(owner.me.userId), Number(appId)],
    );
    expect(await codeOf(sql.saveQuery({ appId, name: "one too many", sql: "SELECT 1" }))).toBe(Code.FailedPrecondition);
    // Replacing one already saved is not one more.
    expect((await sql.saveQuery({ appId, name: "q1", sql: "SELECT 2" })).sql).toBe("SELECT 2");
  });
});
