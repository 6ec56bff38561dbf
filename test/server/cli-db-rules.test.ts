// `pulsebase db rules …` (issue #31, point 6) as operators run it
// (bin/pulsebase.js in a child process) against a whole server: get (text
// and --json), set from a file (the mode kept when the file has none; the
// version checked: --expected-version, else the file's own), mode, history
// with who saved, try as two consumers (and under a draft file), the
// errors (a rule that does not compile, a stale version, a malformed
// file), and `call AccessRulesService/...`; devices see the rules applied.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createModules } from "../../src/server/modules.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { operatorEnv, runCli, type CliRun } from "../helpers/cli.js";

let s: TestServer;
let tmp: string;
let app: { id: number; team_id: number; app_key: string };
let alice: { id: number; token: string };
let bob: { id: number; token: string };

const cli = (...args: string[]): Promise<CliRun> => runCli(args, { cwd: tmp, env: { PULSEBASE_DATA_DIR: join(tmp, "no-data"), ...operatorEnv(s) } });

/** A command that must succeed; its output parsed as JSON. */
async function op(...args: string[]): Promise<any> { // eslint-disable-line @typescript-eslint/no-explicit-any
  const r = await cli(...args);
  expect(r.code, `${args.join(" ")}\n${r.stderr}`).toBe(0);
  return JSON.parse(r.stdout);
}

async function file(name: string, content: unknown): Promise<string> {
  const path = join(tmp, name);
  await writeFile(path, typeof content === "string" ? content : JSON.stringify(content, null, 2));
  return path;
}

/** A device's rows for one SELECT (or the error). */
async function device(token: string, sql: string): Promise<unknown> {
  const r = await s.fetch("/api/db/query", { method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, body: JSON.stringify({ sql }) });
  const body = await r.json();
  return body.results?.[0]?.error || body.results?.[0]?.rows || body;
}

const OWNER = "owner_id = :user_id";
const A = () => String(app.id);

beforeAll(async () => {
  s = await startTestServer({ modules: createModules });
  tmp = await mkdtemp(join(tmpdir(), "pulsebase-cli-rules-"));
  app = await op("apps", "create", "--name", "cli rules");
  await op("databases", "create", "--team", String(app.team_id), "--name", "rules db", "--app", A());
  const made = await cli("db", "query", "--app", A(), "CREATE TABLE notes (id INTEGER PRIMARY KEY, owner_id TEXT NOT NULL, body TEXT); INSERT INTO notes (owner_id, body) VALUES ('alice', 'a1'), ('bob', 'b1'), ('alice', 'a2')");
  expect(made.code, made.stderr + made.stdout).toBe(0);
  alice = await s.register(app.app_key, { user_id: "alice" });
  bob = await s.register(app.app_key, { user_id: "bob" });
}, 60_000);
afterAll(async () => {
  await s?.close();
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

describe("pulsebase db rules", { timeout: 60_000 }, () => {
  it("gets, sets from a file, switches the mode, and the devices see the rules", async () => {
    const none = await cli("db", "rules", "get", "--app", A());
    expect(none.code, none.stderr).toBe(0);
    expect(none.stdout).toBe("mode: open (no rules saved yet: version 0)\nno table has rules\n");
    expect(await op("db", "rules", "get", "--app", A(), "--json")).toMatchObject({ app_id: app.id, mode: "open" });

    // A file without "mode" keeps the mode in force (open): nothing changes for devices yet.
    const rules = await file("rules.json", { tables: { notes: { select: OWNER, insert: OWNER, update: OWNER, delete: OWNER, update_columns: ["body"] } } });
    const v1 = await op("db", "rules", "set", "--app", A(), "--file", rules);
    expect(v1).toMatchObject({ mode: "open", version: 1, tables: [{ table: "notes", select: OWNER, update_columns: ["body"] }] });
    expect(await device(alice.token, "SELECT body FROM notes ORDER BY id")).toEqual([["a1"], ["b1"], ["a2"]]);

    const v2 = await op("db", "rules", "mode", "--app", A(), "rules");
    expect(v2).toMatchObject({ mode: "rules", version: 2, tables: [{ table: "notes", select: OWNER, insert: OWNER }] });
    expect(await device(alice.token, "SELECT body FROM notes ORDER BY id")).toEqual([["a1"], ["a2"]]);
    expect(await device(bob.token, "SELECT body FROM notes ORDER BY id")).toEqual([["b1"]]);

    const text = await cli("db", "rules", "get", "--app", A());
    expect(text.code, text.stderr).toBe(0);
    const lines = text.stdout.split("\n");
    expect(lines[0]).toMatch(/^mode: rules, version 2, saved \d{4}-\d\d-\d\dT.*Z by the operator token$/);
    expect(lines.slice(1, 11)).toEqual([
      "",
      "notes",
      `  select:       ${OWNER}`,
      `  insert:       ${OWNER}`,
      `  update:       ${OWNER}`,
      "  update check: (the update rule)",
      `  delete:       ${OWNER}`,
      "  select columns: every column",
      "  insert columns: every column",
      "  update columns: body",
    ]);
  });

  it("checks the version: --expected-version, else the file's own, and refuses a rule that does not compile", async () => {
    const cur = await op("db", "rules", "get", "--app", A(), "--json");
    const stale = await cli("db", "rules", "set", "--app", A(), "--file", await file("stale.json", { mode: "rules", tables: {} }), "--expected-version", String(cur.version - 1));
    expect(stale.code).toBe(1);
    expect(stale.stderr).toMatch(/changed since version 1/);

    // get --json, edited, set back: checked against the version it was read at.
    const edited = await file("edited.json", { ...cur, tables: cur.tables.map((t: Record<string, unknown>) => ({ ...t, delete: "false" })) });
    const v3 = await op("db", "rules", "set", "--app", A(), "--file", edited);
    expect(v3).toMatchObject({ version: cur.version + 1, mode: "rules", tables: [{ table: "notes", delete: "false" }] });
    const again = await cli("db", "rules", "set", "--app", A(), "--file", edited);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/changed since version 2/);

    const broken = await cli("db", "rules", "set", "--app", A(), "--file", await file("broken.json", { mode: "rules", tables: { notes: { select: "no_such_column = :user_id" } } }));
    expect(broken.code).toBe(1);
    expect(broken.stderr).toMatch(/no such column: no_such_column/);
    expect((await op("db", "rules", "get", "--app", A(), "--json")).version).toBe(3);

    // Mistakes in the file or the command: exit 2, nothing sent.
    for (const [args, message] of [
      [["db", "rules", "set", "--app", A(), "--file", await file("typo.json", { mode: "rules", tabels: {} })], /unknown key "tabels"/],
      [["db", "rules", "set", "--app", A(), "--file", await file("mode.json", { mode: "closed", tables: {} })], /"mode" is "open" or "rules"/],
      [["db", "rules", "set", "--app", A(), "--file", await file("notjson.json", "{ mode: rules")], /is not valid JSON/],
      [["db", "rules", "set", "--app", A(), "--file", await file("key.json", { tables: { notes: { selct: "true" } } })], /selct/],
      [["db", "rules", "mode", "--app", A(), "closed"], /takes open or rules/],
      [["db", "rules", "set", "--app", A()], /needs --file/],
    ] as const) {
      const r = await cli(...args);
      expect(r.code, `${args.join(" ")}: ${r.stderr}`).toBe(2);
      expect(r.stderr).toMatch(message);
    }
    expect((await op("db", "rules", "get", "--app", A(), "--json")).version).toBe(3);
  });

  it("lists the versions with who saved them", async () => {
    const h = await cli("db", "rules", "history", "--app", A());
    expect(h.code, h.stderr).toBe(0);
    const lines = h.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^version \| mode {2}\| tables \| saved_by +\| saved_at/);
    expect(lines.slice(2, 5).map((l) => l.split(" | ").slice(0, 4).map((x) => x.trim()))).toEqual([
      ["3", "rules", "notes", "the operator token"],
      ["2", "rules", "notes", "the operator token"],
      ["1", "open", "notes", "the operator token"],
    ]);
    expect(lines.at(-1)).toBe("(3 rows)");
    const json = await op("db", "rules", "history", "--app", A(), "--limit", "2", "--json");
    expect(json.versions.map((v: { version: number }) => v.version)).toEqual([3, 2]);
  });

  it("tries SQL as two consumers, and under a draft file without saving it", async () => {
    const sql = "SELECT id, body FROM notes ORDER BY id";
    const a = await cli("db", "rules", "try", "--app", A(), "--consumer", String(alice.id), "--sql", sql);
    expect(a.code, a.stderr).toBe(0);
    expect(a.stdout.split("\n").slice(0, 5)).toEqual(["id | body", "---+-----", " 1 | a1", " 3 | a2", "(2 rows)"]);
    const b = await op("db", "rules", "try", "--app", A(), "--consumer", String(bob.id), "--sql", sql, "--json");
    expect(b.results[0].rows).toEqual([[2, "b1"]]);
    // A draft: everyone reads everything (not saved).
    const draft = await file("draft.json", { mode: "rules", tables: { notes: { select: "true" } } });
    const d = await op("db", "rules", "try", "--app", A(), "--consumer", String(bob.id), "--sql", sql, "--file", draft, "--json");
    expect(d.results[0].rows).toEqual([[1, "a1"], [2, "b1"], [3, "a2"]]);
    expect((await op("db", "rules", "get", "--app", A(), "--json")).version).toBe(3);
    // A write the rules refuse is the statement's error: exit 1, the message printed.
    const refused = await cli("db", "rules", "try", "--app", A(), "--consumer", String(bob.id), "--sql", "INSERT INTO notes (owner_id, body) VALUES ('alice', 'forged')");
    expect(refused.code).toBe(1);
    expect(refused.stdout).toMatch(/^error: .*notes/);
    expect(await device(alice.token, "SELECT count(*) FROM notes")).toEqual([[2]]);
    // Not a consumer of this application.
    const stranger = await cli("db", "rules", "try", "--app", A(), "--consumer", "999999", "--sql", sql);
    expect(stranger.code).toBe(1);
    expect(stranger.stderr).toMatch(/not a consumer of this application/);
  });

  it("reaches the service through `call` too", async () => {
    const methods = (await op("call")) as string[];
    expect(methods).toEqual(expect.arrayContaining(["AccessRulesService/GetAccessRules", "AccessRulesService/SetAccessRules", "AccessRulesService/ListAccessRuleVersions", "AccessRulesService/TryAsConsumer"]));
    expect(await op("call", "AccessRulesService/GetAccessRules", "--data", JSON.stringify({ app_id: app.id }))).toMatchObject({ version: 3, mode: "rules" });
  });
});
