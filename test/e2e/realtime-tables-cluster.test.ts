// Realtime table subscriptions across server processes (docs/realtime.md,
// "Table changes", "Resume"): two real servers on one PostgreSQL and a
// private nats-server the test stops and restarts, real `ws` clients. A
// device's write through one server reaches subscribers on both; a
// subscription resumed on the other server gets exactly what it missed; a
// NATS restart loses nothing; a cursor whose changes expired (a second
// cluster with a one-second window) is answered `resync`.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect as natsConnect } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { DatabaseService as AdminDatabaseService } from "../../gen/pulsebase/admin/v1/database_pb.js";
import { IdentityService } from "../../gen/pulsebase/admin/v1/identity_pb.js";
import { SqlService } from "../../gen/pulsebase/admin/v1/sql_pb.js";
import { startCluster, type Cluster, type ClusterServer } from "../helpers/cluster.js";
import { NATS_SERVER_BIN } from "../infra/queue/jetstream-helpers.js";
import { connect, type Msg, type RtClient } from "../capabilities/realtime/ws-client.js";

const open: RtClient[] = [];

afterAll(() => {
  for (const x of open) x.ws.terminate();
});

interface App {
  appKey: string;
  appId: bigint;
}

async function makeApp(on: ClusterServer, name: string): Promise<App> {
  const ids = on.client(IdentityService);
  const team = await ids.createTeam({ name });
  const a = await ids.createApp({ teamId: team.id, name });
  const dbs = on.client(AdminDatabaseService);
  const db = await dbs.createDatabase({ teamId: team.id, name });
  await dbs.linkDatabase({ databaseId: db.id, appId: a.id });
  await on.client(SqlService).runSql({ appId: a.id, sql: "CREATE TABLE notes (id INTEGER PRIMARY KEY, room INTEGER, body TEXT)" });
  return { appKey: a.appKey, appId: a.id };
}

async function register(via: ClusterServer, app: App): Promise<{ id: number; token: string }> {
  const r = await via.request("/api/consumer", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ app_key: app.appKey, device_id: `d-${Math.random()}`, device_model: "Pixel 9", user_id: "u1", os: "android", country: "DE", language: "de" }),
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

async function sql(via: ClusterServer, token: string, text: string): Promise<void> {
  const r = await via.request("/api/db/query", { method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, body: JSON.stringify({ sql: text }) });
  expect(r.status, r.body).toBe(200);
}

const changes = (x: RtClient, id: string) => x.messages.filter((m) => m.type === "change" && m.id === id);
async function nChanges(x: RtClient, id: string, n: number): Promise<Msg[]> {
  await x.next(() => changes(x, id).length >= n, `${n} changes on ${id}`);
  return changes(x, id);
}
const brief = (m: Msg) => ({ op: m.op, ...(m.row !== undefined && { row: m.row }), ...(m.old_key !== undefined && { old_key: m.old_key }) });

describe("two servers, the default resume window", () => {
  let c: Cluster;
  let A: ClusterServer;
  let B: ClusterServer;
  let app: App;

  beforeAll(async () => {
    if (!NATS_SERVER_BIN) throw new Error("nats-server is required (/usr/sbin/nats-server)");
    c = await startCluster(["A", "B"]);
    [A, B] = c.servers as [ClusterServer, ClusterServer];
    app = await makeApp(A, "rt-tables");
  }, 120_000);

  afterAll(async () => {
    await c?.close();
  });

  it("delivers a device's insert, update and delete made through one server to subscribers on both, narrowed by a filter", async () => {
    const dev = await register(A, app);
    const onA = await client(A, dev.token);
    const onB = await client(B, dev.token);
    await subscribe(onA, "all", { kind: "table", table: "notes" });
    await subscribe(onB, "all", { kind: "table", table: "notes" });
    await subscribe(onB, "r1", { kind: "table", table: "notes", filter: { column: "room", op: "in", value: [1] } });
    await sql(A, dev.token, "INSERT INTO notes VALUES (1, 1, 'a'), (2, 2, 'b')");
    await sql(B, dev.token, "UPDATE notes SET body = 'a2' WHERE id = 1");
    await sql(A, dev.token, "DELETE FROM notes WHERE id = 2");
    const want = [
      { op: "insert", row: { id: 1, room: 1, body: "a" } },
      { op: "insert", row: { id: 2, room: 2, body: "b" } },
      { op: "update", row: { id: 1, room: 1, body: "a2" }, old_key: { id: 1 } },
      { op: "delete", old_key: { id: 2 } },
    ];
    expect((await nChanges(onA, "all", 4)).map(brief)).toEqual(want);
    expect((await nChanges(onB, "all", 4)).map(brief)).toEqual(want);
    expect((await nChanges(onB, "r1", 2)).map(brief)).toEqual([want[0], want[2]]);
    // the same cursors on both servers: the stream's sequence
    expect(changes(onA, "all").map((m) => m.cursor)).toEqual(changes(onB, "all").map((m) => m.cursor));
  });

  it("resumes on the other server with exactly the missed changes, once", async () => {
    const dev = await register(A, app);
    const first = await client(B, dev.token);
    await subscribe(first, "s", { kind: "table", table: "notes" });
    await sql(A, dev.token, "INSERT INTO notes VALUES (10, 3, 'x')");
    const [seen] = await nChanges(first, "s", 1);
    first.ws.terminate();
    await sql(A, dev.token, "INSERT INTO notes VALUES (11, 3, 'y')");
    await sql(B, dev.token, "UPDATE notes SET body = 'y2' WHERE id = 11");
    const again = await client(A, dev.token);
    await subscribe(again, "s", { kind: "table", table: "notes" }, seen!.cursor as string);
    await sql(B, dev.token, "DELETE FROM notes WHERE id = 10");
    expect((await nChanges(again, "s", 3)).map(brief)).toEqual([
      { op: "insert", row: { id: 11, room: 3, body: "y" } },
      { op: "update", row: { id: 11, room: 3, body: "y2" }, old_key: { id: 11 } },
      { op: "delete", old_key: { id: 10 } },
    ]);
    await sql(A, dev.token, "INSERT INTO notes VALUES (12, 3, 'z')");
    await nChanges(again, "s", 4);
    const cursors = changes(again, "s").map((m) => m.cursor);
    expect(new Set(cursors).size).toBe(cursors.length);
  });

  it("loses nothing when NATS stops and starts again inside the window", async () => {
    const dev = await register(A, app);
    const live = await client(B, dev.token);
    const away = await client(A, dev.token);
    await subscribe(live, "s", { kind: "table", table: "notes" });
    await subscribe(away, "s", { kind: "table", table: "notes" });
    await sql(A, dev.token, "INSERT INTO notes VALUES (20, 4, 'before')");
    const [before] = await nChanges(away, "s", 1);
    await nChanges(live, "s", 1);
    away.ws.terminate();
    await c.stopNats();
    // written while NATS is down: captured, drained once it is back
    await sql(A, dev.token, "INSERT INTO notes VALUES (21, 4, 'during')");
    await sql(B, dev.token, "UPDATE notes SET body = 'during2' WHERE id = 20");
    await c.startNats();
    await sql(A, dev.token, "INSERT INTO notes VALUES (22, 4, 'after')");
    const want = [
      { op: "insert", row: { id: 21, room: 4, body: "during" } },
      { op: "update", row: { id: 20, room: 4, body: "during2" }, old_key: { id: 20 } },
      { op: "insert", row: { id: 22, room: 4, body: "after" } },
    ];
    expect((await nChanges(live, "s", 4)).slice(1).map(brief)).toEqual(want);
    const back = await client(B, dev.token);
    await subscribe(back, "s", { kind: "table", table: "notes" }, before!.cursor as string);
    expect((await nChanges(back, "s", 3)).map(brief)).toEqual(want);
    await sql(A, dev.token, "INSERT INTO notes VALUES (23, 4, 'last')");
    await nChanges(back, "s", 4);
    await nChanges(live, "s", 5);
    expect(changes(back, "s").map(brief)).toEqual([...want, { op: "insert", row: { id: 23, room: 4, body: "last" } }]);
    expect(changes(live, "s").length).toBe(5);
  }, 60_000);
});

describe("a one-second resume window", () => {
  let c: Cluster;
  let A: ClusterServer;
  let app: App;

  beforeAll(async () => {
    c = await startCluster(["A"], { env: { PULSEBASE_REALTIME_RESUME_WINDOW: "1" } });
    [A] = c.servers as [ClusterServer];
    app = await makeApp(A, "rt-window");
  }, 120_000);

  afterAll(async () => {
    await c?.close();
  });

  it("answers a cursor whose changes expired with resync, then delivers live changes", async () => {
    const dev = await register(A, app);
    const x = await client(A, dev.token);
    await subscribe(x, "s", { kind: "table", table: "notes" });
    await sql(A, dev.token, "INSERT INTO notes VALUES (1, 1, 'old')");
    const [old] = await nChanges(x, "s", 1);
    x.ws.terminate();
    await sql(A, dev.token, "INSERT INTO notes VALUES (2, 1, 'missed')");
    // wait until JetStream removed what came after the cursor (max_age = the window)
    const nc = await natsConnect({ servers: c.natsUrl });
    try {
      const jsm = await jetstreamManager(nc);
      for (;;) {
        const info = await jsm.streams.info(`${c.namespace.toUpperCase()}_REALTIME`);
        if (info.state.first_seq > Number(old!.cursor) + 1) break;
        await new Promise((r) => setTimeout(r, 100));
      }
    } finally {
      await nc.close();
    }
    const y = await client(A, dev.token);
    await subscribe(y, "s", { kind: "table", table: "notes" }, old!.cursor as string);
    expect(await y.next((m) => m.type === "resync")).toEqual({ type: "resync", id: "s" });
    await sql(A, dev.token, "INSERT INTO notes VALUES (3, 1, 'new')");
    expect((await nChanges(y, "s", 1)).map(brief)).toEqual([{ op: "insert", row: { id: 3, room: 1, body: "new" } }]);
  }, 60_000);
});
