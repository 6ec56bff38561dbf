// Errors you can debug and versions you can read (docs/functions.md), through
// the whole server and the CLI in a child process: every version's code and
// SHA-256 (GetVersion, `functions versions --show/--diff`), an identical
// redeploy returning the existing version, a refused first deploy leaving no
// function behind, invocation records carrying the error's name and message
// and the console output, a user's throw logged at warn (never as a server
// error), and `functions logs --follow` printing an invocation as it happens.
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Code, ConnectError, type Client } from "@connectrpc/connect";
import { FunctionService as AdminFunctionService } from "../../gen/pulsebase/admin/v1/functions_pb.js";
import { createModules } from "../../src/server/modules.js";
import { createKvStore } from "../../src/capabilities/functions/kv-store.js";
import { capturedLogger, startTestServer, type TestServer } from "../helpers/server.js";
import { CLI_BIN, cliEnv, operatorEnv, runCli, type CliRun } from "../helpers/cli.js";

let s: TestServer;
let tmp: string;
let fns: Client<typeof AdminFunctionService>;
let appId: bigint;
let token: string;
let logLines: Array<Record<string, unknown>> = [];

/** Polls fn until accept(value) holds. */
async function until<T>(fn: () => Promise<T>, accept: (v: T) => boolean, opts: { timeoutMs?: number; intervalMs?: number } = {}): Promise<T> {
  const end = Date.now() + (opts.timeoutMs ?? 10_000);
  for (;;) {
    const v = await fn();
    if (accept(v)) return v;
    if (Date.now() > end) throw new Error(`timed out waiting; last: ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, opts.intervalMs ?? 50));
  }
}

const sha = (code: string) => createHash("sha256").update(code, "utf8").digest("hex");
const V1 = `export default (req) => ({ v: 1 });\n`;
const V2 = `export default (req) => {\n  console.log("computing", req && req.n);\n  return { v: 2 };\n};\n`;
const THROWS = `export default (req, ctx) => {
  console.warn("about to fail");
  throw new TypeError("amount must be positive");
};`;

/** The CLI against this server, with no token file of its own. */
const cliVars = () => ({ ...operatorEnv(s), PULSEBASE_DATA_DIR: join(tmp, "no-data") });
const cli = (args: string[]): Promise<CliRun> => runCli(args, { cwd: tmp, env: cliVars() });

beforeAll(async () => {
  const captured = capturedLogger();
  logLines = captured.lines;
  s = await startTestServer({ modules: createModules, logger: captured.logger });
  tmp = await mkdtemp(join(tmpdir(), "pulsebase-fnv-"));
  const app = await s.createApp("versions");
  appId = app.appId;
  token = (await s.register(app.appKey)).token;
  fns = s.adminClient(AdminFunctionService);
});
afterAll(async () => {
  await s.close();
  await rm(tmp, { recursive: true, force: true });
});

describe("versions", () => {
  it("every version's code and SHA-256 are readable; listing shows hashes, not empty code", async () => {
    const fn = await fns.createFunction({ appId, name: "versioned", code: V1 });
    expect(fn).toMatchObject({ activeVersion: 1, latestVersion: 1 });
    const v2 = await fns.deployVersion({ functionId: fn.id, code: V2, activate: true });
    expect(v2).toMatchObject({ version: 2, sha256: sha(V2), deduplicated: false, active: true });
    const got = await fns.getVersion({ functionId: fn.id, version: 1 });
    expect(got).toMatchObject({ version: 1, code: V1, sha256: sha(V1), active: false, codeSize: Buffer.byteLength(V1) });
    const list = await cli(["functions", "versions", "--id", String(fn.id)]);
    expect(list.code, list.stderr).toBe(0);
    const versions = JSON.parse(list.stdout).versions;
    expect(versions.map((v: { version: number; sha256: string }) => [v.version, v.sha256])).toEqual([[2, sha(V2)], [1, sha(V1)]]);
    for (const v of versions) expect(v).not.toHaveProperty("code");
    const missing = await fns.getVersion({ functionId: fn.id, version: 9 }).catch((e: unknown) => e);
    expect((missing as ConnectError).code).toBe(Code.NotFound);
  });

  it("functions versions --show N prints the code; --diff A B a unified diff", async () => {
    const fn = (await fns.listFunctions({ appId })).functions.find((f) => f.name === "versioned")!;
    const show = await cli(["functions", "versions", "--id", String(fn.id), "--show", "1"]);
    expect(show.code, show.stderr).toBe(0);
    expect(JSON.parse(show.stdout)).toMatchObject({ version: 1, code: V1, sha256: sha(V1) });
    const diff = await cli(["functions", "versions", "--id", String(fn.id), "--diff", "1", "2"]);
    expect(diff.code, diff.stderr).toBe(0);
    expect(diff.stdout).toContain("--- v1");
    expect(diff.stdout).toContain("+++ v2");
    expect(diff.stdout).toContain("-export default (req) => ({ v: 1 });");
    expect(diff.stdout).toContain('+  console.log("computing", req && req.n);');
    const same = await cli(["functions", "versions", "--id", String(fn.id), "--diff", "2,2"]);
    expect(same.stdout).toMatch(/identical/);
  });

  it("deploying code identical to an existing version returns that version", async () => {
    const fn = (await fns.listFunctions({ appId })).functions.find((f) => f.name === "versioned")!;
    const again = await fns.deployVersion({ functionId: fn.id, code: V2, activate: true });
    expect(again).toMatchObject({ version: 2, deduplicated: true, sha256: sha(V2) });
    // an older version's code: no new version either, and activating it rolls back
    const back = await fns.deployVersion({ functionId: fn.id, code: V1, activate: true });
    expect(back).toMatchObject({ version: 1, deduplicated: true, active: true });
    const after = await fns.getFunction({ id: fn.id });
    expect(after).toMatchObject({ latestVersion: 2, activeVersion: 1 });
    expect((await fns.listVersions({ functionId: fn.id })).versions).toHaveLength(2);
    // concurrent identical deploys make one version
    const code = `export default () => "same";`;
    const results = await Promise.all([1, 2, 3].map(() => fns.deployVersion({ functionId: fn.id, code, activate: false })));
    expect(new Set(results.map((r) => r.version)).size).toBe(1);
    expect((await fns.listVersions({ functionId: fn.id })).versions).toHaveLength(3);
  });

  it("a refused first deploy leaves no function behind (API and CLI)", async () => {
    const err = await fns.createFunction({ appId, name: "broken", code: "export default (req => {" }).catch((e: unknown) => e);
    expect((err as ConnectError).code).toBe(Code.InvalidArgument);
    expect((err as ConnectError).message).toMatch(/refused/);
    const file = join(tmp, "broken.js");
    await writeFile(file, "export default function ( {");
    const r = await cli(["functions", "deploy", "--app", String(appId), "--file", file, "--slug", "broken-cli"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/refused/);
    const names = (await fns.listFunctions({ appId })).functions.map((f) => f.name);
    expect(names).not.toContain("broken");
    expect(names).not.toContain("broken-cli");
    // and the same name deploys fine afterwards
    await writeFile(file, "export default () => ({ ok: true });");
    const ok = await cli(["functions", "deploy", "--app", String(appId), "--file", file, "--slug", "broken-cli"]);
    expect(ok.code, ok.stderr).toBe(0);
    expect(JSON.parse(ok.stdout)).toMatchObject({ function: { name: "broken-cli", active_version: 1 }, version: { version: 1 }, trigger: { slug: "broken-cli" } });
  });
});

describe("errors and logs", () => {
  it("an invocation record carries the error's name and message and the console output", async () => {
    const fn = await fns.createFunction({ appId, name: "thrower", code: THROWS });
    await fns.createHttpTrigger({ functionId: fn.id, slug: "thrower" });
    const res = await s.fetch("/api/fn/thrower", { method: "POST", headers: { authorization: `Bearer ${token}` } });
    expect(res.status).toBe(500);
    // the device sees no detail
    expect(JSON.stringify(await res.json())).not.toContain("amount must be positive");
    const inv = await until(async () => (await fns.listInvocations({ functionId: fn.id })).invocations[0], (i) => i !== undefined);
    expect(inv).toMatchObject({
      outcome: "error",
      status: 500,
      errorName: "TypeError",
      errorMessage: "amount must be positive",
      error: "TypeError: amount must be positive",
      version: 1,
    });
    expect(inv!.logs).toEqual([expect.objectContaining({ level: "warn", message: "about to fail" })]);
    const run = await fns.runFunction({ functionId: fn.id });
    expect(run).toMatchObject({ outcome: "error", errorName: "TypeError", errorMessage: "amount must be positive" });
  });

  it("a user's throw or timeout is logged at warn with app, function and version, never at error", async () => {
    const fn = (await fns.listFunctions({ appId })).functions.find((f) => f.name === "thrower")!;
    const slow = await fns.createFunction({ appId, name: "slow", timeoutMs: 50, code: "export default () => { for (;;) {} };" });
    await fns.createHttpTrigger({ functionId: slow.id, slug: "slow" });
    expect((await s.fetch("/api/fn/slow", { method: "POST", headers: { authorization: `Bearer ${token}` } })).status).toBe(504);
    expect((await s.fetch("/api/fn/thrower", { method: "POST", headers: { authorization: `Bearer ${token}` } })).status).toBe(500);
    const warned = await until(async () => logLines.filter((l) => l.level === 40 && (l.functionId === Number(fn.id) || l.functionId === Number(slow.id))), (l) => l.length >= 2);
    expect(warned.find((l) => l.functionId === Number(fn.id))).toMatchObject({ appId: Number(appId), version: 1, trigger: "http", outcome: "error", msg: "function failed" });
    expect(warned.find((l) => l.functionId === Number(slow.id))).toMatchObject({ appId: Number(appId), version: 1, outcome: "timeout", msg: "function timed out" });
    // a timeout has no stack to show
    expect(warned.find((l) => l.functionId === Number(slow.id))).not.toHaveProperty("stack");
    expect(logLines.filter((l) => (l.level as number) >= 50)).toEqual([]);
  });

  it("a hostile scheduled function (an endless loop every second) is cut each time; other functions keep answering", async () => {
    const hog = await fns.createFunction({ appId, name: "hog", timeoutMs: 100, code: "export default () => { for (;;) {} };" });
    const t = await fns.createScheduleTrigger({ functionId: hog.id, cron: "* * * * * *" });
    const fn = await fns.createFunction({ appId, name: "quick", code: V1 });
    await fns.createHttpTrigger({ functionId: fn.id, slug: "quick" });
    const statuses: number[] = [];
    // Calls go on until the hog has been cut at least twice meanwhile (and
    // there were more than ten of them), however long that takes. Paced
    // well below the plan's invocation rate, which an unpaced loop on an
    // idle machine reaches (a 429 that says nothing about the hog).
    const cut = async () => (await fns.listScheduleRuns({ triggerId: t.id })).runs.filter((r) => r.status === "timeout").length;
    let cuts = 0;
    while (statuses.length <= 10 || cuts < 2) {
      statuses.push((await s.fetch("/api/fn/quick", { method: "POST", headers: { authorization: `Bearer ${token}` } })).status);
      if (statuses.length % 10 === 0) cuts = await cut();
      await new Promise((r) => setTimeout(r, 10));
    }
    await fns.setTriggerEnabled({ triggerId: t.id, enabled: false });
    expect(statuses.length).toBeGreaterThan(10);
    expect(statuses.filter((x) => x !== 200)).toEqual([]);
    const runs = await until(async () => (await fns.listScheduleRuns({ triggerId: t.id })).runs, (r) => r.length >= 2 && r.every((x) => x.status !== "running"));
    for (const r of runs) expect(r).toMatchObject({ status: "timeout", error: expect.stringMatching(/^timed out after \d+ ms/) });
    const inv = (await fns.listInvocations({ functionId: hog.id })).invocations;
    expect(inv.every((i) => i.triggerKind === "schedule" && i.outcome === "timeout" && i.status === 504)).toBe(true);
    expect(logLines.some((l) => l.level === 40 && l.functionId === Number(hog.id) && l.trigger === "schedule")).toBe(true);
    expect(logLines.filter((l) => (l.level as number) >= 50)).toEqual([]);
  });

  it("functions logs --follow prints an invocation as it happens", async () => {
    const fn = await fns.createFunction({ appId, name: "followed", code: V2 });
    await fns.runFunction({ functionId: fn.id }); // before following: not printed
    const child = spawn(process.execPath, [CLI_BIN, "functions", "logs", "--id", String(fn.id), "--follow"], { cwd: tmp, env: cliEnv(cliVars()) });
    let out = "";
    let err = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (err += d.toString()));
    try {
      // the stream is open once the server has counted the follower's starting point; runs until one shows
      const lines = await until(async () => {
        await fns.runFunction({ functionId: fn.id, payload: { kind: { case: "structValue", value: { fields: { n: { kind: { case: "numberValue", value: 7 } } } } } } as never });
        return out.split("\n").filter((l) => l.trim());
      }, (l) => l.length > 0, { timeoutMs: 30_000, intervalMs: 1000 });
      const first = JSON.parse(lines[0]!);
      expect(first, err).toMatchObject({ function_id: Number(fn.id), trigger_kind: "manual", outcome: "ok", logs: [{ level: "log", message: "computing 7" }] });
      // an HTTP invocation too (recorded through the buffered path)
      await fns.createHttpTrigger({ functionId: fn.id, slug: "followed" });
      await s.fetch("/api/fn/followed", { method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, body: JSON.stringify({ n: 8 }) });
      await until(async () => out, (o) => o.includes('"trigger_kind":"http"'), { timeoutMs: 15_000 });
      // nothing from before the follow started
      const ids = out.split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l).id as number);
      expect(new Set(ids).size).toBe(ids.length);
    } finally {
      child.kill("SIGINT");
      await new Promise((r) => child.once("exit", r));
    }
  });
});

describe("the key-value store, seen by the operator", () => {
  it("lists keys by prefix with paging and totals, shows one with its value, deletes one (CLI)", async () => {
    // What ctx.kv writes (the same store, on the server's database).
    const kv = createKvStore(s.db.sql);
    for (let i = 0; i < 5; i++) await kv.put(Number(appId), `cart:${i}`, JSON.stringify({ items: i }));
    await kv.put(Number(appId), "session:x", "s", { ttlSeconds: 3600 });
    const page1 = await cli(["functions", "kv", "list", "--app", String(appId), "--prefix", "cart:", "--page-size", "3"]);
    expect(page1.code, page1.stderr).toBe(0);
    const p1 = JSON.parse(page1.stdout);
    expect(p1.entries.map((e: { key: string }) => e.key)).toEqual(["cart:0", "cart:1", "cart:2"]);
    expect(p1).toMatchObject({ total_keys: 6, max_bytes: 64 * 1024 * 1024 });
    expect(p1.entries[0]).not.toHaveProperty("value");
    const page2 = JSON.parse((await cli(["functions", "kv", "list", "--app", String(appId), "--prefix", "cart:", "--page-size", "3", "--page-token", p1.next_page_token])).stdout);
    expect(page2.entries.map((e: { key: string }) => e.key)).toEqual(["cart:3", "cart:4"]);
    expect(page2.next_page_token ?? "").toBe("");
    const one = await cli(["functions", "kv", "get", "--app", String(appId), "--key", "session:x"]);
    expect(JSON.parse(one.stdout)).toMatchObject({ key: "session:x", value: "s", size: 10, expires_at: expect.any(String) });
    const del = await cli(["functions", "kv", "delete", "--app", String(appId), "--key", "cart:0"]);
    expect(JSON.parse(del.stdout)).toEqual({ deleted: true });
    const gone = await cli(["functions", "kv", "get", "--app", String(appId), "--key", "cart:0"]);
    expect(gone.code).toBe(1);
    expect(gone.stderr).toMatch(/No such key/);
  });
});

