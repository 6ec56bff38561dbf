// Channel access (docs/realtime.md, "Channel access") on one real server:
// the operator's entries through RealtimeAdminService, real `ws` clients
// and POST /api/realtime/broadcast refused with permission_denied.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Code, ConnectError } from "@connectrpc/connect";
import { Agent, fetch } from "undici";
import { RealtimeAdminService } from "../../../gen/pulsebase/admin/v1/realtime_pb.js";
import { createModules } from "../../../src/server/modules.js";
import { startTestServer, type TestServer } from "../../helpers/server.js";
import { connect, type Msg, type RtClient } from "./ws-client.js";

let s: TestServer;
let wsUrl: string;
const open: RtClient[] = [];
const dispatcher = new Agent({ connect: { rejectUnauthorized: false } });

beforeAll(async () => {
  s = await startTestServer({ modules: createModules });
  wsUrl = s.httpsUrl.replace("https:", "wss:") + "/api/realtime";
}, 60_000);

afterAll(async () => {
  for (const c of open) c.ws.terminate();
  await dispatcher.close();
  await s?.close();
});

async function client(token: string): Promise<RtClient> {
  const c = await connect(wsUrl, { token });
  open.push(c);
  await c.next((m) => m.type === "welcome", "welcome");
  return c;
}

async function subscribe(c: RtClient, id: string, topic: Record<string, unknown>): Promise<Msg> {
  c.send({ type: "subscribe", id, topic });
  return c.next((m) => (m.type === "presence_state" || m.type === "error") && m.id === id, `subscription ${id}`);
}

let n = 0;
async function acked(c: RtClient, m: Record<string, unknown>): Promise<Msg> {
  const r = `r${++n}`;
  c.send({ ...m, ref: r });
  return c.next((x) => (x.type === "ok" || x.type === "error") && x.ref === r, `ack ${r}`);
}

const post = (token: string, channel: string) =>
  s.fetch("/api/realtime/broadcast", {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ channel, event: "e", payload: 1 }),
  });

describe("channel access", () => {
  it("is any by default: every consumer subscribes and broadcasts", async () => {
    const { appKey, appId } = await s.createApp("default access");
    const admin = s.adminClient(RealtimeAdminService);
    const got = await admin.getChannelAccess({ appId });
    expect(got.entries).toEqual([]);
    expect(got.updatedAt).toBeUndefined();
    const a = await s.register(appKey);
    const c = await client(a.token);
    expect(await subscribe(c, "x", { kind: "channel", channel: "anything" })).toMatchObject({ type: "presence_state" });
    expect(await acked(c, { type: "broadcast", channel: "anything", event: "e", payload: 1 })).toMatchObject({ type: "ok" });
  });

  it("none refuses a device's subscribe and broadcast (WebSocket, SSE and POST); other channels fall through to any", async () => {
    const { appKey, appId } = await s.createApp("none access");
    const admin = s.adminClient(RealtimeAdminService);
    const saved = await admin.setChannelAccess({ appId, entries: [{ pattern: "ops:*", mode: "none" }] });
    expect(saved.entries.map((e) => [e.pattern, e.mode])).toEqual([["ops:*", "none"]]);
    expect(saved.updatedAt).toBeDefined();
    const a = await s.register(appKey);
    const c = await client(a.token);
    expect(await subscribe(c, "ops", { kind: "channel", channel: "ops:alerts", presence: { on: true } })).toMatchObject({ type: "error", id: "ops", code: "permission_denied" });
    expect(await acked(c, { type: "broadcast", channel: "ops:alerts", event: "e", payload: 1 })).toMatchObject({ type: "error", code: "permission_denied" });
    expect((await post(a.token, "ops:alerts")).status).toBe(403);
    const sse = await fetch(`${s.httpsUrl}/api/realtime/sse?channel=ops:alerts`, { headers: { authorization: `Bearer ${a.token}` }, dispatcher });
    expect(sse.status).toBe(403);
    expect(await sse.json()).toMatchObject({ error: "permission_denied" });
    expect(await subscribe(c, "lobby", { kind: "channel", channel: "lobby" })).toMatchObject({ type: "presence_state" });
    expect((await post(a.token, "lobby")).status).toBe(200);
  });

  it("a rule over :channel and :user_id lets alice subscribe to user:alice but not user:bob", async () => {
    const { appKey, appId } = await s.createApp("rule access");
    const admin = s.adminClient(RealtimeAdminService);
    await admin.setChannelAccess({ appId, entries: [{ pattern: "user:*", mode: "rule", rule: ":channel = 'user:' || :user_id" }] });
    expect((await admin.getChannelAccess({ appId })).entries.map((e) => e.rule)).toEqual([":channel = 'user:' || :user_id"]);
    const alice = await s.register(appKey, { user_id: "alice" });
    const c = await client(alice.token);
    expect(await subscribe(c, "mine", { kind: "channel", channel: "user:alice", presence: { here: 1 } })).toMatchObject({ type: "presence_state" });
    expect(await subscribe(c, "bobs", { kind: "channel", channel: "user:bob" })).toMatchObject({ type: "error", id: "bobs", code: "permission_denied" });
    expect(await acked(c, { type: "broadcast", channel: "user:bob", event: "e", payload: 1 })).toMatchObject({ type: "error", code: "permission_denied" });
    expect(await acked(c, { type: "broadcast", channel: "user:alice", event: "e", payload: 1 })).toMatchObject({ type: "ok" });

    // Saved again: the cache is dropped at once (first match wins, the rule is gone).
    await admin.setChannelAccess({ appId, entries: [{ pattern: "user:bob", mode: "any" }, { pattern: "user:*", mode: "none" }] });
    expect(await subscribe(c, "bobs2", { kind: "channel", channel: "user:bob" })).toMatchObject({ type: "presence_state" });
    expect(await acked(c, { type: "broadcast", channel: "user:alice", event: "e", payload: 1 })).toMatchObject({ type: "error", code: "permission_denied" });
  });

  it("refuses a rule that does not compile, reads a table or uses an unknown value at save (400), and keeps the entries", async () => {
    const { appId } = await s.createApp("bad rules");
    const admin = s.adminClient(RealtimeAdminService);
    await admin.setChannelAccess({ appId, entries: [{ pattern: "*", mode: "none" }] });
    for (const rule of ["(:channel = ", "(SELECT count(*) FROM sqlite_schema) > 0", ":device_id = 'x'", "1; SELECT 2", "exists (select 1 from pragma_table_list)"]) {
      const err = await admin.setChannelAccess({ appId, entries: [{ pattern: "room:*", mode: "rule", rule }] }).then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
      expect(err?.code, rule).toBe(Code.InvalidArgument);
    }
    // the Connect protocol's status of invalid_argument
    const res = await fetch(`${s.adminUrl}/pulsebase.admin.v1.RealtimeAdminService/SetChannelAccess`, {
      method: "POST",
      headers: { authorization: `Bearer ${s.operatorToken}`, "content-type": "application/json" },
      body: JSON.stringify({ appId: String(appId), entries: [{ pattern: "room:*", mode: "rule", rule: "nope(" }] }),
    });
    expect(res.status).toBe(400);
    for (const entries of [[{ pattern: "no spaces", mode: "any" }], [{ pattern: "a", mode: "maybe" }], [{ pattern: "a", mode: "rule" }]]) {
      await expect(admin.setChannelAccess({ appId, entries })).rejects.toMatchObject({ code: Code.InvalidArgument });
    }
    expect((await admin.getChannelAccess({ appId })).entries.map((e) => [e.pattern, e.mode])).toEqual([["*", "none"]]);
  });
});
