// Issue 15, point 4 (statement analysis): tokenizing and checking SQL costs
// time that grows with its length, and a batch may carry 100 strings of
// 100,000 characters. Long new SQL is analysed on a worker thread: the
// service thread is not held while it is done, and the answers are the same.
import { monitorEventLoopDelay } from "node:perf_hooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkStatement } from "../../../src/infra/libsql/sql-guard.js";
import { paramSlots } from "../../../src/infra/libsql/sql-params.js";
import { splitStatements } from "../../../src/infra/libsql/sql-splitter.js";
import { failure } from "./errors.js";
import { createHarness, rowsOf, type Harness } from "./harness.js";

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
    // what analysing one of them here costs now (the baseline)
    const t0 = performance.now();
    for (const s of splitStatements(dense(1000))) {
      paramSlots(s.tokens);
      checkStatement(s.sql, s.tokens);
    }
    const oneMs = performance.now() - t0;
    const loop = monitorEventLoopDelay({ resolution: 1 });
    loop.enable();
    const c0 = process.threadCpuUsage();
    let pending: Promise<unknown>;
    try {
      pending = h.module.runner.batch(app, statements, false);
    } catch (e) {
      pending = Promise.reject(e); // a request-shape error found at once
    }
    const c = process.threadCpuUsage(c0);
    const f = await failure(pending);
    loop.disable();
    // the params do not match the statements: found by the analysis, answered 422
    expect(f).toMatchObject({ http: 422, fields: { "statements.0.params": [expect.stringMatching(/49990 parameter/)] } });
    // what is left on this thread: handing 2 MB of strings to the worker
    // (a few ms; inline it would be 20 x oneMs)
    expect((c.user + c.system) / 1000).toBeLessThan(Math.max(2 * oneMs, 5));
    // inline, the 20 analyses would hold the loop for 20 x oneMs
    expect(loop.max / 1e6).toBeLessThan(Math.max(10 * oneMs, 50));
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
