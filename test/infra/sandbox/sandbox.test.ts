// The sandbox on its own: handler contract, isolation, hostile code, limits,
// warm reuse and concurrency, with a real libSQL database behind `db`.
import { afterAll, describe, expect, it } from "vitest";
import { createSandbox, CompileError } from "../../../src/infra/sandbox/sandbox.js";
import type { RunInput, RunTarget } from "../../../src/infra/sandbox/types.js";
import { dbCapability } from "../../../src/capabilities/database/function-db.js";
import { createTestFunctionDb } from "../../capabilities/functions/libsql-function-db.js";
import { until } from "../../helpers/until.js";

const fdb = createTestFunctionDb();
const sandbox = createSandbox({
  capabilities: [dbCapability(fdb)],
  limits: { maxIsolates: 16, isolatesPerVersion: 4, maxResponseBytes: 64 * 1024, maxLogChars: 2000, maxLogLineChars: 500 },
});
afterAll(() => {
  sandbox.close();
  fdb.close();
});

let nextVersion = 1;
function target(code: string, over: Partial<RunTarget> = {}): RunTarget {
  return { versionId: nextVersion++, appId: 1, code, memoryMb: 32, timeoutMs: 1000, ...over };
}
function input(over: Partial<RunInput> = {}): RunInput {
  return { req: { method: "GET", slug: "s", query: {}, headers: {}, body: null }, consumer: { id: 7 }, event: null, env: {}, trigger: "http", requestId: "r1", ...over };
}

describe("sandbox", () => {
  it("runs the default export with req and ctx and returns the shaped parts", async () => {
    const t = target(`export default async function (req, ctx) {
      console.log("hello", { a: 1 }); console.warn("careful");
      return { status: 201, headers: { "x-a": 1 }, body: { m: req.method, c: ctx.consumer.id, s: ctx.env.SECRET, t: ctx.trigger } };
    }`);
    const r = await sandbox.run(t, input({ env: { SECRET: "s3" } }));
    expect(r.outcome).toBe("ok");
    expect(r.response).toEqual({ status: 201, headers: [["x-a", "1"]], body: JSON.stringify({ m: "GET", c: 7, s: "s3", t: "http" }), text: false });
    expect(r.logs).toEqual([{ level: "log", message: 'hello {"a":1}' }, { level: "warn", message: "careful" }]);
    expect(r.coldStart).toBe(true);
    expect(r.memoryBytes).toBeGreaterThan(0);
  });

  it("reuses a warm isolate; globals persist within one version only", async () => {
    const code = `let n = 0; export default function () { globalThis.hits = (globalThis.hits || 0) + 1; return ++n; }`;
    const t = target(code);
    const a = await sandbox.run(t, input());
    const b = await sandbox.run(t, input());
    expect(a.response?.body).toBe("1");
    expect(b.response?.body).toBe("2");
    expect(b.coldStart).toBe(false);
    const other = await sandbox.run(target(`export default () => typeof globalThis.hits`), input());
    expect(other.response?.body).toBe(JSON.stringify("undefined"));
  });

  it("a warm quick run answers in the call (no promise) and frees its isolate; a run that waits answers later", async () => {
    const t = target(`export default async (req) => ({ n: req.body })`);
    await sandbox.run(t, input({ req: { body: 0 } })); // cold: creates the isolate
    const warm = sandbox.run(t, input({ req: { body: 1 } }));
    expect(warm).not.toBeInstanceOf(Promise);
    expect((warm as Exclude<typeof warm, Promise<unknown>>).response?.body).toBe(JSON.stringify({ n: 1 }));
    // the same isolate serves the next run at once: it went back to the pool
    const again = sandbox.run(t, input({ req: { body: 2 } }));
    expect(again).not.toBeInstanceOf(Promise);
    expect((again as Exclude<typeof again, Promise<unknown>>).coldStart).toBe(false);
    const waits = target(`export default async () => { await new Promise((r) => setTimeout(r, 5)); return "late"; }`);
    await sandbox.run(waits, input());
    const later = sandbox.run(waits, input());
    expect(later).toBeInstanceOf(Promise);
    expect((await later).response?.body).toBe(JSON.stringify("late"));
  });

  it("queries the application's libSQL database through ctx.db", async () => {
    const t = target(`export default async function (req, { db }) {
      await db.batch([{ sql: "CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, body TEXT)" },
                      { sql: "INSERT INTO notes (body) VALUES (?)", params: [req.body.text] }], { transaction: true });
      const r = await db.query("SELECT body FROM notes WHERE body = ?", [req.body.text]);
      let failed = null;
      try { await db.query(42); } catch (e) { failed = e.code; }
      return { rows: r.rows, columns: r.columns, values: r.values, failed };
    }`, { appId: 11 });
    const r = await sandbox.run(t, input({ req: { body: { text: "hi" } } }));
    expect(r.outcome).toBe("ok");
    expect(JSON.parse(r.response!.body)).toEqual({ rows: [{ body: "hi" }], columns: ["body"], values: [["hi"]], failed: "validation_failed" });
    // Written to the app's own database, not another one.
    const own = await fdb.client(11).execute("SELECT count(*) AS n FROM notes");
    expect(Number(own.rows[0]!.n)).toBe(1);
  });

  it("reports a thrown error with its message and keeps the logs", async () => {
    const r = await sandbox.run(target(`export default async () => { console.error("before"); throw new TypeError("boom"); }`), input());
    expect(r.outcome).toBe("error");
    expect(r.error).toBe("TypeError: boom");
    expect(r.logs).toEqual([{ level: "error", message: "before" }]);
  });

  it("bounds the captured logs", async () => {
    const r = await sandbox.run(target(`export default () => { for (let i = 0; i < 1000; i++) console.log("x".repeat(100)); console.log("y".repeat(2000)); return 1; }`), input());
    expect(r.logsTruncated).toBe(true);
    expect(r.logs.reduce((n, l) => n + l.message.length, 0)).toBeLessThanOrEqual(2000);
  });

  it("stops an endless loop at the timeout and recovers with a fresh isolate", async () => {
    const t = target(`let calls = 0; export default async (req) => { calls++; if (req.body === "loop") { while (true) {} } return calls; }`, { timeoutMs: 150 });
    // (the loop never ends: that the run does is the stop)
    const r = await sandbox.run(t, input({ req: { body: "loop" } }));
    expect(r.outcome).toBe("timeout");
    const after = await sandbox.run(t, input({ req: { body: "ok" } }));
    expect(after.outcome).toBe("ok");
    expect(after.response?.body).toBe("1"); // new isolate: state started over
  });

  it("stops a loop after an await and a never-settling promise at the timeout", async () => {
    const a = await sandbox.run(target(`export default async () => { await null; for (;;) {} }`, { timeoutMs: 100 }), input());
    expect(a.outcome).toBe("timeout");
    const b = await sandbox.run(target(`export default () => new Promise(() => {})`, { timeoutMs: 100 }), input());
    expect(b.outcome).toBe("timeout");
  });

  it("kills a memory bomb at the memory limit without harming the host", async () => {
    const r = await sandbox.run(target(`export default () => { const a = []; for (;;) a.push(new Array(1e5).fill(Math.random())); }`, { memoryMb: 16, timeoutMs: 5000 }), input());
    expect(r.outcome).toBe("error");
    expect(r.error).toMatch(/memory/);
    const ok = await sandbox.run(target(`export default () => "alive"`), input());
    expect(ok.response?.body).toBe(JSON.stringify("alive"));
  });

  it("refuses a huge response", async () => {
    const r = await sandbox.run(target(`export default () => ({ body: "x".repeat(200 * 1024) })`), input());
    expect(r.outcome).toBe("error");
    expect(r.error).toMatch(/larger than/);
  });

  it("turns deep recursion into a function error", async () => {
    const r = await sandbox.run(target(`function f(n) { return f(n + 1) + 1; } export default () => f(0)`), input());
    expect(r.outcome).toBe("error");
    expect(r.error).toMatch(/RangeError: Maximum call stack/);
  });

  it("offers no Atomics or shared memory (a wait would hold the service's thread without CPU)", async () => {
    const r = await sandbox.run(target(`export default () => {
      let waited; try { Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 50); waited = "waited"; } catch (e) { waited = e.name; }
      return [typeof Atomics, typeof SharedArrayBuffer, waited];
    }`), input());
    expect(JSON.parse(r.response!.body)).toEqual(["undefined", "undefined", "ReferenceError"]);
  });

  it("offers no Node APIs, host globals, WebAssembly or imports", async () => {
    const r = await sandbox.run(target(`export default async () => {
      let dyn; try { await import("node:fs"); dyn = "imported"; } catch (e) { dyn = "refused"; }
      let ctor; try { ctor = (function(){ return this })() === undefined ? "strict" : "sloppy"; } catch (e) { ctor = "x"; }
      let viaCtor; try { viaCtor = ({}).constructor.constructor("return typeof process")(); } catch (e) { viaCtor = "err"; }
      return [typeof process, typeof require, typeof module, typeof globalThis.global, typeof WebAssembly,
              typeof fetch, typeof Buffer, dyn, viaCtor];
    }`), input());
    // fetch is the host-backed one (fetch-api.ts), not Node's
    expect(JSON.parse(r.response!.body)).toEqual(["undefined", "undefined", "undefined", "undefined", "undefined", "function", "undefined", "refused", "undefined"]);
  });

  it("refuses at check time code that does not compile, imports, or has no default function", async () => {
    await expect(sandbox.check("export default function ( {", 32)).rejects.toThrow(CompileError);
    await expect(sandbox.check("export default function ( {", 32)).rejects.toThrow(/SyntaxError/);
    await expect(sandbox.check(`import fs from "node:fs"; export default () => fs`, 32)).rejects.toThrow(/imports are not available/);
    await expect(sandbox.check(`export const x = 1;`, 32)).rejects.toThrow(/default export/);
    await expect(sandbox.check(`export default 42;`, 32)).rejects.toThrow(/default export/);
    await expect(sandbox.check(`throw new Error("top"); export default () => 1`, 32)).rejects.toThrow(/top/);
    await expect(sandbox.check(`while (true) {} export default () => 1`, 32)).rejects.toThrow(/timed out/);
    await expect(sandbox.check(`export default async function (req, ctx) { return 1 }`, 32)).resolves.toBeUndefined();
  });

  it("keeps prototype tampering inside the function", async () => {
    const t = target(`export default (req) => {
      Object.prototype.polluted = "yes"; Array.prototype.push = () => { throw new Error("no push"); };
      JSON.stringify = () => "hacked"; Object.getPrototypeOf(req).evil = 1;
      console.log("still captured");
      return { body: { ok: true } };
    }`);
    const r = await sandbox.run(t, input());
    expect(r.outcome).toBe("ok");
    expect(r.response?.body).toBe('{"ok":true}');
    expect(r.logs).toEqual([{ level: "log", message: "still captured" }]);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(({} as Record<string, unknown>).evil).toBeUndefined();
    const other = await sandbox.run(target(`export default () => ({}).polluted ?? "clean"`), input());
    expect(other.response?.body).toBe(JSON.stringify("clean"));
  });

  it("runs many invocations of one function in parallel with independent results", async () => {
    const t = target(`export default async (req, { db }) => { const { rows } = await db.query("SELECT ? * 2 AS v", [req.body.n]); return { n: req.body.n, v: rows[0].v }; }`, { appId: 12 });
    const results = await Promise.all(Array.from({ length: 60 }, (_, n) => sandbox.run(t, input({ req: { body: { n } } }))));
    results.forEach((r, n) => {
      expect(r.outcome).toBe("ok");
      expect(JSON.parse(r.response!.body)).toEqual({ n, v: n * 2 });
    });
    expect(sandbox.stats().total).toBeLessThanOrEqual(16);
  });
});

describe("isolate pool bounds", () => {
  it("serves many versions through a small process-wide bound and releases idle isolates", async () => {
    const small = createSandbox({ capabilities: [dbCapability(fdb)], limits: { maxIsolates: 2, isolatesPerVersion: 2, idleMs: 100 } });
    try {
      const versions = Array.from({ length: 5 }, (_, v) => ({ versionId: 1000 + v, appId: 1, code: `export default async (req) => { await null; return ${v} * 100 + req.body; }`, memoryMb: 16, timeoutMs: 5000 }));
      const runs = versions.flatMap((t, v) => Array.from({ length: 4 }, (_, i) => Promise.resolve(small.run(t, input({ req: { body: i } }))).then((r) => [v, i, r] as const)));
      for (const [v, i, r] of await Promise.all(runs)) {
        expect(r.outcome).toBe("ok");
        expect(r.response?.body).toBe(String(v * 100 + i));
      }
      expect(small.stats().total).toBeLessThanOrEqual(2);
      // idle for idleMs (100): released by the pool's sweep
      await until(async () => (small.stats().total === 0 ? true : undefined), 10_000, 20);
      expect(small.stats().total).toBe(0);
    } finally {
      small.close();
    }
  });
});
