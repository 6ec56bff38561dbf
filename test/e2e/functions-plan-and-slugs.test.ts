// Through the whole server: a plan changed with SetAppPlan applies to the
// very next /api/fn (and CMS) request of the same process (no cached plan,
// no tokens leased under the old limit), and every slug that names no enabled HTTP
// trigger (unknown, disabled, malformed) is 404 `not_found` in the platform
// envelope for every method.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FunctionService as AdminFunctionService } from "../../gen/pulsebase/admin/v1/functions_pb.js";
import { createModules } from "../../src/server/modules.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

let s: TestServer;

beforeAll(async () => {
  s = await startTestServer({ modules: createModules, env: { NATS_URL: "" } });
});
afterAll(() => s.close());

/** An application with a consumer and a deployed function behind the slug "hi". */
async function appWithFunction(name: string) {
  const app = await s.createApp(name);
  const token = (await s.register(app.appKey)).token;
  const fns = s.adminClient(AdminFunctionService);
  const fn = await fns.createFunction({ appId: app.appId, name: "hi" });
  await fns.deployVersion({ functionId: fn.id, code: `export default () => ({ hi: true })`, activate: true });
  const trigger = await fns.createHttpTrigger({ functionId: fn.id, slug: "hi" });
  const call = (path: string, method = "POST") =>
    s.fetch(path, { method, headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, body: method === "GET" || method === "DELETE" ? undefined : "{}" });
  return { ...app, fns, fn, trigger, call };
}

async function setPlan(appId: bigint, change: Record<string, unknown>) {
  const current = (await s.admin.getApp({ key: { case: "id", value: appId } })).plan!;
  await s.admin.setAppPlan({ appId, plan: { ...current, ...change } });
}

describe("SetAppPlan takes effect at once in this process", () => {
  it("a plan without functions answers 402 on the very next call, and 200 again once restored", async () => {
    const a = await appWithFunction("plan off");
    expect((await a.call("/api/fn/hi")).status).toBe(200); // the resolution (with the plan) is cached now
    await setPlan(a.appId, { functionsEnabled: false });
    const off = await a.call("/api/fn/hi");
    expect(off.status).toBe(402);
    expect(await off.json()).toEqual({ error: "plan_required", message: expect.any(String) });
    await setPlan(a.appId, { functionsEnabled: true });
    expect((await a.call("/api/fn/hi")).status).toBe(200);
  });

  it("a lowered invocation limit holds from the next call (tokens leased under the old limit are dropped)", async () => {
    const a = await appWithFunction("plan limit");
    expect((await a.call("/api/fn/hi")).status).toBe(200); // leases tokens under 6000/min
    await setPlan(a.appId, { functionInvocationsPerMinute: 2 });
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) statuses.push((await a.call("/api/fn/hi")).status);
    expect(statuses).toEqual([200, 200, 429, 429]);
  });
});

describe("SetAppPlan and the CMS", () => {
  it("a CMS per-second limit set now holds for the next requests (the key resolver's cached plan is dropped)", async () => {
    const app = await s.createApp("cms plan");
    const get = () => s.fetch("/api/v1/nothing", { headers: { "x-app-key": app.appKey } }).then((r) => r.status);
    expect(await get()).toBe(404); // unlimited; the app and its plan are cached now
    await setPlan(app.appId, { cmsRequestsPerSecond: 1 });
    // At most one window boundary falls among three quick requests: at least two share a second.
    const statuses = [await get(), await get(), await get()];
    expect(statuses).toContain(429);
  });
});

describe("slugs that name no enabled HTTP trigger", () => {
  it("are 404 not_found in the platform envelope with X-Request-Id, for every method", async () => {
    const a = await appWithFunction("slugs");
    const off = await a.fns.createHttpTrigger({ functionId: a.fn.id, slug: "disabled" });
    await a.fns.setTriggerEnabled({ triggerId: off.id, enabled: false });
    const slugs = ["unknown", "disabled", "Upper-Case", "dots.in.it", "with%20space", "-leading-dash", "%F0%9F%98%80", "a".repeat(101), "", "a%2Fb", "a/b"];
    for (const method of ["GET", "POST", "PUT", "PATCH", "DELETE"]) {
      for (const slug of slugs) {
        const res = await a.call(`/api/fn/${slug}`, method);
        const text = await res.text();
        expect(res.status, `${method} ${slug}: ${text}`).toBe(404);
        expect(res.headers.get("x-request-id"), `${method} ${slug}`).toBeTruthy();
        expect(JSON.parse(text), `${method} ${slug}`).toEqual({ error: "not_found", message: expect.any(String) });
      }
    }
    // The function itself is still reached under its enabled slug.
    expect((await a.call("/api/fn/hi", "GET")).status).toBe(200);
  });
});
