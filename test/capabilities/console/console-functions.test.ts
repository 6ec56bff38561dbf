// Functions in the console, in Chromium at 1280x800 and 390x844 over a real
// server and PostgreSQL (issue #30, point 3): schedules created, listed with
// their cron and next run, run (the tick made due in the database, the
// server's own scheduler runs it), their run history, paused and edited; a
// CLI-made schedule listed as one; public and signed HTTP triggers and an
// event trigger made from the forms (emptied after Add) and the public one
// called without a token; an invocation that throws, shown with its stack at
// line:column and the deployed source line; the live tail showing new
// invocations without a reload, paused and resumed. No page scrolls
// sideways. CONSOLE_SCREENSHOTS=dir saves the screens.
import { existsSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Code, ConnectError } from "@connectrpc/connect";
import { AccountService } from "../../../gen/pulsebase/admin/v1/account_pb.js";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { FunctionService, TriggerKind } from "../../../gen/pulsebase/admin/v1/functions_pb.js";
import { IdentityService } from "../../../gen/pulsebase/admin/v1/identity_pb.js";
import { CONSOLE_DIST } from "../../../src/capabilities/console/static-console.js";
import { createModules } from "../../../src/server/modules.js";
import { operatorEnv, runCli } from "../../helpers/cli.js";
import type { TestServer } from "../../helpers/server.js";
import { launchChromium } from "./browser.js";
import { startWithOwner, type OperatorSession } from "./operator-session.js";

const SHOTS = process.env.CONSOLE_SCREENSHOTS ? resolve(process.env.CONSOLE_SCREENSHOTS) : undefined;
const EMAIL = "fn-owner@example.com";
// The password setupOwner (operator-session.ts) gives the first owner.
const PASSWORD = "correct horse battery";

// Throws for sku "none": the stack's own frame is line 5 at the `new`.
const CODE = `export default async function (req, ctx) {
  const input = ctx.trigger === "manual" ? req : req?.body;
  console.log("stock check", JSON.stringify(input));
  if (input?.sku === "none") {
    throw new RangeError("out of stock: " + input.sku);
  }
  return { ok: true, trigger: ctx.trigger };
}
`;
const THROW_LINE = 5;
const THROW_COL = CODE.split("\n")[THROW_LINE - 1]!.indexOf("new RangeError") + 1;

let s: TestServer;
let browser: Browser;
let desk: BrowserContext;
let page: Page;
let appId: bigint;
let appKey: string;
let fnId: bigint;
let teamId: bigint;
let owner: OperatorSession;

/** expect.poll with room for a loaded machine. */
const until = <T>(fn: () => T | Promise<T>) => expect.poll(fn, { timeout: 20_000, interval: 100 });
const fns = () => s.adminClient(FunctionService);
const fnUrl = (query = "") => `${s.adminUrl}/functions/${fnId}?app=${appId}${query}`;
/** How far the page scrolls sideways (0: it fits). */
const overflow = (p: Page) => p.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth") as Promise<number>;

async function shot(p: Page, name: string, opts: { live?: boolean } = {}): Promise<void> {
  if (!SHOTS) return;
  // A page with the live tail open always has a request in flight (the stream): it never goes idle.
  if (!opts.live) await p.waitForLoadState("networkidle").catch(() => {});
  await p.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: false });
}

async function signIn(ctx: BrowserContext): Promise<Page> {
  const p = await ctx.newPage();
  await p.goto(`${s.adminUrl}/login`);
  await p.getByLabel("Email").fill(EMAIL);
  await p.getByLabel("Password").fill(PASSWORD);
  await p.getByRole("button", { name: "Sign in" }).click();
  await p.waitForURL((u) => !u.pathname.startsWith("/login"));
  return p;
}

const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  s.fetch(path, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });

beforeAll(async () => {
  if (!existsSync(join(CONSOLE_DIST, "index.html"))) throw new Error(`${CONSOLE_DIST} has no build: npm run console:build (or PULSEBASE_CONSOLE_DIST)`);
  if (SHOTS) await mkdir(SHOTS, { recursive: true });
  const started = await startWithOwner({ modules: createModules, env: { PULSEBASE_SCHEDULE_POLL_MS: "100" } }, EMAIL);
  s = started.s;
  owner = started.owner;
  teamId = owner.me.teams[0]!.teamId;
  const app = await owner.client(IdentityService).createApp({ teamId, name: "Stock" });
  appId = app.id;
  appKey = app.appKey;
  fnId = (await fns().createFunction({ appId, name: "stock", code: CODE })).id;
  browser = await launchChromium();
  desk = await browser.newContext({ viewport: { width: 1280, height: 800 }, ignoreHTTPSErrors: true });
  page = await signIn(desk);
}, 90_000);
afterAll(async () => {
  await browser?.close();
  await s?.close();
});

describe("functions in the console", { timeout: 60_000 }, () => {
  it("creates a schedule, lists it with its cron and next run, shows its run history, pauses and edits it", async () => {
    await page.goto(fnUrl("&tab=schedules"));
    await until(() => page.getByText("No schedules").isVisible()).toBe(true);
    expect(await page.getByRole("tab", { name: "Schedules" }).getAttribute("aria-selected")).toBe("true");
    const form = page.getByRole("form", { name: "New schedule" });
    await form.getByLabel("Cron expression").fill("*/15 * * * *");
    await form.getByLabel("Time zone").selectOption("Europe/Berlin");
    await form.getByRole("button", { name: "Add schedule" }).click();
    const table = page.getByRole("table", { name: "Schedules" });
    const row = table.getByRole("row").filter({ hasText: "*/15 * * * *" });
    await until(() => row.count()).toBe(1);
    expect(await row.textContent()).toContain("Europe/Berlin");
    expect(await row.textContent()).toContain("every 15 minutes");
    expect(await row.textContent()).toContain("active");
    // the next run, as the server computed it, in the page's locale
    const t = (await fns().listTriggers({ functionId: fnId })).triggers.find((x) => x.kind === TriggerKind.SCHEDULE)!;
    const next = new Date(Number(t.nextRunAt!.seconds) * 1000);
    expect(next.getTime()).toBeGreaterThan(Date.now() - 1000);
    const shown = await page.evaluate((ms) => new Date(ms).toLocaleString(), next.getTime());
    expect(await row.textContent()).toContain(shown);
    // the form is empty again
    expect(await form.getByLabel("Cron expression").inputValue()).toBe("");
    expect(await form.getByLabel("Time zone").inputValue()).toBe("UTC");

    // A tick made due now: the server's scheduler runs it; the open schedule shows the run without a reload.
    await row.getByRole("button", { name: "Edit and runs" }).click();
    await page.waitForURL(new RegExp(`schedule=${t.id}`));
    await page.getByRole("table", { name: "Schedule runs" }).or(page.getByText("No runs yet")).first().waitFor();
    // (whole milliseconds, as the scheduler writes them: its claim compares the value it read)
    await s.db.sql.query("UPDATE function_triggers SET next_run_at = date_trunc('milliseconds', now()) WHERE id = $1", [Number(t.id)]);
    const runs = page.getByRole("table", { name: "Schedule runs" });
    await until(async () => (await runs.isVisible()) && (await runs.textContent())).toMatch(/ok.*#\d+/);
    await shot(page, "functions-schedules");

    // The run's invocation, by its link; back returns to the schedule.
    await runs.getByRole("button", { name: /^#\d+$/ }).first().click();
    await page.waitForURL(/tab=invocations&inv=\d+/);
    await until(() => page.getByTestId("invocation-logs").textContent()).toContain("schedule");
    await page.goBack();
    await page.waitForURL(new RegExp(`tab=schedules&schedule=${t.id}`));
    await runs.waitFor();

    // Pause: no next run, the badge says so, and the server agrees.
    await page.getByRole("button", { name: `Pause schedule ${t.id}` }).click();
    await until(() => row.textContent()).toContain("paused");
    expect((await fns().listTriggers({ functionId: fnId })).triggers.find((x) => x.id === t.id)!.enabled).toBe(false);
    await page.getByRole("button", { name: `Resume schedule ${t.id}` }).waitFor();

    // Edit: a new expression and zone; the history stays.
    const edit = page.getByRole("form", { name: "Edit schedule" });
    await edit.getByLabel("Cron expression").fill("0 9 * * 1-5");
    await edit.getByLabel("Time zone").selectOption("America/New_York");
    await edit.getByLabel("Missed ticks").selectOption("run_once");
    await edit.getByRole("button", { name: "Save schedule" }).click();
    const edited = table.getByRole("row").filter({ hasText: "0 9 * * 1-5" });
    await until(() => edited.count()).toBe(1);
    expect(await edited.textContent()).toContain("weekdays at 09:00");
    expect(await edited.textContent()).toContain("America/New_York");
    expect(await edited.textContent()).toContain("run once");
    const after = (await fns().listTriggers({ functionId: fnId })).triggers.find((x) => x.id === t.id)!;
    expect(after).toMatchObject({ cron: "0 9 * * 1-5", timezone: "America/New_York", missedTicks: "run_once", enabled: false });
    expect(await runs.textContent()).toMatch(/ok/);
    expect(await overflow(page)).toBe(0);
  });

  it("lists a schedule made with the CLI as a schedule, in both tabs", async () => {
    const made = await runCli(["functions", "triggers", "create", "--id", String(fnId), "--cron", "0 3 * * *", "--tz", "UTC"], { env: operatorEnv(s) });
    expect(made.code, made.stderr).toBe(0);
    await page.goto(fnUrl("&tab=schedules"));
    const row = page.getByRole("table", { name: "Schedules" }).getByRole("row").filter({ hasText: "0 3 * * *" });
    await until(() => row.count()).toBe(1);
    expect(await row.textContent()).toContain("every day at 03:00");
    expect(await row.textContent()).toContain("UTC");
    expect(await row.textContent()).toContain("active");
    await page.getByRole("tab", { name: "Triggers" }).click();
    await page.waitForURL(/tab=triggers/);
    const triggers = page.getByRole("table", { name: "Triggers" });
    await until(() => triggers.getByRole("row").filter({ hasText: "0 3 * * *" }).textContent()).toMatch(/^schedule/);
    expect(await triggers.textContent()).not.toContain("()");
  });

  it("makes public and signed HTTP triggers and an event trigger from the forms, emptied after Add; the public one answers without a token", async () => {
    await page.goto(fnUrl("&tab=triggers"));
    const http = page.getByRole("form", { name: "New HTTP trigger" });
    await http.getByLabel("Slug").fill("stock-public");
    await http.getByLabel("Authentication").selectOption("public");
    await http.getByRole("button", { name: "Add HTTP trigger" }).click();
    const triggers = page.getByRole("table", { name: "Triggers" });
    const pub = triggers.getByRole("row").filter({ hasText: "stock-public" });
    await until(() => pub.count()).toBe(1);
    expect(await pub.textContent()).toContain("public");
    expect(await pub.textContent()).toContain(`/api/fn/${appKey}/stock-public`);
    expect(await pub.textContent()).toContain("anyone, no token");
    expect(await http.getByLabel("Slug").inputValue()).toBe("");
    expect(await http.getByLabel("Authentication").inputValue()).toBe("consumer");

    await http.getByLabel("Slug").fill("stock-hook");
    await http.getByLabel("Authentication").selectOption("signed");
    await http.getByLabel("Signature header").fill("stripe-signature");
    await http.getByLabel("Tolerance (seconds)").fill("120");
    await http.getByRole("button", { name: "Add HTTP trigger" }).click();
    const secret = page.getByLabel("Signing secret", { exact: true }).and(page.locator("[readonly]"));
    await until(async () => (await secret.count()) && (await secret.inputValue()).length).toBeGreaterThanOrEqual(16);
    const signed = triggers.getByRole("row").filter({ hasText: "stock-hook" });
    expect(await signed.textContent()).toContain("signed");
    expect(await signed.textContent()).toContain("stripe-signature");
    expect(await http.getByLabel("Slug").inputValue()).toBe("");
    expect(await http.getByLabel("Authentication").inputValue()).toBe("consumer");
    expect(await http.getByLabel("Signature header").count()).toBe(0);
    await shot(page, "functions-triggers");

    const ev = page.getByRole("form", { name: "New event trigger" });
    await ev.getByLabel("Source").selectOption("cms");
    await ev.getByLabel("Content type", { exact: true }).fill("article");
    await ev.getByLabel("delete").uncheck();
    await ev.getByRole("button", { name: "Add event trigger" }).click();
    await until(() => triggers.getByRole("row").filter({ hasText: "article" }).textContent()).toContain("insert, update");
    expect(await ev.getByLabel("Content type", { exact: true }).inputValue()).toBe("");
    expect(await ev.getByLabel("delete").isChecked()).toBe(true);

    const server = await fns().listTriggers({ functionId: fnId });
    expect(server.triggers.find((x) => x.slug === "stock-public")?.auth).toBe("public");
    expect(server.triggers.find((x) => x.slug === "stock-hook")).toMatchObject({ auth: "signed", signatureHeader: "stripe-signature", signatureToleranceSeconds: 120 });
    // No token: the public trigger answers, the signed one refuses an unsigned call.
    const res = await post(`/api/fn/${appKey}/stock-public`, { sku: "A1" });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ok: true, trigger: "http" });
    expect((await post(`/api/fn/${appKey}/stock-hook`, { sku: "A1" })).status).toBe(401);
    expect(await overflow(page)).toBe(0);
  });

  it("tails invocations live, shows a thrown error's stack at line:column with the source line, pauses and resumes", async () => {
    await page.goto(fnUrl("&tab=invocations"));
    await until(() => page.getByTestId("tail-state").textContent()).toBe("● Live");
    const table = page.getByRole("table", { name: "Invocations" });
    const failed = await post(`/api/fn/${appKey}/stock-public`, { sku: "none" });
    expect(failed.status).toBe(500);
    // No reload: the stream brings it.
    const row = table.getByRole("row").filter({ hasText: "RangeError" });
    await until(() => row.count()).toBe(1);
    await row.click();
    await page.waitForURL(/inv=\d+/);
    const stack = page.getByTestId("error-stack");
    await until(() => stack.textContent()).toContain(`stock@v1.js:${THROW_LINE}:${THROW_COL}`);
    expect(await stack.textContent()).toContain("RangeError: out of stock: none");
    expect(await stack.textContent()).toContain(`line ${THROW_LINE}, column ${THROW_COL}`);
    await until(() => stack.getByLabel(/^Source of stock@v1\.js/).textContent()).toContain('throw new RangeError("out of stock: " + input.sku);');
    await shot(page, "functions-error-stack", { live: true });

    // The log view follows too.
    await page.getByRole("button", { name: "Log lines" }).click();
    await page.waitForURL(/view=logs/);
    await until(() => page.getByTestId("log-lines").textContent()).toContain('stock check {"sku":"none"}');
    expect(await post(`/api/fn/${appKey}/stock-public`, { sku: "B2" }).then((r) => r.status)).toBe(200);
    await until(() => page.getByTestId("log-lines").textContent()).toContain('stock check {"sku":"B2"}');
    await shot(page, "functions-live-logs", { live: true });

    // Paused, a new invocation waits; resumed, it is caught up.
    await page.getByRole("button", { name: "Pause" }).click();
    await until(() => page.getByTestId("tail-state").textContent()).toBe("Paused");
    expect(await post(`/api/fn/${appKey}/stock-public`, { sku: "C3" }).then((r) => r.status)).toBe(200);
    await page.getByRole("button", { name: "Resume" }).click();
    await until(() => page.getByTestId("log-lines").textContent()).toContain('stock check {"sku":"C3"}');
    expect(await overflow(page)).toBe(0);
  });

  it("a manual run that throws shows the stack and source line in place", async () => {
    await page.goto(fnUrl("&tab=run"));
    await page.getByLabel("Payload (JSON)").fill('{ "sku": "none" }');
    await page.getByRole("button", { name: "Run", exact: true }).click();
    const result = page.getByTestId("run-result");
    await until(() => result.textContent()).toContain(`stock@v1.js:${THROW_LINE}:${THROW_COL}`);
    expect(await result.textContent()).toContain("error");
    expect(await result.textContent()).toContain('stock check {"sku":"none"}');
    await until(() => result.getByLabel(/^Source of stock@v1\.js/).textContent()).toContain("throw new RangeError");
  });

  it("UpdateScheduleTrigger checks what it is given, edits only schedules, and is in the audit log", async () => {
    const code = (p: Promise<unknown>) => p.then(() => "ok", (e) => ConnectError.from(e));
    const sched = (await fns().listTriggers({ functionId: fnId })).triggers.find((x) => x.kind === TriggerKind.SCHEDULE)!;
    const bad = await code(owner.client(FunctionService).updateScheduleTrigger({ triggerId: sched.id, cron: "every day", timezone: "Mars/Olympus" }));
    expect(bad).toBeInstanceOf(ConnectError);
    expect((bad as ConnectError).code).toBe(Code.InvalidArgument);
    expect((bad as ConnectError).rawMessage).toMatch(/cron|time zone/i);
    const http = (await fns().listTriggers({ functionId: fnId })).triggers.find((x) => x.kind === TriggerKind.HTTP)!;
    expect(((await code(owner.client(FunctionService).updateScheduleTrigger({ triggerId: http.id, cron: "0 1 * * *" }))) as ConnectError).code).toBe(Code.FailedPrecondition);
    expect(((await code(owner.client(FunctionService).updateScheduleTrigger({ triggerId: 999_999n, cron: "0 1 * * *" }))) as ConnectError).code).toBe(Code.NotFound);
    // unset fields are kept
    const kept = await owner.client(FunctionService).updateScheduleTrigger({ triggerId: sched.id, missedTicks: "skip" });
    expect(kept).toMatchObject({ cron: sched.cron, timezone: sched.timezone, missedTicks: "skip" });
    const audit = await owner.client(AccountService).listAuditLog({ teamId, pageSize: 100 });
    const rows = audit.entries.filter((e) => e.method === "pulsebase.admin.v1.FunctionService/UpdateScheduleTrigger");
    // the edit made in the page, and the calls above (refused ones too)
    expect(rows.length).toBeGreaterThanOrEqual(4);
    expect(rows.map((e) => e.outcome)).toContain("ok");
    expect(rows.map((e) => e.outcome)).toContain("validation_failed");
  });

  it("fits a phone (390x844) on every functions tab", async () => {
    const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, ignoreHTTPSErrors: true });
    try {
      const p = await signIn(phone);
      const sched = (await fns().listTriggers({ functionId: fnId })).triggers.find((x) => x.kind === TriggerKind.SCHEDULE)!;
      const inv = (await fns().listInvocations({ functionId: fnId, pageSize: 50 })).invocations.find((i) => i.outcome === "error")!;
      for (const [query, ready] of [
        ["&tab=triggers", () => p.getByRole("table", { name: "Triggers" }).waitFor()],
        [`&tab=schedules&schedule=${sched.id}`, () => p.getByRole("form", { name: "Edit schedule" }).waitFor()],
        [`&tab=invocations&inv=${inv.id}`, () => p.getByTestId("error-stack").waitFor()],
        ["&tab=invocations&view=logs", () => p.getByTestId("log-lines").waitFor()],
        ["&tab=run", () => p.getByLabel("Payload (JSON)").waitFor()],
      ] as const) {
        await p.goto(fnUrl(query));
        await ready();
        expect(await overflow(p), query).toBe(0);
        if (query.startsWith("&tab=invocations&inv")) await shot(p, "phone-functions-error-stack", { live: true });
        if (query.startsWith("&tab=schedules")) await shot(p, "phone-functions-schedule");
      }
    } finally {
      await phone.close();
    }
  });
});
