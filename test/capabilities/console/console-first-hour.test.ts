// The console's first hour (issue #30, points 1, 2 and 5) in Chromium over a
// real server and PostgreSQL: the setup link after `apps create` adopts the
// app's team (one team, the owner a member); the home page's numbers after
// 5,000 events and 200 crash groups sent through the batch endpoints; a CMS
// image previewed from the console's own origin and labelled with its
// uploaded name; tabs and selections in the URL with back and forward; a
// not-found page; dark mode; select options and relation targets chosen
// from lists; the metadata breakdown honouring the range; readable chart
// axes; no sideways scroll at 1280x800 and 390x844.
// CONSOLE_SCREENSHOTS=dir saves the screens (npm run console:screenshots).
import { existsSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join, resolve } from "node:path";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AccountService } from "../../../gen/pulsebase/admin/v1/account_pb.js";
import { CmsService } from "../../../gen/pulsebase/admin/v1/cms_pb.js";
import { DatabaseService } from "../../../gen/pulsebase/admin/v1/database_pb.js";
import { OverviewService } from "../../../gen/pulsebase/admin/v1/overview_pb.js";
import { CONSOLE_DIST } from "../../../src/capabilities/console/static-console.js";
import { createModules } from "../../../src/server/modules.js";
import { deployHttpFunction, startTestServer, type TestServer } from "../../helpers/server.js";
import { launchChromium } from "./browser.js";

const SHOTS = process.env.CONSOLE_SCREENSHOTS ? resolve(process.env.CONSOLE_SCREENSHOTS) : undefined;
// A 2x2 PNG (red).
const PNG = Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAFklEQVR4nGP8z8DAwMDAxMDAwMDAAAANHQEDasKb6QAAAABJRU5ErkJggg==", "base64");
const EMAIL = "grace@example.com";
const PASSWORD = "a long first-owner password";
const DESKTOP = { width: 1280, height: 800 };
const PHONE = { width: 390, height: 844 };

let s: TestServer;
let browser: Browser;
let ctx: BrowserContext;
let page: Page;
let appId = 0n;
let appKey = "";
let teamId = 0n;

/** expect.poll with room for a loaded machine. */
const until = <T>(fn: () => T | Promise<T>) => expect.poll(fn, { timeout: 30_000, interval: 100 });

async function shot(p: Page, name: string): Promise<void> {
  if (!SHOTS) return;
  await p.waitForLoadState("networkidle").catch(() => {});
  await p.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: false });
}

// Page-side code as text: this project's type check has no DOM library.
const overflow = (p: Page) => p.evaluate<number>("document.documentElement.scrollWidth - document.documentElement.clientWidth");
/** What sticks out on the right (for the failure message): the innermost elements past the edge. */
const sticking = (p: Page) =>
  p.evaluate<string[]>(`(() => {
    const w = document.documentElement.clientWidth;
    const out = (el) => el.getBoundingClientRect().right > w + 0.5;
    return [...document.querySelectorAll("body *")].filter((el) => out(el) && ![...el.children].some(out)).slice(0, 5)
      .map((el) => el.tagName.toLowerCase() + "." + el.className + " " + Math.round(el.getBoundingClientRect().right) + "px");
  })()`);
const background = (p: Page) => p.evaluate<string>("getComputedStyle(document.documentElement).backgroundColor");
const search = (p: Page) => new URL(p.url()).searchParams;

beforeAll(async () => {
  if (!existsSync(join(CONSOLE_DIST, "index.html"))) throw new Error(`${CONSOLE_DIST} has no build: npm run console:build (or PULSEBASE_CONSOLE_DIST)`);
  if (SHOTS) await mkdir(SHOTS, { recursive: true });
  s = await startTestServer({ modules: createModules });
  browser = await launchChromium();
  ctx = await browser.newContext({ viewport: DESKTOP });
  page = await ctx.newPage();
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await s?.close();
});

describe("the console's first hour", { timeout: 120_000 }, () => {
  it("setup after `apps create` joins the app's team: one team, the owner a member", async () => {
    // What `pulsebase apps create --name demo` does (cli-commands.ts): a team named after the app, then the app.
    const team = await s.admin.createTeam({ name: "demo" });
    const app = await s.admin.createApp({ teamId: team.id, name: "demo" });
    ({ id: appId, appKey } = app);
    teamId = team.id;
    const token = await s.app.console.accounts.newSetupToken();
    await page.goto(`${s.adminUrl}/setup#token=${token}`);
    await page.getByLabel("Your name").fill("Grace Owner");
    await page.getByLabel("Email").fill(EMAIL);
    await page.getByLabel("Password").fill(PASSWORD);
    await page.getByRole("button", { name: "Create owner account" }).click();
    await page.waitForURL(/\/apps/);
    await until(() => page.getByTestId("app-key").textContent()).toBe(appKey);
    await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: "Team" }).click();
    const teamSelect = page.getByRole("combobox", { name: "Team", exact: true });
    await until(() => teamSelect.locator("option").allTextContents()).toEqual(["demo"]);
    await until(() => page.getByRole("table", { name: "Members" }).getByRole("row", { name: new RegExp(EMAIL) }).isVisible()).toBe(true);
    expect(await page.getByText("No members.").count()).toBe(0);
    const teams = (await s.db.sql.query<{ id: string; members: string }>("SELECT t.id::text, (SELECT count(*) FROM team_members m WHERE m.team_id = t.id)::text AS members FROM teams t")).rows;
    expect(teams).toEqual([{ id: String(teamId), members: "1" }]);
  });

  it("the home page shows the instance at a glance after 5,000 events and 200 crash groups", async () => {
    const dev = await s.register(appKey, { user_id: "u-home" });
    const post = (path: string, body: unknown) =>
      s.fetch(path, { method: "POST", headers: { authorization: `Bearer ${dev.token}`, "content-type": "application/json" }, body: JSON.stringify(body) });
    const session = (await (await post("/api/session/start", {})).json()) as { session_id: number };
    const sid = session.session_id;
    // 4,000 events today, 1,000 twenty days ago (outside the last 24 hours and the default 14-day range), 100 a batch.
    const old = new Date(Date.now() - 20 * 86400_000).toISOString();
    const batches: unknown[] = [];
    for (let b = 0; b < 50; b++) {
      const events = Array.from({ length: 100 }, (_, i) =>
        b < 40 ? { name: "purchase", session_id: sid, metadata: { sku: i % 4 === 0 ? "B2" : "A1" } } : { name: "purchase", session_id: sid, metadata: { sku: "OLD" }, created_at: old },
      );
      batches.push({ events });
    }
    for (let i = 0; i < batches.length; i += 10) {
      const res = await Promise.all(batches.slice(i, i + 10).map((b) => post("/api/events/batch", b)));
      expect(await Promise.all(res.map(async (r) => (r.status === 202 ? 202 : `${r.status} ${await r.text()}`)))).toEqual(res.map(() => 202));
    }
    for (let b = 0; b < 2; b++) {
      const logs = Array.from({ length: 100 }, (_, i) => ({
        session_id: sid, app_version: "2.0.0", classFQN: `com.demo.Crash${b * 100 + i}`, message: `boom ${b * 100 + i}`, type: "crash",
        stack_trace: `at com.demo.Crash${b * 100 + i}.run(Crash.kt:${i + 1})`,
      }));
      expect((await post("/api/log/batch", { logs })).status).toBe(202);
    }
    // A failing function, run once; a linked database.
    await deployHttpFunction(s, appId, "broken", "export default async () => { throw new Error('stock gone'); };");
    expect((await s.fetch("/api/fn/broken", { headers: { authorization: `Bearer ${dev.token}` } })).status).toBe(500);
    const dbs = s.adminClient(DatabaseService);
    const db = await dbs.createDatabase({ teamId, name: "main" });
    await dbs.linkDatabase({ databaseId: db.id, appId });
    const overview = s.adminClient(OverviewService);
    const started = Date.now();
    const o = await until(async () => {
      const r = await overview.getOverview({ teamId: 0n });
      const a = r.apps[0];
      return a && a.events24h === 4000n && a.errors24h === 200n && a.functionFailures24h === 1n ? r : undefined;
    }).not.toBeUndefined();
    void o;
    const t0 = Date.now();
    await overview.getOverview({ teamId: 0n });
    console.info(`GetOverview with 5,000 events and 200 crash groups: ${Date.now() - t0} ms (data settled after ${t0 - started} ms)`);

    await page.goto(`${s.adminUrl}/`);
    await until(() => page.getByTestId("stat-events").textContent()).toBe("4,000");
    expect(await page.getByTestId("stat-applications").textContent()).toBe("1");
    expect(await page.getByTestId("stat-crashes-and-errors").textContent()).toBe("200");
    expect(await page.getByTestId("stat-function-failures").textContent()).toBe("1");
    expect(await page.getByTestId("stat-queue-lag").textContent()).toBe("0");
    const dbRow = page.getByRole("table", { name: "Databases" }).getByRole("row", { name: /main/ });
    await until(() => dbRow.textContent()).toMatch(/main.*active.*(KiB|B).*demo/);
    expect(await page.getByRole("link", { name: "Home" }).getAttribute("aria-current")).toBe("page");
    await shot(page, "home");
  });

  it("previews a CMS image from the console's own origin, labelled with its uploaded name", async () => {
    const cms = s.adminClient(CmsService);
    await cms.createContentType({ appId, contentType: { slug: "post", name: "Post", fields: [{ name: "title", type: "text" }, { name: "cover", type: "media" }] } });
    await page.goto(`${s.adminUrl}/cms/post/new?app=${appId}`);
    await page.getByLabel("title").fill("With a picture");
    await page.getByLabel("Upload cover").setInputFiles({ name: "red-square.png", mimeType: "image/png", buffer: PNG });
    const img = page.getByRole("img", { name: "Preview of red-square.png" });
    await img.waitFor();
    await page.getByRole("button", { name: "Save draft" }).click();
    await page.waitForURL(/\/cms\/post\/[0-9a-f-]{36}/);
    // After a reload the label comes from the stored record, the image from the admin listener.
    await page.reload();
    await until(() => page.getByTestId("media-name").textContent()).toBe("red-square.png");
    const preview = page.getByRole("img", { name: "Preview of red-square.png" });
    await until(() => preview.evaluate((el) => (el as unknown as { complete: boolean; naturalWidth: number }).complete && (el as unknown as { naturalWidth: number }).naturalWidth)).toBe(2);
    const src = await preview.getAttribute("src");
    expect(src).toMatch(new RegExp(`^/media/${appKey}/[0-9a-f-]+\\.png$`));
    const res = await fetch(s.adminUrl + src);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("image/png");
    expect(res.headers.get("content-security-policy")).toMatch(/^sandbox;/);
    expect((await fetch(`${s.adminUrl}/media/${appKey}/00000000-0000-4000-8000-000000000000.png`)).status).toBe(404);
    expect({ overflow: await overflow(page), sticking: await sticking(page) }).toEqual({ overflow: 0, sticking: [] });
    await shot(page, "cms-media");
  });

  it("chooses select options and the relation target from lists", async () => {
    await page.goto(`${s.adminUrl}/cms/new-type?app=${appId}`);
    await page.getByLabel("Name", { exact: true }).fill("Review");
    await page.getByLabel("Field 1 name").fill("size");
    await page.getByLabel("Field 1 type").selectOption("select");
    const newOption = page.getByLabel("Field 1 options: new option");
    await newOption.fill("small");
    await newOption.press("Enter");
    await newOption.fill("large");
    await page.getByRole("button", { name: "Add option" }).click();
    await until(() => page.getByLabel("Field 1 options: option 2").inputValue()).toBe("large");
    await page.getByRole("button", { name: "Add field" }).click();
    await page.getByLabel("Field 2 name").fill("about");
    await page.getByLabel("Field 2 type").selectOption("relation");
    const target = page.getByLabel("Field 2 target");
    await until(() => target.locator("option").allTextContents()).toContain("Post");
    await target.selectOption("post");
    await shot(page, "cms-type-lists");
    await page.getByRole("button", { name: "Save content type" }).click();
    await page.waitForURL(/\/cms\/review\?/);
    const t = await s.adminClient(CmsService).getContentType({ appId, slug: "review" });
    expect(t.fields.map((f) => [f.name, f.options, f.target])).toEqual([["size", ["small", "large"], ""], ["about", [], "post"]]);
  });

  it("puts tabs and selections in the URL: links, reload, back and forward", async () => {
    await page.goto(`${s.adminUrl}/analytics?app=${appId}`);
    await page.getByRole("tab", { name: "Crashes & errors" }).click();
    await until(() => search(page).get("tab")).toBe("logs");
    await page.getByRole("row", { name: /com\.demo\.Crash7 / }).click();
    await until(() => search(page).get("log")).toMatch(/^\d+$/);
    const logUrl = page.url();
    await until(() => page.getByTestId("stack-trace").textContent()).toBe("at com.demo.Crash7.run(Crash.kt:8)");
    await page.goBack();
    await until(() => page.getByText("Choose a group to see its stack trace").isVisible()).toBe(true);
    expect(search(page).get("log")).toBeNull();
    await page.goForward();
    await until(() => page.getByTestId("stack-trace").textContent()).toBe("at com.demo.Crash7.run(Crash.kt:8)");
    // A link opens it in a fresh page too.
    const other = await ctx.newPage();
    await other.goto(logUrl);
    await until(() => other.getByTestId("stack-trace").textContent()).toBe("at com.demo.Crash7.run(Crash.kt:8)");
    expect(await other.getByRole("tab", { name: "Crashes & errors" }).getAttribute("aria-selected")).toBe("true");
    await other.close();
    await page.goBack();
    await page.goBack();
    await until(() => page.getByRole("tab", { name: "Events" }).getAttribute("aria-selected")).toBe("true");
    // The team page: the audit log's scope.
    await page.goto(`${s.adminUrl}/team`);
    const audit = page.getByRole("table", { name: "Audit log" });
    await until(() => audit.textContent()).toContain("CreateApp");
    expect(await audit.textContent()).not.toContain("CompleteSetup");
    await page.getByLabel("Show").selectOption("all");
    await until(() => search(page).get("scope")).toBe("all");
    await until(() => audit.textContent()).toContain("CompleteSetup");
    await page.reload();
    await until(() => audit.textContent()).toContain("CompleteSetup");
    expect(await page.getByLabel("Show").inputValue()).toBe("all");
    await page.goBack();
    await until(() => page.getByLabel("Show").inputValue()).toBe("team");
    await until(async () => (await audit.textContent())?.includes("CompleteSetup")).toBe(false);
  });

  it("shows a not-found page for an unknown path", async () => {
    await page.goto(`${s.adminUrl}/no/such/page`);
    await until(() => page.getByRole("heading", { name: "Page not found" }).isVisible()).toBe(true);
    expect(await page.getByText("/no/such/page").isVisible()).toBe(true);
    expect(await page.getByRole("heading", { name: "Applications" }).count()).toBe(0);
    await page.getByRole("link", { name: "Go to the overview" }).click();
    await until(() => page.getByTestId("stat-events").isVisible()).toBe(true);
  });

  it("honours the chosen range in the chart and the metadata breakdown; the chart's labels are readable", async () => {
    await page.goto(`${s.adminUrl}/analytics?app=${appId}`);
    await page.getByRole("row", { name: /purchase/ }).click();
    await until(() => search(page).get("event")).toMatch(/^\d+$/);
    const breakdown = page.getByTestId("breakdown");
    await until(() => breakdown.textContent()).toContain("4,000 occurrences in the range");
    expect(await breakdown.textContent()).not.toContain("OLD");
    const ticks = page.locator(".chart .tick");
    await ticks.first().waitFor();
    const sizes = await ticks.evaluateAll((els) => els.map((el) => el.getBoundingClientRect().height));
    expect(Math.min(...sizes)).toBeGreaterThanOrEqual(11);
    await shot(page, "analytics-range");
    await page.getByRole("button", { name: "Last 30 days" }).click();
    await until(() => breakdown.textContent()).toContain("5,000 occurrences in the range");
    expect(await breakdown.textContent()).toContain("OLD");
    expect(search(page).get("from")).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    // Back is the previous range.
    await page.goBack();
    await until(() => breakdown.textContent()).toContain("4,000 occurrences in the range");
  });

  it("follows the system's dark mode, with a switch that is remembered", async () => {
    const dark = await browser.newContext({ viewport: DESKTOP, colorScheme: "dark" });
    await dark.addCookies((await ctx.cookies()).map((c) => ({ ...c })));
    const p = await dark.newPage();
    const bg = () => background(p);
    await p.goto(`${s.adminUrl}/`);
    await until(() => p.getByTestId("stat-events").isVisible()).toBe(true);
    expect(await bg()).toBe("rgb(15, 19, 27)");
    await shot(p, "home-dark");
    await p.getByLabel("Theme").selectOption("light");
    await until(bg).toBe("rgb(246, 247, 249)");
    await p.reload();
    await until(() => p.getByTestId("stat-events").isVisible()).toBe(true);
    expect(await bg()).toBe("rgb(246, 247, 249)");
    expect(await p.getByLabel("Theme").inputValue()).toBe("light");
    await p.getByLabel("Theme").selectOption("system");
    await until(bg).toBe("rgb(15, 19, 27)");
    await p.getByLabel("Theme").selectOption("dark");
    await dark.close();
    // Light system, dark chosen: dark.
    const light = await browser.newContext({ viewport: DESKTOP, colorScheme: "light" });
    await light.addCookies(await ctx.cookies());
    const q = await light.newPage();
    await q.goto(`${s.adminUrl}/team`);
    expect(await background(q)).toBe("rgb(246, 247, 249)");
    await q.getByLabel("Theme").selectOption("dark");
    expect(await background(q)).toBe("rgb(15, 19, 27)");
    await light.close();
  });

  it("has no sideways scroll on its pages at 1280x800 and on a phone (390x844)", async () => {
    const { rows } = await s.db.sql.query<{ id: string }>("SELECT id::text FROM analytics_logs ORDER BY id LIMIT 1");
    const entry = (await s.adminClient(CmsService).listEntries({ appId, contentType: "post" })).entries[0]!.id;
    const paths = [
      "/",
      `/apps?app=${appId}`,
      `/analytics?app=${appId}`,
      `/analytics?app=${appId}&tab=logs&log=${rows[0]!.id}`,
      `/cms?app=${appId}`,
      `/cms/post?app=${appId}`,
      `/cms/post/${entry}?app=${appId}`,
      `/cms/review/schema?app=${appId}`,
      "/team",
      "/team?scope=all",
      "/nope",
    ];
    for (const viewport of [DESKTOP, PHONE]) {
      await page.setViewportSize(viewport);
      for (const path of paths) {
        await page.goto(s.adminUrl + path);
        await page.getByRole("main").waitFor();
        await page.waitForLoadState("networkidle");
        await page.locator(".loading").first().waitFor({ state: "detached" }).catch(() => {});
        const over = await overflow(page);
        expect({ path, viewport: viewport.width, overflow: over, sticking: over > 0 ? await sticking(page) : [] }).toEqual({ path, viewport: viewport.width, overflow: 0, sticking: [] });
      }
    }
    await page.goto(`${s.adminUrl}/`);
    await until(() => page.getByTestId("stat-events").isVisible()).toBe(true);
    await shot(page, "phone-home");
    await page.setViewportSize(DESKTOP);
  });

  it("GetOverview is role-checked: a member of another team sees nothing of this one", async () => {
    const owner = s.adminClient(AccountService);
    const elsewhere = await s.admin.createTeam({ name: "Elsewhere" });
    const inv = await owner.createInvitation({ teamId: elsewhere.id, email: "stranger@example.com", role: 2 });
    const c = await browser.newContext({ viewport: DESKTOP });
    const p = await c.newPage();
    await p.goto(`${s.adminUrl}/invite#token=${inv.token}`);
    await p.getByLabel("Your name").fill("Stranger");
    await p.getByLabel("Password").fill("a stranger's password");
    await p.getByRole("button", { name: /Join/ }).click();
    await p.waitForURL(/\/apps/);
    await p.goto(`${s.adminUrl}/`);
    await until(() => p.getByTestId("stat-applications").textContent()).toBe("0");
    expect(await p.getByTestId("stat-events").textContent()).toBe("0");
    // Asking for the other team's numbers directly: not_found, as for a team that does not exist.
    const status = await p.evaluate(async (team) => {
      const me = await fetch("/pulsebase.admin.v1.AccountService/GetMe", { method: "POST", headers: { "content-type": "application/json" }, body: "{}" }).then((r) => r.json() as Promise<{ csrfToken: string }>);
      const r = await fetch("/pulsebase.admin.v1.OverviewService/GetOverview", {
        method: "POST",
        headers: { "content-type": "application/json", "x-csrf-token": me.csrfToken },
        body: JSON.stringify({ teamId: team }),
      });
      return [r.status, ((await r.json()) as { code: string }).code];
    }, String(teamId));
    expect(status).toEqual([404, "not_found"]);
    await c.close();
  });
});
