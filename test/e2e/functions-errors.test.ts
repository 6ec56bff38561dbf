// Errors you can debug (docs/functions.md, "Debugging: errors and logs"),
// through the whole server and the CLI in a child process: a function that
// throws has its invocation recorded with the error's name, message and a
// stack whose frames give the line and column in the code as deployed (what
// `functions versions --show N` prints), named <function>@v<N>.js; the device
// gets only the generic 500 with the request id; the throw is logged at warn.
import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Client } from "@connectrpc/connect";
import { FunctionService as AdminFunctionService } from "../../gen/pulsebase/admin/v1/functions_pb.js";
import { createModules } from "../../src/server/modules.js";
import { capturedLogger, startTestServer, type TestServer } from "../helpers/server.js";
import { CLI_BIN, cliEnv, operatorEnv, runCli, type CliRun } from "../helpers/cli.js";

let s: TestServer;
let tmp: string;
let fns: Client<typeof AdminFunctionService>;
let appId: bigint;
let token: string;
let logLines: Array<Record<string, unknown>> = [];

async function until<T>(fn: () => Promise<T>, accept: (v: T) => boolean, timeoutMs = 10_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (accept(v)) return v;
    if (Date.now() > end) throw new Error(`timed out waiting; last: ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The CLI against this server, with no token file of its own. */
const cliVars = () => ({ ...operatorEnv(s), PULSEBASE_DATA_DIR: join(tmp, "no-data") });
const cli = (args: string[]): Promise<CliRun> => runCli(args, { cwd: tmp, env: cliVars() });

// The throw is on line 7, `new` at column 31; the call to check() on line 11, column 10.
const V1 = [
  "const template = `Dear ${'customer'},", // 1
  "your total is",
  "${'{{amount}}'}`;", // 3
  "",
  "function check(amount) {", // 5
  "  if (typeof amount !== 'number')",
  "    if (amount == null) throw new RangeError(`amount is missing from ${JSON.stringify(amount)}`);", // 7
  "  return template.replace('{{amount}}', amount);",
  "}",
  "export default async function handler(req) {", // 10
  "  return check(req.body && req.body.amount);", // 11
  "};",
].join("\n");
// Two lines more at the top: every frame moves down two lines.
const V2 = ["// v2: the same with a comment", "// of two lines", V1].join("\n");

beforeAll(async () => {
  const captured = capturedLogger();
  logLines = captured.lines;
  s = await startTestServer({ modules: createModules, logger: captured.logger });
  tmp = await mkdtemp(join(tmpdir(), "pulsebase-fnerr-"));
  const app = await s.createApp("errors");
  appId = app.appId;
  token = (await s.register(app.appKey)).token;
  fns = s.adminClient(AdminFunctionService);
});
afterAll(async () => {
  await s.close();
  await rm(tmp, { recursive: true, force: true });
});

const call = (slug: string) =>
  s.fetch(`/api/fn/${slug}`, { method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, body: JSON.stringify({ note: "no amount" }) });

describe("errors you can debug", () => {
  it("an invocation record carries the name, message and a stack at the deployed line and column; the device sees none of it", async () => {
    const fn = await fns.createFunction({ appId, name: "invoice", code: V1 });
    await fns.createHttpTrigger({ functionId: fn.id, slug: "invoice" });
    const res = await call("invoice");
    expect(res.status).toBe(500);
    const text = await res.text();
    const requestId = res.headers.get("x-request-id");
    expect(JSON.parse(text)).toEqual({ error: "function_error", message: `The function failed. Request id: ${requestId}` });
    for (const leak of ["invoice@v1", "RangeError", "amount is missing", " at ", "<platform>", ":7:"]) expect(text).not.toContain(leak);

    const inv = await until(async () => (await fns.listInvocations({ functionId: fn.id })).invocations[0], (i) => i !== undefined);
    expect(inv).toMatchObject({ outcome: "error", status: 500, version: 1, errorName: "RangeError", errorMessage: "amount is missing from undefined" });
    expect(inv!.errorStack).toBe(
      ["RangeError: amount is missing from undefined", "    at check (invoice@v1.js:7:31)", "    at handler (invoice@v1.js:11:10)", "    at <platform>"].join("\n"),
    );
    // the line and column point into the code exactly as `functions versions --show 1` prints it
    const show = await cli(["functions", "versions", "--id", String(fn.id), "--show", "1"]);
    expect(show.code, show.stderr).toBe(0);
    const lines = (JSON.parse(show.stdout) as { code: string }).code.split("\n");
    expect(lines[7 - 1]!.slice(31 - 1)).toMatch(/^new RangeError\(/);
    expect(lines[11 - 1]!.slice(10 - 1)).toMatch(/^check\(/);

    // the manual run answers with the same parts
    const run = await fns.runFunction({ functionId: fn.id });
    expect(run).toMatchObject({ outcome: "error", errorName: "TypeError", errorMessage: "Cannot read properties of null (reading 'body')" });
    expect(run.errorStack).toBe(["TypeError: Cannot read properties of null (reading 'body')", "    at handler (invoice@v1.js:11:20)", "    at <platform>"].join("\n"));
  });

  it("a new version's frames name that version at its own lines; `functions invocations` prints them", async () => {
    const fn = (await fns.listFunctions({ appId })).functions.find((f) => f.name === "invoice")!;
    await fns.deployVersion({ functionId: fn.id, code: V2, activate: true });
    expect((await call("invoice")).status).toBe(500);
    const inv = await until(async () => (await fns.listInvocations({ functionId: fn.id })).invocations.find((i) => i.version === 2 && i.triggerKind === "http"), (i) => i !== undefined);
    expect(inv!.errorStack).toContain("    at check (invoice@v2.js:9:31)\n    at handler (invoice@v2.js:13:10)");
    const out = await cli(["functions", "invocations", "--id", String(fn.id), "--page-size", "1"]);
    expect(out.code, out.stderr).toBe(0);
    const [shown] = (JSON.parse(out.stdout) as { invocations: Array<Record<string, unknown>> }).invocations;
    expect(shown).toMatchObject({ version: 2, error_name: "RangeError", error_message: "amount is missing from undefined" });
    expect(shown!.error_stack).toContain("at check (invoice@v2.js:9:31)");
  });

  it("a timer callback's throw is in the record's logs with its stack; a timeout has a message and no stack", async () => {
    const timer = await fns.createFunction({
      appId,
      name: "ticker",
      code: ["export default async function handler() {", "  setTimeout(() => { throw new Error('tick failed'); }, 1);", "  await new Promise((r) => setTimeout(r, 30));", "  return 'ok';", "}"].join("\n"),
    });
    const ok = await fns.runFunction({ functionId: timer.id });
    expect(ok.outcome).toBe("ok");
    expect(ok.logs.map((l) => l.message)).toContain("Uncaught exception in a timer callback: Error: tick failed\n    at ticker@v1.js:2:28\n    at <platform>");
    const slow = await fns.createFunction({ appId, name: "spinner", timeoutMs: 50, code: "export default () => { for (;;) {} };" });
    const cut = await fns.runFunction({ functionId: slow.id });
    expect(cut).toMatchObject({ outcome: "timeout", errorName: "", errorMessage: "timed out after 50 ms", errorStack: "" });
  });

  it("the throw is logged at warn with app, function and version, never at error", async () => {
    const fn = (await fns.listFunctions({ appId })).functions.find((f) => f.name === "invoice")!;
    const warned = await until(async () => logLines.filter((l) => l.level === 40 && l.functionId === Number(fn.id) && l.trigger === "http"), (l) => l.length >= 2);
    expect(warned.map((l) => l.version).sort()).toEqual([1, 2]);
    expect(warned[0]).toMatchObject({ appId: Number(appId), outcome: "error", msg: "function failed" });
    // the stack as the record has it, in the deployed code's lines
    expect(warned.map((l) => l.stack).join("\n")).toContain("(invoice@v2.js:9:31)");
    expect(logLines.filter((l) => (l.level as number) >= 50)).toEqual([]);
  });

  it("functions logs --follow prints a failed invocation with its stack as it happens", async () => {
    const fn = (await fns.listFunctions({ appId })).functions.find((f) => f.name === "invoice")!;
    const child = spawn(process.execPath, [CLI_BIN, "functions", "logs", "--id", String(fn.id), "--follow"], { cwd: tmp, env: cliEnv(cliVars()) });
    let out = "";
    let err = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (err += d.toString()));
    try {
      // the stream is open once the server has counted the follower's starting point: calls until one shows
      await until(
        async () => {
          await call("invoice");
          return out;
        },
        (o) => o.includes('"error_stack"'),
        30_000,
      );
      const first = JSON.parse(out.split("\n")[0]!) as Record<string, unknown>;
      expect(first, err).toMatchObject({ trigger_kind: "http", version: 2, error_name: "RangeError" });
      expect(first.error_stack).toContain("at check (invoice@v2.js:9:31)");
    } finally {
      child.kill("SIGINT");
      await new Promise((r) => child.once("exit", r));
    }
  });
});
