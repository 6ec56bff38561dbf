// Realtime CMS subscriptions across server processes (docs/realtime.md,
// "CMS changes"): two real servers on one PostgreSQL and a private
// nats-server, real `ws` clients. An entry published through one server's
// authoring API reaches subscribers on both with the same cursors; a
// subscription resumed on the other server gets exactly what it missed; a
// table subscription of the same application (the same JetStream stream)
// sees only its table's changes.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CmsService } from "../../gen/pulsebase/admin/v1/cms_pb.js";
import { DatabaseService as AdminDatabaseService } from "../../gen/pulsebase/admin/v1/database_pb.js";
import { IdentityService } from "../../gen/pulsebase/admin/v1/identity_pb.js";
import { SqlService } from "../../gen/pulsebase/admin/v1/sql_pb.js";
import { startCluster, type Cluster, type ClusterServer } from "../helpers/cluster.js";
import { NATS_SERVER_BIN } from "../infra/queue/jetstream-helpers.js";
import { connect, type Msg, type RtClient } from "../capabilities/realtime/ws-client.js";

const open: RtClient[] = [];
let c: Cluster;
let A: ClusterServer;
let B: ClusterServer;
let appKey: string;
let appId: bigint;

beforeAll(async () => {
  if (!NATS_SERVER_BIN) throw new Error("nats-server is required (/usr/sbin/nats-server)");
  c = await startCluster(["A", "B"]);
  [A, B] = c.servers as [ClusterServer, ClusterServer];
  const ids = A.client(IdentityService);
  const team = await ids.createTeam({ name: "rt-cms" });
  const a = await ids.createApp({ teamId: team.id, name: "rt-cms" });
  ({ appKey, id: appId } = a);
  const dbs = A.client(AdminDatabaseService);
  const db = await dbs.createDatabase({ teamId: team.id, name: "rt-cms" });
  await dbs.linkDatabase({ databaseId: db.id, appId });
  await A.client(SqlService).runSql({ appId, sql: "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)" });
  await A.client(CmsService).createContentType({ appId, contentType: { slug: "post", name: "Post", fields: [{ name: "title", type: "text", required: true, label: "Title" }] } });
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

async function subscribe(x: RtClient, id: string, topic: Record<string, unknown>, resume?: string): Promise<Msg> {
  x.send({ type: "subscribe", id, topic, ...(resume !== undefined && { resume }) });
  return x.next((m) => (m.type === "subscribed" || m.type === "error") && m.id === id, `subscription ${id}`);
}

const changes = (x: RtClient, id: string) => x.messages.filter((m) => m.type === "change" && m.id === id);
async function nChanges(x: RtClient, id: string, n: number): Promise<Msg[]> {
  await x.next(() => changes(x, id).length >= n, `${n} changes on ${id}`);
  return changes(x, id);
}
const brief = (m: Msg) => [m.op, (m.entry as Msg).id, (m.entry as Msg).title];

describe("two servers on NATS", () => {
  it("delivers an entry authored through one server to subscribers on both, rendered as each server's read API answers", async () => {
    const dev = await register(A);
    const onA = await client(A, dev.token);
    const onB = await client(B, dev.token);
    expect(await subscribe(onA, "p", { kind: "cms", content_type: "post" })).toMatchObject({ type: "subscribed" });
    expect(await subscribe(onB, "p", { kind: "cms", content_type: "post" })).toMatchObject({ type: "subscribed" });
    expect(await subscribe(onB, "t", { kind: "table", table: "notes" })).toMatchObject({ type: "subscribed" });
    const cms = A.client(CmsService);
    const e = await cms.createEntry({ appId, contentType: "post", publish: true, data: { title: "hello" } });
    await B.client(CmsService).updateEntry({ appId, id: e.id, data: { title: "hello!" } });
    await cms.unpublishEntry({ appId, id: e.id });
    const want = [["publish", e.id, "hello"], ["update", e.id, "hello!"], ["unpublish", e.id, undefined]];
    expect((await nChanges(onA, "p", 3)).map(brief)).toEqual(want);
    expect((await nChanges(onB, "p", 3)).map(brief)).toEqual(want);
    expect(changes(onA, "p").map((m) => m.cursor)).toEqual(changes(onB, "p").map((m) => m.cursor));
    await cms.publishEntry({ appId, id: e.id });
    const [, , , again] = await nChanges(onB, "p", 4);
    const read = await B.get(`/api/v1/post/${e.id}`, { "x-app-key": appKey });
    expect(again!.entry).toEqual((JSON.parse(read.body) as { data: unknown }).data);
    // the table subscription of the same application saw no CMS change
    const r = await B.request("/api/db/query", { method: "POST", headers: { authorization: `Bearer ${dev.token}`, "content-type": "application/json" }, body: JSON.stringify({ sql: "INSERT INTO notes VALUES (1, 'n')" }) });
    expect(r.status, r.body).toBe(200);
    expect((await nChanges(onB, "t", 1)).map((m) => [m.op, m.table])).toEqual([["insert", "notes"]]);
    expect(changes(onB, "t")).toHaveLength(1);
  });

  it("resumes on the other server with exactly the missed changes, once", async () => {
    const dev = await register(A);
    const first = await client(A, dev.token);
    await subscribe(first, "s", { kind: "cms", content_type: "post" });
    const cms = A.client(CmsService);
    const x = await cms.createEntry({ appId, contentType: "post", publish: true, data: { title: "x" } });
    const [seen] = await nChanges(first, "s", 1);
    first.ws.terminate();
    await cms.updateEntry({ appId, id: x.id, data: { title: "x2" } });
    const y = await B.client(CmsService).createEntry({ appId, contentType: "post", publish: true, data: { title: "y" } });
    const again = await client(B, dev.token);
    await subscribe(again, "s", { kind: "cms", content_type: "post" }, seen!.cursor as string);
    await cms.unpublishEntry({ appId, id: y.id });
    expect((await nChanges(again, "s", 3)).map(brief)).toEqual([["update", x.id, "x2"], ["publish", y.id, "y"], ["unpublish", y.id, undefined]]);
    await cms.updateEntry({ appId, id: x.id, data: { title: "x3" } });
    const all = await nChanges(again, "s", 4);
    expect(all.map(brief).at(-1)).toEqual(["update", x.id, "x3"]);
    expect(new Set(all.map((m) => m.cursor)).size).toBe(4);
  });
});
