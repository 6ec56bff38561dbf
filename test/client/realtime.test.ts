// The SDK's realtime against a real server (TLS public listener, PostgreSQL,
// the embedded fan-out), in Node with real WebSockets: two clients exchange
// broadcasts and see each other's presence; a client whose socket the
// network drops (a TCP proxy between it and the server) or silences
// reconnects by itself, joins presence again and sends what it queued
// meanwhile; a deleted consumer's 4001 re-registers and reconnects; a token
// refused at the upgrade is re-issued; the server's refusals arrive as the
// SDK's error classes. Waits are for events, never fixed sleeps.
import { createServer, connect as tcpConnect, type Server, type Socket } from "node:net";
import type { AddressInfo } from "node:net";
import { Agent, WebSocket as UndiciWebSocket, getGlobalDispatcher, setGlobalDispatcher } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createDatabase, createRealtime, PlatformError, type RealtimeChange, ValidationError, type BroadcastMessage, type Channel, type PresenceEvent, type PulsebaseClient,
  type Realtime, type RealtimeOptions, type RealtimeStatusEvent, type WebSocketConstructor,
} from "../../packages/client/src/index.js";
import { DatabaseService } from "../../gen/pulsebase/admin/v1/database_pb.js";
import { createModules } from "../../src/server/modules.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { sdkClient } from "./sdk-fixture.js";

const HEARTBEAT_MS = 1000;
const dispatcher = new Agent({ connect: { rejectUnauthorized: false } });
/** The platform's WebSocket (undici's, as Node's global one) trusting the test server's certificate. */
const InsecureWebSocket = class extends UndiciWebSocket {
  constructor(url: string, protocols: string[]) {
    super(url, { protocols, dispatcher });
  }
} as unknown as WebSocketConstructor;

let s: TestServer;
let appKey: string;
const open: Realtime[] = [];

beforeAll(async () => {
  s = await startTestServer({ modules: createModules, env: { PULSEBASE_REALTIME_HEARTBEAT_MS: String(HEARTBEAT_MS) } });
  ({ appKey } = await s.createApp("sdk realtime"));
}, 60_000);

afterAll(async () => {
  for (const rt of open) rt.close();
  await s?.close();
  await dispatcher.close();
});

function rt(client: PulsebaseClient, o: RealtimeOptions = {}): Realtime {
  const r = createRealtime(client, { WebSocket: InsecureWebSocket, reconnectBase: 50, reconnectMax: 500, ...o });
  open.push(r);
  return r;
}

/** Everything `on(event)` delivered, and a wait for the first (from the start) that matches. */
function collect<T>(on: (cb: (v: T) => void) => unknown) {
  const seen: T[] = [];
  const waiters: Array<{ pred: (v: T) => boolean; resolve: (v: T) => void }> = [];
  on((v) => {
    seen.push(v);
    for (const w of [...waiters]) {
      if (!w.pred(v)) continue;
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve(v);
    }
  });
  return {
    seen,
    next(pred: (v: T) => boolean = () => true, ms = 15_000): Promise<T> {
      const have = seen.find(pred);
      if (have !== undefined) return Promise.resolve(have);
      return new Promise<T>((resolve, reject) => {
        const w = { pred, resolve };
        waiters.push(w);
        setTimeout(() => {
          if (waiters.includes(w)) reject(new Error(`not seen within ${ms} ms; seen ${JSON.stringify(seen.slice(-5))}`));
        }, ms).unref();
      });
    },
  };
}

const statuses = (r: Realtime) => collect<RealtimeStatusEvent>((cb) => r.on("status", cb));
const broadcasts = <P>(c: Channel<P>) => collect<BroadcastMessage<P>>((cb) => c.on("broadcast", cb));
const presence = (c: Channel) => collect<PresenceEvent>((cb) => c.on("presence", cb));

/** A TCP proxy to the server's TLS port that can cut (drop) or silence (freeze) the connections it carries. */
interface Proxy {
  url: string;
  /** While true, new connections are cut at once (the network is away). */
  down: boolean;
  drop(): void;
  freeze(): void;
  close(): Promise<void>;
}
async function proxy(port: number): Promise<Proxy> {
  const pairs = new Set<[Socket, Socket]>();
  const frozen: Socket[] = [];
  const server: Server = createServer((c) => {
    if (p.down) return void c.destroy();
    const u = tcpConnect(port, "127.0.0.1");
    const pair: [Socket, Socket] = [c, u];
    pairs.add(pair);
    const end = () => {
      c.destroy();
      u.destroy();
      pairs.delete(pair);
    };
    for (const x of pair) x.on("error", end).on("close", end);
    c.pipe(u);
    u.pipe(c);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const p: Proxy = {
    down: false,
    url: `wss://127.0.0.1:${(server.address() as AddressInfo).port}/api/realtime`,
    drop() {
      for (const pair of [...pairs]) for (const x of pair) x.destroy();
    },
    freeze() {
      for (const pair of [...pairs]) {
        const [c, u] = pair;
        pairs.delete(pair);
        c.unpipe(u);
        u.unpipe(c);
        c.pause();
        u.pause();
        frozen.push(c, u);
      }
    },
    async close() {
      for (const x of frozen) x.destroy();
      this.drop();
      await new Promise((r) => server.close(r));
    },
  };
  return p;
}

describe("realtime in Node", () => {
  it("uses the platform's WebSocket: Node's global one when none is passed", async () => {
    expect(typeof (globalThis as { WebSocket?: unknown }).WebSocket).toBe("function");
    // Node's WebSocket uses undici's global dispatcher: trust the test certificate for this test only.
    const before = getGlobalDispatcher();
    setGlobalDispatcher(dispatcher);
    try {
      const client = sdkClient(s, appKey);
      const r = createRealtime(client, {});
      open.push(r);
      expect(createRealtime(client)).toBe(r); // one connection per client
      expect(r.status).toBe("idle"); // opened on first use
      const ch = r.channel("global-ws");
      await ch.subscribed;
      expect(r.status).toBe("open");
      expect(r.welcome).toMatchObject({ consumer_id: client.identity!.consumerId, heartbeat_ms: HEARTBEAT_MS });
      r.close();
      expect(r.status).toBe("closed");
    } finally {
      setGlobalDispatcher(before);
    }
  });

  it("two clients: broadcasts (with and without self) and presence joins, updates and leaves", async () => {
    const a = sdkClient(s, appKey);
    const b = sdkClient(s, appKey);
    const ra = rt(a);
    const rb = rt(b);
    const ca = ra.channel<{ text: string }, { name: string; typing?: boolean }>("room:1", { presence: { name: "ann" } });
    const pa = presence(ca);
    const ba = broadcasts(ca);
    await ca.subscribed;
    expect(ca.members).toEqual([{ member: expect.any(String), consumer_id: a.identity!.consumerId, state: { name: "ann" } }]);
    const cb = rb.channel<{ text: string }, { name: string; typing?: boolean }>("room:1", { self: true, presence: { name: "bob" } });
    const bb = broadcasts(cb);
    await cb.subscribed;
    expect(cb.members.map((m) => m.state.name)).toEqual(["ann", "bob"]);
    const join = await pa.next((p) => p.kind === "diff" && p.joins.length > 0);
    expect(join.joins).toEqual([{ member: expect.any(String), consumer_id: b.identity!.consumerId, state: { name: "bob" } }]);
    expect(join.members.map((m) => m.state.name)).toEqual(["ann", "bob"]);

    await ca.send("message", { text: "hi" });
    expect(await bb.next()).toEqual({ channel: "room:1", event: "message", payload: { text: "hi" }, from: a.identity!.consumerId });
    await cb.send("message", { text: "yo" }); // resolves after its own echo (self)
    expect(bb.seen.map((m) => m.payload.text)).toEqual(["hi", "yo"]);
    expect((await ba.next()).payload).toEqual({ text: "yo" });
    expect(ba.seen.map((m) => m.payload.text)).toEqual(["yo"]); // no echo of its own "hi"

    await cb.track({ name: "bob", typing: true });
    await pa.next((p) => p.joins.some((j) => j.state.typing === true));
    expect(ca.members.find((m) => m.consumer_id === b.identity!.consumerId)!.state).toEqual({ name: "bob", typing: true });

    // A broadcast without a subscription.
    await rb.broadcast("room:1", "note", { text: "direct" });
    expect((await ba.next((m) => m.event === "note")).payload).toEqual({ text: "direct" });

    cb.unsubscribe();
    const leave = await pa.next((p) => p.leaves.length > 0);
    expect(leave.leaves.map((l) => l.consumer_id)).toEqual([b.identity!.consumerId]);
    expect(ca.members.map((m) => m.state.name)).toEqual(["ann"]);
  });

  it("joins presence later with track() and leaves it with untrack()", async () => {
    const ra = rt(sdkClient(s, appKey));
    const rb = rt(sdkClient(s, appKey));
    const watch = ra.channel("room:track");
    const pw = presence(watch);
    await watch.subscribed;
    const quiet = rb.channel<unknown, { name: string }>("room:track");
    await quiet.subscribed;
    expect(quiet.members).toEqual([]);
    await quiet.track({ name: "late" });
    expect((await pw.next((p) => p.joins.length > 0)).joins[0]!.state).toEqual({ name: "late" });
    await quiet.untrack();
    await pw.next((p) => p.leaves.length > 0);
    expect(watch.members).toEqual([]);
  });

  it("turns the server's refusals into the SDK's error classes with the catalogue code", async () => {
    const r = rt(sdkClient(s, appKey));
    const bad = r.channel("bad name!");
    const errors = collect<unknown>((cb) => bad.on("error", cb));
    await expect(bad.subscribed).rejects.toBeInstanceOf(ValidationError);
    await expect(bad.subscribed).rejects.toMatchObject({ code: "validation_failed", status: 422, fields: { "topic.channel": expect.any(Array) } });
    expect(await errors.next()).toBeInstanceOf(ValidationError); // also to the subscription's "error" listeners
    // Table and CMS subscriptions need the server's change capture (and a linked database): refused here, typed.
    const t = r.table("notes", { filter: { column: "room_id", op: "eq", value: 5 } });
    const e = await t.subscribed.then(() => undefined, (x: unknown) => x);
    expect(e).toBeInstanceOf(PlatformError);
    expect((e as PlatformError).status).toBeGreaterThanOrEqual(400);
    // Too large for the server's message limit: refused before it is sent.
    await expect(r.broadcast("big", "e", "x".repeat(70_000))).rejects.toMatchObject({ name: "PlatformError", code: "payload_too_large", status: 413 });
    // Over the consumer's broadcast rate (50 a second): rate_limited with the wait.
    const results = await Promise.allSettled(Array.from({ length: 120 }, (_, i) => r.broadcast("flood", "e", i)));
    const refused = results.filter((x): x is PromiseRejectedResult => x.status === "rejected").map((x) => x.reason as PlatformError);
    expect(refused.length).toBeGreaterThan(0);
    expect(refused[0]).toBeInstanceOf(PlatformError);
    expect(refused[0]).toMatchObject({ code: "rate_limited", status: 429, retryAfter: expect.any(Number) });
    // The connection is still usable.
    const ok = r.channel("after-errors");
    await ok.subscribed;
  });

  it("reconnects after the network drops the socket: joins presence again and sends what was queued meanwhile", async () => {
    const p = await proxy(Number(new URL(s.httpsUrl).port));
    try {
      const a = sdkClient(s, appKey);
      const ra = rt(a, { url: p.url });
      const st = statuses(ra);
      const opens = collect<unknown>((cb) => ra.on("open", cb));
      const ca = ra.channel<{ n: number }>("room:drop", { presence: { name: "ann" } });
      const ba = broadcasts(ca);
      await ca.subscribed;
      const rb = rt(sdkClient(s, appKey));
      const cb = rb.channel<{ n: number }>("room:drop");
      const pb = presence(cb);
      const bb = broadcasts(cb);
      await cb.subscribed;
      const firstMember = cb.members[0]!.member;

      p.drop();
      await st.next((e) => e.status === "reconnecting");
      const queued = ca.send("while-away", { n: 1 }); // sent once the socket is back
      await opens.next(() => opens.seen.length >= 2);
      await queued;
      expect((await bb.next((m) => m.event === "while-away")).payload).toEqual({ n: 1 });
      // B saw A leave (the dropped socket) and join again, as a new member with the same state.
      await pb.next((e) => e.leaves.some((l) => l.member === firstMember));
      const again = await pb.next((e) => e.joins.some((j) => j.member !== firstMember));
      expect(again.joins[0]).toMatchObject({ consumer_id: a.identity!.consumerId, state: { name: "ann" } });
      // And A is subscribed again: it receives B's broadcasts.
      await cb.send("back", { n: 2 });
      expect((await ba.next((m) => m.event === "back")).payload).toEqual({ n: 2 });
    } finally {
      await p.close();
    }
  });

  it("reconnects when it hears nothing for two heartbeats", async () => {
    const p = await proxy(Number(new URL(s.httpsUrl).port));
    try {
      const ra = rt(sdkClient(s, appKey), { url: p.url });
      const st = statuses(ra);
      const ca = ra.channel("room:silent");
      const ba = broadcasts(ca);
      await ca.subscribed;
      p.freeze(); // the socket stays open, nothing passes either way
      const gone = await st.next((e) => e.status === "reconnecting");
      expect(gone).toMatchObject({ code: 1006, reason: "heartbeat_timeout" });
      await st.next((e) => e.status === "open" && st.seen.indexOf(e) > st.seen.indexOf(gone));
      const rb = rt(sdkClient(s, appKey));
      await rb.broadcast("room:silent", "hello", 1);
      expect((await ba.next()).event).toBe("hello");
    } finally {
      await p.close();
    }
  });

  it("a deleted consumer's socket (4001) gets a new registration and reconnects, subscriptions and presence included", async () => {
    const a = sdkClient(s, appKey);
    const ra = rt(a);
    const st = statuses(ra);
    const ca = ra.channel("room:revoke", { presence: { name: "ann" } });
    const ba = broadcasts(ca);
    await ca.subscribed;
    const before = a.identity!.consumerId;
    const rb = rt(sdkClient(s, appKey));
    const cb = rb.channel("room:revoke");
    const pb = presence(cb);
    await cb.subscribed;

    await s.admin.deleteConsumer({ consumerId: BigInt(before) });
    expect(await st.next((e) => e.status === "reconnecting")).toMatchObject({ code: 4001, reason: "revoked" });
    const rejoined = await pb.next((e) => e.joins.some((j) => j.consumer_id !== before));
    const after = a.identity!.consumerId;
    expect(after).not.toBe(before); // registered again (same device id)
    expect(rejoined.joins[0]).toMatchObject({ consumer_id: after, state: { name: "ann" } });
    expect(ra.welcome!.consumer_id).toBe(after);
    await cb.send("after-revoke", 1);
    expect((await ba.next((m) => m.event === "after-revoke")).from).toBe(rb.welcome!.consumer_id);
  });

  it("a token refused at the upgrade is re-issued for the same consumer", async () => {
    const p = await proxy(Number(new URL(s.httpsUrl).port));
    try {
      const a = sdkClient(s, appKey);
      const ra = rt(a, { url: p.url });
      const opens = collect<unknown>((cb) => ra.on("open", cb));
      const ca = ra.channel("room:reissue");
      await ca.subscribed;
      const id = a.identity!;
      // The token stops authenticating while the socket is away (as an expired one would):
      // the upgrade is refused with 401, which a WebSocket client cannot read.
      const stale = `${id.token.slice(0, -4)}AAAA`;
      (id as { token: string }).token = stale;
      p.drop();
      await opens.next(() => opens.seen.length >= 2);
      expect(a.identity!.token).not.toBe(stale);
      expect(a.identity!.consumerId).toBe(id.consumerId);
      expect(ra.welcome!.consumer_id).toBe(id.consumerId);
      const rb = rt(sdkClient(s, appKey));
      const got = broadcasts(ca);
      await rb.broadcast("room:reissue", "e", "ok");
      expect((await got.next()).payload).toBe("ok");
    } finally {
      await p.close();
    }
  });
});

describe("table subscriptions", () => {
  interface Note {
    id: number;
    room: number;
    body: string;
  }

  it("delivers typed changes under a filter and resumes from the last cursor after a reconnect, each change once", async () => {
    const app = await s.createApp("sdk realtime tables");
    const dbs = s.adminClient(DatabaseService);
    const d = await dbs.createDatabase({ teamId: app.teamId, name: "rt" });
    await dbs.linkDatabase({ databaseId: d.id, appId: app.appId });
    const client = sdkClient(s, app.appKey);
    const db = createDatabase(client);
    await db.query("CREATE TABLE notes (id INTEGER PRIMARY KEY, room INTEGER NOT NULL, body TEXT)");
    const p = await proxy(Number(new URL(s.httpsUrl).port));
    try {
      const r = rt(client, { url: p.url });
      const st = statuses(r);
      const t = r.table<Note>("notes", { filter: { column: "room", op: "eq", value: 1 } });
      const changes = collect<RealtimeChange<Note>>((cb) => t.on("change", cb));
      await t.subscribed;
      expect(t.cursor).toBeUndefined();

      await db.query("INSERT INTO notes (id, room, body) VALUES (1, 1, 'a'), (2, 2, 'other room')");
      await db.query("UPDATE notes SET body = 'b' WHERE id = 1");
      await db.query("DELETE FROM notes WHERE id = 1");
      const del = await changes.next((c) => c.op === "delete");
      expect(changes.seen.map(({ cursor: _c, at: _a, ...c }) => c)).toEqual([
        { op: "insert", table: "notes", row: { id: 1, room: 1, body: "a" } },
        { op: "update", table: "notes", row: { id: 1, room: 1, body: "b" }, old_key: { id: 1 } },
        { op: "delete", table: "notes", old_key: { id: 1 } },
      ]);
      const last = changes.seen.at(-1)!;
      if (last.op === "delete") expect(last.old_key.id).toBe(1); // typed: a delete has old_key
      expect(t.cursor).toBe(del.cursor);

      // The network goes away; rows change meanwhile; it comes back.
      p.down = true;
      p.drop();
      await st.next((e) => e.status === "reconnecting");
      await db.query("INSERT INTO notes (id, room, body) VALUES (3, 1, 'missed 1'), (4, 1, 'missed 2')");
      await db.query("UPDATE notes SET body = 'missed 3' WHERE id = 3");
      const opened = collect<unknown>((cb) => r.on("open", cb));
      p.down = false;
      await opened.next();
      await changes.next((c) => c.op === "update" && c.row.body === "missed 3");
      // And live again.
      await db.query("INSERT INTO notes (id, room, body) VALUES (5, 1, 'live')");
      await changes.next((c) => c.op !== "delete" && c.row.id === 5);
      const after = changes.seen.slice(3).map((c) => (c.op === "delete" ? "delete" : `${c.op}:${c.row.body}`));
      expect(after).toEqual(["insert:missed 1", "insert:missed 2", "update:missed 3", "insert:live"]);
      expect(new Set(changes.seen.map((c) => c.cursor)).size).toBe(changes.seen.length);
    } finally {
      await p.close();
    }
  });
});
