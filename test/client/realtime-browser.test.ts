// The SDK's realtime in Debian's Chromium: the SDK bundled and minified as
// an app ships it, loaded in a page on loopback, connects with the browser's
// own WebSocket (the token as the `bearer.<token>` subprotocol, as browsers
// cannot set headers), joins a channel with presence and receives a
// broadcast from a Node client; the Node client receives the page's.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Browser, Page } from "playwright-core";
import { Agent, WebSocket as UndiciWebSocket } from "undici";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createRealtime, type BroadcastMessage, type PresenceEvent, type Realtime, type WebSocketConstructor } from "../../packages/client/src/index.js";
import { minifiedBundle } from "../../packages/client/scripts/size.js";
import { createModules } from "../../src/server/modules.js";
import { launchChromium } from "../capabilities/console/browser.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { sdkClient } from "./sdk-fixture.js";

const dispatcher = new Agent({ connect: { rejectUnauthorized: false } });
const InsecureWebSocket = class extends UndiciWebSocket {
  constructor(url: string, protocols: string[]) {
    super(url, { protocols, dispatcher });
  }
} as unknown as WebSocketConstructor;

let s: TestServer;
let site: Server;
let browser: Browser;
let page: Page;
let appKey: string;
let node: Realtime | undefined;

beforeAll(async () => {
  const bundle = await minifiedBundle();
  s = await startTestServer({ modules: createModules });
  ({ appKey } = await s.createApp("sdk realtime browser"));
  browser = await launchChromium();
  // The server's certificate is the test's self-signed one (also for wss://).
  const ctx = await browser.newContext({ ignoreHTTPSErrors: true });
  page = await ctx.newPage();
  site = createServer((req, res) => {
    if (req.url === "/sdk.js") res.writeHead(200, { "content-type": "text/javascript" }).end(bundle);
    else res.writeHead(200, { "content-type": "text/html" }).end('<!doctype html><script type="module">import * as sdk from "/sdk.js"; window.sdk = sdk;</script>');
  });
  await new Promise<void>((r) => site.listen(0, "127.0.0.1", r));
  await page.goto(`http://127.0.0.1:${(site.address() as AddressInfo).port}/`);
  await page.waitForFunction("window.sdk !== undefined");
}, 120_000);

afterAll(async () => {
  node?.close();
  await browser?.close();
  site?.close();
  await s?.close();
  await dispatcher.close();
});

it("subscribes in the page with the browser's WebSocket and exchanges broadcasts with a Node client", async () => {
  // In the page: a client, its realtime, a channel with presence; what arrives is kept on window.
  const pageConsumer = (await page.evaluate(async ({ base, appKey }) => {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const w = globalThis as any;
    const client = w.sdk.createClient({ baseUrl: base, appKey, storage: w.sdk.memoryStorage() });
    const rt = w.sdk.createRealtime(client);
    w.got = [];
    w.members = [];
    const room = rt.channel("lobby", { presence: { name: "page" } });
    room.on("broadcast", (m: unknown) => w.got.push(m));
    room.on("presence", (p: { members: unknown[] }) => (w.members = p.members));
    await room.subscribed;
    w.room = room;
    return rt.welcome.consumer_id;
  }, { base: s.httpsUrl, appKey })) as number;
  expect(pageConsumer).toEqual(expect.any(Number));

  const client = sdkClient(s, appKey);
  node = createRealtime(client, { WebSocket: InsecureWebSocket });
  const lobby = node.channel<{ text: string }, { name: string }>("lobby", { presence: { name: "node" } });
  const got: BroadcastMessage<{ text: string }>[] = [];
  lobby.on("broadcast", (m) => got.push(m));
  const seen = new Promise<BroadcastMessage<{ text: string }>>((resolve) => lobby.on("broadcast", resolve));
  await lobby.subscribed;
  expect(lobby.members.map((m) => [m.consumer_id, m.state.name])).toEqual([[pageConsumer, "page"], [client.identity!.consumerId, "node"]]);
  // The page learns of the Node member.
  await page.waitForFunction("window.members.length === 2");

  await lobby.send("message", { text: "from node" });
  await page.waitForFunction("window.got.length === 1");
  expect(await page.evaluate("window.got")).toEqual([{ channel: "lobby", event: "message", payload: { text: "from node" }, from: client.identity!.consumerId }]);

  await page.evaluate("window.room.send('message', { text: 'from the page' })");
  expect(await seen).toEqual({ channel: "lobby", event: "message", payload: { text: "from the page" }, from: pageConsumer });
  expect(got).toHaveLength(1);

  // The page leaves: the Node client sees it go.
  const left = new Promise<PresenceEvent>((resolve) => lobby.on("presence", (p) => p.leaves.length && resolve(p as PresenceEvent)));
  await page.evaluate("window.room.unsubscribe()");
  expect((await left).leaves.map((l) => l.consumer_id)).toEqual([pageConsumer]);
}, 60_000);
