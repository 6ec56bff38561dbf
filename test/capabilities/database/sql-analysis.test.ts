// Issue 15, point 4 (statement analysis): tokenizing and checking SQL costs
// time that grows with its length, and a batch may carry 100 strings of
// 100,000 characters. Long new SQL is analysed on a worker thread: the
// service thread is not held while it is done, and the answers are the same.
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { failure } from "./errors.js";
import { createHarness, rowsOf, type Harness } from "./harness.js";

// The splitter on this (the service) thread, noting the length of each
// string it is given: every analysis starts with it. The worker thread
// loads its own copy (Node's type stripping), which is not seen here.
const split = vi.hoisted(() => ({ lengths: [] as number[] }));
vi.mock("../../../src/infra/libsql/sql-splitter.js", async (importOriginal) => {
  const actual = (await importOriginal()) as typeof import("../../../src/infra/libsql/sql-splitter.js");
  return {
    ...actual,
    splitStatements: (sql: string, ...rest: unknown[]) => {
      split.lengths.push(sql.length);
      return (actual.splitStatements as (s: string, ...r: unknown[]) => ReturnType<typeof actual.splitStatements>)(sql, ...rest);
    },
  };
});

let h: Harness;
let app: number;

beforeAll(async () => {
  h = await createHarness();
  const team = await h.team();
  app = await h.app(team);
  await h.linkedDb(team, app);
  await h.query(app, "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)");
});
afterAll(async () => h?.close());

/** A 100,000-character statement of one-character tokens, different for each n. */
const dense = (n: number) => `SELECT ${n}${",?".repeat(49_990)}`.slice(0, 100_000);

describe("long SQL", () => {
  it("is analysed off the service thread: a batch of 20 x 100 KB holds it for no more than a moment", async () => {
    // (the first long request starts the worker thread)
    await failure(Promise.resolve().then(() => h.module.runner.batch(app, [{ sql: dense(-1) }], false)));
    const statements = Array.from({ length: 20 }, (_, i) => ({ sql: dense(i) }));
    // (the splitter is seen here: a short statement is analysed on this thread)
    split.lengths = [];
    await h.query(app, "SELECT 1");
    expect(split.lengths).toContain("SELECT 1".length);
    split.lengths = [];
    let pending: Promise<unknown>;
    try {
      pending = h.module.runner.batch(app, statements, false);
    } catch (e) {
      pending = Promise.reject(e); // a request-shape error found at once
    }
    const f = await failure(pending);
    // the params do not match the statements: found by the analysis, answered 422
    expect(f).toMatchObject({ http: 422, fields: { "statements.0.params": [expect.stringMatching(/49990 parameter/)] } });
    // what is left on this thread is handing 2 MB of strings to the worker:
    // none of the 20 long statements was analysed here (inline, each would
    // hold every application for the time of a 100 KB analysis)
    const long = new Set(statements.map((x) => x.sql.length));
    expect(split.lengths.filter((n) => long.has(n))).toEqual([]);
  }, 60_000);

  it("gives the same answers as short SQL: results, guard refusals, named parameters", async () => {
    const pad = ` /* ${"x".repeat(20_000)} */`;
    const ok = await h.query(app, `INSERT INTO t (id, v) VALUES (:id, :v)${pad}`, { id: 1, v: "one" });
    expect(ok.results[0]!.error).toBeUndefined();
    expect(rowsOf((await h.query(app, `SELECT v FROM t WHERE id = ?${pad}`, [1])).results[0])).toEqual([["one"]]);
    expect(await failure(h.query(app, `SELECT sql FROM sqlite_stmt${pad}`))).toMatchObject({ code: "forbidden_query", http: 403 });
    const batch = await h.batch(app, [{ sql: `SELECT 1${pad}` }, { sql: `SELECT 2 -- ${"y".repeat(10_000)}` }], true);
    expect(batch.results.map((r) => rowsOf(r))).toEqual([[[1]], [[2]]]);
  });
});
