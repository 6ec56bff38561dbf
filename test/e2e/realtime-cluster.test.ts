// Realtime across server processes (docs/realtime.md, "Across servers"):
// two real servers on one PostgreSQL and a private nats-server, real `ws`
// clients on each. A broadcast sent through one server reaches a subscriber
// on the other; presence joins and leaves cross too; a member whose server
// is killed with SIGKILL leaves the others' presence after the missed
// presence heartbeats (shortened here through the configuration).
import { afterAll, beforeAll, expect, it } from "vitest";
import { IdentityService } from "../../gen/pulsebase/admin/v1/identity_pb.js";
import { startCluster, type Cluster, type ClusterServer } from "../helpers/cluster.js";
import { NATS_SERVER_BIN } from "../infra/queue/jetstream-helpers.js";
import { connect, type Msg, type RtClient } from "../capabilities/realtime/ws-client.js";

let c: Cluster;
let A: ClusterServer;
let B: ClusterServer;
let appKey: string;
const open: RtClient[] = [];

beforeAll(async () => {
  if (!NATS_SERVER_BIN) throw new Error("nats-server is required (/usr/sbin/nats-server)");
  c = await startCluster(["A", "B"], { env: { PULSEBASE_REALTIME_PRESENCE_HEARTBEAT_MS: "200", PULSEBASE_REALTIME_PRESENCE_MISSED: "3" } });
  [A, B] = c.servers as [ClusterServer, ClusterServer];
  const ids = A.client(IdentityService);
  const team = await ids.createTeam({ name: "rt" });
  appKey = (await ids.createApp({ teamId: team.id, name: "rt" })).appKey;
}, 120_000);

afterAll(async () => {
  for (const x of open) x.ws.terminate();
  await c?.close();
});

async function register(via: ClusterServer): Promise<{ id: number; token: string }> {
  const r = await via.request("/api/consumer", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ app_key: appKey, device_id: `d-${Math.random()}`, device_model: "Pixel 9", user_id: "u1", os: "android", country: "DE", language: "de" }),
  });
  expect(r.status, r.body).toBe(200);
  return JSON.parse(r.body) as { id: number; token: string };
}

async function client(on: ClusterServer, token: string): Promise<RtClient> {
  const x = await connect(`wss://127.0.0.1:${on.https}/api/realtime`, { token });
  open.push(x);
  await x.next((m) => m.type === "welcome");
  return x;
}

const subscribed = (x: RtClient, id: string) => x.next((m) => m.type === "presence_state" && m.id === id, `subscription ${id}`);

it("delivers a broadcast sent through one server to a subscriber on the other", async () => {
  const a = await register(A);
  const b = await register(B);
  const ca = await client(A, a.token);
  const cb = await client(B, b.token);
  ca.send({ type: "subscribe", id: "x", topic: { kind: "channel", channel: "cross" } });
  await subscribed(ca, "x");
  cb.send({ type: "subscribe", id: "x", topic: { kind: "channel", channel: "cross" } });
  await subscribed(cb, "x");
  // A's subscription to the channel's subject may still be on its way to NATS:
  // send (each after the previous one's answer) until one arrives.
  let got: Msg | undefined;
  for (let i = 0; !got && i < 500; i++) {
    cb.send({ type: "broadcast", channel: "cross", event: "hello", payload: { i }, ref: `b${i}` });
    await cb.next((m) => (m.type === "ok" || m.type === "error") && m.ref === `b${i}`);
    got = ca.messages.find((m) => m.type === "broadcast");
  }
  got ??= await ca.next((m) => m.type === "broadcast");
  expect(got).toMatchObject({ channel: "cross", event: "hello", from: b.id });
});

it("shares presence across servers, and drops the members of a server killed with SIGKILL", async () => {
  const a = await register(A);
  const b = await register(B);
  const ca = await client(A, a.token);
  ca.send({ type: "subscribe", id: "p", topic: { kind: "channel", channel: "lobby", presence: { state: { name: "ann" } } } });
  await subscribed(ca, "p");
  const cb = await client(B, b.token);
  cb.send({ type: "subscribe", id: "p", topic: { kind: "channel", channel: "lobby", presence: { state: { name: "bob" } } } });
  await subscribed(cb, "p");
  // Each learns of the other's member (a join, a heartbeat or the answer to B's query).
  const bobOnA = await ca.next((m) => m.type === "presence_diff" && (m.joins as Msg[]).some((j) => j.consumer_id === b.id), "bob on A");
  await cb.next((m) => (m.type === "presence_diff" || m.type === "presence_state") && ((m.joins ?? m.members) as Msg[]).some((j) => j.consumer_id === a.id), "ann on B");
  B.child.kill("SIGKILL");
  const leave = await ca.next((m) => m.type === "presence_diff" && (m.leaves as Msg[]).some((l) => l.consumer_id === b.id), "bob leaves");
  expect((leave.leaves as Msg[]).map((l) => l.member)).toEqual([(bobOnA.joins as Msg[]).find((j) => j.consumer_id === b.id)!.member]);
}, 60_000);
