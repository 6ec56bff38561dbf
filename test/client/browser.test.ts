// The SDK in Debian's Chromium, driving the example web app (examples/web)
// against a real server through the example's dev server, which plays the
// network: 1,000 events recorded while the server is unreachable survive a
// reload and are stored exactly once when it is back (also when the answer
// to one batch is lost), and an uncaught error in the page becomes a crash
// log with its stack and breadcrumbs, sent on the next start if it could not
// be sent before the page went.
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type BrowserContext, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CmsService } from "../../gen/pulsebase/admin/v1/cms_pb.js";
import { startDevServer, type DevServer } from "../../examples/web/dev-server.js";
import { createModules } from "../../src/server/modules.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { eventCounts, waitFor } from "./sdk-fixture.js";

const CHROMIUM = "/usr/bin/chromium";
const ARGS = [
  "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync",
];

let s: TestServer;
let dev: DevServer;
let ctx: BrowserContext;
let page: Page;
let profile: string;
let appKey: string;
let appId: bigint;
const pageErrors: string[] = [];

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium (.ci/run does)`);
  s = await startTestServer({ modules: createModules });
  ({ appKey, appId } = await s.createApp("sdk browser"));
  const cms = s.adminClient(CmsService);
  await cms.createContentType({
    appId,
    contentType: {
      slug: "article", name: "Article",
      fields: [{ name: "title", type: "text", required: true, label: "Title" }, { name: "category", type: "text", label: "Category" }],
      searchableFields: ["title"],
    },
  });
  for (const [i, c] of ["news", "sport", "news"].entries()) {
    await cms.createEntry({ appId, contentType: "article", publish: true, data: { title: `Story ${i}`, category: c } });
  }
  dev = await startDevServer({ upstream: s.httpsUrl, insecure: true });
  profile = await mkdtemp(join(tmpdir(), "pb-chromium-"));
  ctx = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: ARGS });
  page = await openApp();
}, 120_000);

afterAll(async () => {
  await ctx?.close();
  await dev?.close();
  await s?.close();
  if (profile) await rm(profile, { recursive: true, force: true });
});

async function openApp(p?: Page): Promise<Page> {
  p ??= await ctx.newPage();
  p.on("pageerror", (e) => pageErrors.push(e.message));
  await p.goto(`${dev.url}/?appKey=${appKey}&flushAt=100&flushInterval=1000&retryBase=200&retryMax=1500`);
  await p.waitForFunction("window.pb !== undefined");
  return p;
}

interface Stats {
  queued: { events: number; logs: number };
  sent: { events: number };
}
const stats = (p: Page) => p.evaluate("window.pb.analytics.stats()") as Promise<Stats>;

/** Records `n` events in the page, in bursts, as taps would. */
const record = (p: Page, name: string, n: number) =>
  p.evaluate(async ({ name, n }) => {
    const a = (globalThis as unknown as { pb: { analytics: { track(n: string, m: object): void } } }).pb.analytics;
    for (let i = 0; i < n; i++) {
      a.track(name, { i: String(i) });
      if (i % 50 === 49) await new Promise((r) => setTimeout(r, 10));
    }
  }, { name, n });

describe("the example app in Chromium", () => {
  it("registers and lists the published CMS articles", async () => {
    await page.waitForFunction("document.querySelectorAll('#articles article').length === 3");
    expect(await page.locator("#articles article").allTextContents()).toEqual(["Story 2 (news)", "Story 1 (sport)", "Story 0 (news)"]);
    await page.waitForFunction("/consumer \\d+/.test(document.getElementById('status').textContent)");
  });

  // First with a session the server knows (the page forms its batches
  // offline, and keeps them over the reload), then with one that began
  // offline (created with /api/session/batch once the server is back), where
  // the answer to one batch is lost.
  for (const dropOne of [false, true]) {
    it(`1,000 events recorded offline survive a reload and are stored exactly once${dropOne ? ", with one answer lost" : ""}`, async () => {
      const name = dropOne ? "offline_tap_lost_answer" : "offline_tap";
      if (!dropOne) {
        await page.evaluate("window.pb.analytics.track('online_first'), window.pb.analytics.flush()");
      }
      dev.offline = true;
      const from = dev.log.length;
      await record(page, name, 1000);
      expect((await stats(page)).queued.events).toBe(1000);
      // The page has tried to send before it goes.
      const tried = dropOne ? "/api/session/batch" : "/api/events/batch";
      await waitFor(async () => dev.log.slice(from).filter((r) => r.path === tried).length, (n) => n >= 2, 10_000);
      const firstKey = dev.log.slice(from).find((r) => r.path === "/api/events/batch");
      expect(Boolean(firstKey)).toBe(!dropOne);

      await page.reload();
      await page.waitForFunction("window.pb !== undefined");
      expect((await stats(page)).queued.events).toBe(1000); // loaded from localStorage
      const stored = (await page.evaluate(
        "Object.keys(localStorage).filter((k) => k.startsWith('pb:')).reduce((n, k) => n + k.length + localStorage.getItem(k).length, 0)",
      )) as number;

      if (dropOne) dev.dropResponse((r) => r.path === "/api/events/batch");
      const back = dev.log.length;
      dev.offline = false;
      const t0 = Date.now();
      await waitFor(() => stats(page), (st) => st.queued.events === 0, 60_000);
      const sentMs = Date.now() - t0;
      await waitFor(() => eventCounts(s, appId, name), (c) => c.occurrences >= 1000, 60_000);
      const storedMs = Date.now() - t0;
      await new Promise((r) => setTimeout(r, 1500)); // a batch applied twice would show by now
      expect(await eventCounts(s, appId, name)).toEqual({ rows: 1000, occurrences: 1000 });
      const distinct = await s.db.sql.query<{ n: string }>(
        `SELECT count(DISTINCT o.metadata->>'i') AS n FROM analytics_event_occurrences o JOIN analytics_events e ON e.id = o.event_id
          WHERE e.app_id = $1 AND e.name = $2`, [Number(appId), name]);
      expect(Number(distinct.rows[0]!.n)).toBe(1000);

      const after = dev.log.slice(back).filter((r) => r.path === "/api/events/batch");
      // The batch formed before the reload was sent after it with the same key and body.
      console.log(`[sdk offline] ${name}: 1000 events kept in ${stored} chars of localStorage over the reload; ` +
        `all accepted ${sentMs} ms and all stored ${storedMs} ms after the server came back, in ${after.length} batch requests ` +
        `(${after.filter((r) => r.dropped).length} answer lost and resent)`);
      if (firstKey) expect(after.find((r) => r.idempotencyKey === firstKey.idempotencyKey)).toMatchObject({ body: firstKey.body, status: 202 });
      if (dropOne) {
        expect(dev.log.slice(back).filter((r) => r.path === "/api/session/batch").map((r) => r.status)).toContain(200);
        const lost = after.find((r) => r.dropped)!;
        expect(lost.status).toBe(202); // the server took it; the page never heard
        const again = after.filter((r) => r.idempotencyKey === lost.idempotencyKey && !r.dropped);
        expect(again.length).toBeGreaterThanOrEqual(1);
        expect(again.every((r) => r.body === lost.body && r.status === 202)).toBe(true);
      }
    }, 120_000);
  }

  it("hiding the page ends the session on the server", async () => {
    await page.evaluate("window.pb.analytics.track('before_hide'), window.pb.analytics.flush()");
    const session = ((await stats(page)) as unknown as { session: { serverId: number } }).session.serverId;
    const ended = () => s.db.sql.query<{ ended_at: Date | null }>("SELECT ended_at FROM sessions WHERE id = $1", [session]);
    expect((await ended()).rows[0]!.ended_at).toBeNull();
    await page.evaluate(`
      Object.defineProperty(document, "visibilityState", { value: "hidden", configurable: true });
      document.dispatchEvent(new Event("visibilitychange", { bubbles: true }));
      delete document.visibilityState;
      document.dispatchEvent(new Event("visibilitychange", { bubbles: true }));
    `);
    await waitFor(ended, (r) => r.rows[0]!.ended_at !== null, 10_000);
    expect((await ended()).rows[0]!.ended_at).not.toBeNull();
  });

  it("keeps the queue in IndexedDB with indexedDbStorage, over a reload", async () => {
    const setup = `(async () => {
      const m = await import("/pulsebase-client.js");
      const client = m.createClient({ baseUrl: location.origin, appKey: "${appKey}", storage: m.indexedDbStorage("pb-idb-test") });
      window.idb = m.createAnalytics(client, { flushAt: 1000, flushInterval: 60000, retryBase: 200, retryMax: 1000 });
      await window.idb.loaded;
    })()`;
    await page.evaluate(setup);
    await page.evaluate("window.idb.track('idb_warmup'), window.idb.flush()"); // registered, session known
    dev.offline = true;
    await page.evaluate("for (let i = 0; i < 50; i++) window.idb.track('idb_event', { i: String(i) })");
    await page.evaluate("window.idb.flush().catch(() => undefined)");
    await page.reload();
    await page.waitForFunction("window.pb !== undefined");
    await page.evaluate(setup);
    expect(await page.evaluate("window.idb.stats().queued.events")).toBe(50);
    dev.offline = false;
    await page.evaluate("window.idb.flush()");
    await waitFor(() => eventCounts(s, appId, "idb_event"), (c) => c.occurrences >= 50);
    expect(await eventCounts(s, appId, "idb_event")).toEqual({ rows: 50, occurrences: 50 });
  });

  it("an uncaught error becomes a crash log with its stack and breadcrumbs, sent on the next start if the page could not", async () => {
    const crashes = () =>
      s.db.sql.query<{ class_fqn: string; message: string; stack_trace: string; file_name: string; line_number: string; occurrences: string; context: { breadcrumbs?: { name: string }[] } }>(
        "SELECT class_fqn, message, stack_trace, file_name, line_number, occurrences, context FROM analytics_logs WHERE app_id = $1 AND type = 'crash'", [Number(appId)]);
    const appJs = (await readFile(join(import.meta.dirname, "../../examples/web/app.js"), "utf8")).split("\n");
    const line = appJs.findIndex((l) => l.includes("return order.total")) + 1;

    await page.click("#crash");
    await waitFor(crashes, (r) => r.rows.length === 1);
    const [crash] = (await crashes()).rows;
    expect(crash).toMatchObject({ class_fqn: "TypeError", file_name: `${dev.url}/app.js` });
    expect(crash!.message).toMatch(/total/);
    expect(Number(crash!.line_number)).toBe(line);
    expect(crash!.stack_trace).toMatch(/explode .*app\.js:\d+:\d+/);
    expect(crash!.context.breadcrumbs!.map((b) => b.name).slice(-2)).toEqual(["opened home", "pressed crash"]);

    // Offline: stored before the page goes, sent when the app starts again.
    dev.offline = true;
    await page.click("#crash");
    expect((await stats(page)).queued.logs).toBe(1);
    await page.close({ runBeforeUnload: true });
    dev.offline = false;
    page = await openApp();
    await waitFor(crashes, (r) => Number(r.rows[0]?.occurrences) === 2, 20_000);
    expect(Number((await crashes()).rows[0]!.occurrences)).toBe(2);
    expect(pageErrors.filter((m) => !/total/.test(m))).toEqual([]); // nothing else went wrong in the page
  }, 60_000);
});
