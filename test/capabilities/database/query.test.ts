// /api/db/query and /api/db/batch through the service implementation, on
// real libSQL files run by the real engine processes.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { QueryResponseSchema } from "../../../gen/pulsebase/platform/v1/database_pb.js";
import { encodeRest } from "../../../src/transport/http/rest-json.js";
import { failure } from "./errors.js";
import { createHarness, rowsOf, type Harness } from "./harness.js";

let h: Harness;
let team: number;
let app: number;

beforeAll(async () => {
  h = await createHarness({
    limits: { maxRows: 50, maxResultBytes: 64 * 1024, maxStatements: 20, maxSqlLength: 5000, maxParams: 10, maxDatabaseBytes: 2 * 1024 * 1024 },
  });
  team = await h.team();
  app = await h.app(team);
  await h.linkedDb(team, app);
  await h.query(app, "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, qty INTEGER, price REAL, data BLOB)");
});
afterAll(async () => h?.close());

const fresh = async (name: string) => {
  await h.query(app, `CREATE TABLE ${name} (id INTEGER PRIMARY KEY, v TEXT UNIQUE)`);
  return name;
};

describe("query", () => {
  it("runs several statements of one sql string, one result each, and echoes the request id", async () => {
    const t = await fresh("multi");
    const res = await h.query(app, `INSERT INTO ${t} (v) VALUES ('a;b'); INSERT INTO ${t} (v) VALUES ('c'); SELECT id, v FROM ${t} ORDER BY id;`);
    expect(res.results).toHaveLength(3);
    expect(res.results[0]!.rowsWritten).toBe(1);
    expect(res.results[2]!.columns).toEqual(["id", "v"]);
    expect(rowsOf(res.results[2])).toEqual([[1, "a;b"], [2, "c"]]);
    expect(res.results[2]!.rowsRead).toBe(2);
    expect(res.results[2]!.error).toBeUndefined();
    expect(res.requestId).toMatch(/^[0-9a-f-]{36}$/);
    expect(res.requestId).toBe(h.lastRequestId());
  });

  it("binds positional params (?, ?NNN) and named params (:a, @a, $a, with or without prefix)", async () => {
    const t = await fresh("params");
    await h.query(app, `INSERT INTO ${t} (id, v) VALUES (?, ?)`, [1, "one"]);
    await h.query(app, `INSERT INTO ${t} (v, id) VALUES (?2, ?1)`, [2, "two"]);
    await h.query(app, `INSERT INTO ${t} (id, v) VALUES (:id, @v)`, { id: 3, "@v": "three" });
    await h.query(app, `INSERT INTO ${t} (id, v) VALUES ($id, :v)`, { $id: 4, ":v": "four" });
    const res = await h.query(app, `SELECT v FROM ${t} WHERE id >= :min ORDER BY id`, { min: 1 });
    expect(rowsOf(res.results[0])).toEqual([["one"], ["two"], ["three"], ["four"]]);
    // integers are bound as INTEGER, booleans as 1/0
    const types = await h.query(app, "SELECT typeof(?), typeof(?), typeof(?), ?, typeof(?)", [1, 1.5, "x", true, null]);
    expect(rowsOf(types.results[0])).toEqual([["integer", "real", "text", 1, "null"]]);
  });

  it("refuses params that do not match the statement with 422", async () => {
    expect(await failure(h.query(app, "SELECT ?, ?", [1]))).toMatchObject({ http: 422, fields: { params: [expect.stringMatching(/1 value/)] } });
    expect(await failure(h.query(app, "SELECT :a", { b: 1 }))).toMatchObject({ http: 422, fields: { params: [expect.any(String)] } });
    expect(await failure(h.query(app, "SELECT ?", [{ x: 1 }]))).toMatchObject({ http: 422, fields: { "params.0": [expect.any(String)] } });
    expect(await failure(h.query(app, "SELECT ?", "x"))).toMatchObject({ http: 422, fields: { params: [expect.any(String)] } });
  });

  it("encodes values: safe integers and floats as numbers, big integers as strings, blobs as base64, null", async () => {
    const res = await h.query(
      app,
      "SELECT 42, -9007199254740991, 9007199254740992, -9223372036854775808, 1.5, 1e300, 'text', x'00ff10', NULL, CAST('9223372036854775807' AS INTEGER)",
    );
    expect(rowsOf(res.results[0])).toEqual([
      [42, -9007199254740991, "9007199254740992", "-9223372036854775808", 1.5, 1e300, "text", "AP8Q", null, "9223372036854775807"],
    ]);
  });

  it("reports statement errors inside the matching result with the others still run", async () => {
    const t = await fresh("errs");
    const res = await h.query(app, `INSERT INTO ${t} (v) VALUES ('x'); SELECT FROM; INSERT INTO ${t} (v) VALUES ('x'); SELECT * FROM nope; SELECT count(*) FROM ${t}`);
    expect(res.results).toHaveLength(5);
    expect(res.results[1]!.error).toMatch(/syntax error/);
    expect(res.results[2]!.error).toMatch(/UNIQUE constraint failed/);
    expect(res.results[3]!.error).toMatch(/no such table/);
    expect(rowsOf(res.results[4])).toEqual([[1]]);
  });

  it("validates the request shape with 422 before anything else", async () => {
    expect(await failure(h.query(app, ""))).toMatchObject({ http: 422, fields: { sql: [expect.any(String)] } });
    expect(await failure(h.query(app, " ; -- nothing"))).toMatchObject({ http: 422, fields: { sql: [expect.any(String)] } });
    expect(await failure(h.query(app, `SELECT '${"x".repeat(5000)}'`))).toMatchObject({ http: 422, fields: { sql: [expect.stringMatching(/5000/)] } });
    expect(await failure(h.query(app, "SELECT 1;".repeat(21)))).toMatchObject({ http: 422, fields: { sql: [expect.stringMatching(/20/)] } });
    expect(await failure(h.query(app, "SELECT ?", Array(11).fill(1)))).toMatchObject({ http: 422, fields: { params: [expect.stringMatching(/10/)] } });
  });

  it("refuses forbidden statements with 403 forbidden_query and runs nothing", async () => {
    const t = await fresh("guarded");
    const f = await failure(h.query(app, `INSERT INTO ${t} (v) VALUES ('a'); PRAGMA journal_mode = DELETE`));
    expect(f).toMatchObject({ code: "forbidden_query", http: 403 });
    const res = await h.query(app, `SELECT count(*) FROM ${t}`);
    expect(rowsOf(res.results[0])).toEqual([[0]]);
    // data belongs in params, which the guard does not inspect
    await h.query(app, `INSERT INTO ${t} (v) VALUES (?)`, ["PRAGMA attach; VACUUM"]);
    expect(rowsOf((await h.query(app, `SELECT v FROM ${t}`)).results[0])).toEqual([["PRAGMA attach; VACUUM"]]);
  });

  it("refuses the libSQL build's file functions (readfile, writefile, fsdir): no reaching the host's files", async () => {
    for (const sql of [
      "SELECT readfile('/etc/passwd')",
      "SELECT writefile('/tmp/pulsebase-guard-test', 'x')",
      "SELECT name FROM fsdir('/')",
      'SELECT "ReadFile"(\'/etc/hostname\')',
      "INSERT INTO items (name, data) SELECT 'leak', readfile('/etc/hostname')",
    ]) {
      expect(await failure(h.query(app, sql)), sql).toMatchObject({ code: "forbidden_query", http: 403 });
    }
  });

  it("runs every allowed kind of statement", async () => {
    const res = await h.query(
      app,
      `CREATE TABLE kinds (a INTEGER, b TEXT);
       CREATE INDEX kinds_a ON kinds (a);
       CREATE UNIQUE INDEX kinds_b ON kinds (b);
       ALTER TABLE kinds ADD COLUMN c REAL;
       BEGIN;
       INSERT INTO kinds (a, b) VALUES (1, 'x'), (2, 'y');
       UPDATE kinds SET c = a * 1.5;
       DELETE FROM kinds WHERE a = 2;
       COMMIT;
       BEGIN;
       DELETE FROM kinds;
       ROLLBACK;
       SELECT a, b, c FROM kinds;
       DROP INDEX kinds_a;
       DROP TABLE kinds`,
    );
    expect(res.results.map((r) => r.error)).toEqual(Array(15).fill(undefined));
    expect(rowsOf(res.results[12])).toEqual([[1, "x", 1.5]]);
  });

  it.each(["ATTACH", "DETACH", "PRAGMA", "VACUUM", "LOAD_EXTENSION", "SAVEPOINT", "RELEASE"])(
    "answers 403 forbidden_query for %s",
    async (kw) => {
      expect(await failure(h.query(app, `SELECT 1 AS ${kw.toLowerCase()}`))).toMatchObject({ code: "forbidden_query", http: 403 });
    },
  );

  it("limits rows and bytes per result with a statement error", async () => {
    const many = await h.query(app, "SELECT value FROM (WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < 51) SELECT value FROM s)");
    expect(many.results[0]!.error).toMatch(/more than 50 rows/);
    const ok = await h.query(app, "SELECT value FROM (WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < 50) SELECT value FROM s)");
    expect(ok.results[0]!.rows).toHaveLength(50);
    const big = await h.query(app, "SELECT hex(zeroblob(20000)) FROM (WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < 5) SELECT value FROM s)");
    expect(big.results[0]!.error).toMatch(/more than 65536 bytes/);
    // a huge blob is refused before it is encoded
    const huge = await h.query(app, "SELECT zeroblob(10000000)");
    expect(huge.results[0]!.error).toMatch(/result too large/);
  });

  it("refuses writes that would grow the database past its size limit", async () => {
    const t = await fresh("sized");
    const res = await h.query(app, `INSERT INTO ${t} (v) VALUES (hex(zeroblob(3000000)))`);
    expect(res.results[0]!.error).toMatch(/full/i);
    const ok = await h.query(app, `INSERT INTO ${t} (v) VALUES ('small')`);
    expect(ok.results[0]!.error).toBeUndefined();
  });

  it("rolls back a transaction the client opened and left open", async () => {
    const t = await fresh("leak");
    const res = await h.query(app, `BEGIN; INSERT INTO ${t} (v) VALUES ('x')`);
    expect(res.results.every((r) => r.error === undefined)).toBe(true);
    const after = await h.query(app, `SELECT count(*) FROM ${t}`);
    expect(rowsOf(after.results[0])).toEqual([[0]]);
    // and a client transaction that commits keeps its rows
    await h.query(app, `BEGIN; INSERT INTO ${t} (v) VALUES ('y'); COMMIT`);
    expect(rowsOf((await h.query(app, `SELECT v FROM ${t}`)).results[0])).toEqual([["y"]]);
  });

  it("reports rows_written for INSERT ... RETURNING and UPDATE", async () => {
    const t = await fresh("ret");
    const ins = await h.query(app, `INSERT INTO ${t} (v) VALUES ('a'), ('b') RETURNING id`);
    expect(ins.results[0]).toMatchObject({ columns: ["id"], rowsRead: 2, rowsWritten: 2 });
    const up = await h.query(app, `UPDATE ${t} SET v = v || '!'`);
    expect(up.results[0]).toMatchObject({ rowsRead: 0, rowsWritten: 2, columns: [] });
  });
});

describe("batch", () => {
  it("without a transaction runs every statement in order; a failure does not stop the next", async () => {
    const t = await fresh("b_plain");
    const res = await h.batch(app, [
      { sql: `INSERT INTO ${t} (v) VALUES (?)`, params: ["a"] },
      { sql: `INSERT INTO ${t} (v) VALUES (?)`, params: ["a"] },
      { sql: `INSERT INTO ${t} (v) VALUES (:v)`, params: { v: "b" } },
      { sql: `SELECT v FROM ${t} ORDER BY v` },
    ]);
    expect(res.results).toHaveLength(4);
    expect(res.results[1]!.error).toMatch(/UNIQUE/);
    expect(rowsOf(res.results[3])).toEqual([["a"], ["b"]]);
  });

  it("with a transaction rolls back at the first failure; later statements do not run and have no result", async () => {
    const t = await fresh("b_tx");
    const res = await h.batch(
      app,
      [
        { sql: `INSERT INTO ${t} (v) VALUES ('a')` },
        { sql: `INSERT INTO ${t} (v) VALUES ('a')` },
        { sql: `INSERT INTO ${t} (v) VALUES ('c')` },
      ],
      true,
    );
    expect(res.results).toHaveLength(2);
    expect(res.results[0]!.error).toBeUndefined();
    expect(res.results[1]!.error).toMatch(/UNIQUE/);
    expect(rowsOf((await h.query(app, `SELECT count(*) FROM ${t}`)).results[0])).toEqual([[0]]);

    const ok = await h.batch(app, [{ sql: `INSERT INTO ${t} (v) VALUES ('a')` }, { sql: `SELECT count(*) FROM ${t}` }], true);
    expect(rowsOf(ok.results[1])).toEqual([[1]]);
    expect(rowsOf((await h.query(app, `SELECT count(*) FROM ${t}`)).results[0])).toEqual([[1]]);
  });

  it("refuses BEGIN/COMMIT/ROLLBACK inside a transaction batch with 422 naming the statement", async () => {
    const f = await failure(h.batch(app, [{ sql: "SELECT 1" }, { sql: "COMMIT" }], true));
    expect(f).toMatchObject({ http: 422, fields: { "statements.1.sql": [expect.any(String)] } });
    const g = await failure(h.batch(app, [{ sql: "SELECT 1; begin" }], true));
    expect(g.fields).toHaveProperty("statements.0.sql");
  });

  it("validates statements: empty array, missing sql, params per statement", async () => {
    expect(await failure(h.batch(app, []))).toMatchObject({ http: 422, fields: { statements: [expect.any(String)] } });
    expect(await failure(h.batch(app, [{ sql: "SELECT 1" }, { sql: "" }]))).toMatchObject({ fields: { "statements.1.sql": [expect.any(String)] } });
    expect(await failure(h.batch(app, [{ sql: "SELECT ?", params: [] }]))).toMatchObject({ fields: { "statements.0.params": [expect.any(String)] } });
    expect(await failure(h.batch(app, Array(21).fill({ sql: "SELECT 1" })))).toMatchObject({ fields: { statements: [expect.stringMatching(/20/)] } });
  });

  it("refuses a whole batch with one forbidden statement before anything runs", async () => {
    const t = await fresh("b_guard");
    const f = await failure(h.batch(app, [{ sql: `INSERT INTO ${t} (v) VALUES ('a')` }, { sql: "SELECT * FROM pragma_table_info('x')" }]));
    expect(f).toMatchObject({ code: "forbidden_query", http: 403 });
    expect(f.message).toMatch(/statements\.1\.sql/);
    expect(rowsOf((await h.query(app, `SELECT count(*) FROM ${t}`)).results[0])).toEqual([[0]]);
  });

  it("inserts many rows in one transaction", async () => {
    const t = await fresh("b_100");
    const statements = Array.from({ length: 20 }, (_, i) => ({ sql: `INSERT INTO ${t} (v) VALUES (?)`, params: [`v${i}`] }));
    const res = await h.batch(app, statements, true);
    expect(res.results.every((r) => r.rowsWritten === 1)).toBe(true);
    expect(rowsOf((await h.query(app, `SELECT count(*) FROM ${t}`)).results[0])).toEqual([[20]]);
  });
});

describe("compiled statement reuse", () => {
  it("sees schema changes made after a statement was cached", async () => {
    const t = await fresh("reuse");
    await h.query(app, `INSERT INTO ${t} (v) VALUES ('a')`);
    expect((await h.query(app, `SELECT * FROM ${t}`)).results[0]!.columns).toEqual(["id", "v"]);
    await h.query(app, `ALTER TABLE ${t} ADD COLUMN w INTEGER DEFAULT 5`);
    const again = await h.query(app, `SELECT * FROM ${t}`);
    expect(again.results[0]!.columns).toEqual(["id", "v", "w"]);
    expect(rowsOf(again.results[0])).toEqual([[1, "a", 5]]);
    await h.query(app, `DROP TABLE ${t}`);
    expect((await h.query(app, `SELECT * FROM ${t}`)).results[0]!.error).toMatch(/no such table/);
  });
});

describe("REST JSON", () => {
  it("comes out exactly in the spec's shape", async () => {
    const res = await h.query(app, "SELECT 1 AS a, 'x' AS b, NULL AS c, 2.5 AS d; SELECT * FROM nope");
    expect(encodeRest(QueryResponseSchema, res)).toEqual({
      results: [
        { columns: ["a", "b", "c", "d"], rows: [[1, "x", null, 2.5]], rows_read: 1, rows_written: 0 },
        { columns: [], rows: [], rows_read: 0, rows_written: 0, error: expect.stringMatching(/no such table: nope/) },
      ],
      request_id: h.lastRequestId(),
    });
  });
});

describe("state does not leak between requests", () => {
  it("drops temp tables a request created", async () => {
    await h.query(app, "CREATE TABLE temp.scratch (a)");
    const res = await h.query(app, "SELECT count(*) FROM temp.scratch");
    expect(res.results[0]!.error).toMatch(/no such table/);
  });
});
