// The console in a real browser (Debian Chromium via playwright-core) over a
// real server and PostgreSQL: first-owner setup, an app created, events and
// a crash sent by a device and read in the console, SQL run, a function
// deployed and run with its logs, a content type and an entry with an image
// authored and published and read back through /api/v1, a viewer invited
// and refused what it may not do (in the page and on the server), and the
// audit log of it all; a CLI-made account's set-password link. CONSOLE_SCREENSHOTS=dir also saves the main pages
// (npm run console:screenshots writes docs/console/).
import { existsSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AccountService } from "../../../gen/pulsebase/admin/v1/account_pb.js";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { CONSOLE_DIST } from "../../../src/capabilities/console/static-console.js";
import { createModules } from "../../../src/server/modules.js";
import { startTestServer, type TestServer } from "../../helpers/server.js";
import { launchChromium } from "./browser.js";

const SHOTS = process.env.CONSOLE_SCREENSHOTS ? resolve(process.env.CONSOLE_SCREENSHOTS) : undefined;
// A 2x2 PNG (red), for the media field.
const PNG = Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAFklEQVR4nGP8z8DAwMDAxMDAwMDAAAANHQEDasKb6QAAAABJRU5ErkJggg==", "base64");

let s: TestServer;
let browser: Browser;
let owner: BrowserContext;
let page: Page;
let appKey = "";
const cspViolations: string[] = [];

async function shot(p: Page, name: string): Promise<void> {
  if (!SHOTS) return;
  await p.waitForLoadState("networkidle").catch(() => {});
  await p.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: false });
}

function watch(p: Page): void {
  p.on("console", (m) => {
    if (/Content Security Policy|Refused to/i.test(m.text())) cspViolations.push(m.text());
  });
}

/** expect.poll with room for a loaded machine (the default gives up after 1 s). */
const until = <T>(fn: () => T | Promise<T>) => expect.poll(fn, { timeout: 20_000, interval: 100 });

const nav = (p: Page, name: string) => p.getByRole("navigation", { name: "Sections" }).getByRole("link", { name }).click();

beforeAll(async () => {
  if (!existsSync(join(CONSOLE_DIST, "index.html"))) throw new Error("packages/console/dist is missing: npm install builds it (npm run console:build)");
  if (SHOTS) await mkdir(SHOTS, { recursive: true });
  s = await startTestServer({ modules: createModules });
  browser = await launchChromium();
  owner = await browser.newContext({ viewport: { width: 1280, height: 800 }, ignoreHTTPSErrors: true });
  page = await owner.newPage();
  watch(page);
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await s?.close();
});

describe("the console in Chromium", { timeout: 120_000 }, () => {
  it("serves the app with a strict CSP and client routes", async () => {
    const res = await fetch(`${s.adminUrl}/functions/12?app=1`);
    expect(res.status).toBe(200);
    const csp = res.headers.get("content-security-policy") ?? "";
    expect(csp).toMatch(/script-src 'self'(;|$)/);
    expect(csp).not.toMatch(/script-src[^;]*unsafe-inline/);
    expect(await res.text()).toMatch(/<script type="module" crossorigin src="\/assets\/index-[\w-]+\.js">/);
    const asset = /src="(\/assets\/[^"]+)"/.exec(await (await fetch(s.adminUrl)).text())![1]!;
    expect((await fetch(s.adminUrl + asset)).headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
    expect((await fetch(`${s.adminUrl}/assets/nope.js`)).status).toBe(404);
  });

  it("sets up the first owner from the one-time link; the session is an HttpOnly, Secure, SameSite=Strict cookie", async () => {
    await page.goto(s.adminUrl + "/apps");
    await page.waitForURL(/\/login/);
    await until(() => page.getByText("no owner yet").isVisible()).toBe(true);
    const token = await s.app.console.accounts.newSetupToken();
    await page.goto(`${s.adminUrl}/setup#token=${token}`);
    await shot(page, "setup");
    await page.getByLabel("Your name").fill("Ada Owner");
    await page.getByLabel("Email").fill("ada@example.com");
    await page.getByLabel("Password").fill("a long owner password");
    await page.getByLabel("First team").fill("Acme");
    await page.getByRole("button", { name: "Create owner account" }).click();
    await page.waitForURL(/\/apps/);
    await until(() => page.getByText("No applications yet.").isVisible()).toBe(true);
    const cookie = (await owner.cookies()).find((c) => c.name === "__Host-pb_session")!;
    expect(cookie).toMatchObject({ httpOnly: true, secure: true, sameSite: "Strict" });
    expect(await page.evaluate(() => [(globalThis as unknown as { document: { cookie: string } }).document.cookie, JSON.stringify(globalThis.localStorage), JSON.stringify(globalThis.sessionStorage)])).toEqual(["", "{}", "{}"]);
    // A reload keeps the session (the cookie, not the page, holds it).
    await page.reload();
    await until(() => page.getByText("ada@example.com").isVisible()).toBe(true);
  });

  it("creates an application and shows its key", async () => {
    await page.getByLabel("New application name").fill("Shop");
    await page.getByRole("button", { name: "Create application" }).click();
    const key = page.getByTestId("app-key");
    await key.waitFor();
    appKey = (await key.textContent()) ?? "";
    expect(appKey).toMatch(/^pk_/);
    await shot(page, "apps");
  });

  it("shows a device's events over time with their metadata, and its crash with the stack trace", async () => {
    const dev = await s.register(appKey);
    const post = (path: string, body: unknown) =>
      s.fetch(path, { method: "POST", headers: { authorization: `Bearer ${dev.token}`, "content-type": "application/json" }, body: JSON.stringify(body) });
    for (const sku of ["A1", "A1", "B2"]) expect((await post("/api/events", { name: "purchase", metadata: { sku } })).status).toBe(200);
    const crash = await post("/api/logs", { app_version: "1.4.0", classFQN: "com.shop.CheckoutCrash", message: "null basket", type: "crash", stack_trace: "at Checkout.pay(Checkout.kt:42)\nat Main.run(Main.kt:7)" });
    expect(crash.status).toBe(200);
    await nav(page, "Analytics");
    // From the keyboard: a row opens with Enter, tabs move with the arrow keys.
    await page.getByRole("row", { name: /purchase/ }).focus();
    await page.keyboard.press("Enter");
    await page.getByRole("img", { name: "purchase per day" }).waitFor();
    await until(() => page.getByRole("heading", { name: "sku" }).isVisible()).toBe(true);
    await shot(page, "analytics-events");
    await page.getByRole("tab", { name: "Events" }).focus();
    await page.keyboard.press("ArrowRight");
    expect(await page.getByRole("tab", { name: "Crashes & errors" }).getAttribute("aria-selected")).toBe("true");
    await page.getByRole("cell", { name: "com.shop.CheckoutCrash" }).click();
    await until(() => page.getByTestId("stack-trace").textContent()).toContain("Checkout.kt:42");
    await shot(page, "analytics-crashes");
  });

  it("links a database and runs operator SQL with results and errors in place", async () => {
    await nav(page, "Database");
    await page.getByRole("button", { name: "Create and link database" }).click();
    const editor = page.locator(".cm-content");
    await editor.waitFor();
    await editor.fill("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL);\nINSERT INTO items (name) VALUES ('apple'), ('pear');\nPRAGMA table_info(items);\nSELECT * FROM missing");
    await page.getByRole("button", { name: /^Run/ }).click();
    await page.getByRole("table", { name: "Result 3" }).waitFor();
    expect(await page.getByRole("table", { name: "Result 3" }).textContent()).toContain("name");
    await until(() => page.getByRole("alert").textContent()).toContain("no such table: missing");
    await shot(page, "database-sql");
    await page.getByRole("tab", { name: "Tables" }).click();
    await page.getByLabel("Table").selectOption("items");
    await until(() => page.getByText("Rows 1–2 of 2").isVisible()).toBe(true);
    await page.getByRole("tab", { name: "Schema" }).click();
    await page.getByRole("table", { name: "Columns of items" }).waitFor();
    await shot(page, "database-schema");
  });

  it("deploys and runs a function and reads its logs", async () => {
    await nav(page, "Functions");
    await page.getByLabel("New function name").fill("hello");
    await page.getByRole("button", { name: "Create function" }).click();
    await page.getByTestId("editor-javascript").waitFor();
    await until(() => page.locator(".cm-content").textContent()).toContain("console.log");
    await page.getByRole("button", { name: "Deploy" }).click();
    await until(() => page.getByText("Deployed v1 (active)").isVisible()).toBe(true);
    await shot(page, "functions-code");
    await page.getByRole("tab", { name: "Run" }).click();
    await page.getByRole("button", { name: "Run", exact: true }).click();
    const result = page.getByTestId("run-result");
    await result.waitFor();
    await until(() => result.textContent()).toContain('"hello":"console"');
    expect(await result.textContent()).toContain('called with {"name":"console"}');
    await page.getByRole("tab", { name: "Invocations" }).click();
    await page.getByRole("cell", { name: "manual" }).first().click();
    await until(() => page.getByTestId("invocation-logs").textContent()).toContain("called with");
    await shot(page, "functions-invocations");
  });

  it("creates a content type, authors an entry with an image, publishes it, and /api/v1 serves it", async () => {
    await nav(page, "CMS");
    await page.getByRole("link", { name: "New content type" }).click();
    await page.getByLabel("Name", { exact: true }).fill("Article");
    await page.getByLabel("Field 1 name").fill("title");
    await page.getByLabel("Field 1 required").check();
    await page.getByRole("button", { name: "Add field" }).click();
    await page.getByLabel("Field 2 name").fill("body");
    await page.getByLabel("Field 2 type").selectOption("rich_text");
    await page.getByRole("button", { name: "Add field" }).click();
    await page.getByLabel("Field 3 name").fill("cover");
    await page.getByLabel("Field 3 type").selectOption("media");
    await shot(page, "cms-type");
    await page.getByRole("button", { name: "Save content type" }).click();
    await page.getByRole("link", { name: "New entry" }).click();
    await page.getByLabel("title *").fill("Hello from the console");
    await page.getByRole("textbox", { name: "body" }).click();
    await page.keyboard.type("Written in ");
    await page.keyboard.press("Control+b");
    await page.keyboard.type("rich text");
    expect(await page.getByRole("button", { name: "B", exact: true }).getAttribute("aria-pressed")).toBe("true");
    await page.getByLabel("Upload cover").setInputFiles({ name: "cover.png", mimeType: "image/png", buffer: PNG });
    await page.getByRole("img", { name: /Preview of .*\.png/ }).waitFor();
    await shot(page, "cms-entry");
    await page.getByRole("button", { name: "Create and publish" }).click();
    await until(() => page.getByText("published", { exact: true }).first().isVisible()).toBe(true);
    const res = await s.fetch("/api/v1/article", { headers: { "x-app-key": appKey } });
    const body = await res.json();
    expect(res.status).toBe(200);
    const entry = body.data[0];
    expect(entry.title).toBe("Hello from the console");
    expect(entry.body).toBe("<p>Written in <strong>rich text</strong></p>");
    expect(entry.cover).toMatch(/^[0-9a-f-]{36}\.png$/);
    expect(entry.cover_url).toContain(`/${appKey}/cms/media/${entry.cover}`);
    await nav(page, "CMS");
    await page.getByRole("cell", { name: "Article", exact: true }).click();
    await page.getByRole("cell", { name: "Hello from the console" }).waitFor();
    await shot(page, "cms-entries");
  });

  it("invites a viewer, who can read but not change, in the page and on the server", async () => {
    await nav(page, "Team");
    await page.getByLabel("Email", { exact: true }).fill("vera@example.com");
    await page.locator("select[name=invite-role]").selectOption({ label: "viewer" });
    await page.getByRole("button", { name: "Create invitation link" }).click();
    const link = await page.getByTestId("invitation-link").inputValue();
    expect(link).toMatch(/\/invite#token=[\w-]{40,}$/);
    const viewerCtx = await browser.newContext({ viewport: { width: 820, height: 1180 }, ignoreHTTPSErrors: true });
    const v = await viewerCtx.newPage();
    watch(v);
    await v.goto(link);
    await v.getByLabel("Your name").fill("Vera Viewer");
    await v.getByLabel("Password").fill("a long viewer password");
    await v.getByRole("button", { name: "Join Acme" }).click();
    await v.waitForURL(/\/apps/);
    await v.getByTestId("app-key").waitFor();
    expect(await v.getByLabel("New application name").count()).toBe(0);
    expect(await v.getByRole("button", { name: "Rotate key" }).count()).toBe(0);
    await shot(v, "tablet-viewer-apps");
    await nav(v, "Functions");
    await v.getByRole("cell", { name: "hello" }).click();
    await v.getByTestId("editor-javascript").waitFor();
    expect(await v.getByRole("button", { name: "Deploy" }).count()).toBe(0);
    await nav(v, "Database");
    await until(() => v.getByText("Running SQL needs the developer role").isVisible()).toBe(true);
    // Whatever the page shows, the server decides: a hand-made DeployVersion call is refused.
    const answer = await v.evaluate(async () => {
      const post = (m: string, body: unknown, csrf = "") =>
        fetch(`/pulsebase.admin.v1.${m}`, { method: "POST", headers: { "content-type": "application/json", "x-csrf-token": csrf }, body: JSON.stringify(body) });
      const me = (await (await post("AccountService/GetMe", {})).json()) as { csrfToken: string };
      const fns = (await (await post("FunctionService/ListFunctions", { appId: "1" }, me.csrfToken)).json()) as { functions: { id: string }[] };
      const r = await post("FunctionService/DeployVersion", { functionId: fns.functions[0]!.id, code: "export default () => 'pwned'", activate: true }, me.csrfToken);
      return [r.status, (await r.json()) as { code: string }] as const;
    });
    expect(answer[0]).toBe(403);
    expect(answer[1].code).toBe("permission_denied");
    await viewerCtx.close();
  });

  it("shows every change in the team's audit log", async () => {
    await page.reload();
    const audit = page.getByRole("table", { name: "Audit log" });
    await audit.waitFor();
    const text = (await audit.textContent()) ?? "";
    for (const m of ["CreateApp", "CreateDatabase", "LinkDatabase", "RunSql", "CreateFunction", "DeployVersion", "RunFunction", "CreateContentType", "UploadMedia", "CreateEntry", "CreateInvitation"]) {
      expect(text, m).toContain(m);
    }
    expect(text).toContain("vera@example.com");
    expect(text).toContain("permission_denied");
    await shot(page, "team");
    // The instance-wide view (the administrator's) has the sign-ins too.
    await page.getByLabel("Show").selectOption("all");
    await until(async () => (await audit.textContent()) ?? "").toContain("AcceptInvitation");
    expect(await audit.textContent()).toContain("CompleteSetup");
    // The administrator creates another team and owns it.
    await page.getByLabel("New team").fill("Beta");
    await page.getByRole("button", { name: "Create team" }).click();
    await until(() => page.getByLabel("Team", { exact: true }).inputValue()).not.toBe("1");
    expect(await page.getByRole("table", { name: "Members" }).textContent()).toContain("ada@example.com");
    expect(cspViolations).toEqual([]);
  });

  it("lets an account made by the CLI choose its first password from a set-password link", async () => {
    const user = await s.admin.createUser({ name: "Cli Carl", email: "carl@example.com" });
    const team = await s.admin.createTeam({ name: "Carl's", memberUserIds: [user.id] });
    const link = await s.adminClient(AccountService).createPasswordLink({ teamId: team.id, userId: user.id });
    const ctx = await browser.newContext({ ignoreHTTPSErrors: true });
    const c = await ctx.newPage();
    watch(c);
    await c.goto(`${s.adminUrl}/set-password#token=${link.token}`);
    await c.getByLabel("Password").fill("carl's first password");
    await c.getByRole("button", { name: "Set password and sign in" }).click();
    await c.waitForURL(/\/apps/);
    const me = await c.evaluate(async () => (await (await fetch("/pulsebase.admin.v1.AccountService/GetMe", { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })).json()) as { email: string });
    expect(me.email).toBe("carl@example.com");
    await ctx.close();
    expect(cspViolations).toEqual([]);
  });
});
