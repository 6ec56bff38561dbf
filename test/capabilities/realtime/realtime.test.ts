// The realtime gateway on one real server (TLS public listener, PostgreSQL,
// embedded fan-out): real `ws` clients and an SSE reader (docs/realtime.md).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Agent, fetch } from "undici";
import { createModules } from "../../../src/server/modules.js";
import { startTestServer, type TestServer } from "../../helpers/server.js";
import { until } from "../../helpers/until.js";
import { connect, type Msg, type RtClient } from "./ws-client.js";

let s: TestServer;
let wsUrl: string;
let appKey: string;
const open: RtClient[] = [];
const dispatcher = new Agent({ connect: { rejectUnauthorized: false } });

beforeAll(async () => {
  s = await startTestServer({
    modules: createModules,
    env: {
      PULSEBASE_REALTIME_SUBSCRIPTIONS_PER_CONNECTION: "3",
      PULSEBASE_REALTIME_MESSAGE_BYTES: "4096",
      PULSEBASE_REALTIME_BROADCASTS_PER_SECOND: "1000",
      // A burst of one round below stays under it for a reader that keeps up.
      PULSEBASE_REALTIME_SEND_BUFFER_BYTES: String(1024 * 1024),
    },
  });
  wsUrl = s.httpsUrl.replace("https:", "wss:") + "/api/realtime";
  ({ appKey } = await s.createApp("realtime"));
}, 60_000);

afterAll(async () => {
  for (const c of open) c.ws.terminate();
  await dispatcher.close();
  await s?.close();
});

async function client(token: string, opts: Parameters<typeof connect>[1] = {}): Promise<RtClient> {
  const c = await connect(wsUrl, { token, ...opts });
  open.push(c);
  await c.next((m) => m.type === "welcome", "welcome");
  return c;
}

async function subscribe(c: RtClient, id: string, topic: Record<string, unknown>): Promise<Msg> {
  c.send({ type: "subscribe", id, topic });
  return c.next((m) => (m.type === "presence_state" || m.type === "error") && m.id === id, `subscription ${id}`);
}

let n = 0;
const ref = () => `r${++n}`;
/** Sends and waits for the server's ok (or error) of that message: everything it caused on this connection came before. */
async function acked(c: RtClient, m: Record<string, unknown>): Promise<Msg> {
  const r = ref();
  c.send({ ...m, ref: r });
  return c.next((x) => (x.type === "ok" || x.type === "error") && x.ref === r, `ack ${r}`);
}

async function metric(name: string): Promise<string> {
  const text = await (await fetch(`${s.adminUrl}/metrics`, { headers: { authorization: `Bearer ${s.operatorToken}` } })).text();
  return text.split("\n").filter((l) => l.startsWith(name)).join("\n");
}

describe("WebSocket: channels", () => {
  it("delivers a broadcast to the other subscribers, and to the sender only when it asked for self", async () => {
    const a = await s.register(appKey);
    const b = await s.register(appKey);
    const ca = await client(a.token);
    const cb = await client(b.token);
    await subscribe(ca, "room", { kind: "channel", channel: "room:1" });
    await subscribe(cb, "room", { kind: "channel", channel: "room:1", self: true });
    expect(await acked(ca, { type: "broadcast", channel: "room:1", event: "msg", payload: { text: "hi" } })).toMatchObject({ type: "ok" });
    expect(await cb.next((m) => m.type === "broadcast")).toEqual({ type: "broadcast", id: "room", channel: "room:1", event: "msg", payload: { text: "hi" }, from: a.id });
    // The ok came after any echo to the sender (same connection, in order): there was none.
    expect(ca.messages.filter((m) => m.type === "broadcast")).toEqual([]);
    await acked(cb, { type: "broadcast", channel: "room:1", event: "msg", payload: 2 });
    expect(cb.messages.filter((m) => m.type === "broadcast").map((m) => m.payload)).toEqual([{ text: "hi" }, 2]);
    expect((await ca.next((m) => m.type === "broadcast")).from).toBe(b.id);
  });

  it("keeps presence: state, joins, updates and leaves (also when a socket is destroyed)", async () => {
    const a = await s.register(appKey);
    const b = await s.register(appKey);
    const ca = await client(a.token);
    const st = await subscribe(ca, "p", { kind: "channel", channel: "lobby", presence: { state: { name: "ann" } } });
    expect(st.members).toEqual([{ member: expect.any(String), consumer_id: a.id, state: { name: "ann" } }]);
    const cb = await client(b.token);
    const stb = await subscribe(cb, "p", { kind: "channel", channel: "lobby", presence: { state: { name: "bob" } } });
    expect((stb.members as Msg[]).map((m) => m.state)).toEqual([{ name: "ann" }, { name: "bob" }]);
    const join = await ca.next((m) => m.type === "presence_diff" && (m.joins as Msg[]).length > 0);
    expect(join.joins).toEqual([{ member: expect.any(String), consumer_id: b.id, state: { name: "bob" } }]);
    await acked(cb, { type: "presence", id: "p", state: { name: "bob", typing: true } });
    await ca.next((m) => m.type === "presence_diff" && (m.joins as Msg[]).some((j) => (j.state as Msg).typing === true));
    // An abrupt end (no close frame): the member leaves.
    (cb.ws as unknown as { _socket: { destroy(): void } })._socket.destroy();
    const leave = await ca.next((m) => m.type === "presence_diff" && (m.leaves as Msg[]).length > 0);
    expect(leave.leaves).toEqual([{ member: (join.joins as Msg[])[0]!.member, consumer_id: b.id, state: { name: "bob", typing: true } }]);
  });

  it("answers an unknown CMS content type, a table without a linked database, and protocol mistakes with catalogue codes", async () => {
    const a = await s.register(appKey);
    const c = await client(a.token);
    expect(await subscribe(c, "t", { kind: "table", table: "notes", filter: { column: "room_id", op: "eq", value: 5 } })).toMatchObject({ type: "error", code: "database_not_linked", id: "t" });
    expect(await subscribe(c, "c", { kind: "cms", content_type: "article" })).toMatchObject({ type: "error", code: "not_found", id: "c" });
    expect(await subscribe(c, "x", { kind: "channel", channel: "bad name!" })).toMatchObject({ type: "error", code: "validation_failed", fields: { "topic.channel": expect.any(Array) } });
    c.send({ type: "nope", ref: "q" } as Record<string, unknown>);
    expect(await c.next((m) => m.type === "error" && m.ref === "q")).toMatchObject({ code: "bad_request" });
    c.ws.send("not json");
    expect(await c.next((m) => m.type === "error" && m.message === "The message is not JSON.")).toMatchObject({ code: "bad_request" });
    c.send({ type: "ping", ref: "p1" });
    expect(await c.next((m) => m.type === "pong")).toEqual({ type: "pong", ref: "p1" });
  });
});

describe("WebSocket: authentication", () => {
  it("refuses a connection without a token, and a token in the URL", async () => {
    await expect(connect(wsUrl)).rejects.toMatchObject({ status: 401 });
    const a = await s.register(appKey);
    await expect(connect(`${wsUrl}?token=${a.token}`)).rejects.toMatchObject({ status: 400, body: expect.stringContaining("Never put the token in the URL") });
    await expect(connect(wsUrl, { token: "not-a-token" })).rejects.toMatchObject({ status: 401 });
  });

  it("takes the browser form: the token as the bearer.<token> subprotocol", async () => {
    const a = await s.register(appKey);
    const c = await connect(wsUrl, { protocols: ["pulsebase.v1", `bearer.${a.token}`] });
    open.push(c);
    expect(c.ws.protocol).toBe("pulsebase.v1");
    expect(await c.next((m) => m.type === "welcome")).toMatchObject({ consumer_id: a.id });
  });

  it("closes the socket of a deleted consumer (4001, revoked)", async () => {
    const a = await s.register(appKey);
    const c = await client(a.token);
    await subscribe(c, "r", { kind: "channel", channel: "r" });
    await s.admin.deleteConsumer({ consumerId: BigInt(a.id) });
    expect(await c.next((m) => m.type === "closing")).toMatchObject({ code: 4001, reason: "revoked" });
    expect((await c.closed).code).toBe(4001);
  });
});

describe("WebSocket: limits", () => {
  it("refuses a subscription past the per-connection cap and a message past the size limit", async () => {
    const a = await s.register(appKey);
    const c = await client(a.token);
    for (const id of ["1", "2", "3"]) expect(await subscribe(c, id, { kind: "channel", channel: `cap${id}` })).toMatchObject({ type: "presence_state" });
    expect(await subscribe(c, "4", { kind: "channel", channel: "cap4" })).toMatchObject({ type: "error", code: "limit_exceeded", id: "4" });
    c.send({ type: "broadcast", channel: "cap1", event: "big", payload: "x".repeat(5000) });
    expect(await c.next((m) => m.type === "error" && m.code === "payload_too_large")).toBeTruthy();
    // The connection is still usable.
    expect(await acked(c, { type: "broadcast", channel: "cap1", event: "small", payload: 1 })).toMatchObject({ type: "ok" });
  });

  it("refuses broadcasts over the consumer's rate with rate_limited", async () => {
    const a = await s.register(appKey);
    const c = await client(a.token);
    // The configured rate is 1000 per second: send more than that without waiting.
    const refs: string[] = [];
    for (let i = 0; i < 1100; i++) {
      const r = `rl${i}`;
      refs.push(r);
      c.send({ type: "broadcast", channel: "rl", event: "e", payload: i, ref: r });
    }
    await c.next((m) => m.ref === refs.at(-1));
    const refused = c.messages.filter((m) => m.type === "error" && m.code === "rate_limited");
    expect(refused.length).toBeGreaterThan(0);
    expect(refused[0]).toMatchObject({ retry_after_seconds: expect.any(Number) });
  });

  it("closes a slow consumer that never reads while a fast one keeps receiving", async () => {
    const slowC = await s.register(appKey);
    const fastC = await s.register(appKey);
    const slow = await client(slowC.token);
    const fast = await client(fastC.token);
    // Several senders: each stays within its own broadcast rate.
    const txs = await Promise.all([1, 2, 3, 4].map(async () => client((await s.register(appKey)).token)));
    await subscribe(slow, "s", { kind: "channel", channel: "firehose" });
    await subscribe(fast, "s", { kind: "channel", channel: "firehose" });
    slow.ws.pause(); // reads nothing more: the kernel's buffers, then the server's send buffer for it fill up
    const payload = "y".repeat(3500);
    let i = 0;
    // Rounds until the server closed it (the metric); the kernel buffers hold megabytes first.
    await until(async () => {
      await Promise.all(txs.map(async (tx) => {
        for (let k = 0; k < 25; k++) tx.send({ type: "broadcast", channel: "firehose", event: "e", payload: { i: i++, payload }, ref: `f${i}` });
        const r = ref();
        tx.send({ type: "ping", ref: r });
        await tx.next((m) => m.type === "pong" && m.ref === r, "pong");
      }));
      const m = await metric('pulsebase_realtime_closed_total{reason="slow_consumer"}');
      return /slow_consumer"} [1-9]/.test(m) ? true : undefined;
    }, 50_000, 0);
    await acked(txs[0]!, { type: "broadcast", channel: "firehose", event: "last", payload: null });
    // The fast one got every broadcast the server accepted, the last included.
    await fast.next((m) => m.type === "broadcast" && m.event === "last");
    const accepted = txs.reduce((n, tx) => n + tx.messages.filter((m) => m.type === "ok" && String(m.ref).startsWith("f")).length, 0);
    expect(accepted).toBeGreaterThan(0);
    expect(fast.messages.filter((m) => m.type === "broadcast" && m.event === "e").length).toBe(accepted);
    slow.ws.resume();
    expect((await slow.closed).code).not.toBe(1000);
    expect(await metric("pulsebase_realtime_dropped_total")).toMatch(/slow_consumer/);
  }, 60_000);
});

describe("SSE and HTTP", () => {
  it("streams a channel as events and takes broadcasts over POST /api/realtime/broadcast", async () => {
    const a = await s.register(appKey);
    const b = await s.register(appKey);
    const res = await fetch(`${s.httpsUrl}/api/realtime/sse?channel=news`, { headers: { authorization: `Bearer ${a.token}` }, dispatcher });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const reader = res.body!.getReader();
    let text = "";
    const readUntil = async (needle: string) => {
      while (!text.includes(needle)) {
        const { value, done } = await reader.read();
        if (done) throw new Error(`stream ended: ${text}`);
        text += Buffer.from(value).toString("utf8");
      }
    };
    await readUntil("event: presence_state");
    const post = await s.fetch("/api/realtime/broadcast", {
      method: "POST",
      headers: { authorization: `Bearer ${b.token}`, "content-type": "application/json" },
      body: JSON.stringify({ channel: "news", event: "headline", payload: { title: "hello" } }),
    });
    expect(post.status).toBe(200);
    expect(await post.json()).toEqual({});
    await readUntil('"event":"headline"');
    const frame = text.split("\n\n").find((f) => f.includes("headline"))!;
    expect(frame).toMatch(/^event: broadcast\nid: \d+\ndata: /);
    expect(JSON.parse(frame.split("data: ")[1]!)).toMatchObject({ type: "broadcast", channel: "news", event: "headline", payload: { title: "hello" }, from: b.id });
    await reader.cancel();
    // The SSE connection is gone from the hub once the client left.
    await until(async () => ((await metric('pulsebase_realtime_connections{transport="sse"}')).endsWith(" 0") ? true : undefined));
  });

  it("refuses SSE without a token and POST broadcasts with a bad channel", async () => {
    const res = await s.fetch("/api/realtime/sse?channel=news");
    expect(res.status).toBe(401);
    const a = await s.register(appKey);
    const post = await s.fetch("/api/realtime/broadcast", {
      method: "POST",
      headers: { authorization: `Bearer ${a.token}`, "content-type": "application/json" },
      body: JSON.stringify({ channel: "no spaces", event: "e" }),
    });
    expect(post.status).toBe(422);
  });
});
