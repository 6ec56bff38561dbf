// Issue 15, point 5: one application cannot take an engine process's
// memory or the disk: values are capped (SQLITE_LIMIT_LENGTH), temp tables
// live under the same size cap as the database, an engine over its memory
// is stopped and replaced with the request answered in the envelope, and a
// WAL grown by a write (committed or killed) is cut back.
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { until } from "../../helpers/until.js";
import { failure } from "./errors.js";
import { createHarness, rowsOf, type Harness } from "./harness.js";

const series = (n: number) => `(WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < ${n}) SELECT value FROM s)`;
const rssMiB = (pid: number) => (Number(readFileSync(`/proc/${pid}/statm`, "latin1").split(" ")[1]) * 4096) / (1024 * 1024);
const walBytes = (file: string) => {
  try {
    return statSync(`${file}-wal`).size;
  } catch {
    return 0;
  }
};

let h: Harness;
let team: number;

beforeAll(async () => {
  h = await createHarness({
    engineProcesses: 1,
    limits: {
      queryTimeoutMs: 2500,
      maxDatabaseBytes: 8 * 1024 * 1024,
      maxEngineMemoryBytes: 256 * 1024 * 1024,
      walSizeLimitBytes: 1024 * 1024,
    },
  });
  team = await h.team();
});
afterAll(async () => h?.close());

async function appWithDb(): Promise<{ app: number; file: string }> {
  const app = await h.app(team);
  const id = await h.linkedDb(team, app);
  return { app, file: join(h.dataDir, (await h.module.manager.get(id)).filePath!) };
}

describe("values", () => {
  it("refuses a string or blob over 16 MiB as a statement error, and keeps the engine small", async () => {
    const { app } = await appWithDb();
    for (const sql of ["SELECT length(randomblob(1000000000))", "SELECT length(randomblob(20000000))", "SELECT length(zeroblob(16777217))", "SELECT length(printf('%.*c', 17000000, 'x'))"]) {
      const r = await h.query(app, sql);
      expect(r.results[0]!.error, sql).toMatch(/string or blob too big/);
    }
    expect(rowsOf((await h.query(app, "SELECT length(randomblob(1000000))")).results[0])).toEqual([[1000000]]);
    expect(rssMiB(h.module.pool.pids()[0]!)).toBeLessThan(200);
  });
});

describe("temp storage", () => {
  it("caps a temp table like the database itself (8 MiB here) instead of growing the engine", async () => {
    const { app } = await appWithDb();
    const pid = h.module.pool.pids()[0]!;
    const r = await h.query(app, `CREATE TABLE temp.big AS SELECT randomblob(1000000) AS b FROM ${series(200)}`);
    expect(r.results[0]!.error).toMatch(/database or disk is full/);
    expect(rssMiB(pid)).toBeLessThan(150);
    // small temp tables still work within one request
    const ok = await h.query(app, `CREATE TABLE temp.small AS SELECT value FROM ${series(10)}; SELECT count(*) FROM temp.small`);
    expect(rowsOf(ok.results[1])).toEqual([[10]]);
  });
});

describe("engine memory", () => {
  it("stops a request that takes the engine over its memory, answers 400 query_too_large, and serves the next requests", async () => {
    const { app } = await appWithDb();
    const other = await appWithDb();
    await h.query(other.app, "CREATE TABLE o (v TEXT); INSERT INTO o VALUES ('still here')");
    const before = h.module.pool.pids()[0];
    // one row of 30 values of 15 MB each (every value under the value cap)
    const wide = `SELECT ${Array.from({ length: 30 }, () => "randomblob(15000000)").join(", ")}`;
    const f = await failure(h.query(app, wide));
    expect(f).toMatchObject({ code: "query_too_large", http: 400 });
    expect(f.message).toMatch(/more than the engine's 256 MiB of memory/);
    expect(h.module.pool.pids()[0]).not.toBe(before);
    expect(rowsOf((await h.query(other.app, "SELECT v FROM o")).results[0])).toEqual([["still here"]]);
    expect(rowsOf((await h.query(app, "SELECT 1")).results[0])).toEqual([[1]]);
  });
});

describe("the WAL", () => {
  it("is checkpointed and truncated after a write is killed at the time limit", async () => {
    const { app, file } = await appWithDb();
    await h.query(app, "CREATE TABLE w (b BLOB)");
    // ~6 MB written in a transaction that then runs away (under the 8 MiB file cap)
    const f = await failure(
      h.batch(
        app,
        [
          { sql: `INSERT INTO w SELECT randomblob(20000) FROM ${series(300)}` },
          { sql: `SELECT count(*) FROM ${series(100000)} a, ${series(100000)} b` },
        ],
        true,
      ),
    );
    expect(f.code).toBe("timeout");
    await until(async () => (walBytes(file) <= 1024 * 1024 ? true : undefined), 10_000);
    expect(rowsOf((await h.query(app, "SELECT count(*) FROM w")).results[0])).toEqual([[0]]);
  });

  it("is cut back to journal_size_limit after a committed big write", async () => {
    const { app, file } = await appWithDb();
    await h.query(app, "CREATE TABLE w (b BLOB)");
    await h.query(app, `INSERT INTO w SELECT randomblob(20000) FROM ${series(300)}`);
    expect(walBytes(file)).toBeGreaterThan(4 * 1024 * 1024);
    // the next writes find the log checkpointed and start it again, shorter
    for (let i = 0; i < 3; i++) await h.query(app, "DELETE FROM w WHERE rowid = ?", [i + 1]);
    expect(walBytes(file)).toBeLessThanOrEqual(1024 * 1024 + 64 * 1024);
  });
});
