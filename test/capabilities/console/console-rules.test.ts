// The database page's Rules tab in Chromium (issue #31, point 6) over a
// real server: the mode and an owner rule set through the page (template,
// column list, Save) land (GetAccessRules, and devices see only their own
// rows); "try as consumer" shows two consumers different rows, and the
// unsaved draft; a save made from a version someone else replaced meanwhile
// is refused with the conflict message and the page reloads the new one; a
// viewer sees the rules and their history read-only and the server refuses
// their save. CONSOLE_SCREENSHOTS=dir saves the screens (docs/console/).
import { existsSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { AccessRulesService } from "../../../gen/pulsebase/admin/v1/access_rules_pb.js";
import { DatabaseService } from "../../../gen/pulsebase/admin/v1/database_pb.js";
import { SqlService } from "../../../gen/pulsebase/admin/v1/sql_pb.js";
import { Role } from "../../../gen/pulsebase/common/v1/options_pb.js";
import { CONSOLE_DIST } from "../../../src/capabilities/console/static-console.js";
import { createModules } from "../../../src/server/modules.js";
import { startTestServer, type TestServer } from "../../helpers/server.js";
import { launchChromium } from "./browser.js";
import { invite, setupOwner, type OperatorSession } from "./operator-session.js";

const SHOTS = process.env.CONSOLE_SCREENSHOTS ? resolve(process.env.CONSOLE_SCREENSHOTS) : undefined;

let s: TestServer;
let owner: OperatorSession;
const OWNER_PASSWORD = "a long owner password";
const VIEWER_PASSWORD = "a long viewer password";
let browser: Browser;
let ownerCtx: BrowserContext;
let page: Page;
let appId: bigint;
let alice: { id: number; token: string };
let bob: { id: number; token: string };

/** expect.poll with room for a loaded machine. */
const until = <T>(fn: () => T | Promise<T>) => expect.poll(fn, { timeout: 20_000, interval: 100 });

async function shot(p: Page, name: string): Promise<void> {
  if (!SHOTS) return;
  await p.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: false });
}

async function signedIn(email: string, password: string, viewport: { width: number; height: number }): Promise<BrowserContext> {
  const ctx = await browser.newContext({ viewport });
  const p = await ctx.newPage();
  await p.goto(`${s.adminUrl}/login`);
  await p.getByLabel("Email").fill(email);
  await p.getByLabel("Password").fill(password);
  await p.getByRole("button", { name: "Sign in" }).click();
  await p.waitForURL((u) => !u.pathname.startsWith("/login"));
  await p.close();
  return ctx;
}

/** A device's query over REST: the rows, or the status and body when it failed. */
async function device(token: string, sql: string): Promise<unknown> {
  const r = await s.fetch("/api/db/query", { method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, body: JSON.stringify({ sql }) });
  const body = await r.json();
  return r.status === 200 && !body.results[0].error ? body.results[0].rows : { status: r.status, body };
}

const rulesApi = () => s.adminClient(AccessRulesService);
const editor = (p: Page, name: string) => p.getByRole("textbox", { name });

beforeAll(async () => {
  if (!existsSync(join(CONSOLE_DIST, "index.html"))) throw new Error(`${CONSOLE_DIST} has no build: set PULSEBASE_CONSOLE_DIST or npm run console:build`);
  if (SHOTS) await mkdir(SHOTS, { recursive: true });
  s = await startTestServer({ modules: createModules });
  owner = await setupOwner(s, "ada@example.com", OWNER_PASSWORD);
  const teamId = owner.me.teams[0]!.teamId;
  const app = await s.admin.createApp({ teamId, name: "Notes" });
  appId = app.id;
  const dbs = s.adminClient(DatabaseService);
  const db = await dbs.createDatabase({ teamId, name: "notes" });
  await dbs.linkDatabase({ databaseId: db.id, appId });
  const r = await s.adminClient(SqlService).runSql({
    appId,
    sql: `CREATE TABLE notes (id INTEGER PRIMARY KEY, owner_id TEXT NOT NULL, body TEXT);
          INSERT INTO notes (owner_id, body) VALUES ('alice', 'alice one'), ('bob', 'bob one'), ('alice', 'alice two');
          CREATE TABLE audit_trail (id INTEGER PRIMARY KEY, what TEXT)`,
  });
  expect(r.results.map((x) => x.error)).toEqual(["", "", ""]);
  alice = await s.register(app.appKey, { user_id: "alice" });
  bob = await s.register(app.appKey, { user_id: "bob" });
  await invite(s, owner, teamId, "vic@example.com", Role.VIEWER, VIEWER_PASSWORD);
  browser = await launchChromium();
  ownerCtx = await signedIn("ada@example.com", OWNER_PASSWORD, { width: 1280, height: 900 });
  page = await ownerCtx.newPage();
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await s?.close();
});

describe("the database page's Rules tab in Chromium", { timeout: 90_000 }, () => {
  it("sets rules mode and an owner rule from a template, and the save lands", async () => {
    // Open mode first: every device reads every row.
    expect(await device(alice.token, "SELECT body FROM notes ORDER BY id")).toEqual([["alice one"], ["bob one"], ["alice two"]]);
    await page.goto(`${s.adminUrl}/database?app=${appId}`);
    await page.getByRole("tab", { name: "Rules" }).click();
    await until(() => page.url()).toMatch(/tab=rules/);
    await until(() => page.getByRole("status", { name: "Rules in force" }).textContent()).toContain("No rules saved yet");
    await page.getByRole("radio", { name: /^Rules/ }).check();
    const tables = page.getByRole("navigation", { name: "Tables" });
    await tables.getByRole("button", { name: /^notes/ }).click();
    await until(() => page.url()).toMatch(/rtable=notes/);
    // The template asks for the owner column (owner_id is guessed).
    const tpl = page.getByRole("form", { name: "Start from a template" });
    await tpl.getByLabel("Template", { exact: true }).selectOption({ label: "Owner only" });
    expect(await tpl.getByLabel("Owner column", { exact: true }).inputValue()).toBe("owner_id");
    await tpl.getByRole("button", { name: "Apply template" }).click();
    for (const op of ["select", "insert", "update", "delete"]) await until(() => editor(page, `${op} rule of notes`).textContent()).toBe("owner_id = :user_id");
    // An update may set body only (not owner_id).
    await page.getByRole("group", { name: "Columns an update may set" }).getByLabel("body").check();
    await until(() => tables.getByRole("button", { name: /^notes/ }).textContent()).toContain("rules");
    expect(await tables.getByRole("button", { name: /^audit_trail/ }).textContent()).toContain("no access");
    await page.getByRole("button", { name: "Save rules" }).click();
    await until(() => page.getByText("Saved: version 1 is in force.").isVisible()).toBe(true);
    await until(() => page.getByRole("status", { name: "Rules in force" }).textContent()).toMatch(/Version 1 in force \(rules\), saved by ada@example\.com/);

    const saved = await rulesApi().getAccessRules({ appId });
    expect(saved.mode).toBe("rules");
    expect(saved.version).toBe(1);
    expect(saved.tables.map((t) => ({ table: t.table, select: t.select, insert: t.insert, update: t.update, delete: t.delete, updateColumns: t.updateColumns }))).toEqual([
      { table: "notes", select: "owner_id = :user_id", insert: "owner_id = :user_id", update: "owner_id = :user_id", delete: "owner_id = :user_id", updateColumns: ["body"] },
    ]);
    // The devices now see their own rows only.
    expect(await device(alice.token, "SELECT body FROM notes ORDER BY id")).toEqual([["alice one"], ["alice two"]]);
    expect(await device(bob.token, "SELECT body FROM notes ORDER BY id")).toEqual([["bob one"]]);
    // The history says who saved it.
    const history = page.getByRole("table", { name: "Rule versions" });
    await until(() => history.locator("tbody tr").first().textContent()).toMatch(/^1 in force.*rules.*notes.*ada@example\.com/);
  });

  it("tries SQL as two consumers and sees different rows, and the unsaved draft", async () => {
    await page.goto(`${s.adminUrl}/database?app=${appId}&tab=rules&rtable=notes`);
    await until(() => page.getByRole("status", { name: "Rules in force" }).textContent()).toContain("Version 1 in force");
    const box = page.getByRole("region", { name: "Try as consumer" });
    const sql = editor(page, "SQL to try as the consumer");
    const tryAs = async (consumer: number) => {
      await box.getByLabel("Consumer id").fill(String(consumer));
      await sql.fill("SELECT id, owner_id, body FROM notes ORDER BY id");
      await page.keyboard.press("Escape");
      await box.getByRole("button", { name: "Run as consumer" }).click();
      const grid = box.getByRole("table", { name: `Result as consumer ${consumer}` });
      await grid.waitFor();
      return grid;
    };
    const a = await tryAs(alice.id);
    await until(() => box.getByRole("status").textContent()).toBe(`2 row(s) as consumer ${alice.id}`);
    expect(await a.textContent()).toContain("alice one");
    expect(await a.textContent()).not.toContain("bob one");
    const b = await tryAs(bob.id);
    await until(() => box.getByRole("status").textContent()).toBe(`1 row(s) as consumer ${bob.id}`);
    expect(await b.textContent()).toContain("bob one");
    expect(await b.textContent()).not.toContain("alice");
    // The draft (unsaved: select true) is what the preview runs under.
    await editor(page, "select rule of notes").fill("true");
    await page.keyboard.press("Escape");
    await until(() => page.getByText("Unsaved changes (editing version 1).").isVisible()).toBe(true);
    await tryAs(bob.id);
    await until(() => box.getByRole("status").textContent()).toBe(`3 row(s) as consumer ${bob.id}`);
    await shot(page, "database-rules-try");
    // Nothing was saved: the rule in force is still the owner rule.
    expect((await rulesApi().getAccessRules({ appId })).tables[0]!.select).toBe("owner_id = :user_id");
    await page.getByRole("button", { name: "Discard changes" }).click();
    await until(() => editor(page, "select rule of notes").textContent()).toBe("owner_id = :user_id");
  });

  it("refuses a save made from a replaced version with the conflict message, and reloads the new one", async () => {
    await page.goto(`${s.adminUrl}/database?app=${appId}&tab=rules&rtable=notes`);
    await until(() => page.getByRole("status", { name: "Rules in force" }).textContent()).toContain("Version 1 in force");
    // Someone else (the CLI, another browser) saves version 2 meanwhile.
    const cur = await rulesApi().getAccessRules({ appId });
    await rulesApi().setAccessRules({ appId, mode: "rules", expectedVersion: 1, tables: cur.tables.map((t) => ({ ...t, delete: "false" })) });
    await editor(page, "insert rule of notes").fill("owner_id = :user_id AND body IS NOT NULL");
    await page.keyboard.press("Escape");
    await page.getByRole("button", { name: "Save rules" }).click();
    const alert = page.getByRole("region", { name: "Save the rules" }).getByRole("alert");
    await until(() => alert.textContent()).toMatch(/Someone else saved the rules after version 1 was loaded/);
    expect((await rulesApi().getAccessRules({ appId })).version).toBe(2);
    await shot(page, "database-rules-conflict");
    await alert.getByRole("button", { name: "Reload the rules" }).click();
    await until(() => page.getByRole("status", { name: "Rules in force" }).textContent()).toContain("Version 2 in force");
    await until(() => editor(page, "delete rule of notes").textContent()).toBe("false");
    expect(await editor(page, "insert rule of notes").textContent()).toBe("owner_id = :user_id");
    // A rule that does not compile is refused with SQLite's message, shown by the form; nothing saved.
    await editor(page, "select rule of notes").fill("no_such_column = :user_id");
    await page.keyboard.press("Escape");
    await page.getByRole("button", { name: "Save rules" }).click();
    await until(() => page.getByRole("region", { name: "Save the rules" }).getByRole("alert").textContent()).toMatch(/no_such_column/);
    expect((await rulesApi().getAccessRules({ appId })).version).toBe(2);
    await page.getByRole("button", { name: "Discard changes" }).click();
    // The screenshot: the page as it stands, with the history.
    await page.getByRole("table", { name: "Rule versions" }).locator("tbody tr").filter({ hasText: /^1/ }).click();
    await until(() => page.url()).toMatch(/rversion=1/);
    await page.evaluate(() => (globalThis as unknown as { scrollTo(x: number, y: number): void }).scrollTo(0, 0));
    await shot(page, "database-rules");
  });

  it("shows a viewer the rules and their history read-only, and the server refuses their save", async () => {
    const ctx = await signedIn("vic@example.com", VIEWER_PASSWORD, { width: 1280, height: 900 });
    const v = await ctx.newPage();
    try {
      await v.goto(`${s.adminUrl}/database?app=${appId}&tab=rules&rtable=notes`);
      await until(() => v.getByRole("status", { name: "Rules in force" }).textContent()).toContain("Version 2 in force");
      expect(await v.getByText("Viewers see the rules and their history; changing them needs the developer role.").isVisible()).toBe(true);
      await until(() => editor(v, "select rule of notes").textContent()).toBe("owner_id = :user_id");
      const select = editor(v, "select rule of notes");
      expect(await select.getAttribute("aria-readonly")).toBe("true");
      await select.click();
      await v.keyboard.type(" OR 1");
      expect(await select.textContent()).toBe("owner_id = :user_id");
      expect(await v.getByRole("radio", { name: /^Rules/ }).isDisabled()).toBe(true);
      expect(await v.getByRole("button", { name: "Save rules" }).count()).toBe(0);
      expect(await v.getByRole("button", { name: "Apply template" }).count()).toBe(0);
      expect(await v.getByRole("region", { name: "Try as consumer" }).count()).toBe(0);
      await until(() => v.getByRole("table", { name: "Rule versions" }).locator("tbody tr").count()).toBe(2);
      await shot(v, "database-rules-viewer");
      // Whatever the page shows, the server decides.
      const answer = await v.evaluate(async (app) => {
        const post = (m: string, body: unknown, csrf = "") =>
          fetch(`/pulsebase.admin.v1.${m}`, { method: "POST", headers: { "content-type": "application/json", "x-csrf-token": csrf }, body: JSON.stringify(body) });
        const me = (await (await post("AccountService/GetMe", {})).json()) as { csrfToken: string };
        const r = await post("AccessRulesService/SetAccessRules", { appId: app, mode: "open" }, me.csrfToken);
        return [r.status, ((await r.json()) as { code: string }).code] as const;
      }, String(appId));
      expect(answer).toEqual([403, "permission_denied"]);
      expect((await rulesApi().getAccessRules({ appId })).version).toBe(2);
    } finally {
      await ctx.close();
    }
  });
});
