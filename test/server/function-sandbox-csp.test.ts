// Function HTML on the public listener (issue #28, point 8): every HTTP
// trigger answer carries `Content-Security-Policy: sandbox ...` without
// allow-same-origin (the page gets an opaque origin: no cookies of the host
// name it shares with the console), a function's own policy is kept with the
// sandbox added as a second policy, and PULSEBASE_FUNCTION_SANDBOX_CSP=false
// turns it off. Real servers, real TLS sockets.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FunctionService } from "../../gen/pulsebase/admin/v1/functions_pb.js";
import { createModules } from "../../src/server/modules.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

const PAGE = `export default async function (req) {
  const headers = { "content-type": "text/html; charset=utf-8" };
  if (req.query.own) headers["content-security-policy"] = "sandbox allow-same-origin allow-scripts; default-src 'self'";
  return { status: 200, headers, body: "<!doctype html><script>document.cookie = 'pb_session=x; Path=/x'</script>" };
}`;

interface Deployed {
  s: TestServer;
  appKey: string;
  token: string;
}

async function deploy(env: Record<string, string> = {}): Promise<Deployed> {
  const s = await startTestServer({ modules: createModules, env });
  const app = await s.createApp("html");
  const fns = s.adminClient(FunctionService);
  const fn = await fns.createFunction({ appId: app.appId, name: "page" });
  await fns.deployVersion({ functionId: fn.id, code: PAGE, activate: true });
  await fns.createHttpTrigger({ functionId: fn.id, slug: "page", auth: "public" });
  const mine = await fns.createFunction({ appId: app.appId, name: "mine" });
  await fns.deployVersion({ functionId: mine.id, code: PAGE, activate: true });
  await fns.createHttpTrigger({ functionId: mine.id, slug: "mine" });
  return { s, appKey: app.appKey, token: (await s.register(app.appKey)).token };
}

let on: Deployed;
let off: Deployed;

beforeAll(async () => {
  on = await deploy();
  off = await deploy({ PULSEBASE_FUNCTION_SANDBOX_CSP: "false" });
}, 60_000);
afterAll(async () => {
  await on?.s.close();
  await off?.s.close();
});

const SANDBOX = /^sandbox allow-scripts allow-forms allow-popups allow-downloads allow-modals$/;

describe("function answers on the public listener", () => {
  it("a public trigger's HTML is sandboxed, never with allow-same-origin", async () => {
    const res = await on.s.fetch(`/api/fn/${on.appKey}/page`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/text\/html/);
    expect(res.headers.get("content-security-policy")).toMatch(SANDBOX);
    expect(await res.text()).toContain("document.cookie");
  });

  it("so is a consumer trigger's answer", async () => {
    const res = await on.s.fetch("/api/fn/mine", { headers: { authorization: `Bearer ${on.token}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-security-policy")).toMatch(SANDBOX);
  });

  it("a function's own policy is kept and the sandbox added as a second policy", async () => {
    const res = await on.s.fetch(`/api/fn/${on.appKey}/page?own=1`);
    const csp = res.headers.get("content-security-policy") ?? "";
    const policies = csp.split(",").map((p) => p.trim());
    expect(policies).toHaveLength(2);
    expect(policies[0]).toBe("sandbox allow-same-origin allow-scripts; default-src 'self'");
    // Browsers enforce every policy: the second one's sandbox has no allow-same-origin.
    expect(policies[1]).toMatch(SANDBOX);
  });

  it("PULSEBASE_FUNCTION_SANDBOX_CSP=false turns it off", async () => {
    const res = await off.s.fetch(`/api/fn/${off.appKey}/page`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-security-policy")).toBeNull();
    const own = await off.s.fetch(`/api/fn/${off.appKey}/page?own=1`);
    expect(own.headers.get("content-security-policy")).toBe("sandbox allow-same-origin allow-scripts; default-src 'self'");
  });
});
