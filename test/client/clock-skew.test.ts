// A device whose clock is an hour ahead (the SDK in a child process with a
// shifted Date.now): online, the SDK learns the server's time from
// /api/session/start and stamps events in it; offline, the server refuses
// the future created_at (422) and the SDK resends those items without it, so
// they are stored (at the server's time), not dropped.
import { spawn } from "node:child_process";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDevServer, type DevServer } from "../../examples/web/dev-server.js";
import { createModules } from "../../src/server/modules.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

let s: TestServer;
let dev: DevServer;
let appKey: string;
let appId: bigint;
const HOUR = 3_600_000;

beforeAll(async () => {
  s = await startTestServer({ modules: createModules });
  ({ appKey, appId } = await s.createApp("sdk clock"));
  dev = await startDevServer({ upstream: s.httpsUrl, insecure: true });
});
afterAll(async () => {
  await dev.close();
  await s.close();
});

function runApp(event: string, env: Record<string, string>, onRecorded = () => {}): Promise<{ code: number | null; out: string }> {
  const child = spawn(process.execPath, ["--import", "tsx", join(import.meta.dirname, "fixtures/skewed-clock-app.ts")], {
    env: { ...process.env, PB_URL: dev.url, PB_APP_KEY: appKey, PB_SKEW_MS: String(HOUR), PB_EVENT: event, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout.on("data", (d) => {
    out += d;
    if (String(d).includes("recorded")) onRecorded();
  });
  child.stderr.on("data", (d) => (out += d));
  return new Promise((resolve) => child.once("exit", (code) => resolve({ code, out })));
}

const times = async (name: string) =>
  (await s.db.sql.query<{ created_at: Date }>(
    `SELECT o.created_at FROM analytics_event_occurrences o JOIN analytics_events e ON e.id = o.event_id WHERE e.app_id = $1 AND e.name = $2`,
    [Number(appId), name])).rows.map((r) => r.created_at.getTime());

async function settled(name: string, n: number) {
  for (let i = 0; i < 100 && (await times(name)).length < n; i++) await new Promise((r) => setTimeout(r, 100));
  return times(name);
}

describe("a device clock an hour ahead", () => {
  it("online: events are stamped in the server's time", async () => {
    const t0 = Date.now();
    const r = await runApp("skewed_online", { PB_WARM: "1" });
    expect(r.code, r.out).toBe(0);
    const at = await settled("skewed_online", 10);
    const t1 = Date.now();
    expect(at).toHaveLength(10);
    // within the test's own run on this machine's clock (the device's is an hour ahead)
    for (const t of at) {
      expect(t).toBeGreaterThanOrEqual(t0 - 1000);
      expect(t).toBeLessThanOrEqual(t1 + 1000);
    }
    // Only the warm-up event, recorded before the first answer taught the offset, was refused and resent.
    expect(dev.log.filter((x) => x.path === "/api/events/batch").map((x) => x.status)).toEqual([422, 202, 202]);
    expect(JSON.parse(dev.log.filter((x) => x.path === "/api/events/batch")[0]!.body).events).toHaveLength(1);
  });

  it("offline first: the refused future times are dropped, the events are not", async () => {
    dev.log.length = 0;
    dev.offline = true;
    const t0 = Date.now();
    const r = await runApp("skewed_offline", {}, () => (dev.offline = false));
    expect(r.code, r.out).toBe(0);
    expect(JSON.parse(r.out.trim().split("\n").at(-1)!)).toMatchObject({ sent: { events: 10 }, dropped: 0 });
    const at = await settled("skewed_offline", 10);
    const t1 = Date.now();
    expect(at).toHaveLength(10);
    for (const t of at) {
      expect(t).toBeGreaterThanOrEqual(t0 - 1000);
      expect(t).toBeLessThanOrEqual(t1 + 1000);
    }
    expect(dev.log.filter((x) => x.path === "/api/events/batch" && x.status).map((x) => x.status)).toEqual([422, 202]);
  });
});
