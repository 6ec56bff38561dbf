// Function HTML on the public listener, attacked (issue #28, point 8): a
// function's own Content-Security-Policy must never lift the platform's
// sandbox. A policy that merely ends with the sandbox text, after a `;` of
// the same policy (a first `sandbox allow-same-origin` directive wins over a
// duplicate one; `xsandbox ...` is an unknown directive), is one policy with
// allow-same-origin: the page could then set cookies for the host name it
// shares with the console. In real Chromium, each such page must still be
// unable to touch document.cookie, and no cookie lands in the jar.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Browser } from "playwright-core";
import { FunctionService } from "../../gen/pulsebase/admin/v1/functions_pb.js";
import { FUNCTION_SANDBOX_CSP } from "../../src/capabilities/functions/response-shaping.js";
import { createModules } from "../../src/server/modules.js";
import { launchChromium } from "../capabilities/console/browser.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

const OWN: Record<string, string> = {
  duplicate: `sandbox allow-scripts allow-same-origin; ${FUNCTION_SANDBOX_CSP}`,
  unknownDirective: `sandbox allow-scripts allow-same-origin; x${FUNCTION_SANDBOX_CSP}`,
  noSpace: `sandbox allow-same-origin allow-scripts;${FUNCTION_SANDBOX_CSP}`,
  exact: FUNCTION_SANDBOX_CSP,
  asSecondPolicy: `sandbox allow-same-origin allow-scripts, ${FUNCTION_SANDBOX_CSP}`,
};

const PAGE = `const OWN = ${JSON.stringify(OWN)};
export default async function (req) {
  const headers = { "content-type": "text/html; charset=utf-8" };
  if (req.query.own) headers["content-security-policy"] = OWN[req.query.own];
  return { status: 200, headers, body: \`<!doctype html><title>…</title><script>
    let result = "planted";
    try { document.cookie = "__Host-pb_session=tossed; Path=/; Secure; SameSite=None"; if (!document.cookie.includes("tossed")) result = "not kept"; }
    catch (e) { result = "blocked: " + e.name; }
    document.title = result;
  </script>\` };
}`;

let s: TestServer;
let appKey = "";
let browser: Browser;

beforeAll(async () => {
  s = await startTestServer({ modules: createModules });
  const app = await s.createApp("html");
  appKey = app.appKey;
  const fns = s.adminClient(FunctionService);
  const fn = await fns.createFunction({ appId: app.appId, name: "page" });
  await fns.deployVersion({ functionId: fn.id, code: PAGE, activate: true });
  await fns.createHttpTrigger({ functionId: fn.id, slug: "page", auth: "public" });
  browser = await launchChromium();
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await s?.close();
});

describe("a function's own CSP cannot lift the sandbox, in Chromium", { timeout: 60_000 }, () => {
  it.each(Object.keys(OWN))("own policy %s: the page cannot set cookies", async (variant) => {
    const ctx = await browser.newContext({ ignoreHTTPSErrors: true });
    try {
      const page = await ctx.newPage();
      const url = `${s.httpsUrl}/api/fn/${appKey}/page?own=${variant}`;
      const res = await page.goto(url);
      const csp = (await res!.allHeaders())["content-security-policy"] ?? "";
      await expect.poll(() => page.title(), { timeout: 20_000, interval: 100 }).toMatch(/^(planted|not kept|blocked: \w+)$/);
      expect(await page.title()).toBe("blocked: SecurityError");
      expect(await ctx.cookies()).toEqual([]);
      // The sandbox stands as a policy of its own (between commas), whatever came before it.
      expect(csp.split(",").map((p) => p.trim())).toContain(FUNCTION_SANDBOX_CSP);
    } finally {
      await ctx.close();
    }
  });
});
