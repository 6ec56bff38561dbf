// Realtime table subscriptions on one real server (PostgreSQL, no NATS: the
// in-process change log): a device's, the operator's writes reach
// subscribers, filters, resume and resync, access rules (two consumers under
// an owner rule, hostile subscriptions, a membership rule that reads another
// table, evaluated per caller), SSE with Last-Event-ID
// (docs/realtime.md, "Table changes").
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Agent, fetch } from "undici";
import { AccessRulesService } from "../../../gen/pulsebase/admin/v1/access_rules_pb.js";
import { DatabaseService as AdminDatabaseService } from "../../../gen/pulsebase/admin/v1/database_pb.js";
import { SqlService } from "../../../gen/pulsebase/admin/v1/sql_pb.js";
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

async function app(name: string, schema: string): Promise<{ appKey: string; appId: bigint }> {
  const a = await s.createApp(name);
  const dbs = s.adminClient(AdminDatabaseService);
  const db = await dbs.createDatabase({ teamId: a.teamId, name });
  await dbs.linkDatabase({ databaseId: db.id, appId: a.appId });
  await s.adminClient(SqlService).runSql({ appId: a.appId, sql: schema });
  return a;
}

async function client(token: string): Promise<RtClient> {
  const c = await connect(wsUrl, { token });
  open.push(c);
  await c.next((m) => m.type === "welcome", "welcome");
  return c;
}

async function subscribe(c: RtClient, id: string, topic: Record<string, unknown>, resume?: string): Promise<Msg> {
  c.send({ type: "subscribe", id, topic, ...(resume !== undefined && { resume }) });
  return c.next((m) => (m.type === "subscribed" || m.type === "error") && m.id === id, `subscription ${id}`);
}

async function sql(token: string, text: string, params: unknown[] = []): Promise<Record<string, unknown>> {
  const res = await s.fetch("/api/db/query", { method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, body: JSON.stringify({ sql: text, params }) });
  const body = (await res.json()) as Record<string, unknown>;
  if (res.status !== 200) throw new Error(`query ${res.status}: ${JSON.stringify(body)}`);
  return body;
}

const changes = (c: RtClient, id: string) => c.messages.filter((m) => m.type === "change" && m.id === id);
/** Waits until the subscription has n changes; returns them (op and row). */
async function nChanges(c: RtClient, id: string, n: number): Promise<Msg[]> {
  await c.next(() => changes(c, id).length >= n, `${n} changes on ${id}`);
  return changes(c, id);
}
const brief = (m: Msg) => ({ op: m.op, ...(m.row !== undefined && { row: m.row }), ...(m.old_key !== undefined && { old_key: m.old_key }) });

describe("open mode", () => {
  let appKey: string;
  let appId: bigint;
  beforeAll(async () => {
    ({ appKey, appId } = await app("rt-open", "CREATE TABLE notes (id INTEGER PRIMARY KEY, room INTEGER, body TEXT)"));
  });

  it("delivers a device's and the operator's insert, update and delete, in order, narrowed by filters", async () => {
    const dev = await s.register(appKey);
    const all = await client(dev.token);
    expect(await subscribe(all, "all", { kind: "table", table: "Notes" })).toEqual({ type: "subscribed", id: "all", topic: { kind: "table", table: "notes" } });
    expect(await subscribe(all, "r5", { kind: "table", table: "notes", filter: { column: "room", op: "eq", value: 5 } })).toMatchObject({ type: "subscribed" });
    expect(await subscribe(all, "in", { kind: "table", table: "notes", filter: { column: "room", op: "in", value: [6, 7] } })).toMatchObject({ type: "subscribed" });
    await sql(dev.token, "INSERT INTO notes (id, room, body) VALUES (1, 5, 'a'), (2, 6, 'b'), (3, 8, 'c')");
    await sql(dev.token, "UPDATE notes SET body = 'a2' WHERE id = 1");
    await s.adminClient(SqlService).runSql({ appId, sql: "DELETE FROM notes WHERE id = 2" });
    const got = await nChanges(all, "all", 5);
    expect(got.map(brief)).toEqual([
      { op: "insert", row: { id: 1, room: 5, body: "a" } },
      { op: "insert", row: { id: 2, room: 6, body: "b" } },
      { op: "insert", row: { id: 3, room: 8, body: "c" } },
      { op: "update", row: { id: 1, room: 5, body: "a2" }, old_key: { id: 1 } },
      { op: "delete", old_key: { id: 2 } },
    ]);
    expect(got.every((m) => m.table === "notes" && typeof m.cursor === "string")).toBe(true);
    expect((await nChanges(all, "r5", 2)).map(brief)).toEqual([
      { op: "insert", row: { id: 1, room: 5, body: "a" } },
      { op: "update", row: { id: 1, room: 5, body: "a2" }, old_key: { id: 1 } },
    ]);
    expect((await nChanges(all, "in", 2)).map(brief)).toEqual([
      { op: "insert", row: { id: 2, room: 6, body: "b" } },
      { op: "delete", old_key: { id: 2 } },
    ]);
    // a row that leaves the filter is a delete for it; one that enters, an insert
    await sql(dev.token, "UPDATE notes SET room = 7 WHERE id = 1");
    expect((await nChanges(all, "r5", 3)).map(brief).at(-1)).toEqual({ op: "delete", old_key: { id: 1 } });
    expect((await nChanges(all, "in", 3)).map(brief).at(-1)).toEqual({ op: "insert", row: { id: 1, room: 7, body: "a2" } });
    const metrics = await (await fetch(`${s.adminUrl}/metrics`, { headers: { authorization: `Bearer ${s.operatorToken}` } })).text();
    expect(Number(/^pulsebase_realtime_changes_total (\d+)/m.exec(metrics)?.[1])).toBeGreaterThanOrEqual(12);
    expect(metrics).toMatch(/^pulsebase_realtime_change_lag_seconds [0-9.e-]+$/m);
  });

  it("resumes after a disconnect with exactly the missed changes, and answers a foreign cursor with resync", async () => {
    const dev = await s.register(appKey);
    const a = await client(dev.token);
    await subscribe(a, "s", { kind: "table", table: "notes" });
    await sql(dev.token, "INSERT INTO notes (id, room, body) VALUES (10, 1, 'x')");
    const [first] = await nChanges(a, "s", 1);
    a.ws.terminate();
    await sql(dev.token, "INSERT INTO notes (id, room, body) VALUES (11, 1, 'y')");
    await sql(dev.token, "UPDATE notes SET body = 'y2' WHERE id = 11");
    const b = await client(dev.token);
    await subscribe(b, "s", { kind: "table", table: "notes" }, first!.cursor as string);
    await sql(dev.token, "DELETE FROM notes WHERE id = 10");
    const got = await nChanges(b, "s", 3);
    expect(got.map(brief)).toEqual([
      { op: "insert", row: { id: 11, room: 1, body: "y" } },
      { op: "update", row: { id: 11, room: 1, body: "y2" }, old_key: { id: 11 } },
      { op: "delete", old_key: { id: 10 } },
    ]);
    // resumed from the last of them: nothing again
    const c = await client(dev.token);
    await subscribe(c, "s", { kind: "table", table: "notes" }, got.at(-1)!.cursor as string);
    await sql(dev.token, "INSERT INTO notes (id, room, body) VALUES (12, 1, 'z')");
    expect((await nChanges(c, "s", 1)).map(brief)).toEqual([{ op: "insert", row: { id: 12, room: 1, body: "z" } }]);
    await sql(dev.token, "SELECT 1");
    expect(changes(b, "s").length).toBe(4);
    // a cursor this log never gave (another process's): resync, then live changes
    const d = await client(dev.token);
    await subscribe(d, "s", { kind: "table", table: "notes" }, "00000000.1");
    expect(await d.next((m) => m.type === "resync")).toEqual({ type: "resync", id: "s" });
  });

  it("answers a table that does not exist, a reserved one and an unknown filter column", async () => {
    const dev = await s.register(appKey);
    const c = await client(dev.token);
    expect(await subscribe(c, "a", { kind: "table", table: "nope" })).toMatchObject({ type: "error", code: "not_found", message: "no such table: nope" });
    expect(await subscribe(c, "b", { kind: "table", table: "_pulsebase_changes" })).toMatchObject({ type: "error", code: "not_found" });
    expect(await subscribe(c, "c", { kind: "table", table: "notes", filter: { column: "nope", op: "eq", value: 1 } })).toMatchObject({ type: "error", code: "validation_failed" });
  });

  it("SSE: a table subscription whose change ids are cursors, resumed by Last-Event-ID", async () => {
    const dev = await s.register(appKey);
    const filter = encodeURIComponent(JSON.stringify({ column: "room", op: "eq", value: 40 }));
    const first = await sse(`/api/realtime/sse?table=notes&filter=${filter}`, dev.token);
    await first.until((t) => t.includes("event: subscribed"));
    await sql(dev.token, "INSERT INTO notes (id, room, body) VALUES (40, 40, 'sse')");
    const t1 = await first.until((t) => t.includes("event: change"));
    first.close();
    expect(t1).toMatch(/event: subscribed\ndata: /);
    const id = /event: change\nid: (\S+)\n/.exec(t1)![1]!;
    await sql(dev.token, "UPDATE notes SET body = 'sse2' WHERE id = 40");
    const again = await sse(`/api/realtime/sse?table=notes&filter=${filter}`, dev.token, { "last-event-id": id });
    const t2 = await again.until((t) => t.includes("event: change"));
    again.close();
    expect(t2).toContain('"op":"update"');
    expect(t2).toContain('"body":"sse2"');
    expect(t2).not.toContain('"op":"insert"');
  });
});

/** An SSE stream read as text as it comes. */
async function sse(path: string, token: string, headers: Record<string, string> = {}): Promise<{ until(p: (text: string) => boolean): Promise<string>; close(): void }> {
  const ac = new AbortController();
  const res = await fetch(`${s.httpsUrl}${path}`, { headers: { authorization: `Bearer ${token}`, ...headers }, dispatcher, signal: ac.signal });
  expect(res.status).toBe(200);
  let text = "";
  const waiters: Array<{ p: (t: string) => boolean; resolve: (t: string) => void }> = [];
  const dec = new TextDecoder();
  void (async () => {
    try {
      for await (const chunk of res.body!) {
        text += dec.decode(chunk as Uint8Array, { stream: true });
        for (const w of [...waiters]) {
          if (!w.p(text)) continue;
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve(text);
        }
      }
    } catch {
      // aborted
    }
  })();
  return {
    until: (p) => (p(text) ? Promise.resolve(text) : new Promise((resolve) => waiters.push({ p, resolve }))),
    close: () => ac.abort(),
  };
}

describe("rules mode", () => {
  let appKey: string;
  let appId: bigint;
  beforeAll(async () => {
    ({ appKey, appId } = await app(
      "rt-rules",
      "CREATE TABLE notes (id INTEGER PRIMARY KEY, owner TEXT NOT NULL, body TEXT, secret TEXT); CREATE TABLE hidden (id INTEGER PRIMARY KEY); CREATE TABLE rooms (id INTEGER PRIMARY KEY, owner TEXT); CREATE TABLE posts (id INTEGER PRIMARY KEY, room INTEGER); CREATE TABLE scores (id INTEGER PRIMARY KEY, level INTEGER, label TEXT)",
    ));
    await s.adminClient(AccessRulesService).setAccessRules({
      appId,
      mode: "rules",
      tables: [
        { table: "notes", select: "owner = :user_id", insert: "owner = :user_id", update: "owner = :user_id OR body = 'give'", updateCheck: "true", selectColumns: ["id", "owner", "body"] },
        { table: "rooms", select: "owner = :user_id" },
        { table: "posts", select: "room IN (SELECT id FROM rooms)" },
        // comparisons that depend on the columns' affinity ('3' is 3 against an INTEGER column, 5 is '5' against a TEXT one)
        { table: "scores", select: "level >= '3' AND label = 5" },
      ],
    });
  });

  it("delivers each consumer only the rows its select rule admits; a row moved to the other is a delete for one and an insert for the other", async () => {
    const alice = await s.register(appKey, { user_id: "alice" });
    const bob = await s.register(appKey, { user_id: "bob" });
    const ca = await client(alice.token);
    const cb = await client(bob.token);
    await subscribe(ca, "n", { kind: "table", table: "notes" });
    await subscribe(cb, "n", { kind: "table", table: "notes" });
    await sql(alice.token, "INSERT INTO notes (id, owner, body, secret) VALUES (1, 'alice', 'a', 's1')");
    await sql(bob.token, "INSERT INTO notes (id, owner, body, secret) VALUES (2, 'bob', 'b', 's2')");
    // alice gives her note to bob (her update rule allows rows with body 'give')
    await sql(alice.token, "UPDATE notes SET body = 'give' WHERE id = 1");
    await sql(alice.token, "UPDATE notes SET owner = 'bob' WHERE id = 1");
    await s.adminClient(SqlService).runSql({ appId, sql: "INSERT INTO notes (id, owner, body, secret) VALUES (3, 'carol', 'c', 's3')" });
    await sql(bob.token, "INSERT INTO notes (id, owner, body) VALUES (4, 'bob', 'end')");
    const a = await nChanges(ca, "n", 3);
    const b = await nChanges(cb, "n", 3);
    expect(a.map(brief)).toEqual([
      { op: "insert", row: { id: 1, owner: "alice", body: "a", secret: null } },
      { op: "update", row: { id: 1, owner: "alice", body: "give", secret: null }, old_key: { id: 1 } },
      { op: "delete", old_key: { id: 1 } },
    ]);
    expect(b.map(brief)).toEqual([
      { op: "insert", row: { id: 2, owner: "bob", body: "b", secret: null } },
      { op: "insert", row: { id: 1, owner: "bob", body: "give", secret: null } },
      { op: "insert", row: { id: 4, owner: "bob", body: "end", secret: null } },
    ]);
    // bob's last insert came after carol's row: alice got nothing more
    await sql(alice.token, "INSERT INTO notes (id, owner, body) VALUES (5, 'alice', 'last')");
    expect((await nChanges(ca, "n", 4)).map(brief).at(-1)).toEqual({ op: "insert", row: { id: 5, owner: "alice", body: "last", secret: null } });
    expect(changes(ca, "n").length).toBe(4);
  });

  it("evaluates the rule with the columns' affinity, as a device's SELECT does", async () => {
    const alice = await s.register(appKey, { user_id: "alice" });
    const c = await client(alice.token);
    await subscribe(c, "s", { kind: "table", table: "scores" });
    await s.adminClient(SqlService).runSql({ appId, sql: "INSERT INTO scores VALUES (1, 2, '5'), (2, 10, '5'), (3, 10, '6'), (4, 3, 5)" });
    // a last admitted row after them: every decision about the first four was made before it arrived
    await s.adminClient(SqlService).runSql({ appId, sql: "INSERT INTO scores VALUES (5, 9, '5')" });
    const got = await nChanges(c, "s", 3);
    const seen = await sql(alice.token, "SELECT id FROM scores ORDER BY id");
    expect((seen.results as Msg[])[0]!.rows).toEqual([[2], [4], [5]]);
    expect(got.map((m) => (m.row as Msg).id)).toEqual([2, 4, 5]);
  });

  it("refuses hostile subscriptions: a table without rules, a filter on a hidden column", async () => {
    const alice = await s.register(appKey, { user_id: "alice" });
    const c = await client(alice.token);
    expect(await subscribe(c, "a", { kind: "table", table: "hidden" })).toMatchObject({ type: "error", code: "not_found", message: "no such table: hidden" });
    expect(await subscribe(c, "b", { kind: "table", table: "notes", filter: { column: "secret", op: "eq", value: "s1" } })).toMatchObject({ type: "error", code: "permission_denied" });
    // (a rule that reads other tables is evaluated per caller: "membership rules" below)
    expect(await subscribe(c, "c", { kind: "table", table: "posts" })).toMatchObject({ type: "subscribed" });
    expect(await subscribe(c, "d", { kind: "table", table: "notes", filter: { column: "owner", op: "eq", value: "bob" } })).toMatchObject({ type: "subscribed" });
    await s.adminClient(SqlService).runSql({ appId, sql: "INSERT INTO notes (id, owner, body) VALUES (20, 'bob', 'x'), (21, 'alice', 'y')" });
    await sql(alice.token, "INSERT INTO notes (id, owner, body) VALUES (22, 'alice', 'z')");
    // a filter never widens the rule: bob's row does not reach alice
    await subscribe(c, "e", { kind: "table", table: "notes" });
    await sql(alice.token, "INSERT INTO notes (id, owner, body) VALUES (23, 'alice', 'w')");
    await nChanges(c, "e", 1);
    expect(changes(c, "d")).toEqual([]);
  });
});

describe("membership rules (a select rule that reads another table)", () => {
  let appKey: string;
  let appId: bigint;
  beforeAll(async () => {
    ({ appKey, appId } = await app(
      "rt-members",
      "CREATE TABLE messages (id INTEGER PRIMARY KEY, room_id INTEGER, body TEXT); CREATE TABLE notices (id INTEGER PRIMARY KEY, room_id INTEGER); CREATE TABLE members (room_id INTEGER, user_id TEXT); INSERT INTO members VALUES (1, 'alice'), (1, 'bob'), (2, 'bob')",
    ));
    await s.adminClient(AccessRulesService).setAccessRules({
      appId,
      mode: "rules",
      tables: [
        { table: "members", select: "user_id = :user_id" },
        { table: "messages", select: "room_id IN (SELECT room_id FROM members WHERE user_id = :user_id)", insert: "true" },
        // no value of the caller's own: only members' rule, applied for the caller, narrows it
        { table: "notices", select: "room_id IN (SELECT room_id FROM members)" },
      ],
    });
  });

  it("delivers a room's message to its members only, and stops when a membership is removed", async () => {
    const alice = await s.register(appKey, { user_id: "alice" });
    const bob = await s.register(appKey, { user_id: "bob" });
    const ca = await client(alice.token);
    const cb = await client(bob.token);
    for (const c of [ca, cb]) {
      expect(await subscribe(c, "m", { kind: "table", table: "messages" })).toMatchObject({ type: "subscribed" });
      expect(await subscribe(c, "n", { kind: "table", table: "notices" })).toMatchObject({ type: "subscribed" });
    }
    const admin = s.adminClient(SqlService);
    await admin.runSql({ appId, sql: "INSERT INTO messages VALUES (1, 2, 'room 2'); INSERT INTO notices VALUES (1, 2)" });
    await sql(bob.token, "INSERT INTO messages VALUES (2, 1, 'room 1')");
    await admin.runSql({ appId, sql: "INSERT INTO notices VALUES (2, 1)" });
    expect((await nChanges(cb, "m", 2)).map(brief)).toEqual([
      { op: "insert", row: { id: 1, room_id: 2, body: "room 2" } },
      { op: "insert", row: { id: 2, room_id: 1, body: "room 1" } },
    ]);
    expect((await nChanges(cb, "n", 2)).map((m) => (m.row as Msg).id)).toEqual([1, 2]);
    // in order per application: the room-1 rows came after the room-2 ones
    expect((await nChanges(ca, "m", 1)).map(brief)).toEqual([{ op: "insert", row: { id: 2, room_id: 1, body: "room 1" } }]);
    expect((await nChanges(ca, "n", 1)).map((m) => (m.row as Msg).id)).toEqual([2]);
    // the operator removes bob from room 2: a new room-2 message no longer reaches him
    await admin.runSql({ appId, sql: "DELETE FROM members WHERE room_id = 2 AND user_id = 'bob'" });
    await admin.runSql({ appId, sql: "INSERT INTO messages VALUES (3, 2, 'after')" });
    // a message moved from room 1 to room 2 leaves both views: a delete for each
    await admin.runSql({ appId, sql: "UPDATE messages SET room_id = 2 WHERE id = 2" });
    await admin.runSql({ appId, sql: "INSERT INTO messages VALUES (4, 1, 'last')" });
    const last = [
      { op: "delete", old_key: { id: 2 } },
      { op: "insert", row: { id: 4, room_id: 1, body: "last" } },
    ];
    expect((await nChanges(cb, "m", 4)).map(brief).slice(2)).toEqual(last);
    expect((await nChanges(ca, "m", 3)).map(brief).slice(1)).toEqual(last);
    expect(changes(cb, "m").length).toBe(4);
    expect(changes(ca, "m").length).toBe(3);
  });
});
