// Issue 31, point 3: the hostile corpus (access-rules-corpus.ts) against an
// embedded database, through the device API (query and batch, as alice or
// bob), the engine processes and the in-process point-read path; and rules
// changed while device requests run. The operator's view of the data is the
// SQLite file itself, read and reset with node:sqlite outside the service.
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ATTEMPTS, RULES, SCHEMA, SEED, USERS, runAttempt, type Outcome, type Target, type Who } from "./access-rules-corpus.js";
import { createHarness, rowsOf, type Harness } from "./harness.js";

let h: Harness;
let app: number;
let file: string;
let operatorDb: DatabaseSync;

const plain = (v: unknown): unknown => (typeof v === "bigint" ? Number(v) : v);

type Answer = Awaited<ReturnType<Harness["queryAs"]>>;
function outcomeOf(r: Answer): Outcome {
  return { results: r.results.map((x) => ({ rows: rowsOf(x).map((row) => row.map(plain)), rowsWritten: Number(x.rowsWritten), ...(x.error ? { error: x.error } : {}) })) };
}
async function answer(p: Promise<Answer>): Promise<Outcome> {
  try {
    return outcomeOf(await p);
  } catch (e) {
    if (e instanceof ConnectError) return { results: [], refused: e.message };
    throw e;
  }
}

const target: Target = {
  run: (who: Who, sql, params) => answer(h.queryAs(app, USERS[who], sql, params)),
  batch: (who: Who, statements, transaction) => answer(h.batchAs(app, USERS[who], statements, transaction)),
  async operator(sql) {
    const st = operatorDb.prepare(sql);
    st.setReturnArrays(true);
    return st.all() as unknown as unknown[][];
  },
  async reset() {
    operatorDb.exec("BEGIN IMMEDIATE");
    try {
      for (const s of SEED) operatorDb.exec(s);
      operatorDb.exec("COMMIT");
    } catch (e) {
      operatorDb.exec("ROLLBACK");
      throw e;
    }
  },
};

beforeAll(async () => {
  h = await createHarness({ engineProcesses: 1 });
  const team = await h.team();
  app = await h.app(team);
  const dbId = await h.linkedDb(team, app);
  file = join(h.dataDir, (await h.module.manager.get(dbId)).filePath!);
  // the operator's schema (views and triggers are never a device's)
  operatorDb = new DatabaseSync(file, { timeout: 10_000 });
  for (const s of SCHEMA) operatorDb.exec(s);
  await target.reset();
  await h.rules.setAccessRules({ appId: BigInt(app), mode: "rules", tables: RULES });
});
afterAll(async () => {
  operatorDb?.close();
  await h?.close();
});

it("has at least 60 attempts, each with a unique id", () => {
  expect(ATTEMPTS.length).toBeGreaterThanOrEqual(60);
  expect(new Set(ATTEMPTS.map((a) => a.id)).size).toBe(ATTEMPTS.length);
});

it("the seed is what the operator sees, and alice and bob each see their own notes", async () => {
  await target.reset();
  expect(await target.operator("SELECT count(*) FROM notes")).toEqual([[4]]);
  expect((await target.run("alice", "SELECT id FROM notes ORDER BY id")).results[0]?.rows).toEqual([[101], [102]]);
  expect((await target.run("bob", "SELECT id FROM notes ORDER BY id")).results[0]?.rows).toEqual([[7001], [7002]]);
});

describe("the hostile corpus (embedded)", () => {
  it.each(ATTEMPTS.map((a) => [`${a.id} (${a.covers})`, a] as const))("%s", async (_name, a) => {
    await runAttempt(target, a);
  });
});

describe("connection state shared by the application's devices", () => {
  it("total_changes() does not move with how many rows bob wrote", async () => {
    await target.reset();
    const total = async () => Number((await target.run("alice", "SELECT total_changes()")).results[0]?.rows[0]?.[0]);
    const t1 = await total();
    await target.run("bob", "UPDATE notes SET body = body WHERE 0");
    const t2 = await total();
    await target.run("bob", "UPDATE notes SET body = body");
    const t3 = await total();
    expect(t3 - t2, "bob's two-row update shows in alice's total_changes()").toBe(t2 - t1);
  });
});

describe("rules changed while requests run", () => {
  // Rules A show the rows with x = 1 in both tables, rules B those with x = 2:
  // every answer must be wholly A's or wholly B's.
  const A = [
    { table: "f1", select: "x = 1" },
    { table: "f2", select: "x = 1" },
  ];
  const B = [
    { table: "f1", select: "x = 2" },
    { table: "f2", select: "x = 2" },
  ];
  const asA = ["1,2,3", "11,12,13"];
  const asB = ["4,5,6", "14,15,16"];
  let app2: number;

  beforeAll(async () => {
    const team = await h.team();
    app2 = await h.app(team);
    const dbId = await h.linkedDb(team, app2);
    const f = new DatabaseSync(join(h.dataDir, (await h.module.manager.get(dbId)).filePath!), { timeout: 10_000 });
    try {
      f.exec("CREATE TABLE f1 (id INTEGER PRIMARY KEY, x INTEGER); CREATE TABLE f2 (id INTEGER PRIMARY KEY, x INTEGER)");
      f.exec("INSERT INTO f1 VALUES (1, 1), (2, 1), (3, 1), (4, 2), (5, 2), (6, 2)");
      f.exec("INSERT INTO f2 VALUES (11, 1), (12, 1), (13, 1), (14, 2), (15, 2), (16, 2)");
    } finally {
      f.close();
    }
  });

  it("no request sees half of one rule set and half of the other", async () => {
    const both = "SELECT (SELECT group_concat(id) FROM (SELECT id FROM f1 ORDER BY id)), (SELECT group_concat(id) FROM (SELECT id FROM f2 ORDER BY id))";
    const pending: Promise<{ kind: string; seen: unknown }>[] = [];
    const fire = (i: number) => {
      const who = i % 2 === 0 ? USERS.alice : USERS.bob;
      pending.push(
        answer(h.queryAs(app2, who, both)).then((o) => ({ kind: "query", seen: o.refused ?? o.results[0]?.error ?? o.results[0]?.rows[0] })),
        answer(
          h.batchAs(app2, who, [{ sql: "SELECT group_concat(id) FROM (SELECT id FROM f1 ORDER BY id)" }, { sql: "SELECT group_concat(id) FROM (SELECT id FROM f2 ORDER BY id)" }], i % 3 === 0),
        ).then((o) => ({ kind: "batch", seen: o.refused ?? o.results.find((r) => r.error)?.error ?? o.results.map((r) => r.rows[0]?.[0]) })),
        // a point read (in-process after its first run): the row of A or nothing
        answer(h.queryAs(app2, who, "SELECT x FROM f1 WHERE id = ?", [1])).then((o) => ({ kind: "point", seen: o.refused ?? o.results[0]?.error ?? o.results[0]?.rows })),
      );
    };
    for (let flip = 0; flip < 16; flip++) {
      await h.rules.setAccessRules({ appId: BigInt(app2), mode: "rules", tables: flip % 2 === 0 ? A : B });
      for (let i = 0; i < 6; i++) fire(flip * 6 + i);
    }
    const answers = await Promise.all(pending);
    for (const a of answers) {
      if (a.kind === "point") expect([[], [[1]]], JSON.stringify(a)).toContainEqual(a.seen);
      else expect([asA, asB], JSON.stringify(a)).toContainEqual(a.seen);
    }
    // and after the last flip (B) every path answers B
    expect((await answer(h.queryAs(app2, USERS.alice, both))).results[0]?.rows[0]).toEqual(asB);
    expect((await answer(h.queryAs(app2, USERS.alice, "SELECT x FROM f1 WHERE id = ?", [1]))).results[0]?.rows).toEqual([]);
    expect((await answer(h.queryAs(app2, USERS.alice, "SELECT x FROM f1 WHERE id = ?", [4]))).results[0]?.rows).toEqual([[2]]);
  });
});

describe("an operator's trigger that reads, fired by a device's write", () => {
  it("is refused when the rules are saved, and a CTE named after it reads nothing", async () => {
    operatorDb.exec("CREATE TRIGGER notes_copy AFTER INSERT ON notes BEGIN INSERT INTO audit (note_id, owner_id, body) VALUES (NEW.id, NEW.owner_id, NEW.body); END");
    try {
      const refused = await h.rules.setAccessRules({ appId: BigInt(app), mode: "rules", tables: RULES }).then(
        () => undefined,
        (e: unknown) => (e as Error).message,
      );
      expect(refused).toContain("the trigger notes_copy reads notes");
      // the rules in force meet the new trigger at the next request: notes is left out (invisible), never open
      const seen = await target.run("alice", "SELECT count(*) FROM notes");
      expect(seen.results[0]?.error).toBe("no such table: notes");
      const cte = await target.run("alice", "SELECT * FROM (WITH notes_copy AS (SELECT * FROM main.notes) SELECT * FROM notes_copy)");
      expect(cte.results[0]?.rows ?? []).toEqual([]);
      expect(cte.results[0]?.error ?? cte.refused).toBeTruthy();
    } finally {
      operatorDb.exec("DROP TRIGGER notes_copy");
    }
    expect((await target.run("alice", "SELECT count(*) FROM notes")).results[0]?.rows).toEqual([[2]]);
  });
});

// Second red-team pass (issue 31). Each test here failed when it was written:
// a bypass, reported with the fix it suggests.
describe("second red-team pass: open findings", () => {
  let app3: number;
  let f: DatabaseSync;
  const alice = USERS.alice;

  beforeAll(async () => {
    const team = await h.team();
    app3 = await h.app(team);
    const dbId = await h.linkedDb(team, app3);
    f = new DatabaseSync(join(h.dataDir, (await h.module.manager.get(dbId)).filePath!), { timeout: 10_000 });
    // the chat of docs/database.md ("Worked examples"), as written there
    f.exec("CREATE TABLE members (room_id INTEGER, user_id TEXT, PRIMARY KEY (room_id, user_id))");
    f.exec("CREATE TABLE messages (id INTEGER PRIMARY KEY, room_id INTEGER NOT NULL, author TEXT NOT NULL, body TEXT, at TEXT)");
    // a table whose hiding column has no declared type (SQLite's BLOB affinity): common in hand-written schemas
    f.exec("CREATE TABLE posts (id INTEGER PRIMARY KEY, hidden_from, body TEXT)");
    // a public directory whose email column is hidden (select_columns)
    f.exec("CREATE TABLE people (user_id TEXT PRIMARY KEY, display TEXT, email TEXT)");
    f.exec("INSERT INTO people VALUES ('alice', 'Alice', 'alice@example.com'), ('bob', 'Bob', 'ZQX-bob@private.example')");
    const member = "room_id IN (SELECT room_id FROM members WHERE user_id = :user_id)";
    await h.rules.setAccessRules({
      appId: BigInt(app3),
      mode: "rules",
      tables: [
        { table: "members", select: "user_id = :user_id" },
        { table: "messages", select: member, insert: `author = :user_id AND ${member}`, update: "author = :user_id", updateColumns: ["body"], delete: "author = :user_id" },
        // every post but those hidden from the caller
        { table: "posts", select: "hidden_from IS NULL OR hidden_from <> :consumer_id" },
        { table: "people", select: "true", selectColumns: ["user_id", "display"] },
      ],
    });
  });
  afterAll(() => f?.close());

  it("a member removed from a room cannot rewrite the room's messages she no longer sees (UPDATE main.T without reads)", async () => {
    f.exec("DELETE FROM members; DELETE FROM messages");
    f.exec("INSERT INTO members VALUES (1, 'alice'), (1, 'bob'); INSERT INTO messages VALUES (10, 1, 'alice', 'hello', '2024-01-01'), (11, 1, 'bob', 'hi alice', '2024-01-02')");
    // the room's owner removes alice
    f.exec("DELETE FROM members WHERE user_id = 'alice'");
    expect((await answer(h.queryAs(app3, alice, "SELECT count(*) FROM messages"))).results[0]?.rows).toEqual([[0]]);
    // through the view: nothing (the rows are not visible)
    expect((await answer(h.queryAs(app3, alice, "UPDATE messages SET body = 'x'"))).results[0]?.rowsWritten).toBe(0);
    // through main."messages": the update reads no column, so the authorizer lets it in, and only the
    // update rule (author = alice) is applied: the select rule (membership) is not
    const o = await answer(h.queryAs(app3, alice, "UPDATE main.messages SET body = 'rewritten after removal'"));
    const st = f.prepare("SELECT body FROM messages WHERE id = 10");
    st.setReturnArrays(true);
    expect(st.all(), `alice rewrote a message she may no longer see: ${JSON.stringify(o)}`).toEqual([["hello"]]);
    // and rowsWritten counted a row she may not see
    expect(o.refused ?? o.results[0]?.error ?? o.results[0]?.rowsWritten).not.toBe(1);
  });

  it("a point read applies the select rule as the engine does (the caller's values keep their affinity)", async () => {
    // alice is consumer 1; the post was written with the consumer id as a string (a JSON body's "1")
    f.exec("DELETE FROM posts; INSERT INTO posts VALUES (1, '1', 'not for consumer 1'), (2, NULL, 'for everyone')");
    const sql = "SELECT id, body FROM posts WHERE id = ?";
    // the engine: hidden_from ('1', no affinity) <> (SELECT consumer_id ...) (INTEGER affinity) compares 1 with 1
    const first = await answer(h.queryAs(app3, alice, sql, [1]));
    expect(first.results[0]?.rows).toEqual([]);
    expect((await answer(h.queryAs(app3, alice, "SELECT id FROM posts ORDER BY id"))).results[0]?.rows).toEqual([[2]]);
    // the point path (in process after the first run): '1' <> ?(1, bound, no affinity) is true, the row shows
    const second = await answer(h.queryAs(app3, alice, sql, [1]));
    expect(second.results[0]?.rows, "the in-process point read showed a row the engine hides").toEqual([]);
  });

  it("select_columns: a hidden column cannot be read through a NATURAL FULL JOIN (its USING column is coalesce(left, right))", async () => {
    const plain = await answer(h.queryAs(app3, alice, "SELECT * FROM people ORDER BY user_id"));
    expect(plain.results[0]?.rows).toEqual([
      ["alice", "Alice", null],
      ["bob", "Bob", null],
    ]);
    const o = await answer(h.queryAs(app3, alice, "SELECT * FROM people NATURAL FULL JOIN (SELECT NULL AS email WHERE 0) ORDER BY user_id"));
    expect(JSON.stringify(o), "bob's hidden email was read").not.toContain("ZQX-bob@private.example");
  });
});
