// The pieces of access rules (src/infra/libsql/access-rules.ts) on an
// in-memory SQLite of Node's own (the library the engines run): binding the
// caller into a rule, an INSERT's target, and the properties the design's
// soundness rests on, checked on SQLite itself so an upgrade of Node (and
// so of SQLite) that changed them fails here (docs/upgrading.md): the view's
// LIMIT -1 barrier keeps a device's failing expression away from hidden
// rows, and the authorizer refuses every way to the table but the view.
import { DatabaseSync } from "node:sqlite";
import { describe, expect, it } from "vitest";
import {
  accessAuthorizer,
  BASE_SETUP,
  bindCaller,
  CALLER_TABLE,
  callerColumn,
  insertIntoMain,
  tableSetup,
  WRITTEN_TABLE,
  type AccessState,
  type TableRules,
} from "../../../src/infra/libsql/access-rules.js";

describe("bindCaller", () => {
  it("replaces the caller's named values, in every prefix, outside strings and comments only", () => {
    expect(bindCaller("owner_id = :user_id AND app = @app_id OR c = $consumer_id", (n) => `<${n}>`)).toBe("owner_id = <user_id> AND app = <app_id> OR c = <consumer_id>");
    expect(bindCaller("note = ':user_id' /* :user_id */", (n) => `<${n}>`)).toBe("note = ':user_id' /* :user_id */");
  });

  it("refuses other values, several statements, unbalanced parentheses and an empty rule", () => {
    expect(bindCaller("a = :email", callerColumn)).toEqual({ error: expect.stringContaining("unknown value :email") });
    expect(bindCaller("a = ?", callerColumn)).toEqual({ error: expect.stringContaining("unknown value ?") });
    expect(bindCaller("1; DROP TABLE x", callerColumn)).toEqual({ error: expect.stringContaining("';'") });
    expect(bindCaller("1) OR (1", callerColumn)).toEqual({ error: "unbalanced parentheses" });
    expect(bindCaller("  ", callerColumn)).toEqual({ error: expect.stringContaining("empty") });
  });
});

describe("insertIntoMain", () => {
  const tables = new Map<string, TableRules>([["notes", {}]]);
  it.each([
    ["INSERT INTO notes (a) VALUES (1)", "INSERT INTO main.notes (a) VALUES (1)"],
    ['insert or ignore into "Notes" (a) values (1)', 'insert or ignore into main."Notes" (a) values (1)'],
    ["INSERT /* c */ INTO [notes] VALUES (1)", "INSERT /* c */ INTO main.[notes] VALUES (1)"],
    ["INSERT INTO main.notes VALUES (1)", "INSERT INTO main.notes VALUES (1)"],
    ["INSERT INTO other VALUES (1)", "INSERT INTO other VALUES (1)"],
    ["SELECT * FROM notes", "SELECT * FROM notes"],
  ])("%s", (sql, out) => expect(insertIntoMain(sql, tables)).toBe(out));
});

/** A connection set up as an engine's rules connection for `rules` on table notes, as user `user`. */
function rulesDb(rules: TableRules, user: string) {
  const db = new DatabaseSync(":memory:");
  db.exec("CREATE TABLE notes (id INTEGER PRIMARY KEY, owner_id TEXT NOT NULL, secret TEXT)");
  db.exec("INSERT INTO notes VALUES (1, 'alice', 'a'), (2, 'bob', 'ZZZ'), (3, 'alice', 'b')");
  db.exec("CREATE TABLE other (x)");
  for (const s of BASE_SETUP) db.exec(s);
  db.exec(`INSERT INTO temp.${CALLER_TABLE} VALUES (1, '${user}', 1); INSERT INTO temp.${WRITTEN_TABLE} VALUES (0)`);
  const setup = tableSetup({ name: "notes", columns: ["id", "owner_id", "secret"].map((name) => ({ name, generated: false })), pk: ["id"], withoutRowid: false }, rules, 0, "t0k3n");
  expect(setup.error).toBeUndefined();
  for (const s of setup.statements) db.exec(s);
  const state: AccessState = {
    tables: new Map([["notes", rules]]),
    trusted: new Set(setup.names),
    mainViews: new Set(),
    mainTriggers: new Set(["notes_audit"]),
    mainTables: new Set(["notes", "other"]),
    fkParents: new Set(),
  };
  db.setAuthorizer((action, a, b, name, inside) => accessAuthorizer(state, action, a, b, name, inside));
  const all = (sql: string) => db.prepare(sql).all();
  return { db, all, state };
}

const owner: TableRules = { select: "owner_id = :user_id", update: "owner_id = :user_id", delete: "owner_id = :user_id", insert: "owner_id = :user_id" };
// an expression that fails only on bob's row: the oracle the barrier must defeat
const ORACLE = "CASE WHEN secret = 'ZZZ' THEN abs(-9223372036854775807 - 1) ELSE 1 END";

describe("the rules connection, on SQLite itself", () => {
  it("shows the caller's rows only", () => {
    const { all } = rulesDb(owner, "alice");
    expect(all("SELECT id FROM notes ORDER BY id")).toEqual([{ id: 1 }, { id: 3 }]);
    expect(all("SELECT count(*) AS n FROM notes")).toEqual([{ n: 2 }]);
  });

  it.each([
    ["WHERE", `SELECT id FROM notes WHERE ${ORACLE}`],
    ["the select list", `SELECT ${ORACLE} FROM notes`],
    ["ORDER BY", `SELECT id FROM notes ORDER BY ${ORACLE}`],
    ["a join condition", `SELECT a.id FROM notes a JOIN notes b ON ${ORACLE.replace("secret", "b.secret")}`],
    ["a subquery", `SELECT (SELECT count(*) FROM notes WHERE ${ORACLE}) AS n`],
    ["a point read's shape", `SELECT id FROM notes WHERE id = 2 AND ${ORACLE}`],
    ["an UPDATE's WHERE", `UPDATE notes SET secret = secret WHERE ${ORACLE}`],
    ["an UPDATE's SET", `UPDATE notes SET secret = ${ORACLE}`],
    ["a DELETE's WHERE", `DELETE FROM notes WHERE ${ORACLE} = 0`],
  ])("a failing expression in %s never runs on a hidden row", (_where, sql) => {
    const { db } = rulesDb(owner, "alice");
    expect(() => db.prepare(sql).all()).not.toThrow();
  });

  it("the same expression does fail on a row the caller may see (the test can fail)", () => {
    const { db } = rulesDb(owner, "bob");
    expect(() => db.prepare(`SELECT id FROM notes WHERE ${ORACLE}`).all()).toThrow(/integer overflow/);
  });

  it.each([
    "SELECT * FROM main.notes",
    'SELECT * FROM "main"."notes"',
    "SELECT count(*) FROM main.notes",
    "SELECT * FROM other",
    "SELECT * FROM sqlite_schema",
    `SELECT * FROM temp.${CALLER_TABLE}`,
    "SELECT * FROM pragma_table_info('notes')",
    "INSERT INTO main.notes (owner_id) VALUES ('alice') RETURNING secret",
    "CREATE TEMP VIEW v AS SELECT * FROM main.notes",
    "UPDATE main.notes SET secret = 'x' WHERE id = 2",
    // a CTE's body is compiled "inside" the CTE's name: never trusted for being a table's name
    "SELECT * FROM (WITH notes AS (SELECT * FROM main.notes) SELECT * FROM notes)",
    "SELECT * FROM (WITH other AS (SELECT * FROM main.other) SELECT * FROM other)",
    // an UPDATE's WHERE and RETURNING are compiled inside the target view's name
    "UPDATE notes SET secret = secret WHERE id = 1 RETURNING (SELECT group_concat(secret) FROM main.notes)",
    "DELETE FROM notes WHERE id = 1 AND EXISTS (SELECT 1 FROM main.notes WHERE secret = 'ZZZ')",
    "SELECT total_changes()",
    "SELECT * FROM (WITH x AS (SELECT total_changes() AS n) SELECT * FROM x)",
    // nor is a name of the operator's triggers (a CTE can take it)
    "SELECT * FROM (WITH notes_audit AS (SELECT * FROM main.notes) SELECT * FROM notes_audit)",
  ])("refuses %s while compiling it", (sql) => {
    const { db } = rulesDb(owner, "alice");
    expect(() => db.prepare(sql)).toThrow(/not authorized|prohibited/);
  });

  it("skips rows an update or delete may not touch, and counts the ones it changed", () => {
    const { db } = rulesDb(owner, "alice");
    db.prepare("UPDATE notes SET secret = 'x'").run();
    db.prepare("DELETE FROM notes WHERE id = 2").run();
    db.setAuthorizer(null);
    expect(db.prepare(`SELECT n FROM temp.${WRITTEN_TABLE}`).get()).toEqual({ n: 2 });
    expect(db.prepare("SELECT id, secret FROM main.notes ORDER BY id").all()).toEqual([
      { id: 1, secret: "x" },
      { id: 2, secret: "ZZZ" },
      { id: 3, secret: "x" },
    ]);
  });

  it("a REPLACE cannot delete a row the caller may not delete", () => {
    const { db } = rulesDb(owner, "alice");
    expect(() => db.prepare("INSERT OR REPLACE INTO main.notes (id, owner_id, secret) VALUES (2, 'alice', 'mine now')").run()).toThrow(/UNIQUE/);
    db.setAuthorizer(null);
    expect(db.prepare("SELECT owner_id, secret FROM main.notes WHERE id = 2").get()).toEqual({ owner_id: "bob", secret: "ZZZ" });
  });
});

/** A rules connection on any schema: `rules` by table name, as user `user` (consumer 1, app 1), set up as installRules does. */
function rulesOn(schema: string[], rules: Record<string, TableRules>, user: string) {
  const db = new DatabaseSync(":memory:");
  db.exec("PRAGMA foreign_keys = ON");
  for (const s of schema) db.exec(s);
  for (const s of BASE_SETUP) db.exec(s);
  db.exec(`INSERT INTO temp.${CALLER_TABLE} VALUES (1, '${user}', 1); INSERT INTO temp.${WRITTEN_TABLE} VALUES (0)`);
  const state: AccessState = { tables: new Map(), trusted: new Set(), mainViews: new Set(), mainTriggers: new Set(), mainTables: new Set(), fkParents: new Set() };
  // as the engine's installRules fills them
  for (const r of db.prepare("SELECT lower(name) AS name, type FROM main.sqlite_schema").all() as { name: string; type: string }[]) {
    if (r.type === "table") state.mainTables.add(r.name);
    if (r.type === "view") state.mainViews.add(r.name);
    if (r.type === "trigger") state.mainTriggers.add(r.name);
  }
  let index = 0;
  for (const [t, r] of Object.entries(rules)) {
    const cols = db.prepare("SELECT name, hidden, pk, dflt_value AS dflt, upper(type) AS type FROM pragma_table_xinfo(?, 'main')").all(t) as { name: string; hidden: number; pk: number; dflt: string | null; type: string }[];
    const pk = cols.filter((c) => c.pk > 0).sort((x, y) => x.pk - y.pk).map((c) => c.name);
    const columns = cols.filter((c) => c.hidden !== 1).map((c) => ({ name: c.name, generated: c.hidden >= 2, dflt: c.dflt, rowidAlias: pk.length === 1 && c.pk === 1 && c.type === "INTEGER" }));
    const setup = tableSetup({ name: t, columns, pk, withoutRowid: false }, r, index++, "t0k3n");
    expect(setup.error).toBeUndefined();
    for (const s of setup.statements) db.exec(s);
    for (const n of setup.names) state.trusted.add(n);
    state.tables.set(t.toLowerCase(), r);
    for (const f of db.prepare("SELECT lower(\"table\") AS p FROM pragma_foreign_key_list(?, 'main')").all(t) as { p: string }[]) state.fkParents.add(f.p);
  }
  const auth = (action: number, a: string | null, b: string | null, name: string | null, inside: string | null) => accessAuthorizer(state, action, a, b, name, inside);
  db.setAuthorizer(auth);
  /** A device's statement (an INSERT's target made main."T", as the engine does). */
  const dev = (sql: string) => {
    const st = db.prepare(insertIntoMain(sql, state.tables));
    return st.columns().length ? st.all() : Number(st.run().changes);
  };
  /** The operator's view of the data (no authorizer, main named). */
  const op = (sql: string) => {
    db.setAuthorizer(null);
    try {
      return db.prepare(sql).all();
    } finally {
      db.setAuthorizer(auth);
    }
  };
  return { db, dev, op, state };
}

describe("second red-team pass: SQLite properties the rules rest on (held)", () => {
  it("a CTE of the device's statement is not visible inside a rule's view: it cannot stand in for the membership table", () => {
    const { dev } = rulesOn(
      [
        "CREATE TABLE members (room_id INTEGER, user_id TEXT, PRIMARY KEY (room_id, user_id))",
        "CREATE TABLE messages (id INTEGER PRIMARY KEY, room_id INTEGER, body TEXT)",
        "INSERT INTO members VALUES (1, 'alice'), (2, 'bob'); INSERT INTO messages VALUES (1, 1, 'a'), (2, 2, 'ZZZ')",
      ],
      { members: { select: "user_id = :user_id" }, messages: { select: "room_id IN (SELECT room_id FROM members WHERE user_id = :user_id)" } },
      "alice",
    );
    expect(dev("SELECT * FROM (WITH members AS (SELECT 2 AS room_id, 'alice' AS user_id) SELECT id FROM messages)")).toEqual([{ id: 1 }]);
    expect(dev("SELECT (WITH members(room_id, user_id) AS (VALUES (2, 'alice')) SELECT group_concat(body) FROM messages) AS b")).toEqual([{ b: "a" }]);
  });

  it("a hidden column (select_columns) reads as NULL in a window and in an UPDATE's RETURNING", () => {
    const { dev, op } = rulesOn(
      ["CREATE TABLE n (id INTEGER PRIMARY KEY, owner_id TEXT, secret TEXT, body TEXT)", "INSERT INTO n VALUES (1, 'alice', 'a-s', 'a-b'), (2, 'bob', 'ZZZ', 'b-b')"],
      { n: { select: "owner_id = :user_id", update: "owner_id = :user_id", selectColumns: ["id", "owner_id", "body"] } },
      "alice",
    );
    expect(dev("SELECT id, first_value(secret) OVER w AS s FROM n WINDOW w AS (ORDER BY secret)")).toEqual([{ id: 1, s: null }]);
    expect(dev("UPDATE n SET body = body RETURNING secret")).toEqual([{ secret: null }]);
    expect(op("SELECT body FROM main.n ORDER BY id")).toEqual([{ body: "a-b" }, { body: "b-b" }]);
  });

  it("a FOREIGN KEY cascade from a device's delete into another table is refused, never run with the operator's rights", () => {
    const { dev, op } = rulesOn(
      [
        "CREATE TABLE lists (id INTEGER PRIMARY KEY, owner_id TEXT)",
        "CREATE TABLE items (id INTEGER PRIMARY KEY, list_id INTEGER REFERENCES lists (id) ON DELETE CASCADE, owner_id TEXT)",
        "INSERT INTO lists VALUES (1, 'alice'); INSERT INTO items VALUES (10, 1, 'alice'), (11, 1, 'bob')",
      ],
      { lists: { select: "owner_id = :user_id", delete: "owner_id = :user_id" }, items: { select: "owner_id = :user_id" } },
      "alice",
    );
    expect(() => dev("DELETE FROM lists WHERE id = 1")).toThrow(/not authorized/);
    expect(op("SELECT id FROM main.items ORDER BY id")).toEqual([{ id: 10 }, { id: 11 }]);
  });
});

// Each test here failed when it was written (report: second red-team pass).
describe("second red-team pass: findings, fixed", () => {
  it("a hidden column (select_columns) cannot be read through the RETURNING of an UPDATE … FROM", () => {
    const { dev } = rulesOn(
      ["CREATE TABLE profiles (user_id TEXT PRIMARY KEY, display TEXT, email TEXT)", "INSERT INTO profiles VALUES ('alice', 'Alice', 'alice@x'), ('bob', 'Bob', 'bob@secret.example')"],
      { profiles: { select: "true", update: "user_id = :user_id", selectColumns: ["user_id", "display"] } },
      "alice",
    );
    // without FROM the RETURNING reads the view (NULL); with FROM it reads every visible row's real values, bob's included
    expect(dev("UPDATE profiles SET display = display RETURNING user_id, email")).toEqual([
      { user_id: "alice", email: null },
      { user_id: "bob", email: null },
    ]);
    expect(JSON.stringify(dev("UPDATE profiles SET display = display FROM (SELECT 1) RETURNING user_id, email"))).not.toContain("bob@secret.example");
  });

  it("a hidden column (select_columns) cannot be read through a NATURAL or USING join (SQLite builds those terms without asking the authorizer)", () => {
    const { dev } = rulesOn(
      ["CREATE TABLE profiles (user_id TEXT PRIMARY KEY, display TEXT, email TEXT, pin INTEGER)", "INSERT INTO profiles VALUES ('alice', 'Alice', 'alice@x', 1111), ('bob', 'Bob', 'bob@secret.example', 4821)"],
      { profiles: { select: "true", selectColumns: ["user_id", "display"] } },
      "alice",
    );
    expect(dev("SELECT * FROM profiles")).toEqual([
      { user_id: "alice", display: "Alice", email: null, pin: null },
      { user_id: "bob", display: "Bob", email: null, pin: null },
    ]);
    // the USING column of a FULL JOIN is coalesce(left, right): the hidden value itself
    const full = dev("SELECT * FROM profiles NATURAL FULL JOIN (SELECT NULL AS email, NULL AS pin WHERE 0)");
    expect(JSON.stringify(full), "hidden columns read in full").not.toContain("bob@secret.example");
    // the join term compares the real value: enumerate a small domain, or confirm a guess
    expect(dev("SELECT user_id, c.pin FROM profiles JOIN (WITH RECURSIVE c(pin) AS (SELECT 0 UNION ALL SELECT pin + 1 FROM c WHERE pin < 9999) SELECT pin FROM c) AS c USING (pin)")).toEqual([]);
    expect(dev("SELECT user_id FROM profiles NATURAL JOIN (SELECT 'bob@secret.example' AS email)")).toEqual([]);
  });

  it("an update or delete forwarded by a NULL key reaches only the row the device sees", () => {
    // rowid table, TEXT PRIMARY KEY: SQLite allows several NULL keys; the forwarding trigger matches `k IS NULL`
    const { dev, op } = rulesOn(
      ["CREATE TABLE t (k TEXT PRIMARY KEY, owner_id TEXT, team TEXT, v TEXT)", "INSERT INTO t VALUES (NULL, 'alice', 'red', 'a'), (NULL, 'bob', 'red', 'ZZZ')"],
      // alice sees her rows; her team may edit the team's rows (an update rule wider than the select rule)
      { t: { select: "owner_id = :user_id", update: "team = 'red'" } },
      "alice",
    );
    dev("UPDATE t SET v = 'edited'");
    expect(op("SELECT owner_id, v FROM main.t WHERE owner_id <> 'alice'"), "bob's invisible row was overwritten with alice's").toEqual([{ owner_id: "bob", v: "ZZZ" }]);
  });

  it("a table of the operator's named json_each is not readable by a device", () => {
    const { dev } = rulesOn(["CREATE TABLE json_each (x TEXT)", "INSERT INTO json_each VALUES ('OPERATOR-ONLY')", "CREATE TABLE n (id INTEGER PRIMARY KEY, owner_id TEXT)"], { n: { select: "owner_id = :user_id" } }, "alice");
    expect(() => dev("SELECT * FROM main.json_each")).toThrow(/not authorized|prohibited/);
  });

  it("names are matched as SQLite matches them (ASCII case only): rules on übung give nothing on Übung", () => {
    const { dev, op } = rulesOn(
      ['CREATE TABLE "übung" (id INTEGER PRIMARY KEY, owner_id TEXT)', 'CREATE TABLE "Übung" (id INTEGER PRIMARY KEY, v TEXT)', "INSERT INTO \"Übung\" VALUES (1, 'PRIVATE')"],
      { übung: { select: "owner_id = :user_id", insert: "owner_id = :user_id", update: "owner_id = :user_id" } },
      "alice",
    );
    let wrote = 0;
    try {
      wrote += dev("UPDATE main.\"Übung\" SET v = 'overwritten'") as number;
    } catch {
      // refused: as it should be
    }
    try {
      wrote += dev("INSERT INTO main.\"Übung\" (id, v) VALUES (2, 'from a device')") as number;
    } catch {
      // refused
    }
    expect(wrote).toBe(0);
    expect(op('SELECT * FROM main."Übung"')).toEqual([{ id: 1, v: "PRIVATE" }]);
  });
});

// Not bypasses: what the red team found devices cannot do that the docs say they can (each failed when written).
describe("second red-team pass: what the docs promise", () => {
  it("insert_columns: a column left out keeps a DEFAULT that is not a constant (a random id, the docs' advice for private rows)", () => {
    const { dev } = rulesOn(
      ["CREATE TABLE docs (id TEXT PRIMARY KEY DEFAULT (lower(hex(randomblob(16)))), owner_id TEXT, body TEXT)"],
      { docs: { select: "owner_id = :user_id", insert: "owner_id = :user_id", insertColumns: ["owner_id", "body"] } },
      "alice",
    );
    expect(() => dev("INSERT INTO docs (owner_id, body) VALUES ('alice', 'x')")).not.toThrow();
  });

  it("insert_columns do not cover an INTEGER PRIMARY KEY: it is the row's id, which an insert may choose (docs)", () => {
    const { dev, op } = rulesOn(
      ["CREATE TABLE posts (id INTEGER PRIMARY KEY, owner_id TEXT, body TEXT, pinned INTEGER DEFAULT 0)"],
      { posts: { select: "owner_id = :user_id", insert: "owner_id = :user_id", insertColumns: ["owner_id", "body"] } },
      "alice",
    );
    dev("INSERT INTO posts (id, owner_id, body) VALUES (424242, 'alice', 'x')");
    expect(op("SELECT id FROM main.posts")).toContainEqual({ id: 424242 });
    // a column outside the list keeps its DEFAULT
    expect(() => dev("INSERT INTO posts (owner_id, body, pinned) VALUES ('alice', 'y', 1)")).toThrow(/may not set pinned/);
  });

  it("a FOREIGN KEY of a table with rules is refused with a reason (SQLite checks it by reading the parent outside the rules), and the insert rule can enforce it instead", () => {
    const { dev, state } = rulesOn(
      ["CREATE TABLE lists (id INTEGER PRIMARY KEY, owner_id TEXT)", "CREATE TABLE items (id INTEGER PRIMARY KEY, list_id INTEGER REFERENCES lists (id), owner_id TEXT)", "INSERT INTO lists VALUES (1, 'alice')"],
      { lists: { select: "owner_id = :user_id" }, items: { select: "owner_id = :user_id", insert: "owner_id = :user_id" } },
      "alice",
    );
    state.refusal = undefined;
    expect(() => dev("INSERT INTO items (list_id, owner_id) VALUES (1, 'alice')")).toThrow(/prohibited|not authorized/);
    expect(state.refusal).toMatch(/a foreign key to lists would be checked by reading lists outside the rules/);
    const { dev: dev2, op } = rulesOn(
      ["CREATE TABLE lists (id INTEGER PRIMARY KEY, owner_id TEXT)", "CREATE TABLE items (id INTEGER PRIMARY KEY, list_id INTEGER, owner_id TEXT)", "INSERT INTO lists VALUES (1, 'alice'), (2, 'bob')"],
      { lists: { select: "owner_id = :user_id" }, items: { select: "owner_id = :user_id", insert: "owner_id = :user_id AND list_id IN (SELECT id FROM lists)" } },
      "alice",
    );
    dev2("INSERT INTO items (list_id, owner_id) VALUES (1, 'alice')");
    expect(() => dev2("INSERT INTO items (list_id, owner_id) VALUES (2, 'alice')")).toThrow(/insert on items refused/);
    expect(op("SELECT list_id FROM main.items")).toEqual([{ list_id: 1 }]);
  });
});
