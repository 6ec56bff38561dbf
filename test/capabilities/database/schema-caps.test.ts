// Issue 15, point 4: a schema is loaded (parsed in full) by every
// connection that compiles a statement after it changed, the in-process
// point reader included, on the thread every application shares. Its size
// is capped (columns per table, objects, bytes of definitions), a change
// over a cap is a statement error and is undone, and the reader never loads
// a schema over the caps (one made before them) on that thread.
import { DatabaseSync } from "node:sqlite";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createHarness, rowsOf, type Harness } from "./harness.js";

// node:sqlite on this (the service) thread, noting what it compiles while
// `on`: compiling a statement loads the schema (the engine processes, other
// processes, are not seen). A PRAGMA that reads the file header does not.
const compiled = vi.hoisted(() => ({ on: false, sql: [] as string[] }));
vi.mock("node:sqlite", async (importOriginal) => {
  const actual = (await importOriginal()) as typeof import("node:sqlite");
  class Noting extends actual.DatabaseSync {
    override prepare(sql: string, ...rest: unknown[]) {
      if (compiled.on) compiled.sql.push(sql);
      return (super.prepare as (s: string, ...r: unknown[]) => ReturnType<typeof actual.DatabaseSync.prototype.prepare>)(sql, ...rest);
    }
    override exec(sql: string) {
      if (compiled.on) compiled.sql.push(sql);
      return super.exec(sql);
    }
  }
  return { ...actual, DatabaseSync: Noting };
});
const HEADER_ONLY = /^PRAGMA (schema_version|query_only = ON|trusted_schema = OFF|busy_timeout = 0)$/;

const cols = (n: number, from = 0) => Array.from({ length: n }, (_, i) => `c${i + from} INTEGER DEFAULT ${i} CHECK (c${i + from} >= 0)`).join(", ");

describe("schema caps (small caps for the test)", () => {
  let h: Harness;
  let app: number;
  const caps = { maxColumnsPerTable: 8, maxSchemaObjects: 6, maxSchemaBytes: 2048 };

  beforeAll(async () => {
    h = await createHarness({ limits: caps });
    const team = await h.team();
    app = await h.app(team);
    await h.linkedDb(team, app);
  });
  afterAll(async () => h?.close());

  const tables = async () =>
    rowsOf((await h.query(app, "SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")).results[0]).map((r) => r[0]);

  it("refuses a table with more columns than the cap, as a statement error, and creates nothing", async () => {
    const res = await h.query(app, `CREATE TABLE wide (id INTEGER PRIMARY KEY, ${cols(8)})`);
    expect(res.results[0]!.error).toMatch(/too many columns: a table may have at most 8 columns \(wide would have 9\)/);
    expect(await tables()).not.toContain("wide");
    const ok = await h.query(app, `CREATE TABLE narrow (id INTEGER PRIMARY KEY, ${cols(7)})`);
    expect(ok.results[0]!.error).toBeUndefined();
  });

  it("refuses ALTER TABLE ADD COLUMN past the column cap and keeps the table as it was", async () => {
    const res = await h.query(app, "ALTER TABLE narrow ADD COLUMN extra TEXT");
    expect(res.results[0]!.error).toMatch(/too many columns/);
    const info = await h.query(app, "SELECT * FROM narrow");
    expect(info.results[0]!.columns).toHaveLength(8);
  });

  it("refuses schema definitions over the byte cap", async () => {
    const long = `CREATE TABLE verbose (id INTEGER PRIMARY KEY, note TEXT CHECK (length(note) < 100 ${"AND note <> 'x' ".repeat(120)}))`;
    const res = await h.query(app, long);
    expect(res.results[0]!.error).toMatch(/schema too large: the database schema may hold at most 2048 bytes/);
    expect(await tables()).not.toContain("verbose");
  });

  it("refuses objects over the cap, and a failing change rolls its whole transaction batch back", async () => {
    const res = await h.batch(
      app,
      [
        { sql: "CREATE TABLE o1 (a)" },
        { sql: "CREATE TABLE o2 (a)" },
        { sql: "CREATE INDEX o2_a ON o2 (a)" },
        { sql: "CREATE TABLE o3 (a)" },
        { sql: "CREATE TABLE o4 (a)" },
        { sql: "CREATE TABLE o5 (a)" },
      ],
      true,
    );
    const last = res.results[res.results.length - 1]!;
    expect(last.error).toMatch(/schema too large: the database schema may hold at most 6 tables, indexes, views and triggers/);
    expect(await tables()).toEqual(["narrow"]);
    // without a transaction each statement stands alone: the ones under the cap stay
    const loose = await h.query(app, "CREATE TABLE p1 (a); CREATE TABLE p2 (a); CREATE TABLE p3 (a); CREATE TABLE p4 (a); CREATE TABLE p5 (a); CREATE TABLE p6 (a)");
    expect(loose.results.map((r) => r.error === undefined)).toEqual([true, true, true, true, true, false]);
    // dropping is always allowed
    expect((await h.query(app, "DROP TABLE p5")).results[0]!.error).toBeUndefined();
    expect((await h.query(app, "CREATE TABLE p6 (a)")).results[0]!.error).toBeUndefined();
  });
});

describe("a schema made before the caps (4 MB, 60 tables of 1,500 columns)", () => {
  let h: Harness;
  let app: number;
  let path: string;

  beforeAll(async () => {
    h = await createHarness({ engineProcesses: 2 });
    const team = await h.team();
    app = await h.app(team);
    const id = await h.linkedDb(team, app);
    path = join(h.dataDir, (await h.module.manager.get(id)).filePath!);
    // written straight into the file, as an older version of the service would have let it be
    const db = new DatabaseSync(path);
    db.exec("BEGIN");
    db.exec("CREATE TABLE kv (id INTEGER PRIMARY KEY, v TEXT); INSERT INTO kv VALUES (1, 'one')");
    for (let t = 0; t < 60; t++) db.exec(`CREATE TABLE w${t} (id INTEGER PRIMARY KEY, ${cols(1500)})`);
    for (let t = 0; t < 40; t++) db.exec(`CREATE TABLE filler${t} (a)`);
    db.exec("COMMIT");
    const bytes = Number((db.prepare("SELECT sum(length(sql)) AS b FROM sqlite_schema").get() as { b: number }).b);
    db.close();
    expect(bytes).toBeGreaterThan(4_000_000);
  }, 60_000);
  afterAll(async () => h?.close());

  it("is never loaded on the service thread: schema changes alternated with point reads do not block the event loop", async () => {
    // what loading this schema costs on this machine now (the baseline)
    const t0 = performance.now();
    const probe = new DatabaseSync(path, { readOnly: true });
    probe.prepare("SELECT v FROM kv WHERE id = 1").get();
    probe.close();
    const parseMs = performance.now() - t0;
    const read = () => h.query(app, "SELECT v FROM kv WHERE id = ?", [1]);
    expect(rowsOf((await read()).results[0])).toEqual([["one"]]);
    const altered: (string | undefined)[] = [];
    compiled.on = true;
    for (let i = 0; i < 12; i++) {
      // the schema version moves (a DROP is always allowed; an ADD COLUMN is over the caps)
      expect((await h.query(app, `DROP TABLE filler${i}`)).results[0]!.error).toBeUndefined();
      altered.push((await h.query(app, `ALTER TABLE w${i} ADD COLUMN more${i} TEXT`)).results[0]!.error);
      const r = h.module.runner.queryNow(app, { sql: "SELECT v FROM kv WHERE id = ?", params: [1] });
      expect((await r)[0]!.rows).toEqual([["one"]]);
    }
    compiled.on = false;
    // the schema is costly to load (a lower bound: load only makes it larger)
    expect(parseMs).toBeGreaterThan(40);
    // nothing that loads the schema was compiled on this thread: the point
    // reads went to the engines (a load here would hold every application
    // for parseMs, and there would be 12)
    expect(compiled.sql.filter((q) => !HEADER_ONLY.test(q))).toEqual([]);
    for (const e of altered) expect(e).toMatch(/schema too large|too many columns/);
  }, 60_000);
});
