// The console's realtime views in Chromium over a real server (issue #32,
// point 5): the database page's Live tab shows a row a device inserts as it
// is committed, pauses (the URL says so, changes wait) and resumes, and
// shows the operator every row even under rules that hide it from devices;
// the Channels page shows a device's presence (with its state) and its
// broadcast. RealtimeAdminService is checked over the API beside it.
// CONSOLE_SCREENSHOTS=dir saves the screens (docs/console/).
import { existsSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join, resolve } from "node:path";
import { toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { AccessRulesService } from "../../../gen/pulsebase/admin/v1/access_rules_pb.js";
import { DatabaseService } from "../../../gen/pulsebase/admin/v1/database_pb.js";
import { RealtimeAdminService, type TableChange } from "../../../gen/pulsebase/admin/v1/realtime_pb.js";
import { SqlService } from "../../../gen/pulsebase/admin/v1/sql_pb.js";
import { CONSOLE_DIST } from "../../../src/capabilities/console/static-console.js";
import { createModules } from "../../../src/server/modules.js";
import { startTestServer, type TestServer } from "../../helpers/server.js";
import { connect, type RtClient } from "../realtime/ws-client.js";
import { launchChromium } from "./browser.js";
import { setupOwner } from "./operator-session.js";

const SHOTS = process.env.CONSOLE_SCREENSHOTS ? resolve(process.env.CONSOLE_SCREENSHOTS) : undefined;
const PASSWORD = "a long owner password";

let s: TestServer;
let browser: Browser;
let ctx: BrowserContext;
let page: Page;
let appId: bigint;
let appKey: string;
let dev: { id: number; token: string };
const sockets: RtClient[] = [];

const until = <T>(fn: () => T | Promise<T>) => expect.poll(fn, { timeout: 20_000, interval: 100 });

async function shot(p: Page, name: string): Promise<void> {
  if (!SHOTS) return;
  await p.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: false });
}

async function deviceSql(token: string, sql: string): Promise<void> {
  const r = await s.fetch("/api/db/query", { method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, body: JSON.stringify({ sql }) });
  const body = (await r.json()) as { results?: Array<{ error?: string }> };
  if (r.status !== 200 || body.results?.[0]?.error) throw new Error(`device SQL ${r.status}: ${JSON.stringify(body)}`);
}

async function socket(token: string): Promise<RtClient> {
  const c = await connect(s.httpsUrl.replace("https:", "wss:") + "/api/realtime", { token });
  sockets.push(c);
  await c.next((m) => m.type === "welcome", "welcome");
  return c;
}

const rt = () => s.adminClient(RealtimeAdminService);

beforeAll(async () => {
  if (!existsSync(join(CONSOLE_DIST, "index.html"))) throw new Error(`${CONSOLE_DIST} has no build: set PULSEBASE_CONSOLE_DIST or npm run console:build`);
  if (SHOTS) await mkdir(SHOTS, { recursive: true });
  s = await startTestServer({ modules: createModules });
  const owner = await setupOwner(s, "ada@example.com", PASSWORD);
  const teamId = owner.me.teams[0]!.teamId;
  const app = await s.admin.createApp({ teamId, name: "Chat" });
  appId = app.id;
  appKey = app.appKey;
  const dbs = s.adminClient(DatabaseService);
  const db = await dbs.createDatabase({ teamId, name: "chat" });
  await dbs.linkDatabase({ databaseId: db.id, appId });
  const r = await s.adminClient(SqlService).runSql({ appId, sql: "CREATE TABLE messages (id INTEGER PRIMARY KEY, owner_id TEXT, body TEXT)" });
  expect(r.results.map((x) => x.error)).toEqual([""]);
  dev = await s.register(appKey, { user_id: "ann" });
  browser = await launchChromium();
  ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  page = await ctx.newPage();
  await page.goto(`${s.adminUrl}/login`);
  await page.getByLabel("Email").fill("ada@example.com");
  await page.getByLabel("Password").fill(PASSWORD);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL((u) => !u.pathname.startsWith("/login"));
}, 60_000);

afterAll(async () => {
  for (const c of sockets) c.ws.terminate();
  await browser?.close();
  await s?.close();
});

describe("RealtimeAdminService", { timeout: 60_000 }, () => {
  it("WatchTable streams a device's changes to the operator, every row even under rules; a device's own subscription is unaffected", async () => {
    const abort = new AbortController();
    const got: TableChange[] = [];
    let started = "";
    const stream = rt().watchTable({ appId, table: "MESSAGES" }, { signal: abort.signal, timeoutMs: 60_000 });
    const reading = (async () => {
      try {
        for await (const e of stream) {
          if (e.kind.case === "started") started = e.kind.value.table;
          if (e.kind.case === "change") got.push(e.kind.value);
        }
      } catch {
        // aborted
      }
    })();
    await until(() => started).toBe("messages");
    // rules mode: the device may see its own rows only; the operator sees all
    await s.adminClient(AccessRulesService).setAccessRules({ appId, mode: "rules", tables: [{ table: "messages", select: "owner_id = :user_id", insert: "1", update: "0", delete: "1" }] });
    const devSock = await socket(dev.token);
    devSock.send({ type: "subscribe", id: "t", topic: { kind: "table", table: "messages" } });
    await devSock.next((m) => m.type === "subscribed" && m.id === "t", "subscribed");
    await deviceSql(dev.token, "INSERT INTO messages (id, owner_id, body) VALUES (100, 'ann', 'mine'), (101, 'bob', 'not mine')");
    await until(() => got.map((c) => [c.op, c.row?.body])).toEqual([["insert", "mine"], ["insert", "not mine"]]);
    await devSock.next((m) => m.type === "change" && m.id === "t", "the device's change");
    // the device got its own row only
    await new Promise((r) => setTimeout(r, 300));
    expect(devSock.messages.filter((m) => m.type === "change").map((m) => (m.row as { body: string }).body)).toEqual(["mine"]);
    await deviceSql(dev.token, "DELETE FROM messages WHERE id = 100");
    await until(() => got.at(-1)?.op).toBe("delete");
    expect(got.at(-1)!.oldKey).toEqual({ id: 100 });
    abort.abort();
    await reading;
    // the device's subscription keeps working after the operator's watch ended (the interest is shared)
    await deviceSql(dev.token, "INSERT INTO messages (id, owner_id, body) VALUES (102, 'ann', 'still here')");
    await devSock.next((m) => m.type === "change" && (m.row as { body?: string } | undefined)?.body === "still here", "a change after the watch ended");
    devSock.close();
    await s.adminClient(AccessRulesService).setAccessRules({ appId, mode: "open", tables: [] });
  });

  it("WatchTable refuses a table that does not exist", async () => {
    const stream = rt().watchTable({ appId, table: "nope" }, { timeoutMs: 10_000 });
    await expect((async () => {
      for await (const _ of stream) void _;
    })()).rejects.toThrow(/no such table/);
  });

  it("ListChannels and InspectChannel show a channel's subscribers, presence and recent broadcasts", async () => {
    const c = await socket(dev.token);
    c.send({ type: "subscribe", id: "c", topic: { kind: "channel", channel: "api-room", presence: { state: { name: "Ann" } } } });
    await c.next((m) => m.type === "presence_state", "presence_state");
    for (let i = 0; i < 3; i++) c.send({ type: "broadcast", channel: "api-room", event: "msg", payload: { n: i }, ref: `b${i}` });
    await c.next((m) => m.type === "ok" && m.ref === "b2", "ok");
    const list = await rt().listChannels({ appId });
    expect(list.channels.map((x) => ({ channel: x.channel, subscribers: x.subscribers, presenceMembers: x.presenceMembers, recentMessages: x.recentMessages }))).toEqual([{ channel: "api-room", subscribers: 1, presenceMembers: 1, recentMessages: 3 }]);
    const i = await rt().inspectChannel({ appId, channel: "api-room" });
    expect(i.members.map((m) => ({ consumerId: Number(m.consumerId), state: m.state, here: m.onThisServer }))).toEqual([{ consumerId: dev.id, state: { name: "Ann" }, here: true }]);
    expect(i.recent.map((r) => r.payload && toJson(ValueSchema, r.payload))).toEqual([{ n: 2 }, { n: 1 }, { n: 0 }]);
    expect(i.recentCapacity).toBe(50);
    c.close();
    await until(async () => (await rt().listChannels({ appId })).channels.length).toBe(0);
    expect((await rt().inspectChannel({ appId, channel: "api-room" })).subscribers).toBe(0);
  });
});

describe("the console's realtime views in Chromium", { timeout: 90_000 }, () => {
  it("the Live tab shows a row a device inserts, pauses and resumes", async () => {
    await page.goto(`${s.adminUrl}/database?app=${appId}`);
    await page.getByRole("tab", { name: "Live" }).click();
    await until(() => page.url()).toMatch(/tab=live/);
    await page.getByLabel("Table").selectOption("messages");
    await until(() => page.url()).toMatch(/table=messages/);
    await until(() => page.getByTestId("live-state").textContent()).toBe("● Live");
    await deviceSql(dev.token, "INSERT INTO messages (id, owner_id, body) VALUES (1, 'ann', 'hello from a device')");
    const live = page.getByRole("table", { name: "Live changes of messages" });
    await until(() => live.locator("tbody tr").first().textContent()).toMatch(/insert.*1.*ann.*hello from a device/);
    await deviceSql(dev.token, "UPDATE messages SET body = 'edited' WHERE id = 1");
    await until(() => live.locator("tbody tr").first().textContent()).toMatch(/update.*edited/);
    await shot(page, "database-live");

    await page.getByRole("button", { name: "Pause" }).click();
    await until(() => page.url()).toMatch(/paused=1/);
    await deviceSql(dev.token, "INSERT INTO messages (id, owner_id, body) VALUES (2, 'ann', 'while paused')");
    await until(() => page.getByText("1 new change(s) waiting").isVisible()).toBe(true);
    expect(await live.locator("tbody tr").count()).toBe(2);
    await page.getByRole("button", { name: "Resume" }).click();
    await until(() => live.locator("tbody tr").first().textContent()).toMatch(/insert.*while paused/);
    expect(page.url()).not.toMatch(/paused=1/);
    await deviceSql(dev.token, "DELETE FROM messages WHERE id = 2");
    await until(() => live.locator("tbody tr").first().textContent()).toMatch(/delete.*2/);
  });

  it("the Channels page shows a device's presence and a broadcast", async () => {
    const c = await socket(dev.token);
    c.send({ type: "subscribe", id: "room", topic: { kind: "channel", channel: "room:5", presence: { state: { name: "Ann", typing: false } } } });
    await c.next((m) => m.type === "presence_state", "presence_state");
    c.send({ type: "broadcast", channel: "room:5", event: "message", payload: { text: "hi there" }, ref: "b" });
    await c.next((m) => m.type === "ok" && m.ref === "b", "ok");
    await page.goto(`${s.adminUrl}/channels?app=${appId}`);
    const channels = page.getByRole("table", { name: "Channels" });
    const row = channels.locator("tbody tr", { hasText: "room:5" });
    await until(() => row.textContent()).toMatch(/^room:5\s*1\s*1\s*1/);
    await row.click();
    await until(() => page.url()).toMatch(/channel=room%3A5/);
    const presence = page.getByRole("table", { name: "Presence" });
    await until(() => presence.locator("tbody tr").first().textContent()).toMatch(new RegExp(`#${dev.id}.*"name":"Ann".*this one`, "s"));
    const recent = page.getByRole("table", { name: "Recent messages" });
    await until(() => recent.locator("tbody tr").first().textContent()).toMatch(/message.*"text":"hi there"/s);
    // refreshing live: a state change and a second message appear without a reload
    c.send({ type: "presence", id: "room", state: { name: "Ann", typing: true } });
    c.send({ type: "broadcast", channel: "room:5", event: "message", payload: { text: "second" } });
    await until(() => recent.locator("tbody tr").first().textContent()).toMatch(/second/);
    await until(() => presence.locator("tbody tr").first().textContent()).toMatch(/"typing":true/);
    await shot(page, "channels");
    c.close();
  });
});
