// Issue 15, point 3: a device token of one application must not rewrite
// the database file, forge the service's capture rows, or read what other
// applications sharing a team database ran. Three layers, each tested on
// its own: the statement guard (403 forbidden_query before anything runs),
// the SQLite authorizer every tenant connection carries (engine and point
// reader), and SQLite's defensive mode (no writable schema, no page writes,
// even for the service's own statements).
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DatabaseKind } from "../../../gen/pulsebase/admin/v1/database_pb.js";
import type { EngineStatement } from "../../../src/infra/libsql/engine-protocol.js";
import { PointReader, pointReadShape } from "../../../src/infra/libsql/point-reader.js";
import { splitStatements } from "../../../src/infra/libsql/sql-splitter.js";
import { failure } from "./errors.js";
import { createHarness, rowsOf, type Harness } from "./harness.js";

let h: Harness;
let team: number;
let app: number;
let neighbour: number;
let dbId: number;
let file: string;

beforeAll(async () => {
  h = await createHarness({ engineProcesses: 1 });
  team = await h.team();
  app = await h.app(team);
  neighbour = await h.app(team);
  // one team database shared by two applications
  dbId = await h.linkedDb(team, app, neighbour);
  file = join(h.dataDir, (await h.module.manager.get(dbId)).filePath!);
  await h.query(neighbour, "CREATE TABLE secrets (id INTEGER PRIMARY KEY, v TEXT)");
  await h.query(neighbour, "INSERT INTO secrets (v) VALUES ('neighbour-literal-4711')");
  await h.query(app, "CREATE TABLE notes (id INTEGER PRIMARY KEY AUTOINCREMENT, v TEXT)");
  await h.query(app, "INSERT INTO notes (v) VALUES ('a')");
});
afterAll(async () => h?.close());

/** The file is a sound SQLite database with the expected tables, read outside the service. */
function healthy(path = file): void {
  const db = new DatabaseSync(path, { readOnly: true });
  try {
    expect(db.prepare("PRAGMA integrity_check").get()).toEqual({ integrity_check: "ok" });
    const names = (db.prepare("SELECT type, name FROM sqlite_schema ORDER BY name").all() as { type: string; name: string }[]).map((r) => `${r.type}:${r.name}`);
    expect(names.filter((n) => n.startsWith("trigger:") || n.startsWith("view:"))).toEqual([]);
  } finally {
    db.close();
  }
}

describe("the guard refuses the introspection and page tables, for every spelling", () => {
  const page1 = Buffer.alloc(4096, 0).toString("hex");
  it.each([
    ["UPDATE sqlite_dbpage SET data = unhex(?) WHERE pgno = 1", [page1]],
    ['UPDATE "sqlite_dbpage" SET data = unhex(?) WHERE pgno = 1', [page1]],
    ["INSERT INTO main.[SQLITE_DBPAGE] (pgno, data) VALUES (1, unhex(?))", [page1]],
    ["SELECT pgno, hex(data) FROM sqlite_dbpage WHERE pgno = 1", undefined],
    ["SELECT sql FROM sqlite_stmt", undefined],
    ["SELECT count(*) FROM SqLiTe_StMt", undefined],
    ["SELECT name, pgsize FROM dbstat", undefined],
    ["SELECT * FROM dbstat('main')", undefined],
    // libSQL's sha3_query runs the SQL it is given (here a PRAGMA the guard never saw)
    ["SELECT hex(sha3_query(?))", ["PRAGMA writable_schema = 1"]],
    // writes to SQLite's own tables
    ["INSERT INTO sqlite_sequence (name, seq) VALUES ('notes', 1000000)", undefined],
    ["UPDATE main.sqlite_sequence SET seq = 0", undefined],
    ["DELETE FROM sqlite_stat1", undefined],
    ["INSERT OR REPLACE INTO `sqlite_schema` VALUES ('view', 'v', 'v', 0, 'CREATE VIEW v AS SELECT 1')", undefined],
    // the service's capture table
    ["DELETE FROM _pulsebase_changes", undefined],
  ])("%s is 403 forbidden_query and nothing runs", async (sql, params) => {
    const f = await failure(h.query(app, sql, params));
    expect(f).toMatchObject({ code: "forbidden_query", http: 403 });
    healthy();
  });

  it("leaves the other application's statements and literals unseen", async () => {
    const f = await failure(h.query(app, "SELECT group_concat(sql, ' | ') FROM sqlite_stmt"));
    expect(f.code).toBe("forbidden_query");
    expect(f.message).not.toContain("neighbour-literal");
    // and both applications keep working on the shared file
    expect(rowsOf((await h.query(neighbour, "SELECT v FROM secrets")).results[0])).toEqual([["neighbour-literal-4711"]]);
    expect(rowsOf((await h.query(app, "SELECT v FROM notes")).results[0])).toEqual([["a"]]);
  });

  it("refuses the temp schema and the same names on a remote libSQL database (no authorizer there)", async () => {
    const remoteApp = await h.app(team);
    // an unreachable server: provisioning fails and the database stays
    // pending, but the guard answers before the status is looked at
    const db = await h.admin.createDatabase({ teamId: BigInt(team), name: "remote", kind: DatabaseKind.REMOTE, url: "http://127.0.0.1:1" });
    await h.admin.linkDatabase({ databaseId: db.id, appId: BigInt(remoteApp) });
    for (const sql of [
      "CREATE TABLE temp.scratch AS SELECT 1 AS x",
      'SELECT * FROM "temp".sqlite_schema',
      "INSERT INTO temp.t VALUES (1)",
      "SELECT sql FROM sqlite_stmt",
      "UPDATE sqlite_dbpage SET data = zeroblob(4096) WHERE pgno = 1",
      "SELECT * FROM dbstat",
      "DELETE FROM sqlite_sequence",
    ]) {
      expect(await failure(h.query(remoteApp, sql)), sql).toMatchObject({ code: "forbidden_query", http: 403 });
    }
    // an ordinary statement passes the guard and meets the database's status
    expect(await failure(h.query(remoteApp, "SELECT * FROM temperature"))).toMatchObject({ code: "database_unavailable", http: 503 });
  });
});

describe("the engine's authorizer, under the guard", () => {
  // Statements sent to the engine pool directly, as if the guard had let
  // them through: SQLite's authorizer must refuse them on its own. A
  // database of its own, so that nothing above can have touched it.
  let file = "";
  let dbId = 0;
  let app = 0;
  const run = (sql: string, args: (number | string | null)[] = [], service = false) =>
    h.module.pool.run(
      {
        path: file,
        statements: [{ sql, args, verb: (sql.split(/\s/)[0] ?? "").toUpperCase() }],
        transaction: false,
        mayUseTemp: true,
        maxRows: 100,
        maxBytes: 1 << 20,
        busyTimeoutMs: 1000,
        maxDatabaseBytes: 1 << 30,
        ...(service ? { service: true } : {}),
      },
      dbId,
    );

  beforeAll(async () => {
    app = await h.app(team);
    dbId = await h.linkedDb(team, app);
    file = join(h.dataDir, (await h.module.manager.get(dbId)).filePath!);
    await h.query(app, "CREATE TABLE notes (id INTEGER PRIMARY KEY AUTOINCREMENT, v TEXT)");
    await h.query(app, "INSERT INTO notes (v) VALUES ('a')");
    // the service's capture table, made by the service
    const [r] = await run("CREATE TABLE IF NOT EXISTS _pulsebase_changes (seq INTEGER PRIMARY KEY AUTOINCREMENT, tbl TEXT)", [], true);
    expect(r!.error).toBeUndefined();
  });

  it.each([
    "INSERT INTO _pulsebase_changes (tbl) VALUES ('forged')",
    "DELETE FROM _pulsebase_changes",
    "SELECT * FROM _PULSEBASE_CHANGES",
    "DROP TABLE _pulsebase_changes",
    "UPDATE sqlite_sequence SET seq = 0",
    "INSERT INTO sqlite_sequence (name, seq) VALUES ('x', 1)",
    "SELECT count(*) FROM dbstat",
    "SELECT * FROM pragma_table_info('notes')",
    "PRAGMA writable_schema = 1",
    "PRAGMA journal_mode = OFF",
    "CREATE TRIGGER t1 AFTER INSERT ON notes BEGIN DELETE FROM notes; END",
    "CREATE TEMP TRIGGER t2 AFTER INSERT ON notes BEGIN DELETE FROM notes; END",
    "CREATE VIEW v1 AS SELECT 1",
    "CREATE TEMP VIEW v2 AS SELECT 1",
    "CREATE VIRTUAL TABLE f USING fts5(a)",
    "ATTACH DATABASE '/tmp/pb-attach.db' AS other",
    "SAVEPOINT s1",
    "ANALYZE",
    "SELECT load_extension('/tmp/x.so')",
    "SELECT fts3_tokenizer('simple')",
  ])("refuses %s", async (sql) => {
    const [r] = await run(sql);
    expect(r!.error).toMatch(/not authorized|prohibited|no such (table|function|module)/);
    healthy(file);
  });

  it("allows what the guard's prefixes imply, AUTOINCREMENT and temp tables included", async () => {
    for (const sql of [
      "CREATE TABLE auth_ok (id INTEGER PRIMARY KEY AUTOINCREMENT, v TEXT UNIQUE)",
      "CREATE INDEX auth_ok_v ON auth_ok (v)",
      "INSERT INTO auth_ok (v) VALUES ('x')",
      "UPDATE auth_ok SET v = 'y'",
      "ALTER TABLE auth_ok ADD COLUMN w TEXT",
      "ALTER TABLE auth_ok RENAME COLUMN w TO w2",
      "ALTER TABLE auth_ok DROP COLUMN w2",
      "SELECT name FROM sqlite_schema WHERE name = 'auth_ok'",
      "SELECT seq FROM sqlite_sequence WHERE name = 'auth_ok'",
      "SELECT count(*) FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 10) SELECT x FROM c)",
      "SELECT json_extract('{\"a\":1}', '$.a'), (SELECT count(*) FROM json_each('[1,2]'))",
      "CREATE TABLE temp.scratch AS SELECT 1 AS x",
      "DELETE FROM auth_ok",
      "DROP INDEX auth_ok_v",
      "DROP TABLE auth_ok",
    ]) {
      const [r] = await run(sql);
      expect(r!.error, sql).toBeUndefined();
    }
  });

  it("runs in defensive mode: the service's own statements cannot make the schema writable either", async () => {
    const r = await h.module.pool.run(
      {
        path: file,
        statements: [
          { sql: "PRAGMA writable_schema = 1", args: [], verb: "PRAGMA" },
          { sql: "UPDATE sqlite_schema SET sql = 'CREATE TABLE notes (x)' WHERE name = 'notes'", args: [], verb: "UPDATE" },
        ],
        transaction: false,
        mayUseTemp: false,
        maxRows: 100,
        maxBytes: 1 << 20,
        busyTimeoutMs: 1000,
        maxDatabaseBytes: 1 << 30,
        service: true,
      },
      dbId,
    );
    expect(r[1]!.error).toMatch(/may not be modified/);
    healthy(file);
    expect(rowsOf((await h.query(app, "SELECT v FROM notes WHERE id = ?", [1])).results[0])).toEqual([["a"]]);
  });
});

describe("the point reader's connection", () => {
  let dir: string;
  let path: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "pb-hostile-reader-"));
    path = join(dir, "r.db");
    const w = new DatabaseSync(path);
    w.exec("PRAGMA journal_mode = WAL; CREATE TABLE _pulsebase_changes (seq INTEGER PRIMARY KEY, tbl TEXT); INSERT INTO _pulsebase_changes VALUES (1, 'x')");
    w.close();
  });
  afterAll(async () => rm(dir, { recursive: true, force: true }));

  it("never serves a reserved table, even with a verdict that says it may", () => {
    const reader = new PointReader();
    try {
      const sql = "SELECT tbl FROM _pulsebase_changes WHERE seq = ?";
      const s: EngineStatement = { sql, args: [1], verb: "SELECT" };
      reader.learn(path, sql, { point: true, single: true, version: 1 });
      // the authorizer refuses to compile it: the statement goes to the engine (and its guard)
      expect(reader.tryRun(path, s, pointReadShape(splitStatements(sql)[0]!.tokens)!, 10, 1 << 20)).toBeUndefined();
    } finally {
      reader.closeAll();
    }
  });
});
