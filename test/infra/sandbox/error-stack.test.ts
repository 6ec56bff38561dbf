// A function's errors as the operator reads them (docs/functions.md,
// "Debugging: errors and logs"): name, message and a stack whose frames give
// the line and column in the code as deployed, the platform's frames hidden.
// Through the real sandbox (isolated-vm), and the cleaning on its own.
import { afterAll, describe, expect, it } from "vitest";
import { createSandbox } from "../../../src/infra/sandbox/sandbox.js";
import type { RunInput, RunTarget } from "../../../src/infra/sandbox/types.js";
import type { HostCapability } from "../../../src/kernel/host-capability.js";
import { appError } from "../../../src/kernel/errors.js";
import { cleanFrames, errorStack, MAX_ERROR_CHARS, MAX_STACK_CHARS, MAX_STACK_FRAMES, moduleFileName } from "../../../src/infra/sandbox/error-stack.js";

// A host capability whose calls fail, like a ctx.db query on a missing table.
const failing: HostCapability = {
  name: "store",
  busyCode: "unavailable",
  failureCode: "internal_error",
  methods: {
    get() {
      throw appError("validation_failed", "no such table: notes");
    },
  },
};
const sandbox = createSandbox({ capabilities: [failing], limits: { maxIsolates: 16, isolatesPerVersion: 2 } });
afterAll(() => sandbox.close());

let nextVersion = 1;
function target(lines: string[], over: Partial<RunTarget> = {}): RunTarget {
  return { versionId: nextVersion++, appId: 1, code: lines.join("\n"), memoryMb: 32, timeoutMs: 1000, fileName: "rates@v3.js", ...over };
}
function input(req: unknown = null): RunInput {
  return { req, consumer: null, event: null, env: {}, trigger: "http", requestId: "r1" };
}
/** No host path, no Node internal, no platform source. */
function expectNoPlatform(text: string): void {
  expect(text).not.toMatch(/\/|node:|<isolated-vm|isolated-vm boundary|bootstrap|invoke|entry \(/);
}

describe("the stack of a thrown error", () => {
  it("a synchronous throw in a nested function after a multi-line template literal: exact line and column, platform frames hidden", async () => {
    const t = target([
      "const banner = `first", //          1
      "second line", //                    2
      'third ${"x"} line`;', //            3
      "function check(n) {", //            4
      '  if (n < 0) throw new RangeError("n must not be negative: " + n);', // 5: `new` at column 20
      "  return n;", //                    6
      "}", //                              7
      "export default function handler(req) {", // 8
      "  return check(req.n);", //         9: `check` at column 10
      "}",
    ]);
    const r = await sandbox.run(t, input({ n: -1 }));
    expect(r.outcome).toBe("error");
    expect(r.error).toBe("RangeError: n must not be negative: -1");
    expect(r.errorName).toBe("RangeError");
    expect(r.errorMessage).toBe("n must not be negative: -1");
    expect(r.errorStack).toBe(
      ["RangeError: n must not be negative: -1", "    at check (rates@v3.js:5:20)", "    at handler (rates@v3.js:9:10)", "    at <platform>"].join("\n"),
    );
  });

  it("an async function after an await, and a rejected promise", async () => {
    const t = target([
      "async function load(id) {",
      "  await new Promise((r) => setTimeout(r, 5));",
      "  throw new TypeError(`no record ${id}`);", // 3: column 9
      "}",
      "export default async function handler(req) {",
      "  if (req.reject) return Promise.reject(new SyntaxError(\"bad input\"));", // 6: column 41
      "  const rec = await load(req.id);", // 7: column 15 (the await)
      "  return rec;",
      "}",
    ]);
    const r = await sandbox.run(t, input({ id: 7 }));
    expect(r.errorStack).toBe(["TypeError: no record 7", "    at load (rates@v3.js:3:9)", "    at async handler (rates@v3.js:7:15)", "    at <platform>"].join("\n"));
    const rejected = await sandbox.run(t, input({ reject: true }));
    expect(rejected).toMatchObject({ outcome: "error", errorName: "SyntaxError", errorMessage: "bad input" });
    expect(rejected.errorStack).toBe(["SyntaxError: bad input", "    at handler (rates@v3.js:6:41)", "    at <platform>"].join("\n"));
  });

  it("a failed host call (ctx.<capability>) points at the line that awaited it", async () => {
    const t = target([
      "async function load(store) {",
      "  const rows = await store.get('notes');", // 2: the await at column 16
      "  return rows;",
      "}",
      "export default async (req, ctx) => {",
      "  return await load(ctx.store);", // 6: column 10
      "};",
    ]);
    const r = await sandbox.run(t, input());
    expect(r).toMatchObject({ outcome: "error", errorName: "Error", errorMessage: "no such table: notes" });
    expect(r.errorStack!.split("\n").slice(1)).toEqual(["    at <platform>", "    at async load (rates@v3.js:2:16)", "    at async default (rates@v3.js:6:10)", "    at <platform>"]);
  });

  it("a throw in a timer callback is logged with its stack in the deployed source; so is console.log(error)", async () => {
    const t = target([
      "export default async function handler() {",
      "  setTimeout(function tick() {",
      '    JSON.parse("{oops");', // 3: column 10
      "  }, 1);",
      "  await new Promise((r) => setTimeout(r, 20));",
      "  try { null.x; } catch (e) { console.log(\"caught\", e); }", // 6: column 14
      '  return "fine";',
      "}",
    ]);
    const r = await sandbox.run(t, input());
    expect(r.outcome).toBe("ok");
    expect(r.logs).toHaveLength(2);
    expect(r.logs[0]!.level).toBe("error");
    expect(r.logs[0]!.message).toMatch(/^Uncaught exception in a timer callback: SyntaxError: /);
    expect(r.logs[0]!.message.split("\n").slice(1)).toEqual(["    at JSON.parse (<anonymous>)", "    at tick (rates@v3.js:3:10)", "    at <platform>"]);
    expect(r.logs[1]!.message.split("\n").slice(1)).toEqual(["    at handler (rates@v3.js:6:14)", "    at <platform>"]);
    for (const l of r.logs) expectNoPlatform(l.message.replace(/^.*\n/, ""));
  });

  it("a rejected ctx.waitUntil promise is logged with its stack", async () => {
    const t = target([
      "export default function handler(req, ctx) {",
      "  ctx.waitUntil((async () => {",
      "    await null;",
      '    throw new Error("late failure");', // 4: column 11
      "  })());",
      '  return "accepted";',
      "}",
    ]);
    const r = await sandbox.run(t, input());
    expect(r.outcome).toBe("ok");
    const bg = await r.background!;
    expect([...r.logs, ...bg.logs].map((l) => l.message)).toContain("A ctx.waitUntil promise rejected: Error: late failure\n    at rates@v3.js:4:11");
  });

  it("an error raised by the platform (a Web API refusing its input) shows the function's frame and hides the host's", async () => {
    const t = target(["export default function handler() {", "  return crypto.getRandomValues(new Uint8Array(70000));", "}"]);
    const r = await sandbox.run(t, input());
    expect(r.outcome).toBe("error");
    expect(r.errorStack!.split("\n").slice(1)).toEqual(["    at <platform>", "    at handler (rates@v3.js:2:17)", "    at <platform>"]);
    expectNoPlatform(r.errorStack!.split("\n").slice(1).join("\n"));
  });

  it("a thrown non-error and a timeout have no stack; the timeout names the function's timeout", async () => {
    const thrown = await sandbox.run(target(["export default () => { throw { code: 42 }; };"]), input());
    expect(thrown).toMatchObject({ outcome: "error", error: 'Uncaught {"code":42}' });
    expect(thrown.errorStack).toBeUndefined();
    const slow = await sandbox.run(target(["export default () => { for (;;) {} };"], { timeoutMs: 100 }), input());
    expect(slow).toMatchObject({ outcome: "timeout", error: "timed out after 100 ms" });
    expect(slow.errorStack).toBeUndefined();
  });

  it("a stack the function rewrote cannot forge the header; a deep stack is cut at the frame limit", async () => {
    const forged = await sandbox.run(
      target(['export default () => { const e = new Error("real"); e.stack = "Error: fake\\n    at x (/etc/passwd:1:1)\\n    at y (rates@v3.js:9:9)"; throw e; };']),
      input(),
    );
    expect(forged.errorStack).toBe("Error: real\n    at <platform>\n    at y (rates@v3.js:9:9)");
    const deep = await sandbox.run(target(['function f(n) { if (n === 0) throw new Error("deep"); return f(n - 1); }', "export default () => f(100);"]), input());
    const frames = deep.errorStack!.split("\n").slice(1);
    expect(frames).toHaveLength(MAX_STACK_FRAMES);
    expect(frames[0]).toBe("    at f (rates@v3.js:1:36)");
    expect(frames[1]).toBe("    at f (rates@v3.js:1:62)");
  });

  it("counts lines as the engine does: \\r\\n, a lone \\r and U+2028 (even inside a string) each end one", async () => {
    for (const sep of ["\r\n", "\r", "\n"]) {
      const code = ["// one", "// two", "export default () => { throw new Error('x'); };"].join(sep);
      const r = await sandbox.run({ ...target([]), code }, input());
      expect(r.errorStack!.split("\n")[1], JSON.stringify(sep)).toBe("    at default (rates@v3.js:3:30)");
    }
    const ls = await sandbox.run(target(["const s = 'a\u2028b';", "export default () => { throw new Error('x'); };"]), input());
    expect(ls.errorStack!.split("\n")[1]).toBe("    at default (rates@v3.js:3:30)");
  });

  it("a huge message is cut at MAX_ERROR_CHARS; the stack keeps its frames", async () => {
    const r = await sandbox.run(target(["export default () => { throw new Error('x'.repeat(1_000_000)); };"], { memoryMb: 64 }), input());
    expect(r.error).toBe(`Error: ${"x".repeat(MAX_ERROR_CHARS - 7)}…`);
    expect(r.errorMessage).toBe(`${"x".repeat(MAX_ERROR_CHARS)}…`);
    expect(r.errorStack!.length).toBeLessThanOrEqual(MAX_STACK_CHARS);
    expect(r.errorStack!.split("\n").slice(1)).toEqual(["    at default (rates@v3.js:1:30)", "    at <platform>"]);
  });

  it("the module is named function.js when the caller names nothing", async () => {
    const r = await sandbox.run(target(['export default () => { throw new Error("x"); };'], { fileName: undefined }), input());
    expect(r.errorStack).toBe("Error: x\n    at default (function.js:1:30)\n    at <platform>");
  });

  it("a successful run carries no error parts", async () => {
    const r = await sandbox.run(target(["export default () => 1;"]), input());
    expect(r).toMatchObject({ outcome: "ok" });
    expect(r.errorName).toBeUndefined();
    expect(r.errorStack).toBeUndefined();
  });
});

describe("cleaning frames", () => {
  const file = moduleFileName("rates", 3);

  it("names the module <function>@v<version>.js", () => {
    expect(file).toBe("rates@v3.js");
  });

  it("keeps the module's and V8's frames, shows each run of other frames as one <platform>", () => {
    const raw = [
      "TypeError: host bad",
      "    at hostFn (/srv/pulsebase/dist/web-apis.js:5:63)",
      "    at node:internal/process/task_queues:95:5",
      "    at (<isolated-vm boundary>)",
      "    at handler (rates@v3.js:7:30)",
      "    at rates@v3.js:8:44",
      "    at Array.map (<anonymous>)",
      "    at async Promise.all (index 0)",
      "    at eval (eval at handler (rates@v3.js:9:23), <anonymous>:3:7)",
      "    at eval (eval at x (/srv/a.js:1:1), <anonymous>:3:7)",
      "    at other (rates@v3.js.map:1:1)",
      "    at invoke (<isolated-vm>:230:33)",
    ].join("\n");
    expect(cleanFrames(raw, file)).toBe(
      [
        "TypeError: host bad",
        "    at <platform>",
        "    at handler (rates@v3.js:7:30)",
        "    at rates@v3.js:8:44",
        "    at Array.map (<anonymous>)",
        "    at async Promise.all (index 0)",
        "    at eval (eval at handler (rates@v3.js:9:23), <anonymous>:3:7)",
        "    at <platform>",
      ].join("\n"),
    );
  });

  it("caps the recorded stack in characters, saying how many frames were left out", () => {
    const frame = `    at ${"x".repeat(300)} (rates@v3.js:1:1)`;
    const s = errorStack("Error: long", ["Error: long", ...Array(15).fill(frame)].join("\n"), file);
    expect(s.length).toBeLessThanOrEqual(MAX_STACK_CHARS);
    expect(s).toMatch(/\n {4}\.\.\. \d+ more frames$/);
    expect(errorStack("Error: x", "Error: x", file)).toBe("");
  });
});
