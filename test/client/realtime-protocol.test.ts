// The SDK's realtime against a scripted WebSocket (no server): what it sends
// on the wire for the cases a real server cannot be made to produce on
// demand: a table subscription made again with `resume` and its last cursor
// after a drop, `resync` (the subscription goes on, the app is told), the
// window of unanswered messages, an `error` without a ref, a 4001 close that
// renews the token before reconnecting, and the subprotocol carrying the token.
import { describe, expect, it } from "vitest";
import {
  createRealtime, NetworkError, PlatformError, type Identity, type PulsebaseClient, type WebSocketConstructor,
} from "../../packages/client/src/index.js";

type Sent = Record<string, unknown> & { type: string; ref?: string };

class FakeSocket {
  static all: FakeSocket[] = [];
  sent: Sent[] = [];
  onopen: ((ev: unknown) => void) | null = null;
  onmessage: ((ev: { data: string }) => void) | null = null;
  onclose: ((ev: { code: number; reason: string }) => void) | null = null;
  onerror: ((ev: unknown) => void) | null = null;
  closedByClient = false;
  constructor(readonly url: string, readonly protocols: string[]) {
    FakeSocket.all.push(this);
  }
  send(data: string) {
    this.sent.push(JSON.parse(data) as Sent);
  }
  close() {
    this.closedByClient = true;
  }
  // The server's side.
  open(heartbeatMs = 60_000) {
    this.onopen?.({});
    this.push({ type: "welcome", connection_id: "c", consumer_id: 1, heartbeat_ms: heartbeatMs, limits: { message_bytes: 65536, subscriptions: 100, broadcasts_per_second: 50 } });
  }
  push(m: Record<string, unknown>) {
    this.onmessage?.({ data: JSON.stringify(m) });
  }
  /** Answers every unanswered message with ok. */
  okAll() {
    for (const m of this.sent.splice(0)) if (m.ref) this.push({ type: "ok", ref: m.ref });
  }
  drop(code = 1006) {
    this.onclose?.({ code, reason: "" });
  }
}

function fakeClient(): PulsebaseClient & { renewed: string[] } {
  const identity = { consumerId: 1, token: "t1", deviceId: "d" } as Identity;
  const renewed: string[] = [];
  return {
    appKey: "k", baseUrl: "https://api.example.com/base/", storage: undefined as never, fetch: undefined, timeoutMs: 5000,
    identity, renewed,
    ready: async () => identity,
    request: async () => ({ status: 200, data: undefined as never, headers: { get: () => null }, requestId: undefined }),
    renewToken: async (failed: string) => {
      renewed.push(failed);
      (identity as { token: string }).token = "t2";
      return identity;
    },
    setUser: async () => {},
    reset: async () => {},
  };
}

const tick = () => new Promise((r) => setTimeout(r, 0));
async function until<T>(fn: () => T | undefined): Promise<T> {
  for (let i = 0; i < 200; i++) {
    const v = fn();
    if (v !== undefined) return v;
    await tick();
  }
  throw new Error("not reached");
}
const socket = (n: number) => until(() => FakeSocket.all[n]);
const WS = FakeSocket as unknown as WebSocketConstructor;

describe("realtime on the wire", () => {
  it("connects to wss://…/api/realtime with the token as the bearer subprotocol, never in the URL", async () => {
    FakeSocket.all = [];
    const rt = createRealtime(fakeClient(), { WebSocket: WS });
    rt.channel("a");
    const ws = await socket(0);
    expect(ws.url).toBe("wss://api.example.com/base/api/realtime");
    expect(ws.protocols).toEqual(["pulsebase.v1", "bearer.t1"]);
    rt.close();
  });

  it("makes a table subscription again with resume and its last cursor; on resync it goes on and tells the app", async () => {
    FakeSocket.all = [];
    const rt = createRealtime(fakeClient(), { WebSocket: WS, reconnectBase: 1, reconnectMax: 2 });
    const t = rt.table<{ id: number }>("notes", { filter: { column: "room", op: "in", value: [1, 2] } });
    const seen: string[] = [];
    t.on("change", (c) => seen.push(`${c.op}:${c.cursor}`));
    t.on("resync", () => seen.push("resync"));
    let ws = await socket(0);
    ws.open();
    const sub = ws.sent[0]!;
    expect(sub).toMatchObject({ type: "subscribe", id: t.id, topic: { kind: "table", table: "notes", filter: { column: "room", op: "in", value: [1, 2] } } });
    expect(sub.resume).toBeUndefined();
    ws.okAll();
    await t.subscribed;
    ws.push({ type: "change", id: t.id, op: "insert", table: "notes", row: { id: 1 }, cursor: "x.1" });
    ws.push({ type: "change", id: t.id, op: "delete", table: "notes", old_key: { id: 1 }, cursor: "x.2" });
    expect(t.cursor).toBe("x.2");

    ws.drop();
    ws = await socket(1);
    ws.open();
    expect(ws.sent[0]).toMatchObject({ type: "subscribe", id: t.id, resume: "x.2" });
    ws.okAll();
    ws.push({ type: "resync", id: t.id });
    ws.push({ type: "change", id: t.id, op: "insert", table: "notes", row: { id: 7 }, cursor: "y.9" });
    expect(seen).toEqual(["insert:x.1", "delete:x.2", "resync", "insert:y.9"]);
    expect(ws.sent).toEqual([]); // nothing sent for the resync: the server's subscription goes on
    rt.close();
  });

  it("keeps at most 16 messages unanswered, sends the rest as answers come, and rejects what a drop leaves unanswered", async () => {
    FakeSocket.all = [];
    const rt = createRealtime(fakeClient(), { WebSocket: WS, reconnectBase: 1, reconnectMax: 2 });
    const sends = Array.from({ length: 40 }, (_, i) => rt.broadcast("c", "e", i).then(() => "ok", (e: unknown) => e));
    const ws = await socket(0);
    ws.open();
    expect(ws.sent.map((m) => m.payload)).toEqual(Array.from({ length: 16 }, (_, i) => i));
    ws.okAll(); // 0..15 answered: 16..31 go out
    expect(ws.sent.map((m) => m.payload)).toEqual(Array.from({ length: 16 }, (_, i) => 16 + i));
    ws.push({ type: "error", ref: ws.sent[0]!.ref, code: "rate_limited", message: "Too many broadcasts.", retry_after_seconds: 1 }); // 32 goes out
    ws.drop();
    const first = await Promise.all(sends.slice(0, 33));
    expect(first.slice(0, 16)).toEqual(Array(16).fill("ok"));
    expect(first[16]).toBeInstanceOf(PlatformError);
    expect(first[16]).toMatchObject({ code: "rate_limited", status: 429, retryAfter: 1 });
    // Sent, unanswered when the socket went: their fate is unknown, they are not sent again.
    for (const r of first.slice(17)) expect(r).toBeInstanceOf(NetworkError);
    // Never sent: they go out on the next connection.
    const next = await socket(1);
    next.open();
    expect(next.sent.map((m) => m.payload)).toEqual([33, 34, 35, 36, 37, 38, 39]);
    next.okAll();
    expect(await Promise.all(sends.slice(33))).toEqual(Array(7).fill("ok"));
    rt.close();
  });

  it("a 4001 close renews the token (the client's re-issue) and reconnects with the new one; an error without a ref goes to on('error')", async () => {
    FakeSocket.all = [];
    const client = fakeClient();
    const rt = createRealtime(client, { WebSocket: WS, reconnectBase: 1, reconnectMax: 2 });
    const errors: unknown[] = [];
    rt.on("error", (e) => errors.push(e));
    const ch = rt.channel("room", { presence: { name: "a" } });
    let ws = await socket(0);
    ws.open();
    ws.okAll();
    await ch.subscribed;
    ws.push({ type: "error", code: "rate_limited", message: "At most 32 messages of a connection wait to be handled." });
    expect(errors).toEqual([expect.any(PlatformError)]);
    ws.push({ type: "closing", code: 4001, reason: "revoked" });
    ws.drop(4001);
    ws = await socket(1);
    expect(client.renewed).toEqual(["t1"]);
    expect(ws.protocols).toEqual(["pulsebase.v1", "bearer.t2"]);
    ws.open();
    expect(ws.sent[0]).toMatchObject({ type: "subscribe", id: ch.id, topic: { kind: "channel", channel: "room", presence: { state: { name: "a" } } } });
    rt.close();
  });
});
