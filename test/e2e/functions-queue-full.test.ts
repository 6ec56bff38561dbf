// Issue #28, point 1: an application whose runs fill its isolate share and
// its queue gets 503 `unavailable` with Retry-After for the runs past the
// queue (the platform refusing, not the function failing: never a 500),
// while another application's function still answers.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createModules } from "../../src/server/modules.js";
import { deployHttpFunction, startTestServer, type TestServer } from "../helpers/server.js";

let s: TestServer;

beforeAll(async () => {
  // one isolate per application: its queue holds 256 runs (isolate-pool.ts)
  s = await startTestServer({ modules: createModules, env: { PULSEBASE_FN_APP_ISOLATES: "1" } });
}, 120_000);

afterAll(async () => {
  await s?.close();
});

describe("an application's full isolate queue", () => {
  it("answers 503 unavailable with Retry-After past the queue, never 500, and another application is served", async () => {
    const hog = await s.createApp("queue-hog");
    const other = await s.createApp("queue-other");
    await deployHttpFunction(s, hog.appId, "slow", "export default async () => { await new Promise((r) => setTimeout(r, 3000)); return { ok: true }; }");
    await deployHttpFunction(s, other.appId, "quick", "export default () => ({ quick: true });");
    const hogToken = (await s.register(hog.appKey)).token;
    const otherToken = (await s.register(other.appKey)).token;

    const calls = Array.from({ length: 280 }, () => s.fetch("/api/fn/slow", { headers: { authorization: `Bearer ${hogToken}` } }));
    const quick = await s.fetch("/api/fn/quick", { headers: { authorization: `Bearer ${otherToken}` } });
    expect(quick.status).toBe(200);
    expect(await quick.json()).toEqual({ quick: true });

    const answers = await Promise.all(calls);
    const statuses = answers.map((r) => r.status);
    expect(statuses.filter((x) => x === 500)).toEqual([]);
    const refused = answers.filter((r) => r.status === 503);
    expect(refused.length).toBeGreaterThan(0);
    for (const r of refused) {
      expect(r.headers.get("retry-after")).toBe("1");
      expect(r.headers.get("x-request-id")).toBeTruthy();
      expect((await r.json()).error).toBe("unavailable");
    }
    // the others ran (200) or waited until their own timeout (504)
    for (const x of statuses) expect([200, 503, 504]).toContain(x);
    expect(statuses).toContain(200);
  }, 60_000);
});
