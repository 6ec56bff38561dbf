// Point reads are answered in the service process. They must give the same
// answers as the engine path, never run a statement whose cost is not
// bounded by the rows it returns, and keep working while the engine
// processes are busy.
import { mkdtemp, readdir, readlink, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { DatabaseSync } from "node:sqlite";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { bindable } from "../../../src/infra/libsql/engine-values.js";
import { classifyPoint, type PointShape } from "../../../src/infra/libsql/point-plan.js";
import { PointReader, pointReadShape } from "../../../src/infra/libsql/point-reader.js";
import { splitStatements } from "../../../src/infra/libsql/sql-splitter.js";
import { failure } from "./errors.js";
import { createHarness, rowsOf, type Harness } from "./harness.js";
import { until } from "../../helpers/until.js";

// A pass-through node:sqlite whose prepare can run a hook first: a write
// made by another connection exactly while the reader classifies a statement
// (the hook runs before preparing the first statement whose text includes
// `on`). The writers here use the same library as the reader: one SQLite
// library per process and file (see point-reader.ts).
const hooks = vi.hoisted(() => ({ beforePlan: undefined as (() => void) | undefined, on: "EXPLAIN QUERY PLAN" }));
vi.mock("node:sqlite", async (importOriginal) => {
  const actual = (await importOriginal()) as typeof import("node:sqlite");
  class Hooked extends actual.DatabaseSync {
    override prepare(sql: string, ...rest: unknown[]) {
      if (sql.includes(hooks.on) && hooks.beforePlan) {
        const f = hooks.beforePlan;
        hooks.beforePlan = undefined;
        f();
      }
      return (super.prepare as (s: string, ...r: unknown[]) => ReturnType<typeof actual.DatabaseSync.prototype.prepare>)(sql, ...rest);
    }
  }
  return { ...actual, DatabaseSync: Hooked };
});

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

const shape = (sql: string) => pointReadShape(splitStatements(sql)[0]!.tokens);

/**
 * What the query runner does: the reader first; when it has no verdict for
 * the statement, the engine runs it and makes one (point-plan.ts, on its
 * own connection), and the reader keeps it for the next request.
 */
function readVia(reader: PointReader, path: string, sql: string, args: (number | string | null)[], sh: PointShape, maxRows: number, maxBytes: number) {
  const s = { sql, args, verb: "SELECT" };
  const r = reader.tryRun(path, s, sh, maxRows, maxBytes);
  if (r !== undefined || !reader.wantsVerdict(path, sql)) return r;
  const engine = new DatabaseSync(path);
  try {
    reader.learn(path, sql, classifyPoint(engine, sh, bindable(args), 64 * 1024));
  } finally {
    engine.close();
  }
  return reader.tryRun(path, s, sh, maxRows, maxBytes);
}

describe("the point-read shape", () => {
  it.each([
    ["SELECT id, name FROM kv WHERE id = ?", 1],
    ["select * from kv where id = :id", 1],
    ['SELECT "k"."name" FROM "k" WHERE a = ? AND b = 3 LIMIT 1', 2],
    ["SELECT name FROM kv WHERE email = 'a@b.c' LIMIT ?", 1],
    ["SELECT name FROM kv /* note */ WHERE id = ? -- trailing", 1],
  ])("recognises %s", (sql, conditions) => {
    expect(shape(sql)?.conditions).toBe(conditions);
  });

  it("keeps the statement up to its LIMIT without comments, and the LIMIT value as written", () => {
    expect(shape("SELECT name FROM kv /* note */ WHERE id = ? -- trailing")).toMatchObject({ head: "SELECT name FROM kv WHERE id = ?", limit: undefined });
    expect(shape('SELECT "k"."name" FROM "k" WHERE a = ? AND b = \'x;y\' LIMIT ?2')).toMatchObject({ head: 'SELECT "k" . "name" FROM "k" WHERE a = ? AND b = \'x;y\'', limit: "?2" });
    // named parameters take SQLite's numbers (values arrive as a positional list)
    expect(shape("SELECT name FROM kv WHERE id = :id AND cat = @c LIMIT :id")).toMatchObject({ head: "SELECT name FROM kv WHERE id = ?1 AND cat = ?2", limit: "?1" });
    expect(shape("SELECT name FROM kv WHERE a = ?3 AND b = $b")).toMatchObject({ head: "SELECT name FROM kv WHERE a = ?3 AND b = ?4" });
  });

  it.each([
    "SELECT count(*) FROM kv WHERE id = ?",
    "SELECT id FROM kv WHERE id = ? OR id = ?",
    "SELECT id FROM kv WHERE id > ?",
    "SELECT id FROM kv WHERE id = (SELECT max(id) FROM kv)",
    "SELECT id FROM kv WHERE id IN (1, 2)",
    "SELECT id FROM kv, other WHERE kv.id = ?",
    "SELECT id FROM kv JOIN other USING (id) WHERE id = ?",
    "SELECT id FROM kv WHERE id = ? ORDER BY name",
    "SELECT id FROM kv WHERE id = ? COLLATE NOCASE",
    "SELECT DISTINCT id FROM kv WHERE id = ?",
    "SELECT id + 1 FROM kv WHERE id = ?",
    "SELECT id FROM kv",
    "SELECT id FROM kv WHERE id = ? LIMIT 1 OFFSET 5",
    "WITH c AS (SELECT 1) SELECT id FROM kv WHERE id = ?",
    "DELETE FROM kv WHERE id = ?",
    "SELECT id FROM kv NOT INDEXED WHERE id = ?",
    "SELECT id FROM kv INDEXED BY kv_cat WHERE cat = ?",
    "SELECT id FROM main.kv WHERE id = ?",
    "SELECT id FROM kv AS k WHERE id = ?",
  ])("leaves %s to the engine", (sql) => {
    expect(shape(sql)).toBeUndefined();
  });
});

describe("PointReader on a file", () => {
  let dir: string;
  let path: string;
  let writer: DatabaseSync;
  const reader = new PointReader();
  const read = (sql: string, args: (number | string | null)[] = [], maxRows = 100, maxBytes = 1 << 20) =>
    readVia(reader, path, sql, args, shape(sql) ?? { table: "", conditions: -1, head: sql, limit: undefined }, maxRows, maxBytes);

  // (node:sqlite has no generate_series: rows come from a recursive CTE)
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "pb-point-"));
    path = join(dir, "db.sqlite");
    writer = new DatabaseSync(path);
    writer.exec("PRAGMA journal_mode = WAL");
    writer.exec(`
      CREATE TABLE kv (id INTEGER PRIMARY KEY, name TEXT NOT NULL, cat TEXT, big INTEGER, data BLOB, f REAL);
      CREATE INDEX kv_cat ON kv (cat);
      INSERT INTO kv WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < 300) SELECT value, 'n' || value, 'c' || (value % 3), 9007199254740993, x'00ff10', value / 4.0 FROM s;
      CREATE TABLE g (id INTEGER PRIMARY KEY, v TEXT, up TEXT AS (upper(v)));
      INSERT INTO g (id, v) VALUES (1, 'x');
      CREATE VIEW kv_view AS SELECT id, name FROM kv;
    `);
  });
  afterAll(async () => {
    reader.closeAll();
    writer.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("answers a primary-key read with the engine's value encodings", () => {
    const r = read("SELECT id, name, big, data, f FROM kv WHERE id = ?", [7]);
    expect(r).toEqual({
      columns: ["id", "name", "big", "data", "f"],
      rows: [[7, "n7", "9007199254740993", "AP8Q", 1.75]],
      rowsRead: 1,
      rowsWritten: 0,
    });
    expect(read("SELECT name FROM kv WHERE id = ?", [100000])?.rows).toEqual([]);
  });

  it("serves reads with named parameters (bound as the positional list the service builds)", () => {
    expect(read("SELECT name FROM kv WHERE id = :id", [7])?.rows).toEqual([["n7"]]);
    expect(read("SELECT id FROM kv WHERE cat = @c LIMIT $n", ["c1", 2])?.rows).toEqual([[1], [4]]);
  });

  it("answers an index equality read and stops at the row limit", () => {
    expect(read("SELECT id FROM kv WHERE cat = ? LIMIT 2", ["c1"])?.rows).toEqual([[1], [4]]);
    const big = read("SELECT id FROM kv WHERE cat = ?", ["c1"], 50);
    expect(big?.error).toMatch(/more than 50 rows/);
  });

  it("leaves statements whose cost is not bounded by their rows to the engine", () => {
    // no index on name: a full scan
    expect(read("SELECT id FROM kv WHERE name = ?", ["n5"])).toBeUndefined();
    // the index answers cat only; f would be filtered row by row
    expect(read("SELECT id FROM kv WHERE cat = ? AND f = ?", ["c1", 1])).toBeUndefined();
    // a view, a generated column, a table-valued function
    expect(read("SELECT name FROM kv_view WHERE id = ?", [1])).toBeUndefined();
    expect(read("SELECT v FROM g WHERE id = ?", [1])).toBeUndefined();
    expect(read("SELECT value FROM generate_series WHERE value = ?", [1])).toBeUndefined();
    // not compilable: the engine reports the error
    expect(read("SELECT nope FROM kv WHERE id = ?", [1])).toBeUndefined();
  });

  it("sees committed writes at once and follows schema changes", () => {
    writer.prepare("UPDATE kv SET name = 'changed' WHERE id = 3").run();
    expect(read("SELECT name FROM kv WHERE id = ?", [3])?.rows).toEqual([["changed"]]);
    expect(read("SELECT id FROM kv WHERE cat = ? LIMIT 1", ["c2"])?.rows).toEqual([[2]]);
    // without the index the same text is a scan: no longer served here
    writer.exec("DROP INDEX kv_cat");
    expect(read("SELECT id FROM kv WHERE cat = ? LIMIT 1", ["c2"])).toBeUndefined();
    writer.exec("CREATE INDEX kv_cat ON kv (cat)");
    expect(read("SELECT id FROM kv WHERE cat = ? LIMIT 1", ["c2"])?.rows).toEqual([[2]]);
  });

  it("never serves a plan that depends on the bound values (partial index)", () => {
    writer.exec("CREATE TABLE pi (id INTEGER PRIMARY KEY, cat TEXT, name TEXT); CREATE INDEX pi_c1 ON pi (cat, name) WHERE cat = 'c1'");
    writer.exec("INSERT INTO pi WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < 300) SELECT value, 'c' || (value % 3), 'n' || value FROM s");
    // with 'c1' bound SQLite plans a SEARCH of the partial index; with 'c2'
    // the same text is re-planned as a full scan
    const sql = "SELECT id FROM pi WHERE cat = ? AND name = ?";
    expect(read(sql, ["c1", "n3"])).toBeUndefined();
    expect(read(sql, ["c2", "n2"])).toBeUndefined();
  });

  it("does not use a verdict whose plan was made on a schema committed after the read's snapshot", () => {
    writer.exec("CREATE TABLE late (id INTEGER PRIMARY KEY, tag TEXT); INSERT INTO late WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < 300) SELECT value, 't' || value FROM s");
    const sql = "SELECT id FROM late WHERE tag = ?";
    // the index appears between the read's snapshot and the plan check: the
    // read's own statement is compiled on the old schema (a full scan)
    hooks.on = "sqlite_stat4";
    hooks.beforePlan = () => writer.exec("CREATE INDEX late_tag ON late (tag)");
    expect(read(sql, ["t5"])).toBeUndefined();
    expect(hooks.beforePlan).toBeUndefined();
    // the next read's snapshot has the index
    expect(read(sql, ["t5"])?.rows).toEqual([[5]]);
  });

  it("never scans through a plan whose index was dropped: the read finds nothing before it falls back", () => {
    writer.exec("CREATE TABLE big (id INTEGER PRIMARY KEY, tag TEXT); INSERT INTO big WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < 1000000) SELECT value, 't' || value FROM s");
    const sql = "SELECT id FROM big WHERE tag = ?";
    // CPU time of this thread, not wall time: a shared machine deschedules
    // the process, which wall time would count. A relative cost (no
    // counter of rows examined is reachable through node:sqlite): the
    // guarded read against a full scan of the same million rows, about a
    // thousand times apart, asserted at four.
    const ms = (f: () => void) => {
      const c0 = process.threadCpuUsage();
      f();
      const c = process.threadCpuUsage(c0);
      return (c.user + c.system) / 1000;
    };
    const guarded: number[] = [];
    for (let k = 0; k < 3; k++) {
      writer.exec("CREATE INDEX big_tag ON big (tag)");
      expect(read(sql, ["t999999"])?.rows).toEqual([[999999]]); // a point read, its verdict kept
      writer.exec("DROP INDEX big_tag");
      // the kept statement now compiles to a full scan: it must read nothing
      guarded.push(ms(() => expect(read(sql, ["t1000000"])).toBeUndefined()));
      expect(read(sql, ["t1000000"])).toBeUndefined(); // re-checked: a scan, left to the engine
    }
    const scan = new DatabaseSync(path);
    const st = scan.prepare(sql);
    const scans = [0, 1, 2].map(() => ms(() => expect(st.all("t1000000")).toHaveLength(1)));
    scan.close();
    // a full scan of a million rows against a failed schema check
    expect(Math.min(...guarded)).toBeLessThan(Math.min(...scans) / 4);
  });

  it("leaves no read snapshot behind: the WAL checkpoints right after a first (classifying) read", () => {
    const file = join(dir, "ck.sqlite");
    const w = new DatabaseSync(file);
    const own = new PointReader();
    try {
      w.exec("PRAGMA journal_mode = WAL");
      w.exec("CREATE TABLE ck (id INTEGER PRIMARY KEY, v TEXT); INSERT INTO ck VALUES (1, 'a')");
      const checkpoint = () => {
        w.prepare("UPDATE ck SET v = v || 'x' WHERE id = 1").run();
        const st = w.prepare("PRAGMA wal_checkpoint(PASSIVE)");
        st.setReturnArrays(true);
        return st.get() as unknown as number[];
      };
      checkpoint();
      const sql = "SELECT v FROM ck WHERE id = ?";
      expect(readVia(own, file, sql, [1], shape(sql)!, 100, 1 << 20)?.rows).toEqual([["ax"]]);
      const [busy, log, done] = checkpoint();
      expect(busy).toBe(0);
      expect(done).toBe(log); // every frame copied back: no reader holds an old snapshot
    } finally {
      own.closeAll();
      w.close();
    }
  });

  it("does not serve a file that does not exist, and never creates it", async () => {
    const missing = join(dir, "missing.sqlite");
    expect(reader.tryRun(missing, { sql: "SELECT id FROM kv WHERE id = ?", args: [1], verb: "SELECT" }, shape("SELECT id FROM kv WHERE id = ?")!, 10, 1000)).toBeUndefined();
    await expect(import("node:fs/promises").then((fs) => fs.stat(missing))).rejects.toThrow();
  });
});

describe("point reads through the service", () => {
  let h: Harness;
  let app: number;

  beforeAll(async () => {
    h = await createHarness({ limits: { queryTimeoutMs: 1500, maxRows: 50 }, engineProcesses: 2 });
    const team = await h.team();
    app = await h.app(team);
    await h.linkedDb(team, app);
    await h.query(app, "CREATE TABLE kv (id INTEGER PRIMARY KEY, name TEXT)");
    await h.query(app, "INSERT INTO kv VALUES (1, 'one'), (2, 'two')");
  });
  afterAll(async () => h?.close());

  it("reads its own writes and reports the same errors as the engine path", async () => {
    await h.query(app, "UPDATE kv SET name = 'uno' WHERE id = ?", [1]);
    const r = await h.query(app, "SELECT id, name FROM kv WHERE id = ?", [1]);
    expect(r.results[0]!.columns).toEqual(["id", "name"]);
    expect(rowsOf(r.results[0])).toEqual([[1, "uno"]]);
    const bad = await h.query(app, "SELECT missing FROM kv WHERE id = ?", [1]);
    expect(bad.results[0]!.error).toMatch(/no such column/);
    expect((await failure(h.query(app, "SELECT id FROM kv WHERE id = ?", [1, 2]))).http).toBe(422);
  });

  it("sees a commit made elsewhere after a read stopped at the row limit", async () => {
    const team = await h.team();
    const other = await h.app(team);
    const id = await h.linkedDb(team, other);
    await h.query(other, "CREATE TABLE many (id INTEGER PRIMARY KEY, tag TEXT)");
    await h.query(other, "INSERT INTO many SELECT value, 't' FROM (WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < 120) SELECT value FROM s)");
    const tooMany = await h.query(other, "SELECT id FROM many WHERE tag = 't'");
    expect(tooMany.results[0]!.error).toMatch(/more than 50 rows/);
    // a commit through another connection (another server process, a tool)
    const direct = new DatabaseSync(join(h.dataDir, (await h.module.manager.get(id)).filePath!));
    try {
      direct.prepare("UPDATE many SET tag = 'u' WHERE id = 7").run();
    } finally {
      direct.close();
    }
    const after = await h.query(other, "SELECT count(*) FROM many WHERE tag = 'u'");
    expect(rowsOf(after.results[0])).toEqual([[1]]);
    expect(rowsOf((await h.query(other, "SELECT tag FROM many WHERE id = ?", [7])).results[0])).toEqual([["u"]]);
  });

  it("answers point reads while every engine process is busy with a runaway query", async () => {
    // its first run is on an engine, which checks its plan for the reader
    expect(rowsOf((await h.query(app, "SELECT name FROM kv WHERE id = ?", [1])).results[0])).toEqual([["uno"]]);
    const crossJoin = "SELECT count(*) FROM (WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < 100000) SELECT value FROM s) a, (WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < 100000) SELECT value FROM s) b";
    let slowEnded = 0;
    const slow = [failure(h.query(app, crossJoin)), failure(h.query(app, crossJoin))].map((p) => p.finally(() => slowEnded++));
    // both reached the pool: one running (the application's share), one queued
    await until(async () => {
      const o = h.module.pool.stats().owners.find((x) => x.owner === app);
      return o && o.running >= 1 && o.running + o.queued === 2 ? true : undefined;
    }, 10_000, 10);
    const r = await h.query(app, "SELECT name FROM kv WHERE id = ?", [2]);
    expect(rowsOf(r.results[0])).toEqual([["two"]]);
    // answered while both runaways still hold the engines
    expect(slowEnded).toBe(0);
    // each runaway is stopped at the time-out, or (on a loaded machine, its
    // engine slow to start) refused after its queue wait: never answered
    const codes = (await Promise.all(slow)).map((f) => f.code);
    expect(codes).toContain("timeout");
    for (const c of codes) expect(["timeout", "database_unavailable"]).toContain(c);
  });

  it("closes its connection when the database is deleted, so the file's space is freed", async () => {
    const team = await h.team();
    const other = await h.app(team);
    const id = await h.linkedDb(team, other);
    await h.query(other, "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT); INSERT INTO t VALUES (1, 'a')");
    expect(rowsOf((await h.query(other, "SELECT v FROM t WHERE id = ?", [1])).results[0])).toEqual([["a"]]);
    const file = join(h.dataDir, (await h.module.manager.get(id)).filePath!);
    const openHere = async () => {
      const fds = await readdir("/proc/self/fd");
      const targets = await Promise.all(fds.map((fd) => readlink(`/proc/self/fd/${fd}`).catch(() => "")));
      return targets.filter((t) => t.startsWith(file));
    };
    expect((await openHere()).length).toBeGreaterThan(0);
    await h.module.manager.unlink(id, other);
    await h.module.manager.delete(id);
    // (node:sqlite closes at once; gc() would also release statements a
    // binding kept alive)
    gc();
    await until(async () => ((await openHere()).length === 0 ? true : undefined), 10_000, 20);
    expect(await openHere()).toEqual([]);
    await expect(stat(file)).rejects.toThrow();
  });
});
