// Issue 31, point 3 and "Tests": the hostile corpus for access rules. One
// application in `rules` mode, two devices (user "alice", consumer 1, and
// user "bob", consumer 2); every attempt is alice (unless it says
// otherwise) trying to read, change or learn something of bob's.
//
// The corpus is data plus the invariants every attempt is held to, so it
// can run against any database that applies the rules: the embedded engine
// (access-rules-hostile.test.ts) and, later, a remote libSQL server. A
// Target says how to run SQL as a device, how the operator reads the data
// (no rules: the file itself, read-only) and how the data is put back to
// the seed before each attempt.
//
// What every attempt must leave true, whatever it expects on top:
//   - no value of bob's (BOB_VALUES, BOB_IDS) appears in the rows it
//     returned, in a statement error or in a refusal, unless the attempt's
//     own text carries it (a guess echoed back is not a leak);
//   - bob's data (BOB_DATA: every row not alice's, the table without rules,
//     the rows of bob's room) reads the same through the operator before
//     and after;
//   - none of alice's own rows holds one of bob's values afterwards (a read
//     copied into her own row is a read);
// and its `expect`: the exact rows alice sees, a refusal, the count written,
// or (for a guess) the same answer whether the guess is right or wrong.
import { expect } from "vitest";

export type Who = "alice" | "bob";
export const USERS: Record<Who, { consumerId: number; userId: string }> = {
  alice: { consumerId: 1, userId: "alice" },
  bob: { consumerId: 2, userId: "bob" },
};

/** One statement's answer as a device sees it. */
export interface Result {
  rows: unknown[][];
  rowsWritten: number;
  error?: string;
}
/** A request's answer: the statements' results, or the refusal of the whole request (4xx). */
export interface Outcome {
  results: Result[];
  refused?: string;
}

export interface Target {
  run(who: Who, sql: string, params?: unknown): Promise<Outcome>;
  batch(who: Who, statements: { sql: string; params?: unknown }[], transaction: boolean): Promise<Outcome>;
  /** Rows as the operator sees them (no rules). */
  operator(sql: string): Promise<unknown[][]>;
  /** The seed data back in place (schema and rules untouched). */
  reset(): Promise<void>;
}

// ---------------------------------------------------------------- schema

/** Made by the operator (not through the device API: views and triggers are the operator's). */
export const SCHEMA = [
  "CREATE TABLE notes (id INTEGER PRIMARY KEY, owner_id TEXT NOT NULL, body TEXT, secret TEXT)",
  "CREATE INDEX notes_owner ON notes (owner_id)",
  "CREATE TABLE rooms (id INTEGER PRIMARY KEY, owner_id TEXT NOT NULL, name TEXT)",
  "CREATE TABLE members (room_id INTEGER NOT NULL, user_id TEXT NOT NULL, PRIMARY KEY (room_id, user_id))",
  "CREATE TABLE messages (id INTEGER PRIMARY KEY, room_id INTEGER NOT NULL, author TEXT NOT NULL, body TEXT)",
  // WITHOUT ROWID, keyed by a value bob chose
  "CREATE TABLE handles (handle TEXT PRIMARY KEY, owner_id TEXT NOT NULL, bio TEXT) WITHOUT ROWID",
  "CREATE TABLE profiles (user_id TEXT PRIMARY KEY, display TEXT, role TEXT NOT NULL DEFAULT 'user')",
  // no rules: invisible to devices
  "CREATE TABLE plain (id INTEGER PRIMARY KEY, v TEXT)",
  "CREATE TABLE audit (id INTEGER PRIMARY KEY, note_id INTEGER, owner_id TEXT, body TEXT)",
  // the operator's view and trigger
  "CREATE VIEW all_notes AS SELECT id, owner_id, body, secret FROM notes",
  // (a trigger a device's write fires may not read tables under rules, NEW and OLD included: this one reads none)
  "CREATE TRIGGER notes_audit AFTER INSERT ON notes BEGIN INSERT INTO audit (note_id, owner_id, body) VALUES (NULL, NULL, 'a note was added'); END",
];

const OWN = "owner_id = :user_id";
const MEMBER = "room_id IN (SELECT room_id FROM members WHERE user_id = :user_id)";

/** The rules in force (AccessRulesService.SetAccessRules tables). */
export const RULES = [
  { table: "notes", select: OWN, insert: OWN, update: OWN, delete: OWN },
  { table: "rooms", select: "id IN (SELECT room_id FROM members WHERE user_id = :user_id)", insert: OWN },
  { table: "members", select: "user_id = :user_id", insert: "room_id IN (SELECT id FROM main.rooms WHERE owner_id = :user_id)", delete: "user_id = :user_id" },
  { table: "messages", select: MEMBER, insert: `${MEMBER} AND author = :user_id`, update: "author = :user_id", updateCheck: `${MEMBER} AND author = :user_id`, delete: "author = :user_id" },
  { table: "handles", select: OWN, insert: OWN, update: OWN, delete: OWN },
  { table: "profiles", select: "user_id = :user_id", update: "user_id = :user_id", updateColumns: ["display"] },
];

/** Every value of bob's; the ones alice may legitimately see (the shared room) carry no ZQX. */
export const BOB_VALUES = [
  "ZQX-body-7001",
  "ZQX-secret-7001",
  "ZQX-body-7002",
  "ZQX-secret-7002",
  "ZQX-room",
  "ZQX-msg-7001",
  "ZQX-msg-7002",
  "ZQX-handle",
  "ZQX-bio",
  "ZQX-Bob",
  "ZQX-admin",
  "ZQX-plain",
  "ZQX-audit",
];
/** Ids of bob's rows (notes, rooms, messages). */
export const BOB_IDS = [7001, 7002];

/** The seed, in the order it is written (the operator's trigger writes audit rows: audit is written last). */
export const SEED = [
  "DELETE FROM notes",
  "DELETE FROM rooms",
  "DELETE FROM members",
  "DELETE FROM messages",
  "DELETE FROM handles",
  "DELETE FROM profiles",
  "DELETE FROM plain",
  "INSERT INTO notes VALUES (101, 'alice', 'a-body-101', 'a-secret-101'), (102, 'alice', 'a-body-102', 'a-secret-102'), (7001, 'bob', 'ZQX-body-7001', 'ZQX-secret-7001'), (7002, 'bob', 'ZQX-body-7002', 'ZQX-secret-7002')",
  "INSERT INTO rooms VALUES (101, 'alice', 'a-room'), (300, 'alice', 'shared-room'), (7001, 'bob', 'ZQX-room')",
  "INSERT INTO members VALUES (101, 'alice'), (300, 'alice'), (300, 'bob'), (7001, 'bob')",
  "INSERT INTO messages VALUES (101, 101, 'alice', 'a-msg-101'), (300, 300, 'bob', 'shared-msg'), (7001, 7001, 'bob', 'ZQX-msg-7001'), (7002, 7001, 'bob', 'ZQX-msg-7002')",
  "INSERT INTO handles VALUES ('a-handle', 'alice', 'a-bio'), ('ZQX-handle', 'bob', 'ZQX-bio')",
  "INSERT INTO profiles VALUES ('alice', 'Alice', 'user'), ('bob', 'ZQX-Bob', 'ZQX-admin')",
  "INSERT INTO plain VALUES (1, 'ZQX-plain')",
  "DELETE FROM audit",
  "INSERT INTO audit VALUES (1, 7001, 'bob', 'ZQX-audit')",
];

/** What must read the same through the operator after every attempt. */
export const BOB_DATA = [
  "SELECT * FROM notes WHERE owner_id <> 'alice' ORDER BY id",
  "SELECT * FROM rooms WHERE owner_id <> 'alice' ORDER BY id",
  "SELECT * FROM members WHERE user_id <> 'alice' OR room_id = 7001 ORDER BY room_id, user_id",
  "SELECT * FROM messages WHERE author <> 'alice' OR room_id = 7001 ORDER BY id",
  "SELECT * FROM handles WHERE owner_id <> 'alice' ORDER BY handle",
  "SELECT * FROM profiles WHERE user_id <> 'alice' ORDER BY user_id",
  "SELECT * FROM plain ORDER BY id",
];

/** Alice's own rows: none may end up holding a value of bob's. */
export const ALICE_DATA = [
  "SELECT * FROM notes WHERE owner_id = 'alice'",
  "SELECT * FROM rooms WHERE owner_id = 'alice'",
  "SELECT * FROM messages WHERE author = 'alice'",
  "SELECT * FROM handles WHERE owner_id = 'alice'",
  "SELECT * FROM profiles WHERE user_id = 'alice'",
];

// what alice may see, as rows
const A_NOTES = [
  [101, "alice", "a-body-101", "a-secret-101"],
  [102, "alice", "a-body-102", "a-secret-102"],
];
const A_MESSAGES = [
  [101, 101, "alice", "a-msg-101"],
  [300, 300, "bob", "shared-msg"],
];
const A_ROOMS = [
  [101, "alice", "a-room"],
  [300, "alice", "shared-room"],
];

// ---------------------------------------------------------------- attempts

type Step = { sql: string; params?: unknown; as?: Who };

interface Expect {
  /** Exactly these rows, no error (the single statement's, or the last of a batch). */
  rows?: unknown[][];
  /** Refused: a statement error or a refused request. A RegExp the message must match. */
  refused?: true | RegExp;
  /** Either these rows or refused (a construct the rules may refuse or answer). */
  rowsOrRefused?: unknown[][];
  /** No error, this many rows written. */
  written?: number;
  /** Either this many rows written or refused. */
  writtenOrRefused?: number;
  /** Only the invariants (with `after`). */
  invariantsOnly?: true;
}

export interface Attempt {
  id: string;
  /** The construct of point 3 (or the brief) it covers. */
  covers: string;
  as?: Who;
  sql?: string;
  params?: unknown;
  /** A batch instead of one statement. */
  batch?: Step[];
  transaction?: boolean;
  /** Run first (bob's moves, for instance); their answers are not checked. */
  before?: Step[];
  /** A point read: run it twice (the second is served in-process), both answers held to `expect`. */
  twice?: boolean;
  /**
   * A guess: the statement runs with each of these params (from the seed
   * each time); a right guess and a wrong one must look alike to alice.
   */
  guesses?: [unknown, unknown];
  expect: Expect;
  /** Further checks through the operator afterwards. */
  after?: (t: Target, outcome: Outcome) => Promise<void>;
}

const MIN_INT = "abs(-9223372036854775807-1)"; // integer overflow: an error
const RIGHT = "ZQX-secret-7001";
const WRONG = "no-such-secret";
const guess: [unknown, unknown] = [[RIGHT], [WRONG]];

const aliceNote = (id: number) => async (t: Target) => {
  const rows = await t.operator(`SELECT * FROM notes WHERE id = ${id}`);
  expect(rows, `alice's note ${id} is as seeded`).toEqual([A_NOTES.find((r) => r[0] === id)]);
};

export const ATTEMPTS: Attempt[] = [
  // --- names: quoting, brackets, backticks, schema-qualified, case
  { id: "name-plain", covers: "baseline", sql: "SELECT * FROM notes ORDER BY id", expect: { rows: A_NOTES } },
  { id: "name-main", covers: "schema-qualified", sql: "SELECT * FROM main.notes", expect: { refused: true } },
  { id: "name-main-quoted", covers: "schema-qualified, quoted", sql: 'SELECT * FROM main."notes"', expect: { refused: true } },
  { id: "name-quoted-main", covers: "schema-qualified, quoted", sql: 'SELECT * FROM "main".notes', expect: { refused: true } },
  { id: "name-upper-main", covers: "case variation", sql: 'SELECT * FROM "MAIN"."NOTES"', expect: { refused: true } },
  { id: "name-bracket", covers: "bracketed", sql: "SELECT * FROM [notes] ORDER BY id", expect: { rows: A_NOTES } },
  { id: "name-backtick", covers: "backticked", sql: "SELECT * FROM `notes` ORDER BY id", expect: { rows: A_NOTES } },
  { id: "name-temp", covers: "temp-qualified", sql: "SELECT * FROM temp.notes ORDER BY id", expect: { rows: A_NOTES } },
  { id: "name-case", covers: "case variation", sql: "SELECT * FROM NoTeS ORDER BY id", expect: { rows: A_NOTES } },
  { id: "name-main-bracket", covers: "schema-qualified, bracketed", sql: "SELECT secret FROM [main].[notes] WHERE owner_id = 'bob'", expect: { refused: true } },
  { id: "not-indexed", covers: "NOT INDEXED", sql: "SELECT * FROM notes NOT INDEXED ORDER BY id", expect: { rowsOrRefused: A_NOTES } },
  { id: "indexed-by", covers: "INDEXED BY", sql: "SELECT * FROM notes INDEXED BY notes_owner WHERE owner_id = 'bob'", expect: { rowsOrRefused: [] } },
  { id: "indexed-by-main", covers: "INDEXED BY, schema-qualified", sql: "SELECT * FROM main.notes INDEXED BY notes_owner WHERE owner_id = 'bob'", expect: { refused: true } },

  // --- joins and subqueries
  { id: "self-join", covers: "JOIN", sql: "SELECT a.id, b.id FROM notes a JOIN notes b ON a.id <> b.id ORDER BY 1, 2", expect: { rows: [[101, 102], [102, 101]] } },
  { id: "cross-join-count", covers: "JOIN, aggregate", sql: "SELECT count(*) FROM notes CROSS JOIN messages", expect: { rows: [[4]] } },
  { id: "join-main", covers: "JOIN, schema-qualified", sql: "SELECT o.secret FROM notes n JOIN main.notes o ON o.owner_id = 'bob'", expect: { refused: true } },
  { id: "in-subquery-main", covers: "subquery", sql: "SELECT * FROM notes WHERE id IN (SELECT id FROM main.notes)", expect: { refused: true } },
  { id: "scalar-subquery", covers: "subquery", sql: "SELECT (SELECT group_concat(secret) FROM notes)", expect: { rows: [["a-secret-101,a-secret-102"]] } },
  { id: "from-subquery", covers: "subquery in FROM", sql: "SELECT count(*) FROM (SELECT * FROM notes WHERE owner_id = 'bob')", expect: { rows: [[0]] } },
  {
    id: "correlated",
    covers: "correlated subquery",
    sql: "SELECT id, (SELECT count(*) FROM messages m WHERE m.author = n.owner_id) FROM notes n ORDER BY id",
    expect: { rows: [[101, 1], [102, 1]] },
  },
  { id: "correlated-exists", covers: "correlated subquery", sql: "SELECT count(*) FROM notes n WHERE EXISTS (SELECT 1 FROM notes o WHERE o.owner_id = 'bob' AND o.id <> n.id)", expect: { rows: [[0]] } },

  // --- CTEs (a statement may not start with WITH: the guard; a subquery may hold one)
  { id: "cte-top", covers: "CTE", sql: "WITH x AS (SELECT * FROM notes) SELECT count(*) FROM x", expect: { rowsOrRefused: [[2]] } },
  { id: "cte-in-subquery", covers: "CTE", sql: "SELECT (WITH n AS (SELECT secret FROM notes) SELECT group_concat(secret) FROM n)", expect: { rows: [["a-secret-101,a-secret-102"]] } },
  {
    id: "cte-named-like-table",
    covers: "CTE named like a table with rules",
    sql: "SELECT * FROM (WITH notes AS (SELECT * FROM main.notes) SELECT * FROM notes) ORDER BY id",
    expect: { rowsOrRefused: A_NOTES },
  },
  {
    id: "cte-named-like-table-scalar",
    covers: "CTE named like a table with rules, case variation",
    sql: 'SELECT (WITH NOTES AS (SELECT * FROM "main"."notes") SELECT group_concat(secret) FROM NOTES)',
    expect: { rowsOrRefused: [["a-secret-101,a-secret-102"]] },
  },
  {
    id: "cte-reads-unruled-table",
    covers: "CTE named like a table with rules over a table without rules",
    sql: "SELECT (WITH messages AS (SELECT v AS body FROM main.plain) SELECT group_concat(body) FROM messages)",
    expect: { refused: true },
  },
  {
    id: "cte-reads-schema",
    covers: "CTE over sqlite_schema",
    sql: "SELECT count(*) FROM (WITH notes AS (SELECT name, sql FROM sqlite_schema) SELECT * FROM notes) WHERE name = 'plain'",
    expect: { refused: true },
  },
  {
    id: "cte-recursive",
    covers: "recursive CTE",
    sql: "SELECT id FROM notes WHERE id IN (WITH RECURSIVE c(n) AS (SELECT 100 UNION ALL SELECT n + 1 FROM c WHERE n < 7005) SELECT n FROM c) ORDER BY id",
    expect: { rows: [[101], [102]] },
  },
  {
    id: "cte-recursive-named-like-table",
    covers: "recursive CTE named like a table with rules",
    sql: "SELECT (WITH RECURSIVE messages(id, body) AS (SELECT id, body FROM main.messages UNION ALL SELECT id, body FROM messages WHERE 0) SELECT group_concat(body) FROM messages)",
    expect: { rowsOrRefused: [["a-msg-101,shared-msg"]] },
  },
  {
    id: "cte-shadows-membership",
    covers: "CTE shadowing the table a rule reads (membership)",
    sql: "SELECT * FROM (WITH members(room_id, user_id) AS (VALUES (7001, 'alice')) SELECT * FROM messages) ORDER BY id",
    expect: { rowsOrRefused: A_MESSAGES },
  },

  // --- compound selects
  { id: "union-main", covers: "UNION", sql: "SELECT id, secret FROM notes UNION SELECT id, secret FROM main.notes", expect: { refused: true } },
  {
    id: "union-all",
    covers: "UNION ALL",
    sql: "SELECT secret FROM notes UNION ALL SELECT body FROM messages ORDER BY 1",
    expect: { rows: [["a-msg-101"], ["a-secret-101"], ["a-secret-102"], ["shared-msg"]] },
  },
  { id: "except", covers: "EXCEPT", sql: "SELECT owner_id FROM notes EXCEPT SELECT 'alice'", expect: { rows: [] } },
  { id: "intersect", covers: "INTERSECT", sql: "SELECT 'bob' INTERSECT SELECT owner_id FROM notes", expect: { rows: [] } },

  // --- windows and aggregates (count leaks)
  { id: "window", covers: "window function", sql: "SELECT id, count(*) OVER (), row_number() OVER (ORDER BY id) FROM notes ORDER BY id", expect: { rows: [[101, 2, 1], [102, 2, 2]] } },
  { id: "aggregates", covers: "aggregate", sql: "SELECT count(*), max(id), min(id), sum(length(secret)) FROM notes", expect: { rows: [[2, 102, 101, 24]] } },
  { id: "count-membership", covers: "aggregate through the membership rule", sql: "SELECT count(*), max(id) FROM messages", expect: { rows: [[2, 300]] } },
  { id: "group-by-owner", covers: "aggregate, GROUP BY", sql: "SELECT owner_id, count(*) FROM notes GROUP BY owner_id", expect: { rows: [["alice", 2]] } },
  { id: "count-rooms", covers: "aggregate through the membership rule", sql: "SELECT count(*) FROM rooms", expect: { rows: [[2]] } },

  // --- json_each / json_tree over another table
  { id: "json-each", covers: "json_each", sql: "SELECT value FROM json_each((SELECT json_group_array(secret) FROM notes)) ORDER BY 1", expect: { rows: [["a-secret-101"], ["a-secret-102"]] } },
  { id: "json-each-main", covers: "json_each over main", sql: "SELECT count(*) FROM json_each((SELECT json_group_array(secret) FROM main.notes))", expect: { refused: true } },
  { id: "json-tree", covers: "json_tree", sql: "SELECT count(*) FROM json_tree((SELECT json_group_object(id, body) FROM messages)) WHERE type = 'text'", expect: { rows: [[2]] } },
  {
    id: "json-each-correlated",
    covers: "json_each, correlated",
    sql: "SELECT n.id, j.value FROM notes n, json_each(json_array(n.owner_id)) j ORDER BY 1",
    expect: { rows: [[101, "alice"], [102, "alice"]] },
  },

  // --- SQLite's and the service's own tables, pragma functions
  { id: "sqlite-master", covers: "sqlite_master", sql: "SELECT name FROM sqlite_master", expect: { refused: true } },
  { id: "sqlite-schema", covers: "sqlite_schema", sql: "SELECT name, sql FROM sqlite_schema", expect: { refused: true } },
  { id: "sqlite-temp-master", covers: "sqlite_temp_master", sql: "SELECT sql FROM sqlite_temp_master", expect: { refused: true } },
  { id: "temp-sqlite-schema", covers: "sqlite_temp_schema", sql: "SELECT count(*) FROM temp.sqlite_schema", expect: { refused: true } },
  { id: "pb-caller", covers: "the service's _pulsebase_* temp tables", sql: "UPDATE _pulsebase_caller SET user_id = 'bob'", expect: { refused: true } },
  { id: "pb-caller-quoted", covers: "the service's _pulsebase_* temp tables, quoted", sql: 'SELECT * FROM temp."_PULSEBASE_CALLER"', expect: { refused: true } },
  { id: "pb-written", covers: "the service's _pulsebase_* temp tables", sql: "SELECT n FROM temp._pulsebase_written", expect: { refused: true } },
  { id: "pragma-fn", covers: "pragma_* functions", sql: "SELECT name FROM pragma_table_info('notes')", expect: { refused: true } },
  { id: "pragma", covers: "PRAGMA", sql: "PRAGMA temp.table_info(notes)", expect: { refused: true } },

  // --- tables without rules, the operator's view and trigger, temp objects
  { id: "unruled-read", covers: "a table without rules", sql: "SELECT * FROM plain", expect: { refused: true } },
  { id: "unruled-read-audit", covers: "a table without rules (written by a trigger)", sql: "SELECT * FROM audit", expect: { refused: true } },
  { id: "unruled-write", covers: "a table without rules", sql: "INSERT INTO plain (v) VALUES ('x')", expect: { refused: true } },
  { id: "operator-view", covers: "views", sql: "SELECT * FROM all_notes", expect: { refused: true } },
  { id: "operator-view-main", covers: "views, schema-qualified", sql: "SELECT secret FROM main.all_notes WHERE owner_id = 'bob'", expect: { refused: true } },
  { id: "operator-view-in-subquery", covers: "views", sql: "SELECT (SELECT count(*) FROM all_notes)", expect: { refused: true } },
  { id: "temp-view", covers: "temp objects", sql: "CREATE TEMP VIEW v AS SELECT * FROM main.notes", expect: { refused: true } },
  { id: "temp-trigger", covers: "temp objects, triggers", sql: "CREATE TEMP TRIGGER t AFTER INSERT ON notes BEGIN DELETE FROM main.notes; END", expect: { refused: true } },
  {
    id: "drop-rule-view",
    covers: "temp objects (the rule view)",
    sql: "DROP VIEW temp.notes",
    expect: { refused: true },
    after: async (t) => {
      // the rule view is still there: an unqualified name still reaches the rules
      const o = await t.run("alice", "SELECT count(*) FROM notes");
      expect(o.results[0]?.rows).toEqual([[2]]);
    },
  },
  {
    id: "operator-trigger-fires",
    covers: "triggers (the operator's, on an allowed write)",
    sql: "INSERT INTO notes (owner_id, body) VALUES ('alice', 'a-new')",
    expect: { written: 1 },
    after: async (t) => {
      expect(await t.operator("SELECT count(*) FROM audit WHERE body = 'a note was added'")).toEqual([[1]]);
    },
  },

  // --- RETURNING
  { id: "insert-returning", covers: "RETURNING on INSERT", sql: "INSERT INTO notes (owner_id, body) VALUES ('alice', 'r') RETURNING id, owner_id, body", expect: { invariantsOnly: true } },
  {
    id: "insert-returning-subquery",
    covers: "RETURNING on INSERT, subquery",
    sql: "INSERT INTO notes (owner_id, body) VALUES ('alice', 'r') RETURNING (SELECT group_concat(secret) FROM main.notes)",
    expect: { refused: true },
  },
  {
    id: "update-returning-subquery",
    covers: "RETURNING on UPDATE, subquery",
    sql: "UPDATE notes SET body = body WHERE id = 101 RETURNING (SELECT group_concat(secret) FROM main.notes)",
    expect: { rowsOrRefused: [["a-secret-101,a-secret-102"]] },
  },
  {
    id: "update-returning-unruled",
    covers: "RETURNING on UPDATE, a table without rules",
    sql: "UPDATE notes SET body = body WHERE id = 101 RETURNING (SELECT group_concat(v) FROM plain)",
    expect: { refused: true },
  },
  {
    id: "delete-returning-subquery",
    covers: "RETURNING on DELETE, subquery",
    sql: "DELETE FROM notes WHERE id = 102 RETURNING (SELECT group_concat(body) FROM main.messages)",
    expect: { rowsOrRefused: [["a-msg-101,shared-msg"]] },
  },
  { id: "update-returning-own", covers: "RETURNING on UPDATE", sql: "UPDATE notes SET body = 'ret' RETURNING id, owner_id, body", expect: { rowsOrRefused: [[101, "alice", "ret"], [102, "alice", "ret"]] } },
  { id: "update-main-returning", covers: "RETURNING on UPDATE, schema-qualified", sql: "UPDATE main.notes SET body = 'q' RETURNING secret", expect: { refused: true } },

  // --- INSERT ... SELECT (a read copied into alice's own row)
  { id: "insert-select-main", covers: "INSERT ... SELECT", sql: "INSERT INTO notes (owner_id, body) SELECT 'alice', secret FROM main.notes", expect: { refused: true } },
  { id: "insert-select-own", covers: "INSERT ... SELECT", sql: "INSERT INTO notes (owner_id, body) SELECT 'alice', group_concat(secret) FROM notes", expect: { written: 1 } },
  {
    id: "insert-select-cte",
    covers: "INSERT ... SELECT, CTE named like a table with rules",
    sql: "INSERT INTO notes (owner_id, body) SELECT 'alice', (SELECT group_concat(secret) FROM (WITH notes AS (SELECT * FROM main.notes) SELECT * FROM notes))",
    expect: { writtenOrRefused: 1 },
  },

  // --- UPSERT, REPLACE
  { id: "upsert-bobs-row", covers: "UPSERT", sql: "INSERT INTO notes (id, owner_id, body) VALUES (7001, 'alice', 'x') ON CONFLICT (id) DO UPDATE SET body = excluded.body", expect: { invariantsOnly: true } },
  {
    id: "upsert-reads-existing",
    covers: "UPSERT reading the existing row",
    sql: "INSERT INTO notes (id, owner_id, body) VALUES (7001, 'alice', 'x') ON CONFLICT (id) DO UPDATE SET owner_id = 'alice', body = notes.secret",
    expect: { invariantsOnly: true },
  },
  {
    id: "upsert-where-guess",
    covers: "UPSERT, DO UPDATE ... WHERE on the existing row",
    sql: "INSERT INTO notes (id, owner_id, body) VALUES (101, 'alice', 'x') ON CONFLICT (id) DO UPDATE SET body = 'x' WHERE (SELECT count(*) FROM main.notes WHERE secret = ?) > 0",
    guesses: guess,
    expect: { invariantsOnly: true },
  },
  { id: "replace-bobs-row", covers: "INSERT OR REPLACE", sql: "INSERT OR REPLACE INTO notes (id, owner_id, body) VALUES (7001, 'alice', 'stolen')", expect: { refused: true } },
  { id: "replace-into", covers: "REPLACE", sql: "REPLACE INTO notes (id, owner_id, body) VALUES (7001, 'alice', 'stolen')", expect: { refused: true } },
  { id: "replace-into-main", covers: "REPLACE, schema-qualified", sql: "REPLACE INTO main.notes (id, owner_id, body) VALUES (7002, 'alice', 'stolen')", expect: { refused: true } },
  { id: "update-or-replace", covers: "UPDATE OR REPLACE", sql: "UPDATE OR REPLACE notes SET id = 7001 WHERE id = 101", expect: { refused: true }, after: aliceNote(101) },
  { id: "update-or-replace-main", covers: "UPDATE OR REPLACE, schema-qualified", sql: "UPDATE OR REPLACE main.notes SET id = 7002", expect: { refused: true } },
  { id: "replace-without-rowid", covers: "INSERT OR REPLACE, WITHOUT ROWID", sql: "INSERT OR REPLACE INTO handles (handle, owner_id, bio) VALUES ('ZQX-handle', 'alice', 'mine')", expect: { refused: true } },
  { id: "update-or-replace-without-rowid", covers: "UPDATE OR REPLACE, WITHOUT ROWID", sql: "UPDATE OR REPLACE handles SET handle = 'ZQX-handle' WHERE handle = 'a-handle'", expect: { refused: true } },
  { id: "insert-or-ignore", covers: "INSERT OR IGNORE (conflict with a hidden row)", sql: "INSERT OR IGNORE INTO notes (id, owner_id, body) VALUES (7001, 'alice', 'x')", expect: { invariantsOnly: true } },

  // --- WITHOUT ROWID
  { id: "without-rowid-read", covers: "WITHOUT ROWID", sql: "SELECT * FROM handles", expect: { rows: [["a-handle", "alice", "a-bio"]] } },
  { id: "without-rowid-update", covers: "WITHOUT ROWID, count", sql: "UPDATE handles SET bio = 'b'", expect: { written: 1 } },
  { id: "without-rowid-delete-bobs", covers: "WITHOUT ROWID, count", sql: "DELETE FROM handles WHERE handle = 'ZQX-handle'", expect: { written: 0 } },

  // --- plain writes and counts (changes / rows_written)
  { id: "update-all", covers: "count leak through rows_written", sql: "UPDATE notes SET body = 'pwned'", expect: { written: 2 } },
  { id: "update-main-all", covers: "count leak, schema-qualified", sql: "UPDATE main.notes SET body = 'pwned'", expect: { writtenOrRefused: 2 } },
  { id: "update-bobs", covers: "count leak through rows_written", sql: "UPDATE notes SET body = 'pwned' WHERE id = 7001", expect: { written: 0 } },
  { id: "delete-bobs", covers: "count leak through rows_written", sql: "DELETE FROM notes WHERE owner_id = 'bob'", expect: { written: 0 } },
  { id: "delete-main", covers: "DELETE, schema-qualified", sql: "DELETE FROM main.notes", expect: { refused: true } },
  { id: "delete-all", covers: "count leak through rows_written", sql: "DELETE FROM notes", expect: { written: 2 } },
  {
    id: "changes-after-update",
    covers: "changes() after a write that would touch bob's rows",
    batch: [{ sql: "UPDATE notes SET body = 'c'" }, { sql: "SELECT changes()" }],
    expect: { invariantsOnly: true },
    // (4 would count bob's rows; today it is 0, not the 2 rows_written says: changes() of a rule view)
    after: async (_t, o) => expect(o.results[1]?.rows[0]?.[0], "changes() counts only alice's rows").not.toBe(4),
  },
  {
    id: "update-from",
    covers: "UPDATE ... FROM on a table with rules",
    sql: "UPDATE notes SET body = x.s FROM (SELECT 'k' AS s) AS x WHERE notes.id = 101",
    expect: { writtenOrRefused: 1 },
    after: async (t, o) => {
      const row = await t.operator("SELECT * FROM notes WHERE id = 101");
      // updated as asked, or (refused) untouched: never other columns lost
      expect(row, JSON.stringify(o)).toEqual([o.refused ?? o.results[0]?.error ? A_NOTES[0] : [101, "alice", "k", "a-secret-101"]]);
    },
  },

  // --- a row moved out of the rules or to bob; column lists
  { id: "move-to-bob", covers: "moving a row to bob (owner change)", sql: "UPDATE notes SET owner_id = 'bob' WHERE id = 101", expect: { refused: true }, after: aliceNote(101) },
  { id: "escape-rule", covers: "changing one's own row so it escapes the rule", sql: "UPDATE notes SET owner_id = 'nobody' WHERE id = 101", expect: { refused: true }, after: aliceNote(101) },
  { id: "insert-as-bob", covers: "INSERT a row for bob", sql: "INSERT INTO notes (owner_id, body) VALUES ('bob', 'forged')", expect: { refused: true } },
  { id: "insert-main-as-bob", covers: "INSERT a row for bob, schema-qualified", sql: "INSERT INTO main.notes (owner_id, body) VALUES ('bob', 'forged')", expect: { refused: true } },
  {
    id: "column-list",
    covers: "update column list",
    sql: "UPDATE profiles SET display = 'A2', role = 'admin'",
    expect: { refused: true },
    after: async (t) => expect(await t.operator("SELECT * FROM profiles WHERE user_id = 'alice'")).toEqual([["alice", "Alice", "user"]]),
  },
  {
    id: "column-list-main",
    covers: "update column list, schema-qualified",
    sql: "UPDATE main.profiles SET role = 'admin'",
    expect: { refused: true },
    after: async (t) => expect(await t.operator("SELECT role FROM profiles WHERE user_id = 'alice'")).toEqual([["user"]]),
  },
  {
    id: "column-list-replace",
    covers: "update column list, REPLACE",
    sql: "INSERT OR REPLACE INTO profiles (user_id, display, role) VALUES ('alice', 'Alice', 'admin')",
    expect: { refused: true },
    after: async (t) => expect(await t.operator("SELECT role FROM profiles WHERE user_id = 'alice'")).toEqual([["user"]]),
  },

  // --- membership rule
  { id: "membership-read", covers: "membership rule", sql: "SELECT * FROM messages ORDER BY id", expect: { rows: A_MESSAGES } },
  { id: "membership-rooms", covers: "membership rule", sql: "SELECT * FROM rooms ORDER BY id", expect: { rows: A_ROOMS } },
  { id: "membership-bobs-room", covers: "membership rule", sql: "SELECT * FROM messages WHERE room_id = 7001", expect: { rows: [] } },
  { id: "membership-join", covers: "membership rule, JOIN", sql: "SELECT r.name, m.body FROM rooms r JOIN messages m ON m.room_id = r.id ORDER BY m.id", expect: { rows: [["a-room", "a-msg-101"], ["shared-room", "shared-msg"]] } },
  { id: "membership-self-join", covers: "membership rule", sql: "INSERT INTO members (room_id, user_id) VALUES (7001, 'alice')", expect: { refused: true } },
  { id: "membership-post", covers: "membership rule, INSERT check", sql: "INSERT INTO messages (room_id, author, body) VALUES (7001, 'alice', 'spam')", expect: { refused: true } },
  { id: "membership-move", covers: "membership rule, moving a row to bob's room", sql: "UPDATE messages SET room_id = 7001 WHERE id = 101", expect: { refused: true } },
  { id: "membership-edit-bobs", covers: "membership rule, a visible row of bob's", sql: "UPDATE messages SET body = 'edited' WHERE id = 300", expect: { written: 0 } },
  { id: "membership-delete-bobs-member", covers: "membership rule", sql: "DELETE FROM members WHERE room_id = 300", expect: { written: 1 } },

  // --- error oracles: a right guess and a wrong one must look alike
  { id: "oracle-where", covers: "error oracle in WHERE", sql: `SELECT count(*) FROM notes WHERE CASE WHEN secret = ? THEN ${MIN_INT} ELSE 1 END`, guesses: guess, expect: { rows: [[2]] } },
  { id: "oracle-order-by", covers: "error oracle in ORDER BY", sql: `SELECT id FROM notes ORDER BY CASE WHEN secret = ? THEN ${MIN_INT} ELSE 1 END, id`, guesses: guess, expect: { rows: [[101], [102]] } },
  { id: "oracle-group-by", covers: "error oracle in GROUP BY (malformed JSON)", sql: "SELECT count(*) FROM notes GROUP BY CASE WHEN secret = ? THEN json('{') ELSE 1 END", guesses: guess, expect: { rows: [[2]] } },
  {
    id: "oracle-having",
    covers: "error oracle in HAVING",
    sql: `SELECT owner_id FROM notes GROUP BY owner_id HAVING max(CASE WHEN secret = ? THEN ${MIN_INT} ELSE 0 END) >= 0`,
    guesses: guess,
    expect: { rows: [["alice"]] },
  },
  { id: "oracle-join-on", covers: "error oracle in a join condition", sql: "SELECT count(*) FROM notes a JOIN notes b ON CASE WHEN b.secret = ? THEN json('{') ELSE 1 END", guesses: guess, expect: { rows: [[4]] } },
  {
    id: "oracle-like-escape",
    covers: "error oracle: LIKE ... ESCAPE with two characters",
    sql: "SELECT count(*) FROM notes WHERE body LIKE 'zz' ESCAPE CASE WHEN secret = ? THEN 'ab' ELSE '!' END",
    guesses: guess,
    expect: { rows: [[0]] },
  },
  { id: "oracle-window", covers: "error oracle in a window", sql: `SELECT sum(CASE WHEN secret = ? THEN ${MIN_INT} ELSE 0 END) OVER () FROM notes`, guesses: guess, expect: { rows: [[0], [0]] } },
  {
    id: "oracle-membership",
    covers: "error oracle through the membership rule",
    sql: "SELECT count(*) FROM messages WHERE CASE WHEN body = ? THEN json('{') ELSE 1 END",
    guesses: [["ZQX-msg-7001"], [WRONG]],
    expect: { rows: [[2]] },
  },
  { id: "oracle-update-where", covers: "error oracle in an UPDATE's WHERE", sql: `UPDATE notes SET body = body WHERE CASE WHEN secret = ? THEN ${MIN_INT} ELSE 1 END`, guesses: guess, expect: { written: 2 } },
  { id: "oracle-update-set", covers: "error oracle in an UPDATE's SET", sql: "UPDATE notes SET body = CASE WHEN secret = ? THEN json('{') ELSE body END", guesses: guess, expect: { written: 2 } },
  { id: "oracle-update-main-set", covers: "error oracle in an UPDATE's SET, schema-qualified", sql: `UPDATE main.notes SET body = CASE WHEN ? = 'x' THEN ${MIN_INT} ELSE 'same' END`, guesses: guess, expect: { writtenOrRefused: 2 } },
  { id: "oracle-delete-where", covers: "error oracle in a DELETE's WHERE", sql: `DELETE FROM notes WHERE CASE WHEN secret = ? THEN ${MIN_INT} ELSE 0 END`, guesses: guess, expect: { written: 0 } },
  {
    id: "oracle-update-where-subquery",
    covers: "count oracle: an UPDATE's WHERE reading main",
    sql: "UPDATE notes SET body = body WHERE id = 101 AND EXISTS (SELECT 1 FROM main.notes WHERE secret = ?)",
    guesses: guess,
    expect: { invariantsOnly: true },
  },
  {
    id: "oracle-delete-where-unruled",
    covers: "count oracle: a DELETE's WHERE reading a table without rules",
    sql: "DELETE FROM notes WHERE id = 102 AND (SELECT count(*) FROM plain WHERE v = ?) = 0",
    guesses: [["ZQX-plain"], [WRONG]],
    expect: { invariantsOnly: true },
  },
  { id: "oracle-count-subquery", covers: "count leak through a subquery", sql: "SELECT (SELECT count(*) FROM notes WHERE secret = ?)", guesses: guess, expect: { rows: [[0]] } },

  // --- transactions: a later statement rolls back
  {
    id: "tx-rolled-back",
    covers: "writes in a transaction a later statement rolls back",
    batch: [{ sql: "UPDATE notes SET body = 'tx' WHERE id = 101" }, { sql: `SELECT ${MIN_INT}` }],
    transaction: true,
    expect: { invariantsOnly: true },
    after: aliceNote(101),
  },
  {
    id: "tx-refused-forgery",
    covers: "a transaction whose later write the rules refuse",
    batch: [{ sql: "INSERT INTO notes (owner_id, body) VALUES ('alice', 'tx-ins')" }, { sql: "INSERT INTO notes (owner_id, body) VALUES ('bob', 'forged')" }],
    transaction: true,
    expect: { invariantsOnly: true },
    after: async (t, o) => {
      expect(o.refused ?? o.results[1]?.error, "the forged row is refused").toBeTruthy();
      expect(await t.operator("SELECT count(*) FROM notes WHERE body = 'tx-ins'")).toEqual([[0]]);
    },
  },
  {
    id: "tx-left-open",
    covers: "BEGIN left open",
    sql: "BEGIN; UPDATE notes SET body = 'open-tx' WHERE id = 101",
    expect: { invariantsOnly: true },
    after: aliceNote(101),
  },
  {
    id: "tx-returning-then-rollback",
    covers: "a read in a transaction that is rolled back",
    batch: [{ sql: "UPDATE notes SET body = body WHERE id = 101 RETURNING (SELECT group_concat(secret) FROM main.notes)" }, { sql: `SELECT ${MIN_INT}` }],
    transaction: true,
    expect: { invariantsOnly: true },
  },

  // --- connection state: last_insert_rowid(), changes(), total_changes()
  {
    id: "last-insert-rowid",
    covers: "last_insert_rowid() after bob's insert",
    before: [{ as: "bob", sql: "INSERT INTO notes (id, owner_id, body) VALUES (7777, 'bob', 'ZQX-new')" }],
    sql: "SELECT last_insert_rowid()",
    expect: { invariantsOnly: true },
    after: async (_t, o) => expect(o.results[0]?.rows[0]?.[0], "bob's new row id").not.toBe(7777),
  },
  {
    id: "changes-after-bob",
    covers: "changes() after bob's write",
    before: [{ as: "bob", sql: "UPDATE notes SET body = body || '' WHERE 0" }, { as: "bob", sql: "INSERT INTO notes (owner_id, body) VALUES ('bob', 'ZQX-a'), ('bob', 'ZQX-b'), ('bob', 'ZQX-c')" }],
    sql: "SELECT changes()",
    expect: { invariantsOnly: true },
    after: async (_t, o) => expect(o.results[0]?.rows[0]?.[0], "bob's insert count").not.toBe(3),
  },

  // --- the point-read path (served in-process after its first run)
  { id: "point-bobs", covers: "point read", sql: "SELECT * FROM notes WHERE id = ?", params: [7001], twice: true, expect: { rows: [] } },
  { id: "point-own", covers: "point read", sql: "SELECT * FROM notes WHERE id = ?", params: [101], twice: true, expect: { rows: [A_NOTES[0]!] } },
  { id: "point-literal", covers: "point read", sql: "SELECT body, secret FROM notes WHERE id = 7002", twice: true, expect: { rows: [] } },
  { id: "point-quoted", covers: "point read, quoted", sql: 'SELECT * FROM "notes" WHERE "id" = 7001 LIMIT 1', twice: true, expect: { rows: [] } },
  { id: "point-without-rowid", covers: "point read, WITHOUT ROWID", sql: "SELECT * FROM handles WHERE handle = ?", params: ["ZQX-handle"], twice: true, expect: { rows: [] } },
  { id: "point-profiles", covers: "point read", sql: "SELECT * FROM profiles WHERE user_id = ?", params: ["bob"], twice: true, expect: { rows: [] } },
  { id: "point-membership", covers: "point read, membership rule", sql: "SELECT * FROM messages WHERE id = ?", params: [7001], twice: true, expect: { rows: [] } },
  {
    id: "point-after-bob",
    covers: "point read learned from bob's own read",
    before: [
      { as: "bob", sql: "SELECT body FROM notes WHERE id = ?", params: [7002] },
      { as: "bob", sql: "SELECT body FROM notes WHERE id = ?", params: [7002] },
    ],
    sql: "SELECT body FROM notes WHERE id = ?",
    params: [7002],
    twice: true,
    expect: { rows: [] },
  },
  { id: "point-main", covers: "point read, schema-qualified", sql: "SELECT * FROM main.notes WHERE id = ?", params: [7001], twice: true, expect: { refused: true } },
  // --- second red-team pass (issue 31): held
  // a CTE named like the table a rule reads by its plain name: the rule's view is compiled in its own scope
  { id: "rt2-cte-shadows-rule-table", covers: "CTE shadowing the membership table a rule reads", sql: "SELECT * FROM (WITH members AS (SELECT 7001 AS room_id, 'alice' AS user_id) SELECT id FROM messages) ORDER BY id", expect: { rows: [[101], [300]] } },
  { id: "rt2-cte-shadows-rule-table-scalar", covers: "CTE shadowing the membership table, in a scalar subquery", sql: "SELECT (WITH members(room_id, user_id) AS (VALUES (7001, 'alice')) SELECT count(*) FROM messages)", expect: { rows: [[2]] } },
  { id: "rt2-named-window", covers: "named window (WINDOW w AS)", sql: "SELECT id, count(*) OVER w, first_value(body) OVER w FROM notes WINDOW w AS (ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) ORDER BY id", expect: { rows: [[101, 2, "a-body-101"], [102, 2, "a-body-101"]] } },
  { id: "rt2-window-partition-count", covers: "window partition as a count leak", sql: "SELECT DISTINCT count(*) OVER (PARTITION BY owner_id) FROM notes", expect: { rows: [[2]] } },
  // an UPSERT without a conflict target reads nothing of the row: its update still goes through the update rule
  { id: "rt2-upsert-no-target", covers: "INSERT … ON CONFLICT DO UPDATE without a target", sql: "INSERT INTO notes (id, owner_id, body) VALUES (7001, 'alice', 'x') ON CONFLICT DO UPDATE SET body = 'pwned'", expect: { writtenOrRefused: 0 } },
  { id: "rt2-upsert-no-target-main", covers: "UPSERT without a target, schema-qualified", sql: "INSERT INTO main.notes (id, owner_id, body) VALUES (7002, 'alice', 'x') ON CONFLICT DO UPDATE SET body = 'pwned'", expect: { writtenOrRefused: 0 } },
  { id: "rt2-update-from-hidden", covers: "UPDATE … FROM a row alice may not see", sql: "UPDATE notes SET body = m.body FROM messages AS m WHERE m.id = 7001 AND notes.id = 101", expect: { written: 0 }, after: aliceNote(101) },
  { id: "rt2-update-from-main", covers: "UPDATE … FROM, schema-qualified source", sql: "UPDATE notes SET body = m.body FROM main.messages AS m WHERE m.id = 7001", expect: { refused: true } },
  {
    // messages' update rule (author) admits alice's message in a room she left; its update check (membership) refuses it
    id: "rt2-update-main-after-leaving",
    covers: "UPDATE main.T without reads, on a row the select rule hides but the update rule admits",
    before: [{ sql: "DELETE FROM members WHERE room_id = 101" }],
    sql: "UPDATE main.messages SET body = 'edited after leaving'",
    expect: { writtenOrRefused: 0 },
    after: async (t) => expect(await t.operator("SELECT body FROM messages WHERE id = 101")).toEqual([["a-msg-101"]]),
  },
  { id: "rt2-update-view-pk-null", covers: "update forwarding by a NULL key", sql: "UPDATE handles SET handle = NULL WHERE handle = 'a-handle'", expect: { writtenOrRefused: 0 } },
  { id: "rt2-json-each-main", covers: "table-valued function, schema-qualified", sql: "SELECT * FROM main.json_each('[1]')", expect: { rowsOrRefused: [[0, 1, "integer", 1, 1, null, "$[0]", "$"]] } },
  { id: "rt2-delete-returning-changes", covers: "changes() in RETURNING", sql: "DELETE FROM notes WHERE id = 7001 RETURNING changes()", expect: { rowsOrRefused: [] } },
  { id: "rt2-point-true-rule-sibling", covers: "point read of a table without rules, by a statement learned elsewhere", sql: "SELECT * FROM plain WHERE id = ?", params: [1], twice: true, expect: { refused: true } },
];

// ---------------------------------------------------------------- checking

function text(a: Attempt): string {
  return JSON.stringify([a.sql, a.params, a.batch, a.guesses]);
}

/** Every value of bob's found in the outcome that the attempt did not write itself. */
export function leaks(a: Attempt, o: Outcome): string[] {
  const own = text(a);
  const found: string[] = [];
  const look = (v: unknown) => {
    if (typeof v === "string") {
      for (const b of BOB_VALUES) if (v.includes(b) && !own.includes(b)) found.push(`${b} in ${JSON.stringify(v)}`);
    } else if ((typeof v === "number" || typeof v === "bigint") && BOB_IDS.includes(Number(v)) && !own.includes(String(v))) {
      found.push(`bob's id ${v}`);
    }
  };
  look(o.refused);
  for (const r of o.results) {
    look(r.error);
    for (const row of r.rows) for (const v of row) look(v);
  }
  return found;
}

async function snapshot(t: Target, queries: string[]): Promise<unknown[][][]> {
  const out: unknown[][][] = [];
  for (const q of queries) out.push(await t.operator(q));
  return out;
}

async function once(t: Target, a: Attempt, params: unknown): Promise<Outcome> {
  const who = a.as ?? "alice";
  if (a.batch) return t.batch(who, a.batch.map((s) => ({ sql: s.sql, params: s.params })), a.transaction ?? false);
  return t.run(who, a.sql!, params);
}

const errorOf = (o: Outcome): string | undefined => o.refused ?? o.results.find((r) => r.error !== undefined)?.error;
const last = (o: Outcome): Result | undefined => o.results[o.results.length - 1];

function checkExpect(a: Attempt, o: Outcome): void {
  const e = a.expect;
  const err = errorOf(o);
  const label = `${a.id}: ${JSON.stringify(o)}`;
  if (e.rows) {
    expect(err, label).toBeUndefined();
    expect(last(o)?.rows, label).toEqual(e.rows);
  }
  if (e.refused) {
    expect(err, `${a.id} should be refused: ${JSON.stringify(o)}`).toBeDefined();
    if (e.refused instanceof RegExp) expect(err).toMatch(e.refused);
  }
  if (e.rowsOrRefused && err === undefined) expect(last(o)?.rows, label).toEqual(e.rowsOrRefused);
  if (e.written !== undefined) {
    expect(err, label).toBeUndefined();
    expect(last(o)?.rowsWritten, label).toBe(e.written);
  }
  if (e.writtenOrRefused !== undefined && err === undefined) expect(last(o)?.rowsWritten, label).toBe(e.writtenOrRefused);
}

/** What alice can tell from an answer: its rows, counts, and whether (not how) it failed. */
function observable(o: Outcome): unknown {
  return { refused: o.refused !== undefined, results: o.results.map((r) => ({ rows: r.rows, w: r.rowsWritten, failed: r.error !== undefined })) };
}

/** Runs one attempt from the seed and checks everything it must leave true. */
export async function runAttempt(t: Target, a: Attempt): Promise<void> {
  const paramSets = a.guesses ?? [a.params];
  const seen: Outcome[] = [];
  for (const params of paramSets) {
    await t.reset();
    for (const s of a.before ?? []) await t.run(s.as ?? "alice", s.sql, s.params);
    // (bob's own moves may change his data: what alice does may not)
    const bobAfterMoves = await snapshot(t, BOB_DATA);
    const runs = a.twice ? 2 : 1;
    for (let i = 0; i < runs; i++) {
      const o = await once(t, a, params);
      const where = `${a.id}${a.guesses ? ` (guess ${JSON.stringify(params)})` : ""}${a.twice ? ` (run ${i + 1})` : ""}`;
      expect(leaks(a, o), `${where} returned bob's data: ${JSON.stringify(o)}`).toEqual([]);
      checkExpect({ ...a, id: where }, o);
      if (i === 0) seen.push(o);
      if (a.after) await a.after(t, o);
    }
    expect(await snapshot(t, BOB_DATA), `${a.id}: bob's data changed`).toEqual(bobAfterMoves);
    const alice = JSON.stringify(await snapshot(t, ALICE_DATA));
    const own = text(a);
    for (const b of BOB_VALUES) if (!own.includes(b)) expect(alice.includes(b), `${a.id}: alice's rows now hold ${b}`).toBe(false);
  }
  if (a.guesses) expect(observable(seen[0]!), `${a.id}: a right guess and a wrong one answer differently`).toEqual(observable(seen[1]!));
}
