// Cookie tossing in Chromium (issue #28, point 8). The public listener and
// the console share the host name 127.0.0.1 (cookies do not separate
// ports). Mallory, a developer, serves a page from a public function that
// plants her own session cookie for 127.0.0.1 with a longer Path (sent
// before the operator's), and a junk one. The operator, signed in to the
// console, opens that page and goes back to the console: it must still run
// as the operator, or ask to sign in again, never as Mallory. The page's
// sandbox CSP keeps it from setting cookies at all; a cookie planted anyway
// (as with the sandbox turned off) makes the console ask for a new sign-in.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { FunctionService } from "../../../gen/pulsebase/admin/v1/functions_pb.js";
import { Role } from "../../../gen/pulsebase/common/v1/options_pb.js";
import { CONSOLE_DIST } from "../../../src/capabilities/console/static-console.js";
import { createModules } from "../../../src/server/modules.js";
import { startTestServer, type TestServer } from "../../helpers/server.js";
import { launchChromium } from "./browser.js";
import { invite, setupOwner, type OperatorSession } from "./operator-session.js";

const OWNER_EMAIL = "owner@example.com";
const OWNER_PASSWORD = "correct horse battery";

let s: TestServer;
let browser: Browser;
let ctx: BrowserContext;
let consolePage: Page;
let mallory: OperatorSession;
let tossUrl = "";

const until = <T>(fn: () => T | Promise<T>) => expect.poll(fn, { timeout: 20_000, interval: 100 });

/** Mallory's page: plants her session under the legacy and the new name, and a junk one; says what happened in the title. */
const tossCode = (secret: string) => `export default async function () {
  const html = \`<!doctype html><title>…</title><script>
    let result = "planted";
    try {
      document.cookie = "pb_session=${secret}; Path=/pulsebase.admin.v1.AccountService; Secure; SameSite=None";
      document.cookie = "pb_session=junk; Path=/pulsebase.admin.v1.AccountService/GetMe; Secure; SameSite=None";
      document.cookie = "__Host-pb_session=${secret}; Path=/; Secure; SameSite=None";
    } catch (e) { result = "blocked: " + e.name; }
    document.title = result;
  </script>\`;
  return { status: 200, headers: { "content-type": "text/html; charset=utf-8" }, body: html };
}`;

async function signIn(page: Page): Promise<void> {
  await page.goto(s.adminUrl + "/login");
  await page.getByLabel("Email").fill(OWNER_EMAIL);
  await page.getByLabel("Password").fill(OWNER_PASSWORD);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL(/\/apps/);
  await until(() => page.getByText(OWNER_EMAIL).isVisible()).toBe(true);
}

/** Who the console shows after a reload: the operator, Mallory, or the sign-in page. */
async function consoleRunsAs(page: Page): Promise<string> {
  await page.goto(s.adminUrl + "/apps");
  let seen = "";
  await until(async () => {
    if (await page.getByText("mallory@example.com").isVisible()) seen = "mallory";
    else if (await page.getByText(OWNER_EMAIL).isVisible()) seen = "owner";
    else if (/\/login/.test(page.url()) && (await page.getByRole("button", { name: "Sign in" }).isVisible())) seen = "sign-in";
    return seen;
  }).not.toBe("");
  return seen;
}

beforeAll(async () => {
  if (!existsSync(join(CONSOLE_DIST, "index.html"))) throw new Error("packages/console/dist is missing: npm install builds it (npm run console:build)");
  s = await startTestServer({ modules: createModules });
  const owner = await setupOwner(s, OWNER_EMAIL, OWNER_PASSWORD);
  const teamId = owner.me.teams[0]!.teamId;
  mallory = await invite(s, owner, teamId, "mallory@example.com", Role.DEVELOPER);
  const secret = mallory.cookie.slice(mallory.cookie.indexOf("=") + 1);
  const app = await s.admin.createApp({ teamId, name: "mallory's shop" });
  const fns = s.adminClient(FunctionService);
  const fn = await fns.createFunction({ appId: app.id, name: "toss" });
  await fns.deployVersion({ functionId: fn.id, code: tossCode(secret), activate: true });
  await fns.createHttpTrigger({ functionId: fn.id, slug: "toss", auth: "public" });
  tossUrl = `${s.httpsUrl}/api/fn/${app.appKey}/toss`;
  browser = await launchChromium();
  ctx = await browser.newContext({ ignoreHTTPSErrors: true });
  consolePage = await ctx.newPage();
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await s?.close();
});

describe("cookie tossing from a public function, in Chromium", { timeout: 120_000 }, () => {
  it("signs in with a __Host- session cookie on http://127.0.0.1", async () => {
    await signIn(consolePage);
    const cookies = await ctx.cookies(s.adminUrl);
    expect(cookies.map((c) => c.name)).toEqual(["__Host-pb_session"]);
    expect(cookies[0]).toMatchObject({ path: "/", secure: true, httpOnly: true, sameSite: "Strict" });
  });

  it("the function's page cannot set cookies, and the console still runs as the operator", async () => {
    const evil = await ctx.newPage();
    await evil.goto(tossUrl);
    await until(() => evil.title()).toMatch(/^(planted|blocked: \w+)$/);
    const outcome = await evil.title();
    await evil.close();
    expect(await consoleRunsAs(consolePage)).toBe("owner");
    expect((await ctx.cookies(s.adminUrl)).map((c) => c.name)).toEqual(["__Host-pb_session"]);
    // The sandbox (opaque origin) is what stopped it.
    expect(outcome).toBe("blocked: SecurityError");
  });

  it("a session cookie planted anyway (the sandbox turned off) gets a clean sign-in request, never Mallory's account", async () => {
    const secret = mallory.cookie.slice(mallory.cookie.indexOf("=") + 1);
    const admin = new URL(s.adminUrl);
    await ctx.addCookies([
      { name: "pb_session", value: secret, domain: admin.hostname, path: "/pulsebase.admin.v1.AccountService", secure: true, httpOnly: false, sameSite: "None" },
    ]);
    expect(await consoleRunsAs(consolePage)).toBe("sign-in");
    // The refusal removed both cookies: nothing of Mallory's is left to send.
    await until(async () => (await ctx.cookies(s.adminUrl)).filter((c) => c.name.endsWith("pb_session")).map((c) => c.name)).toEqual([]);
    await signIn(consolePage);
    expect(await consoleRunsAs(consolePage)).toBe("owner");
  });

  it("a junk cookie planted beside the session also asks to sign in again", async () => {
    const admin = new URL(s.adminUrl);
    await ctx.addCookies([{ name: "pb_session", value: "junk", domain: admin.hostname, path: "/pulsebase.admin.v1.AccountService/GetMe", secure: true, httpOnly: false, sameSite: "None" }]);
    expect(await consoleRunsAs(consolePage)).toBe("sign-in");
    await signIn(consolePage);
    expect(await consoleRunsAs(consolePage)).toBe("owner");
  });
});
