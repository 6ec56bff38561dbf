// The operator CLI as operators run it (bin/pulsebase.js in a child process)
// against a whole server: how it finds the admin listener, deploying a
// function from a file and calling it over REST, CMS content read back from
// /api/v1, a database created, linked and queried, the errors it prints, and
// `load` reporting failed requests with a non-zero exit status.
import { execFile, spawn } from "node:child_process";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { freePort } from "../helpers/ports.js";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { IdentityService } from "../../gen/pulsebase/admin/v1/identity_pb.js";
import { createModules } from "../../src/server/modules.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { CLI_BIN, cliEnv, runCli, type CliRun } from "../helpers/cli.js";

let s: TestServer;
let tmp: string;
let adminPort: string;

/** The CLI's environment: nothing of ours leaks in, no token file unless a test gives one. */
const noTokenFile = (extra: Record<string, string>) => ({ PULSEBASE_DATA_DIR: join(tmp, "no-data"), ...extra });

function cli(args: string[], extra: Record<string, string> = {}): Promise<CliRun> {
  return runCli(args, { cwd: tmp, env: noTokenFile(extra) });
}

/** The CLI as configured by PULSEBASE_ADMIN_URL and the token variable; its output parsed. */
async function op(args: string[]): Promise<any> { // eslint-disable-line @typescript-eslint/no-explicit-any
  const r = await cli(args, { PULSEBASE_ADMIN_URL: s.adminUrl, PULSEBASE_OPERATOR_TOKEN: s.operatorToken });
  expect(r.code, `${args.join(" ")}\n${r.stderr}`).toBe(0);
  return JSON.parse(r.stdout);
}


beforeAll(async () => {
  s = await startTestServer({ modules: createModules });
  tmp = await mkdtemp(join(tmpdir(), "pulsebase-cli-"));
  adminPort = new URL(s.adminUrl).port;
});
afterAll(async () => {
  await s.close();
  await rm(tmp, { recursive: true, force: true });
});

describe("apps create without --team", () => {
  it("uses the only team, and asks for --team once there are several", async () => {
    // A fresh instance: the first app makes a team named after it; the next
    // ones join that team instead of making one team per app.
    const own = await startTestServer({ modules: createModules });
    try {
      const env = { PULSEBASE_ADMIN_URL: own.adminUrl, PULSEBASE_OPERATOR_TOKEN: own.operatorToken };
      const first = await cli(["apps", "create", "--name", "first"], env);
      expect(first.code, first.stderr).toBe(0);
      const second = await cli(["apps", "create", "--name", "second"], env);
      expect(second.code, second.stderr).toBe(0);
      expect(JSON.parse(second.stdout).team_id).toBe(JSON.parse(first.stdout).team_id);
      expect((await cli(["teams", "create", "--name", "other"], env)).code).toBe(0);
      const ambiguous = await cli(["apps", "create", "--name", "third"], env);
      expect(ambiguous.code).toBe(2);
      expect(ambiguous.stderr).toContain("several teams, pass --team");
    } finally {
      await own.close();
    }
  });
});

describe("finding the admin listener", () => {
  it("uses PULSEBASE_ADMIN_URL, and PULSEBASE_ADMIN_PORT with the token file of PULSEBASE_DATA_DIR", async () => {
    const byUrl = await cli(["apps", "create", "--name", "by url"], { PULSEBASE_ADMIN_URL: s.adminUrl, PULSEBASE_OPERATOR_TOKEN: s.operatorToken });
    expect(byUrl.code, byUrl.stderr).toBe(0);
    const app = JSON.parse(byUrl.stdout);
    expect(app).toMatchObject({ name: "by url", app_key: expect.stringMatching(/^pk_/) });
    expect(typeof app.id).toBe("number");

    const dataDir = join(tmp, "data");
    await rm(dataDir, { recursive: true, force: true });
    await mkdir(dataDir);
    await writeFile(join(dataDir, "operator-token"), `${s.operatorToken}\n`);
    const byPort = await cli(["apps", "get", "--id", String(app.id)], { PULSEBASE_ADMIN_PORT: adminPort, PULSEBASE_DATA_DIR: dataDir });
    expect(byPort.code, byPort.stderr).toBe(0);
    expect(JSON.parse(byPort.stdout).app_key).toBe(app.app_key);
  });

  it("says in apps create which token mode the application is in and what strict mode protects", async () => {
    const env = { PULSEBASE_ADMIN_URL: s.adminUrl, PULSEBASE_OPERATOR_TOKEN: s.operatorToken };
    const created = await cli(["apps", "create", "--name", "token mode"], env);
    expect(created.code, created.stderr).toBe(0);
    const app = JSON.parse(created.stdout);
    expect(app.strict_token_mode).toBe(false);
    expect(created.stderr).toContain("token mode: lenient");
    expect(created.stderr).toMatch(/user_email\s+and device_id/);
    expect(created.stderr).toContain(`pulsebase apps settings --id ${app.id} --strict-token-mode true`);
    const strict = await cli(["apps", "settings", "--id", String(app.id), "--strict-token-mode", "true"], env);
    expect(JSON.parse(strict.stdout).strict_token_mode).toBe(true);
  });

  it("takes --admin-url over PULSEBASE_ADMIN_URL, and PULSEBASE_ADMIN_URL over PULSEBASE_ADMIN_PORT", async () => {
    const dead = await freePort();
    const token = { PULSEBASE_OPERATOR_TOKEN: s.operatorToken };
    const urlWins = await cli(["apps", "list"], { ...token, PULSEBASE_ADMIN_URL: s.adminUrl, PULSEBASE_ADMIN_PORT: String(dead) });
    expect(urlWins.code, urlWins.stderr).toBe(0);
    const flagWins = await cli(["apps", "list", "--admin-url", `http://127.0.0.1:${dead}`], { ...token, PULSEBASE_ADMIN_URL: s.adminUrl });
    expect(flagWins.code).toBe(1);
    expect(flagWins.stderr).toContain(`http://127.0.0.1:${dead}`);
  });

  it("says clearly when the admin listener cannot be reached, without a stack trace", async () => {
    const dead = await freePort();
    const [r, badPort, noToken, wrongToken] = await Promise.all([
      cli(["functions", "list", "--app", "1"], { PULSEBASE_ADMIN_PORT: String(dead), PULSEBASE_OPERATOR_TOKEN: s.operatorToken }),
      cli(["apps", "list"], { PULSEBASE_ADMIN_PORT: "eighty", PULSEBASE_OPERATOR_TOKEN: "x" }),
      cli(["apps", "list"], { PULSEBASE_ADMIN_URL: s.adminUrl }),
      cli(["apps", "list"], { PULSEBASE_ADMIN_URL: s.adminUrl, PULSEBASE_OPERATOR_TOKEN: "not-the-operator-token" }),
    ]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toContain(`cannot reach the admin listener at http://127.0.0.1:${dead} (connection refused; URL from PULSEBASE_ADMIN_PORT)`);
    expect(r.stderr).not.toMatch(/\n\s+at /);
    expect(badPort.code).toBe(1);
    expect(badPort.stderr).toContain("PULSEBASE_ADMIN_PORT must be a port number");
    expect(noToken.code).toBe(1);
    expect(noToken.stderr).toContain("no operator token");
    expect(wrongToken.code).toBe(1);
    expect(wrongToken.stderr).toContain("refused the operator token");
    const unknown = await cli(["frobnicate"]);
    expect(unknown.code).toBe(2);
  });

  it("lists every command group in help", async () => {
    const r = await cli(["help"]);
    expect(r.code).toBe(0);
    for (const c of ["apps create", "plans set", "databases create", "databases link", "functions deploy", "functions triggers create", "functions invocations", "cms types create", "cms entries publish", "cms media upload", "analytics events list", "call SERVICE/METHOD", "load --url"]) {
      expect(r.stdout).toContain(c);
    }
  });
});

describe("operating the platform", () => {
  let app: { id: number; team_id: number; app_key: string };
  let token: string;
  beforeAll(async () => {
    app = await op(["apps", "create", "--name", "cli ops"]);
    token = (await s.register(app.app_key)).token;
  });
  const device = (path: string, init: RequestInit = {}) =>
    s.fetch(path, { ...init, headers: { authorization: `Bearer ${token}`, "content-type": "application/json", ...(init.headers as Record<string, string>) } });

  it("deploys a function from a file and serves it at /api/fn/{slug}; a redeploy replaces the code", async () => {
    const file = join(tmp, "hello.js");
    await writeFile(file, "export default async (req, ctx) => ({ hello: req.query.name ?? 'world', greeting: ctx.env.GREETING });");
    const out = await op(["functions", "deploy", "--app", String(app.id), "--slug", "hello", "--file", file, "--env", "GREETING=hej"]);
    expect(out.function).toMatchObject({ name: "hello", active_version: 1, secret_names: ["GREETING"] });
    expect(out.trigger).toMatchObject({ slug: "hello", enabled: true });
    const res = await device("/api/fn/hello?name=Ada");
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ hello: "Ada", greeting: "hej" });

    await writeFile(file, "export default async () => ({ status: 201, headers: { 'content-type': 'text/plain' }, body: 'v2' });");
    const again = await op(["functions", "deploy", "--app", String(app.id), "--slug", "hello", "--file", file]);
    expect(again.function.id).toBe(out.function.id);
    expect(again.function.active_version).toBe(2);
    const v2 = await device("/api/fn/hello");
    expect(v2.status).toBe(201);
    expect(await v2.text()).toBe("v2");

    const run = await op(["functions", "run", "--id", String(out.function.id)]);
    expect(run).toMatchObject({ status: 201, body: "v2", outcome: "ok" });
    const invocations = await op(["functions", "invocations", "--id", String(out.function.id)]);
    expect(invocations.invocations.length).toBeGreaterThanOrEqual(3);
    const triggers = await op(["functions", "triggers", "list", "--id", String(out.function.id)]);
    expect(triggers.triggers).toHaveLength(1);
  });

  it("changes a schedule's cron and zone with schedules update, keeping what it is not given", async () => {
    const file = join(tmp, "tick.js");
    await writeFile(file, "export default async () => ({ ok: true });");
    const fn = await op(["functions", "deploy", "--app", String(app.id), "--name", "tick", "--file", file]);
    const trigger = await op(["functions", "triggers", "create", "--id", String(fn.function.id), "--cron", "0 3 * * *", "--tz", "Europe/Berlin", "--missed", "run_once"]);
    const updated = await op(["functions", "schedules", "update", "--trigger", String(trigger.id), "--cron", "*/15 * * * *"]);
    expect(updated).toMatchObject({ id: trigger.id, cron: "*/15 * * * *", timezone: "Europe/Berlin", missed_ticks: "run_once" });
    const bad = await cli(["functions", "schedules", "update", "--trigger", String(trigger.id), "--cron", "every day"], { PULSEBASE_ADMIN_URL: s.adminUrl, PULSEBASE_OPERATOR_TOKEN: s.operatorToken });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("cron");
  });

  it("exits 1 when a manual run fails, and 1 with the field errors when code does not compile", async () => {
    const file = join(tmp, "boom.js");
    await writeFile(file, "export default async () => { throw new Error('boom'); };");
    const fn = await op(["functions", "deploy", "--app", String(app.id), "--name", "boom", "--file", file]);
    expect(fn.trigger).toBeUndefined();
    const run = await cli(["functions", "run", "--id", String(fn.function.id)], { PULSEBASE_ADMIN_URL: s.adminUrl, PULSEBASE_OPERATOR_TOKEN: s.operatorToken });
    expect(run.code).toBe(1);
    expect(JSON.parse(run.stdout)).toMatchObject({ outcome: "error", error: expect.stringContaining("boom") });
    await writeFile(file, "export default async ( => {");
    const bad = await cli(["functions", "deploy", "--id", String(fn.function.id), "--file", file], { PULSEBASE_ADMIN_URL: s.adminUrl, PULSEBASE_OPERATOR_TOKEN: s.operatorToken });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/^error: .*\n {2}code: /);
  });

  it("creates a content type and entries from JSON; published entries are read from /api/v1", async () => {
    const typeFile = join(tmp, "note.json");
    await writeFile(typeFile, JSON.stringify({ slug: "note", name: "Note", fields: [{ name: "title", type: "text", required: true }, { name: "stars", type: "number" }], sortable_fields: ["stars"] }));
    const type = await op(["cms", "types", "create", "--app", String(app.id), "--file", typeFile]);
    expect(type).toMatchObject({ slug: "note", fields: [expect.objectContaining({ name: "title" }), expect.objectContaining({ name: "stars" })] });
    const entry = await op(["cms", "entries", "create", "--app", String(app.id), "--type", "note", "--data", JSON.stringify({ title: "Hello", stars: 4 })]);
    expect(entry.published).toBe(false);
    const cms = () => s.fetch("/api/v1/note", { headers: { "x-app-key": app.app_key } });
    // the draft is not served
    expect(await (await cms()).text()).not.toContain(entry.id);
    await op(["cms", "entries", "update", "--app", String(app.id), "--id", entry.id, "--data", '{"stars": 5}']);
    await op(["cms", "entries", "publish", "--app", String(app.id), "--id", entry.id]);
    const body = await (await cms()).json();
    expect(body.data).toEqual([expect.objectContaining({ id: entry.id, title: "Hello", stars: 5 })]);
    const types = await op(["cms", "types", "list", "--app", String(app.id)]);
    expect(types.content_types.map((t: { slug: string }) => t.slug)).toEqual(["note"]);
  });

  it("creates and links a database the app then queries, and calls any method with `call`", async () => {
    const db = await op(["databases", "create", "--team", String(app.team_id), "--name", "main", "--app", String(app.id)]);
    expect(db).toMatchObject({ name: "main", status: "DATABASE_STATUS_ACTIVE", linked_app_ids: [app.id] });
    const q = await device("/api/db/query", { method: "POST", body: JSON.stringify({ sql: "SELECT 40 + 2 AS answer" }) });
    expect(q.status).toBe(200);
    expect((await q.json()).results[0].rows).toEqual([[42]]);
    const status = await op(["databases", "status", "--id", String(db.id)]);
    expect(status).toMatchObject({ status: "DATABASE_STATUS_ACTIVE", linked_app_ids: [app.id] });
    await op(["databases", "unlink", "--id", String(db.id), "--app", String(app.id)]);
    const gone = await device("/api/db/query", { method: "POST", body: JSON.stringify({ sql: "SELECT 1" }) });
    expect(gone.status).not.toBe(200);
    const got = await op(["call", "IdentityService/GetApp", "--data", JSON.stringify({ id: app.id })]);
    expect(got.app_key).toBe(app.app_key);
  });
});

describe("usage mistakes, output and speed", () => {
  const env = () => ({ PULSEBASE_ADMIN_URL: s.adminUrl, PULSEBASE_OPERATOR_TOKEN: s.operatorToken });

  it("refuses an option the command does not take, an unknown option and an unknown command with exit 2 and the usage", async () => {
    const [stray, unknown, command, extraWord, missingValue] = await Promise.all([
      // --id is another command's option: before, this listed nothing and exited 0.
      cli(["functions", "schedules", "runs", "--id", "3"], env()),
      cli(["apps", "list", "--frobnicate"], env()),
      cli(["apps", "frobnicate"], env()),
      cli(["apps", "list", "now"], env()),
      cli(["apps", "get", "--id"], env()),
    ]);
    for (const r of [stray, unknown, command, extraWord, missingValue]) {
      expect(r.code, r.stderr).toBe(2);
      expect(r.stdout).toBe("");
    }
    expect(stray.stderr).toContain("functions schedules runs does not take --id");
    expect(stray.stderr).toContain("usage: pulsebase functions schedules runs --trigger ID");
    expect(unknown.stderr).toContain("--frobnicate");
    expect(unknown.stderr).toContain("usage: pulsebase apps list");
    expect(command.stderr).toContain("unknown command: apps frobnicate");
    // the usage of the commands of the group named
    expect(command.stderr).toContain("usage: pulsebase apps create --name N");
    expect(extraWord.stderr).toContain("unknown command: apps list now");
    expect(missingValue.stderr).toContain("usage: pulsebase apps get");
  });

  it("prints db query results as an aligned table, JSON with --json, and durations rounded", async () => {
    const app = await op(["apps", "create", "--name", "cli table"]);
    await op(["databases", "create", "--team", String(app.team_id), "--name", "tabled", "--app", String(app.id)]);
    const sql = "SELECT 1 AS id, 'ship it' AS title, 40.25 AS price, NULL AS note UNION ALL SELECT 22, 'a', 3, 'x'";
    const table = await cli(["db", "query", "--app", String(app.id), sql], env());
    expect(table.code, table.stderr).toBe(0);
    const lines = table.stdout.split("\n");
    expect(lines.slice(0, 5)).toEqual([
      "id | title   | price | note",
      "---+---------+-------+-----",
      " 1 | ship it | 40.25 | NULL",
      "22 | a       |     3 | x",
      "(2 rows)",
    ]);
    expect(table.stdout).toMatch(/\(\d+(\.\d)? ms\)\n$/);
    const json = await cli(["db", "query", "--json", "--app", String(app.id), sql], env());
    expect(json.code, json.stderr).toBe(0);
    expect(JSON.parse(json.stdout).results[0]).toMatchObject({ columns: ["id", "title", "price", "note"], rows: [[1, "ship it", 40.25, null], [22, "a", 3, "x"]] });
    // Longer than one page of 10,000 rows: every row is printed, in order.
    const long = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 12345) SELECT i FROM n";
    const all = await cli(["db", "query", "--json", "--app", String(app.id), long], env());
    expect(all.code, all.stderr).toBe(0);
    const allRows = JSON.parse(all.stdout).results[0].rows as number[][];
    expect(allRows).toHaveLength(12345);
    expect(allRows[12344]).toEqual([12345]);
    expect(JSON.parse(all.stdout).results[0].next_page_token).toBeUndefined();
    // As a table too, past the size where spreading the rows into Math.max overflows the stack.
    const wide = await cli(["db", "query", "--app", String(app.id), long.replace("12345", "130000")], env());
    expect(wide.code, wide.stderr).toBe(0);
    expect(wide.stdout).toContain("\n130000\n(130000 rows)");
    const failed = await cli(["db", "query", "--app", String(app.id), "SELECT * FROM nowhere"], env());
    expect(failed.code).toBe(1);
    expect(failed.stdout).toMatch(/^error: .*no such table/);

    // An invocation's duration is a double on the wire: printed to a tenth of a millisecond.
    const file = join(tmp, "dur.js");
    await writeFile(file, "export default async () => ({ ok: true });");
    const fn = await op(["functions", "deploy", "--app", String(app.id), "--name", "dur", "--file", file]);
    await op(["functions", "run", "--id", String(fn.function.id)]);
    const invs = await cli(["functions", "invocations", "--id", String(fn.function.id)], env());
    const durations = [...invs.stdout.matchAll(/"duration_ms": ([0-9.e+-]+)/g)].map((m) => m[1]!);
    expect(durations.length).toBeGreaterThan(0);
    for (const d of durations) expect(d).toMatch(/^\d+(\.\d)?$/);
  });

  it("answers a command against the running server (timed and reported, not asserted)", async () => {
    const times: number[] = [];
    for (let i = 0; i < 5; i++) {
      const t0 = performance.now();
      const r = await cli(["apps", "list"], env());
      times.push(performance.now() - t0);
      expect(r.code, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout).apps.length).toBeGreaterThan(0);
    }
    const t0 = performance.now();
    await new Promise<void>((res, rej) => execFile(process.execPath, ["-e", "0"], (err) => (err ? rej(err) : res())));
    const bare = performance.now() - t0;
    const ms = times.map((t) => Math.round(t));
    console.log(`pulsebase apps list: ${ms.join(", ")} ms (median ${ms.sort((a, b) => a - b)[2]} ms); node -e 0: ${Math.round(bare)} ms`);
  });
});

describe("pulsebase load", () => {
  it("counts the requests that failed, prints why, and exits non-zero", async () => {
    const app = await s.createApp("cli load");
    const child = spawn(process.execPath, [CLI_BIN, "load", "--url", s.httpsUrl, "--app-key", app.appKey, "--rpc", "consumer.create", "--duration", "3", "--concurrency", "2", "--insecure"], { cwd: tmp, env: cliEnv(noTokenFile({})) });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const exited = new Promise<number>((r) => child.on("close", (code) => r(code ?? 1)));
    // Once the load's consumer is registered, the app key it drives stops working.
    const admin = s.adminClient(IdentityService);
    for (let i = 0; i < 200; i++) {
      const { consumers } = await admin.listConsumers({ appId: app.appId, pageSize: 10 });
      if (consumers.length) break;
      await new Promise((r) => setTimeout(r, 25));
    }
    await admin.rotateAppKey({ appId: app.appId });
    const code = await exited;
    expect(code, stderr).toBe(1);
    const summary = JSON.parse(stdout);
    expect(summary.failed).toBeGreaterThan(0);
    expect(summary.unsent).toBe(0);
    expect(summary.requests).toBe(summary.succeeded + summary.failed);
    const failedStatuses = Object.entries(summary.statuses as Record<string, number>).filter(([st]) => st !== "200");
    expect(failedStatuses.reduce((n, [, c]) => n + c, 0)).toBe(summary.failed);
    expect(stderr).toMatch(/\d+ request\(s\) failed, 0 not sent \(status 4\d\d: \d+/);
  });

  it("exits non-zero with a clear message when the server cannot be reached", async () => {
    const dead = await freePort();
    const r = await cli(["load", "--url", `https://127.0.0.1:${dead}`, "--app-key", "pk_x", "--duration", "1", "--insecure"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`cannot reach https://127.0.0.1:${dead} (ECONNREFUSED)`);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });
});
