// Issue 31: access rules per table, as an operator sets them and a device
// meets them: the modes, the operator API (versions, conflicts, rules that
// do not compile refused at save), what a device may do under owner and
// membership rules, the errors it gets, the preview, and the point-read
// path. The hostile corpus is access-rules-hostile.test.ts.
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { create } from "@bufbuild/protobuf";
import { TableRulesSchema } from "../../../gen/pulsebase/admin/v1/access_rules_pb.js";
import { failure } from "./errors.js";
import { createHarness, rowsOf, type Harness } from "./harness.js";

let h: Harness;
let team: number;
let app: number;
const alice = { consumerId: 11, userId: "alice" };
const bob = { consumerId: 12, userId: "bob" };

const owner = (table: string, extra: Partial<{ updateColumns: string[]; selectColumns: string[]; insertColumns: string[] }> = {}) =>
  create(TableRulesSchema, {
    table,
    select: "owner_id = :user_id",
    insert: "owner_id = :user_id",
    update: "owner_id = :user_id",
    delete: "owner_id = :user_id",
    ...extra,
  });

async function setRules(appId: number, tables: ReturnType<typeof owner>[], mode = "rules") {
  return h.rules.setAccessRules({ appId: BigInt(appId), mode, tables });
}

/** The one result of a device query as plain rows, its writes and its error. */
async function run(as: typeof alice, sql: string, params?: unknown, appId = app) {
  const r = (await h.queryAs(appId, as, sql, params)).results[0]!;
  return { rows: rowsOf(r), written: Number(r.rowsWritten), error: r.error };
}

/** What trusted code sees (no caller: the runner as ctx.db uses it): the table's rows by id. */
async function all(sql = "SELECT id, owner_id, body FROM notes ORDER BY id") {
  const [r] = await h.module.runner.query(app, { sql });
  if (r!.error) throw new Error(r!.error);
  return r!.rows;
}

beforeAll(async () => {
  h = await createHarness({ engineProcesses: 1 });
  team = await h.team();
  app = await h.app(team);
  await h.linkedDb(team, app);
  // the schema is the operator's: made before the rules (devices cannot, under rules)
  await h.batch(app, [
    { sql: "CREATE TABLE notes (id INTEGER PRIMARY KEY, owner_id TEXT NOT NULL, body TEXT, created TEXT NOT NULL DEFAULT 'today')" },
    { sql: "CREATE TABLE rooms (id INTEGER PRIMARY KEY, name TEXT)" },
    { sql: "CREATE TABLE members (room_id INTEGER, user_id TEXT, PRIMARY KEY (room_id, user_id)) WITHOUT ROWID" },
    { sql: "CREATE TABLE messages (id INTEGER PRIMARY KEY, room_id INTEGER NOT NULL, author TEXT NOT NULL, body TEXT)" },
    { sql: "CREATE TABLE private (id INTEGER PRIMARY KEY, v TEXT)" },
    { sql: "INSERT INTO notes (id, owner_id, body) VALUES (1, 'alice', 'a1'), (2, 'bob', 'b1'), (3, 'alice', 'a2')" },
    { sql: "INSERT INTO rooms VALUES (1, 'general'), (2, 'bob-only')" },
    { sql: "INSERT INTO members VALUES (1, 'alice'), (1, 'bob'), (2, 'bob')" },
    { sql: "INSERT INTO messages VALUES (1, 1, 'bob', 'hello all'), (2, 2, 'bob', 'bob secret'), (3, 1, 'alice', 'hi')" },
    { sql: "INSERT INTO private VALUES (1, 'hidden')" },
  ]);
});
afterAll(async () => h?.close());

describe("the access mode", () => {
  it("is open by default: a device reads every row, as the platform spec says", async () => {
    const r = await h.rules.getAccessRules({ appId: BigInt(app) });
    expect(r).toMatchObject({ mode: "open", version: 0, tables: [] });
    expect((await run(bob, "SELECT count(*) FROM notes")).rows).toEqual([[3]]);
  });

  it("in rules mode a device sees only the rows its rule admits, and nothing of a table without rules", async () => {
    const saved = await setRules(app, [owner("notes")]);
    expect(saved).toMatchObject({ mode: "rules", version: 1 });
    expect((await run(alice, "SELECT id, body FROM notes ORDER BY id")).rows).toEqual([[1, "a1"], [3, "a2"]]);
    expect((await run(bob, "SELECT id, body FROM notes ORDER BY id")).rows).toEqual([[2, "b1"]]);
    expect((await run(bob, "SELECT count(*) FROM notes")).rows).toEqual([[1]]);
    // deny by default: a table with no rules does not exist for a device
    expect((await run(alice, "SELECT * FROM private")).error).toBe("no such table: private");
    // the operator's own SQL keeps its rights
    expect(await all()).toHaveLength(3);
  });

  it("refuses a device's schema change with 403 forbidden_query before anything runs", async () => {
    for (const sql of ["CREATE TABLE t2 (a)", "DROP TABLE notes", "ALTER TABLE notes ADD COLUMN x", "CREATE INDEX i ON notes (body)"]) {
      expect(await failure(h.queryAs(app, alice, sql)), sql).toMatchObject({ code: "forbidden_query", http: 403 });
    }
    expect(await all()).toHaveLength(3);
  });

  it("switching back to open gives devices the spec's behaviour again", async () => {
    const v = await h.rules.getAccessRules({ appId: BigInt(app) });
    await h.rules.setAccessRules({ appId: BigInt(app), mode: "open", tables: v.tables });
    expect((await run(alice, "SELECT count(*) FROM notes")).rows).toEqual([[3]]);
    await h.rules.setAccessRules({ appId: BigInt(app), mode: "rules", tables: v.tables });
    expect((await run(alice, "SELECT count(*) FROM notes")).rows).toEqual([[2]]);
  });
});

describe("writes under an owner rule", () => {
  it("updates and deletes only the caller's rows, and counts only those", async () => {
    const u = await run(alice, "UPDATE notes SET body = body || '!'");
    expect(u).toMatchObject({ written: 2, error: undefined });
    const d = await run(alice, "DELETE FROM notes WHERE id = 2");
    expect(d).toMatchObject({ written: 0, error: undefined });
    expect(await all()).toEqual([
      [1, "alice", "a1!"],
      [2, "bob", "b1"],
      [3, "alice", "a2!"],
    ]);
  });

  it("inserts a row that passes the check, with the table's defaults and generated id; refuses one that does not", async () => {
    const ok = await run(alice, "INSERT INTO notes (owner_id, body) VALUES (?, ?)", ["alice", "new"]);
    expect(ok).toMatchObject({ written: 1, error: undefined });
    const mine = await run(alice, "SELECT owner_id, body, created FROM notes WHERE body = 'new'");
    expect(mine.rows).toEqual([["alice", "new", "today"]]);
    const forged = await run(alice, "INSERT INTO notes (owner_id, body) VALUES ('bob', 'forged')");
    expect(forged.error).toBe("access rule: insert on notes refused (the new row does not pass the rule)");
    expect(forged.written).toBe(0);
    expect((await all("SELECT count(*) FROM notes WHERE body = 'forged'"))).toEqual([[0]]);
    // the id of what was inserted: in the same request
    const [ins, id] = (await h.batchAs(app, alice, [{ sql: "INSERT INTO notes (owner_id, body) VALUES ('alice', 'x')" }, { sql: "SELECT last_insert_rowid()" }])).results;
    expect(ins!.error).toBeUndefined();
    expect(rowsOf(id)[0]![0]).toBeGreaterThan(3);
  });

  it("refuses an update that would move the row out of the caller's reach (the check on the new row)", async () => {
    const moved = await run(alice, "UPDATE notes SET owner_id = 'bob' WHERE id = 1");
    expect(moved.error).toBe("access rule: update on notes refused (the new row does not pass the rule)");
    expect((await all("SELECT owner_id FROM notes WHERE id = 1"))).toEqual([["alice"]]);
  });

  it("RETURNING of an update or delete gives the caller's rows; an INSERT's RETURNING is refused with a reason", async () => {
    const r = await run(alice, "UPDATE notes SET body = 'r' WHERE id IN (1, 2) RETURNING id, body");
    expect(r.rows).toEqual([[1, "r"]]);
    const ins = await run(alice, "INSERT INTO notes (owner_id, body) VALUES ('alice', 'y') RETURNING id");
    expect(ins.error).toMatch(/^access rule: notes is read through its rules only/);
    expect((await all("SELECT count(*) FROM notes WHERE body = 'y'"))).toEqual([[0]]);
  });

  it("a column list keeps an update from setting other columns; a select column list shows the others as NULL", async () => {
    await setRules(app, [owner("notes", { updateColumns: ["body"], selectColumns: ["id", "body"] })]);
    const blocked = await run(alice, "UPDATE notes SET created = 'yesterday' WHERE id = 1");
    expect(blocked.error).toBe("access rule: update of notes.created is not allowed");
    expect((await run(alice, "UPDATE notes SET body = 'ok' WHERE id = 1")).written).toBe(1);
    expect((await run(alice, "SELECT id, owner_id, body FROM notes WHERE id = 1")).rows).toEqual([[1, null, "ok"]]);
    // the columns it cannot read are left as they were by an update (never written back as NULL)
    expect(await all("SELECT owner_id, created FROM notes WHERE id = 1")).toEqual([["alice", "today"]]);
    // and filtering on them sees NULL: no hidden value can be probed
    expect((await run(alice, "UPDATE notes SET body = 'probe' WHERE owner_id = 'alice'")).written).toBe(0);
    // an insert column list: the other columns keep their DEFAULT
    await setRules(app, [owner("notes", { insertColumns: ["owner_id", "body"] })]);
    const backdated = await run(alice, "INSERT INTO notes (owner_id, body, created) VALUES ('alice', 'b', 'long ago')");
    expect(backdated.error).toBe("access rule: insert into notes may not set created");
    expect((await run(alice, "INSERT INTO notes (owner_id, body) VALUES ('alice', 'plain')")).written).toBe(1);
    expect(await all("SELECT created FROM notes WHERE body IN ('b', 'plain')")).toEqual([["today"]]);
    await setRules(app, [owner("notes")]);
  });

  it("a transaction whose later statement fails leaves nothing behind", async () => {
    const r = await h.batchAs(
      app,
      alice,
      [{ sql: "UPDATE notes SET body = 'tx' WHERE id = 1" }, { sql: "INSERT INTO notes (owner_id, body) VALUES ('bob', 'no')" }],
      true,
    );
    expect(r.results.at(-1)!.error).toMatch(/^access rule: insert on notes refused/);
    expect((await all("SELECT body FROM notes WHERE id = 1"))).toEqual([["ok"]]);
  });
});

describe("rules that read other tables", () => {
  it("a membership rule shows the messages of the caller's rooms only", async () => {
    await setRules(app, [
      owner("notes"),
      create(TableRulesSchema, { table: "members", select: "user_id = :user_id" }),
      create(TableRulesSchema, {
        table: "messages",
        select: "room_id IN (SELECT room_id FROM members WHERE user_id = :user_id)",
        insert: "author = :user_id AND room_id IN (SELECT room_id FROM members WHERE user_id = :user_id)",
      }),
    ]);
    expect((await run(alice, "SELECT id, body FROM messages ORDER BY id")).rows).toEqual([[1, "hello all"], [3, "hi"]]);
    expect((await run(bob, "SELECT id FROM messages ORDER BY id")).rows).toEqual([[1], [2], [3]]);
    // a join through members cannot widen it: members has a rule too, and alice sees her memberships only
    const join = "SELECT m.body FROM messages m JOIN members x ON x.room_id = m.room_id WHERE x.user_id = ? ORDER BY m.id";
    expect((await run(alice, join, ["bob"])).rows).toEqual([]);
    expect((await run(alice, join, ["alice"])).rows).toEqual([["hello all"], ["hi"]]);
    const intoBobsRoom = await run(alice, "INSERT INTO messages (room_id, author, body) VALUES (2, 'alice', 'let me in')");
    expect(intoBobsRoom.error).toMatch(/^access rule: insert on messages refused/);
    expect((await run(alice, "INSERT INTO messages (room_id, author, body) VALUES (1, 'alice', 'ok')")).written).toBe(1);
    // no delete rule: a device may not delete at all
    expect((await run(bob, "DELETE FROM messages WHERE id = 1")).error).toBe("access rule: delete on messages is not allowed");
  });
});

describe("the operator API", () => {
  it("refuses a rule that does not compile when it is saved, with SQLite's message, and keeps the rules in force", async () => {
    const before = await h.rules.getAccessRules({ appId: BigInt(app) });
    const bad = await failure(setRules(app, [create(TableRulesSchema, { table: "notes", select: "no_such_column = :user_id" })]));
    expect(bad).toMatchObject({ code: "bad_request", http: 400 });
    expect(bad.message).toContain("no such column: no_such_column");
    const unknownValue = await failure(setRules(app, [create(TableRulesSchema, { table: "notes", select: "owner_id = :email" })]));
    expect(unknownValue).toMatchObject({ code: "validation_failed", http: 422 });
    expect(unknownValue.fields["tables.0.select"]![0]).toContain("unknown value :email");
    const noTable = await failure(setRules(app, [owner("nope")]));
    expect(noTable.message).toContain("no such table: nope");
    expect((await h.rules.getAccessRules({ appId: BigInt(app) })).version).toBe(before.version);
    expect((await run(alice, "SELECT count(*) FROM notes")).error).toBeUndefined();
  });

  it("keeps every version, newest first, and refuses an edit made from an old version", async () => {
    const now = await h.rules.getAccessRules({ appId: BigInt(app) });
    const versions = await h.rules.listAccessRuleVersions({ appId: BigInt(app) });
    expect(versions.versions.map((v) => v.version)).toEqual([...Array(now.version).keys()].map((i) => now.version - i).slice(0, 20));
    const stale = await failure(h.rules.setAccessRules({ appId: BigInt(app), mode: "rules", tables: now.tables, expectedVersion: now.version - 1 }));
    expect(stale).toMatchObject({ code: "failed_precondition", http: 409 });
    const ok = await h.rules.setAccessRules({ appId: BigInt(app), mode: "rules", tables: now.tables, expectedVersion: now.version });
    expect(ok.version).toBe(now.version + 1);
  });

  it("an update or delete rule needs a primary key", async () => {
    await all("CREATE TABLE log (owner_id TEXT, line TEXT)");
    const f = await failure(setRules(app, [owner("log")]));
    expect(f.message).toContain("log has no PRIMARY KEY");
  });

  it("previews a query as a consumer under a draft, and keeps nothing it writes", async () => {
    const { rows } = await h.testDb.sql.query<{ id: string }>(
      "INSERT INTO consumers (app_id, user_id, device_id, device_model, os, country, language) VALUES ($1, 'bob', 'd', 'm', 'o', 'c', 'l') RETURNING id",
      [app],
    );
    const consumerId = BigInt(rows[0]!.id);
    const draft = [create(TableRulesSchema, { table: "notes", select: "owner_id = :user_id OR body = 'public'", delete: "true" })];
    const r = await h.rules.tryAsConsumer({ appId: BigInt(app), consumerId, sql: "SELECT id FROM notes ORDER BY id; DELETE FROM notes", useDraft: true, draftTables: draft });
    expect(r.results[0]!.rows.length).toBe(1);
    expect(Number(r.results[1]!.rowsWritten)).toBe(1);
    expect(await all("SELECT count(*) FROM notes WHERE owner_id = 'bob'")).toEqual([[1]]);
    expect(await failure(h.rules.tryAsConsumer({ appId: BigInt(app), consumerId: 999999n, sql: "SELECT 1" }))).toMatchObject({ code: "not_found" });
  });
});

describe("the point-read path", () => {
  it("serves a primary-key read under an owner rule in-process with the same answers as the engine", async () => {
    await setRules(app, [owner("notes")]);
    // the first run goes to the engine (which finds it a point read), the next ones are served in-process
    for (let i = 0; i < 3; i++) {
      expect((await run(alice, "SELECT id, owner_id FROM notes WHERE id = ?", [1])).rows).toEqual([[1, "alice"]]);
      expect((await run(alice, "SELECT id, owner_id FROM notes WHERE id = ?", [2])).rows).toEqual([]);
      expect((await run(bob, "SELECT id, owner_id FROM notes WHERE id = ?", [2])).rows).toEqual([[2, "bob"]]);
      expect((await run(bob, "SELECT id, owner_id FROM notes WHERE id = ?", [1])).rows).toEqual([]);
    }
    // served here, without an engine: the pool sees none of these reads (the
    // owner rule names one caller value of three), an index read included
    await all("CREATE INDEX IF NOT EXISTS notes_owner ON notes (owner_id)");
    // their first runs (after the schema change) are on an engine, which checks their plans
    await run(bob, "SELECT id FROM notes WHERE owner_id = ?", ["alice"]);
    await run(bob, "SELECT id, owner_id FROM notes WHERE id = ?", [2]);
    const engineRuns = vi.spyOn(h.module.pool, "run");
    try {
      expect((await run(alice, "SELECT id, owner_id FROM notes WHERE id = ?", [1])).rows).toEqual([[1, "alice"]]);
      expect((await run(alice, "SELECT id, owner_id FROM notes WHERE id = ?", [2])).rows).toEqual([]);
      expect((await run(bob, "SELECT id FROM notes WHERE owner_id = ?", ["alice"])).rows).toEqual([]);
      expect((await run(bob, "SELECT id FROM notes WHERE owner_id = ?", ["bob"])).rows).toEqual([[2]]);
      expect(engineRuns).not.toHaveBeenCalled();
    } finally {
      engineRuns.mockRestore();
    }
  });
});
