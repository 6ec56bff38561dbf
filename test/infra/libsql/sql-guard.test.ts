// The statement guard, splitter and parameter binding, without a database.
import { describe, expect, it } from "vitest";
import { checkStatement, findBlockedKeyword } from "../../../src/infra/libsql/sql-guard.js";
import { bindParams, paramSlots, type ParamSlots } from "../../../src/infra/libsql/sql-params.js";
import { splitStatements } from "../../../src/infra/libsql/sql-splitter.js";

/** Guard verdict for every statement of a sql string: true when all pass. */
function allowed(sql: string): boolean {
  const parts = splitStatements(sql);
  return parts.length > 0 && parts.every((p) => checkStatement(p.sql, p.tokens).ok);
}

describe("allowed prefixes", () => {
  const ok = [
    "SELECT 1",
    "select * from t",
    "SeLeCt 1",
    "INSERT INTO t (a) VALUES (1)",
    "insert or replace into t (a) values (1)",
    "UPDATE t SET a = 1",
    "DELETE FROM t",
    "CREATE TABLE t (a)",
    "create table if not exists t (a)",
    "CREATE INDEX i ON t (a)",
    "CREATE UNIQUE INDEX i ON t (a)",
    "CREATE\tUNIQUE\n INDEX i ON t (a)",
    "ALTER TABLE t ADD COLUMN b",
    "DROP TABLE t",
    "DROP INDEX i",
    "BEGIN",
    "BEGIN IMMEDIATE",
    "COMMIT",
    "ROLLBACK",
    "  \n\t SELECT 1",
    "SELECT(1)",
    "SELECT released FROM t",
    "SELECT x'50524147' AS hex_of_pragma",
  ];
  it.each(ok)("accepts %j", (sql) => expect(allowed(sql)).toBe(true));

  const refused = [
    "WITH x AS (SELECT 1) SELECT * FROM x",
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c",
    "EXPLAIN SELECT 1",
    "EXPLAIN QUERY PLAN SELECT 1",
    "REPLACE INTO t VALUES (1)",
    "CREATE VIEW v AS SELECT 1",
    "CREATE TRIGGER tr AFTER INSERT ON t BEGIN DELETE FROM t; END",
    "CREATE TEMP TABLE x (a)",
    "CREATE TEMPORARY TABLE x (a)",
    "CREATE VIRTUAL TABLE x USING fts5(a)",
    "CREATE/**/TABLE t (a)",
    "/* c */ SELECT 1",
    "-- c\nSELECT 1",
    "END",
    "ANALYZE",
    "REINDEX",
    "DROP VIEW v",
    "DROP TRIGGER tr",
    "\"SELECT\" 1",
    "SELECTx 1",
    "\u00a0SELECT 1",
    "\ufeffSELECT 1",
    "ＳＥＬＥＣＴ 1",
    "(SELECT 1)",
    "VALUES (1)",
  ];
  it.each(refused)("refuses %j", (sql) => expect(allowed(sql)).toBe(false));
});

describe("blocked keywords", () => {
  const keywords = ["ATTACH", "DETACH", "PRAGMA", "VACUUM", "LOAD_EXTENSION", "SAVEPOINT", "RELEASE"];
  for (const kw of keywords) {
    it(`refuses ${kw} anywhere, any case`, () => {
      expect(allowed(`SELECT 1 AS ${kw}`)).toBe(false);
      expect(allowed(`SELECT 1 AS ${kw.toLowerCase()}`)).toBe(false);
      expect(allowed(`SELECT '${kw}'`)).toBe(false);
      expect(allowed(`SELECT 1 /* ${kw} */`)).toBe(false);
      expect(allowed(`SELECT 1 -- ${kw}`)).toBe(false);
      expect(allowed(`SELECT "${kw}" FROM t`)).toBe(false);
      expect(findBlockedKeyword(`x ${kw} y`)).toBe(kw);
      expect(findBlockedKeyword(`x ${kw}x y`)).toBeUndefined();
    });
  }

  const bypasses = [
    "PRAGMA table_info(t)",
    "pragma journal_mode = DELETE",
    "SELECT 1; PRAGMA foo",
    "SELECT 1;PRAGMA foo",
    "SELECT * FROM t/*x*/PRAGMA",
    "SELECT * FROM t WHERE a = 1;\nattach 'x' AS y",
    "SELECT * FROM pragma_table_info('t')",
    "SELECT * FROM PRAGMA_database_list",
    "SELECT * FROM \"pragma_table_info\"('t')",
    "SELECT * FROM [pragma_database_list]",
    "SELECT * FROM `pragma_database_list`",
    "SELECT * FROM main.pragma_table_list",
    "SELECT load_extension('x')",
    "SELECT LOAD_EXTENSION ('x')",
    "SELECT load_extension/**/('x')",
    "SELECT Load_Extension('x', 'entry')",
    "ATTACH DATABASE 'x' AS y",
    "ATTACH 'file:x?mode=memory' AS y",
    "DETACH y",
    "VACUUM",
    "VACUUM INTO '/tmp/x'",
    "SAVEPOINT a",
    "RELEASE a",
    "RELEASE SAVEPOINT a",
    "ROLLBACK TO SAVEPOINT a",
    "BEGIN; PRAGMA writable_schema = 1",
    "SELECT 'pragma'",
    "SELECT 1 /* ; PRAGMA */",
    "SELECT ';' ; PRAGMA x",
    "SELECT 'abc; PRAGMA x",
    "SELECT \"a;b\" FROM t; VACUUM",
    "SELECT * FROM t WHERE a = $pragma",
    "SELECT * FROM t WHERE a = :attach",
    "SELECT 1 FROM t WHERE x = 'ＰＲＡＧＭＡ'",
    "SELECT * FROM ｐｒａｇｍａ_table_info('t')",
    "SELECT 'PRA\u200bGMA'",
    "SELECT 'PRA\u00adGMA'",
    "SELECT 'P\u200dRAGMA'",
    "SELECT 'PRA\u034fGMA'", // combining grapheme joiner
    "SELECT 'VAC\u2060UUM'", // word joiner
    "SELECT 'PR\u0410GMA'", // Cyrillic A
    "SELECT '\u0440ragma'", // Cyrillic er
    "SELECT 1 FROM t WHERE a = 'ᴾᴿᴬᴳᴹᴬ'",
    "SELECT 'VACUUM' || 'x'",
    "SELECT 'LOAD_EXTENSİON'", // dotted capital I
    "SELECT 'ſavepoint'", // long s
    "INSERT INTO t VALUES ('x'); DETACH DATABASE y",
    "UPDATE t SET a = 1 WHERE b IN (SELECT name FROM pragma_function_list)",
    "CREATE TABLE t AS SELECT * FROM pragma_compile_options",
    "SELECT 1 AS PrAgMa",
    "SELECT 1\nrelease",
    "SELECT 1 AS\tATTACH",
    // the build's fileio functions reach the server's files
    "SELECT readfile('/etc/passwd')",
    "SELECT WriteFile('/tmp/x', 'y')",
    "SELECT * FROM fsdir('/')",
    "SELECT \"readfile\"('/etc/passwd')",
    "SELECT rеadfile('/etc/passwd')", // Cyrillic e
  ];
  it.each(bypasses)("refuses bypass attempt %j", (sql) => expect(allowed(sql)).toBe(false));
});

describe("splitting", () => {
  const texts = (sql: string) => splitStatements(sql).map((s) => s.sql.trim());

  it("splits at top-level semicolons and drops empty statements", () => {
    expect(texts("SELECT 1; SELECT 2;")).toEqual(["SELECT 1", "SELECT 2"]);
    expect(texts("SELECT 1;;; ;\n")).toEqual(["SELECT 1"]);
    expect(texts("SELECT 1; -- done\n /* end */ ")).toEqual(["SELECT 1"]);
    expect(texts(";")).toEqual([]);
    expect(texts("  -- only a comment")).toEqual([]);
  });

  it("keeps semicolons inside literals, quoted identifiers, blobs and comments", () => {
    expect(texts("SELECT 'a;b', 'it''s;'; SELECT 2")).toEqual(["SELECT 'a;b', 'it''s;'", "SELECT 2"]);
    expect(texts('SELECT "a;b" FROM [c;d] JOIN `e;f`; SELECT 2')).toEqual(['SELECT "a;b" FROM [c;d] JOIN `e;f`', "SELECT 2"]);
    expect(texts("SELECT x'3b3b'; SELECT 2")).toEqual(["SELECT x'3b3b'", "SELECT 2"]);
    expect(texts("SELECT 1 /* ; */ + 1 -- ;\n; SELECT 2")).toEqual(["SELECT 1 /* ; */ + 1 -- ;", "SELECT 2"]);
    expect(texts('SELECT "a""b;"; SELECT 2')).toEqual(['SELECT "a""b;"', "SELECT 2"]);
  });

  it("a statement after a comment begins with that comment (and is refused)", () => {
    expect(allowed("SELECT 1; -- note\nSELECT 2")).toBe(false);
    expect(allowed("SELECT 1; SELECT 2 -- note")).toBe(true);
  });
});

describe("parameters", () => {
  const slots = (sql: string) => splitStatements(sql).map((s) => paramSlots(s.tokens) as ParamSlots);

  it("numbers parameters the way SQLite does", () => {
    const [s] = slots("SELECT ?, ?5, ?, :a, @b, :a, $c");
    expect(s!.count).toBe(9);
    expect([...s!.names.entries()]).toEqual([[7, ":a"], [8, "@b"], [9, "$c"]]);
    expect(slots("SELECT '?', \"?\", :x -- ?\n")[0]!.count).toBe(1);
  });

  it("binds arrays positionally, consumed statement by statement", () => {
    expect(bindParams(slots("SELECT ?, ?"), [1, "a"])).toEqual([[1, "a"]]);
    expect(bindParams(slots("SELECT ?2, ?1"), [1, 2])).toEqual([[1, 2]]);
    expect(bindParams(slots("SELECT ?; SELECT 1; SELECT ?, ?"), [1, 2, 3])).toEqual([[1], [], [2, 3]]);
    expect(bindParams(slots("SELECT :a, :b"), [1, 2])).toEqual([[1, 2]]);
    expect(bindParams(slots("SELECT ?, ?"), [true, false])).toEqual([[1, 0]]);
  });

  it("binds objects by name with or without the prefix", () => {
    expect(bindParams(slots("SELECT :a, @b, $c"), { a: 1, "@b": 2, $c: 3 })).toEqual([[1, 2, 3]]);
    expect(bindParams(slots("SELECT :a; SELECT :a, :b"), { a: 1, b: 2 })).toEqual([[1], [1, 2]]);
  });

  it("reports mismatches", () => {
    expect(bindParams(slots("SELECT ?, ?"), [1])).toMatch(/1 value\(s\) given/);
    expect(bindParams(slots("SELECT ?"), [1, 2])).toMatch(/2 value\(s\) given/);
    expect(bindParams(slots("SELECT ?"), undefined)).toMatch(/no params/);
    expect(bindParams(slots("SELECT :a"), { b: 1 })).toMatch(/no value for parameter :a/);
    expect(bindParams(slots("SELECT :a"), { a: 1, b: 2 })).toMatch(/no statement uses the parameter\(s\) b/);
    expect(bindParams(slots("SELECT ?"), { a: 1 })).toMatch(/pass params as an array/);
    expect(bindParams(slots(":a"), { ":b": 1, a: 2 })).toMatch(/b/);
  });
});
