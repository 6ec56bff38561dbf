// The console's data tools in Chromium (issue #30, point 4) over a real
// server: a 10,000-row table (one bulk insert) sorted, filtered, searched
// and paged by page number in the table editor, with the view in the URL
// (reload, back); a row inserted, edited and deleted, and the audit log's
// entries; a viewer on a phone browses but is refused editing in the page
// and on the server; the SQL editor scrolls a 100,000-row result to its
// last row with a few dozen rows in the DOM, exports the whole result as
// CSV with RFC 4180 quoting, and keeps history and saved queries across a
// reload. No horizontal overflow at 1280x800 or 390x844.
// CONSOLE_SCREENSHOTS=dir saves the screens (docs/console/).
import { existsSync } from "node:fs";
import { mkdir, readFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Browser, BrowserContext, Page } from "playwright-core";
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

/** expect.poll with room for a loaded machine. */
const until = <T>(fn: () => T | Promise<T>) => expect.poll(fn, { timeout: 20_000, interval: 100 });

async function shot(p: Page, name: string): Promise<void> {
  if (!SHOTS) return;
  await p.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: false });
}

/** A browser context signed in through the console's sign-in page. */
async function signedIn(email: string, password: string, viewport: { width: number; height: number }): Promise<BrowserContext> {
  const ctx = await browser.newContext({ viewport, acceptDownloads: true });
  const p = await ctx.newPage();
  await p.goto(`${s.adminUrl}/login`);
  await p.getByLabel("Email").fill(email);
  await p.getByLabel("Password").fill(password);
  await p.getByRole("button", { name: "Sign in" }).click();
  await p.waitForURL((u) => !u.pathname.startsWith("/login"));
  await p.close();
  return ctx;
}

/** How far the page scrolls sideways (0: it fits). (The test's tsconfig has no DOM types: the page's globals are typed here.) */
const overflow = (p: Page) =>
  p.evaluate(() => {
    const root = (globalThis as unknown as { document: { documentElement: { scrollWidth: number; clientWidth: number } } }).document.documentElement;
    return root.scrollWidth - root.clientWidth;
  });
const status = (p: Page) => p.getByRole("status").filter({ hasText: /row/ }).first();

beforeAll(async () => {
  if (!existsSync(join(CONSOLE_DIST, "index.html"))) throw new Error(`${CONSOLE_DIST} has no build: set PULSEBASE_CONSOLE_DIST or npm run console:build`);
  if (SHOTS) await mkdir(SHOTS, { recursive: true });
  s = await startTestServer({ modules: createModules });
  owner = await setupOwner(s, "ada@example.com", OWNER_PASSWORD);
  const teamId = owner.me.teams[0]!.teamId;
  const app = await s.admin.createApp({ teamId, name: "Shop" });
  appId = app.id;
  const dbs = s.adminClient(DatabaseService);
  const db = await dbs.createDatabase({ teamId, name: "shop" });
  await dbs.linkDatabase({ databaseId: db.id, appId });
  // 10,000 rows in one bulk insert.
  const r = await s.adminClient(SqlService).runSql({
    appId,
    sql: `CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, city TEXT, spent REAL);
          WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10000)
          INSERT INTO customers SELECT i, printf('customer %05d', i), CASE i % 4 WHEN 0 THEN 'Oslo' WHEN 1 THEN 'Lima' WHEN 2 THEN 'Pune' ELSE NULL END, (i * 37) % 1000 + 0.5 FROM n`,
  });
  expect(r.results.map((x) => x.error)).toEqual(["", ""]);
  await invite(s, owner, teamId, "vic@example.com", Role.VIEWER, VIEWER_PASSWORD);
  browser = await launchChromium();
  ownerCtx = await signedIn("ada@example.com", OWNER_PASSWORD, { width: 1280, height: 800 });
  page = await ownerCtx.newPage();
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await s?.close();
});

describe("the console's data tools in Chromium", { timeout: 60_000 }, () => {
  it("sorts, filters, searches and jumps to a page of a 10,000-row table, the view in the URL", async () => {
    await page.goto(`${s.adminUrl}/database?app=${appId}`);
    await page.getByRole("tab", { name: "Tables" }).click();
    await page.getByLabel("Table").selectOption("customers");
    await until(() => page.getByText("Rows 1–50 of 10000").isVisible()).toBe(true);
    expect(page.url()).toMatch(/tab=tables/);
    expect(page.url()).toMatch(/table=customers/);
    const rows = page.getByRole("table", { name: "Rows of customers" });
    const firstRow = () => rows.locator("tbody tr").first().textContent();
    // Sort: once ascending, once more descending.
    await rows.getByRole("button", { name: /^spent/ }).click();
    await until(() => page.url()).toMatch(/sort=spent/);
    await rows.getByRole("button", { name: /^spent/ }).click();
    await until(() => page.url()).toMatch(/desc=1/);
    await until(firstRow).toMatch(/999\.5/);
    // Jump to page 137 of 200.
    await page.getByLabel("Page number").fill("137");
    await page.getByRole("button", { name: "Go" }).click();
    await until(() => page.getByText("Rows 6801–6850 of 10000").isVisible()).toBe(true);
    expect(page.url()).toMatch(/page=137/);
    expect(await page.getByText("of 200", { exact: false }).first().isVisible()).toBe(true);
    // Filter city = Oslo, then spent > 990.
    await page.getByLabel("Filter column").selectOption("city");
    await page.getByLabel("Value").fill("Oslo");
    await page.getByRole("button", { name: "Add filter" }).click();
    await until(() => page.getByText("Rows 1–50 of 2500").isVisible()).toBe(true);
    await page.getByLabel("Filter column").selectOption("spent");
    await page.getByLabel("Operator").selectOption("gt");
    await page.getByLabel("Value").fill("990");
    await page.getByRole("button", { name: "Add filter" }).click();
    await until(() => page.getByText(/^Rows 1–\d+ of \d+$/).textContent()).toMatch(/of (2[0-9]|1[0-9]|[1-9])$/);
    const texts = await rows.locator("tbody tr").allTextContents();
    expect(texts.length).toBeGreaterThan(0);
    for (const t of texts) expect(t).toMatch(/Oslo99\d\.5/);
    await page.evaluate(() => (globalThis as unknown as { scrollTo(x: number, y: number): void }).scrollTo(0, 0));
    await shot(page, "database-table-editor");
    // The view survives a reload; back undoes the last filter.
    await page.reload();
    await until(() => page.getByRole("button", { name: /Remove filter spent > 990/ }).isVisible()).toBe(true);
    await page.goBack();
    await until(() => page.getByText("Rows 1–50 of 2500").isVisible()).toBe(true);
    await page.getByRole("button", { name: /Remove filter city = Oslo/ }).click();
    // Search: text in any column.
    await page.getByLabel("Search rows").fill("customer 0424");
    await page.getByRole("button", { name: "Search", exact: true }).click();
    await until(() => page.getByText("Rows 1–10 of 10").isVisible()).toBe(true);
    expect(page.url()).toMatch(/q=customer/);
    expect(await overflow(page)).toBeLessThanOrEqual(0);
  });

  it("inserts, edits and deletes a row, and the audit log shows each change", async () => {
    await page.goto(`${s.adminUrl}/database?app=${appId}&tab=tables&table=customers`);
    await until(() => page.getByText("Rows 1–50 of 10000").isVisible()).toBe(true);
    await page.getByRole("button", { name: "Insert row" }).click();
    const form = page.getByRole("form", { name: "Insert a row" });
    await form.locator("input[name=name]").fill(`O'Hara, "the" ; DROP TABLE customers`);
    await form.locator("input[name=city]").fill("Quito");
    await form.locator("input[name=spent]").fill("12.25");
    await form.getByRole("button", { name: "Insert" }).click();
    await until(() => page.getByText("Row 10001 inserted.").isVisible()).toBe(true);
    await until(() => page.getByText("Rows 1–50 of 10001").isVisible()).toBe(true);
    await page.getByLabel("Search rows").fill("Quito");
    await page.getByRole("button", { name: "Search", exact: true }).click();
    const rows = page.getByRole("table", { name: "Rows of customers" });
    await until(() => rows.locator("tbody tr").first().textContent()).toContain(`10001O'Hara, "the" ; DROP TABLE customersQuito12.25`);
    await rows.getByRole("button", { name: "Edit" }).click();
    const edit = page.getByRole("form", { name: "Edit the row" });
    await edit.locator("input[name=spent]").fill("99.75");
    await shot(page, "database-row-edit");
    await edit.getByRole("button", { name: "Save row" }).click();
    await until(() => page.getByText("Row 10001 saved.").isVisible()).toBe(true);
    await until(() => rows.locator("tbody tr").first().textContent()).toContain("Quito99.75");
    await rows.getByRole("button", { name: "Delete" }).click();
    await rows.getByRole("button", { name: "Confirm delete" }).click();
    await until(() => page.getByText("Row 10001 deleted.").isVisible()).toBe(true);
    await until(() => page.getByText("No rows match.").isVisible()).toBe(true);
    // The audit log, in the Team page.
    await page.goto(`${s.adminUrl}/team?tab=audit`);
    const audit = page.getByRole("table", { name: "Audit log" });
    await audit.waitFor();
    for (const m of ["InsertRow", "UpdateRow", "DeleteRow"]) {
      await until(() => audit.getByRole("row").filter({ hasText: m }).first().textContent()).toMatch(/ada@example\.com.*table=customers/);
    }
    expect(await audit.getByRole("row").filter({ hasText: "DeleteRow" }).first().textContent()).toMatch(/id=10001/);
  });

  it("scrolls a 100,000-row result to its last row with only the visible rows in the DOM", async () => {
    await page.goto(`${s.adminUrl}/database?app=${appId}`);
    const editor = page.locator(".cm-content");
    await editor.waitFor();
    await editor.fill("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000) SELECT i, 'row ' || i AS label, i * 0.5 AS half FROM n");
    await page.getByRole("button", { name: /^Run/ }).click();
    const grid = page.getByRole("table", { name: "Result 1" });
    await grid.waitFor();
    await until(() => status(page).textContent()).toBe("100,000 row(s)");
    expect(await grid.getAttribute("aria-rowcount")).toBe("100001");
    // (Escape closes the editor's completion list, for the screenshot.)
    await page.keyboard.press("Escape");
    await grid.evaluate((el) => el.scrollTo(0, el.scrollHeight));
    await until(() => grid.getByRole("row").filter({ hasText: "row 100000" }).count()).toBe(1);
    expect(await grid.getByRole("row").filter({ hasText: "row 100000" }).isVisible()).toBe(true);
    const inDom = await grid.getByRole("row").count();
    expect(inDom).toBeLessThan(100);
    expect(await grid.getByRole("row").filter({ hasText: /^1row 1/ }).count()).toBe(0);
    await shot(page, "database-sql-grid");
    expect(await overflow(page)).toBeLessThanOrEqual(0);
  });

  it("exports the whole result as CSV with RFC 4180 quoting", async () => {
    await page.goto(`${s.adminUrl}/database?app=${appId}`);
    const editor = page.locator(".cm-content");
    await editor.waitFor();
    await editor.fill(
      `SELECT 0 AS i, 'a,b' AS text, 'say "hi"' AS quoted, 'two' || char(10) || 'lines' AS multi, NULL AS empty
       UNION ALL SELECT * FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 30000) SELECT i, 'plain ' || i, 'q', 'm', i FROM n)`,
    );
    await page.getByRole("button", { name: /^Run/ }).click();
    await until(() => status(page).textContent()).toBe("30,001 row(s)");
    const [download] = await Promise.all([page.waitForEvent("download"), page.getByRole("button", { name: "Export CSV" }).click()]);
    expect(download.suggestedFilename()).toBe("result-1.csv");
    const text = await readFile((await download.path())!, "utf8");
    const lines = text.split("\r\n");
    expect(lines[0]).toBe("i,text,quoted,multi,empty");
    expect(lines[1]).toBe(`0,"a,b","say ""hi""","two\nlines",`);
    expect(lines[2]).toBe("1,plain 1,q,m,1");
    expect(lines.at(-2)).toBe("30000,plain 30000,q,m,30000");
    expect(lines.length).toBe(30_003);
    await until(() => page.getByText("Exported 30,001 rows.").isVisible()).toBe(true);
  });

  it("keeps the history and saved queries across a reload", async () => {
    await page.goto(`${s.adminUrl}/database?app=${appId}`);
    const editor = page.locator(".cm-content");
    await editor.waitFor();
    await editor.fill("SELECT city, count(*) AS n FROM customers GROUP BY city ORDER BY n DESC");
    await page.getByRole("button", { name: /^Run/ }).click();
    await until(() => status(page).textContent()).toBe("4 row(s)");
    await page.getByLabel("Query name").fill("customers per city");
    await page.getByRole("button", { name: "Save query" }).click();
    await until(() => page.getByRole("list", { name: "Saved queries" }).textContent()).toContain("customers per city");
    await page.reload();
    await until(() => page.getByRole("list", { name: "Saved queries" }).textContent()).toContain("customers per city");
    const history = page.getByRole("list", { name: "History" });
    await until(() => history.locator("li").first().textContent()).toContain("SELECT city, count(*) AS n FROM customers");
    expect(await history.textContent()).toContain("WITH RECURSIVE n(i)");
    await editor.fill("SELECT 1");
    await page.getByRole("list", { name: "Saved queries" }).getByRole("button", { name: "customers per city", exact: true }).click();
    await until(() => editor.textContent()).toBe("SELECT city, count(*) AS n FROM customers GROUP BY city ORDER BY n DESC");
    await page.getByRole("button", { name: "Delete saved query customers per city" }).click();
    await until(() => page.getByText("None yet: name a query and Save it.").isVisible()).toBe(true);
  });

  it("lets a viewer on a phone browse but not edit, in the page and on the server", async () => {
    const ctx = await signedIn("vic@example.com", VIEWER_PASSWORD, { width: 390, height: 844 });
    const v = await ctx.newPage();
    try {
      await v.goto(`${s.adminUrl}/database?app=${appId}&tab=tables&table=customers&page=3`);
      await until(() => v.getByText("Rows 101–150 of 10000").isVisible()).toBe(true);
      expect(await v.getByText("Viewers browse; editing rows needs the developer role.").isVisible()).toBe(true);
      expect(await v.getByRole("button", { name: "Insert row" }).count()).toBe(0);
      expect(await v.getByRole("button", { name: "Edit" }).count()).toBe(0);
      expect(await overflow(v)).toBeLessThanOrEqual(0);
      await shot(v, "phone-database-tables");
      await v.getByRole("tab", { name: "SQL editor" }).click();
      await until(() => v.getByText("Running SQL needs the developer role").isVisible()).toBe(true);
      // Whatever the page shows, the server decides.
      const answer = await v.evaluate(async (app) => {
        const post = (m: string, body: unknown, csrf = "") =>
          fetch(`/pulsebase.admin.v1.${m}`, { method: "POST", headers: { "content-type": "application/json", "x-csrf-token": csrf }, body: JSON.stringify(body) });
        const me = (await (await post("AccountService/GetMe", {})).json()) as { csrfToken: string };
        const r = await post("SqlService/UpdateRow", { appId: app, table: "customers", key: { id: 1 }, values: { name: "pwned" } }, me.csrfToken);
        return [r.status, ((await r.json()) as { code: string }).code] as const;
      }, String(appId));
      expect(answer).toEqual([403, "permission_denied"]);
      const still = await s.adminClient(SqlService).browseTable({ appId, table: "customers", pageSize: 1 });
      expect(JSON.stringify(still.rows[0])).toContain("customer 00001");
    } finally {
      await ctx.close();
    }
  });

  it("fits a phone for the owner's SQL editor and table editor too", async () => {
    const ctx = await signedIn("ada@example.com", OWNER_PASSWORD, { width: 390, height: 844 });
    const p = await ctx.newPage();
    try {
      await p.goto(`${s.adminUrl}/database?app=${appId}&tab=tables&table=customers`);
      await until(() => p.getByText("Rows 1–50 of 10000").isVisible()).toBe(true);
      expect(await overflow(p)).toBeLessThanOrEqual(0);
      await p.goto(`${s.adminUrl}/database?app=${appId}`);
      await p.locator(".cm-content").waitFor();
      await p.locator(".cm-content").fill("SELECT * FROM customers");
      await p.getByRole("button", { name: /^Run/ }).click();
      await until(() => status(p).textContent()).toBe("10,000 row(s)");
      expect(await overflow(p)).toBeLessThanOrEqual(0);
      await shot(p, "phone-database-sql");
    } finally {
      await ctx.close();
    }
  });
});
