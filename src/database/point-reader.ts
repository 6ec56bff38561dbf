// Point reads served in the service process, without the hop to an engine
// process. Embedded databases normally run in engine processes because a
// runaway statement can only be stopped by killing its process
// (docs/database.md). A point read cannot run away: it is recognised from its
// text (`SELECT <columns> FROM <table> WHERE <col> = <value> [AND ...]
// [LIMIT n]`: no expressions, functions, joins or subqueries) and confirmed
// by SQLite's own plan (one SEARCH on a real table whose index or primary key
// uses every condition), so it touches only the rows it returns, at most
// maxRows + 1. Everything else, and any point read that fails here, goes to
// the engine processes unchanged.
//
// The reading connection is Node's built-in SQLite (node:sqlite): the same
// file format, WAL and locking as the libsql engines, and a thinner binding:
// a PK read costs about half the CPU of the same call through libsql, a
// quarter less for the whole request. Every connection this process opens on
// a database file (reads and plan checks) goes through this one library:
// SQLite tracks POSIX locks per process inside the library, and two copies
// of it on one file in one process could each think the other's locks are
// theirs (https://sqlite.org/howtocorrupt.html, 2.2.1). The engines are
// other processes; provisioning uses node:sqlite as well. A file
// this library cannot read (a libSQL-only schema feature) is simply not
// served here.
//
// The connection is query-only and has no busy wait (WAL readers do not wait
// for writers). A plan confirmed for one schema is never used on another:
// the statement that runs is the read with its LIMIT rewritten to
// `LIMIT CASE WHEN (SELECT schema_version FROM pragma_schema_version) = <V>
// THEN <n> ELSE 0 END`, V being the schema the plan was confirmed on. SQLite
// evaluates the LIMIT once, before the loop, in the statement's own
// snapshot; on another schema it is 0 and the loop never runs (so even a
// plan that became a full scan reads nothing). An empty result is then told
// apart from "another schema" by reading the schema version once more
// (PRAGMA is refused to clients, so the version only moves forward). One
// call into the driver per read: each costs 3-15 us once other work has
// cooled the caches, and BEGIN, PRAGMA and COMMIT around the read cost a
// quarter of a point read's server CPU.
import { existsSync } from "node:fs";
import { DatabaseSync, type SQLInputValue, type StatementSync } from "node:sqlite";
import type { EngineResult, EngineStatement, EngineValue } from "./engine-protocol.js";
import { bindable, encode, LimitError, readRows, sizeOf, tooManyBytes, type ReadBudget } from "./engine-values.js";
import { paramSlots } from "./sql-params.js";
import type { Token } from "./sql-tokenizer.js";

type Db = DatabaseSync;
type Stmt = StatementSync;

export interface PointShape {
  /** The table named after FROM, unquoted. */
  table: string;
  /** How many `col = value` conditions the WHERE clause has. */
  conditions: number;
  /** The statement up to its LIMIT, rebuilt from its tokens (no comments). */
  head: string;
  /** The LIMIT value as written (a number, a string or a parameter), if any. */
  limit: string | undefined;
}

/** The statement that runs: the read, reading nothing unless the schema is `version`. */
export function guardedRead(shape: PointShape, version: number): string {
  return `${shape.head} LIMIT CASE WHEN (SELECT schema_version FROM pragma_schema_version) = ${version} THEN ${shape.limit ?? "-1"} ELSE 0 END`;
}

/**
 * The table and conditions when the statement has the shape of a point read,
 * else undefined. Only the shape: SQLite's plan decides.
 */
export function pointReadShape(tokens: readonly Token[]): PointShape | undefined {
  const t = tokens.filter((x) => x.kind !== "space" && x.kind !== "comment");
  let i = 0;
  const word = (w: string) => t[i]?.kind === "word" && t[i]!.text.toUpperCase() === w && (i++, true);
  const punct = (p: string) => t[i]?.kind === "punct" && t[i]!.text === p && (i++, true);
  const ident = () => (t[i]?.kind === "word" && !KEYWORDS.has(t[i]!.text.toUpperCase())) || t[i]?.kind === "qident" ? (i++, true) : false;
  const column = () => ident() && (!punct(".") || ident());
  const value = () => (t[i]?.kind === "param" || t[i]?.kind === "number" || t[i]?.kind === "string" ? (i++, true) : false);
  if (!word("SELECT")) return undefined;
  if (!punct("*")) {
    do if (!column()) return undefined;
    while (punct(","));
  }
  if (!word("FROM")) return undefined;
  const from = t[i];
  if (!from || !ident() || !word("WHERE")) return undefined;
  const table = from.kind === "qident" ? from.text.slice(1, -1) : from.text;
  let conditions = 0;
  do {
    if (!column() || !punct("=") || !value()) return undefined;
    conditions++;
  } while (word("AND"));
  const end = i;
  if (word("LIMIT") && !value()) return undefined;
  if (i !== t.length) return undefined;
  // tokens joined by spaces: the same statement (a string or quoted name is
  // one token), and a trailing comment cannot swallow the LIMIT added to it.
  // Named parameters become ?NNN with SQLite's own numbering (the values
  // arrive as a positional list, and node:sqlite binds a list to nameless
  // parameters only).
  const text = numberedParams(t);
  const head = text.slice(0, end).join(" ");
  return { table, conditions, head, limit: end < t.length ? text[t.length - 1] : undefined };
}

/** Token texts, named parameters (:a, @a, $a) rewritten to the ?NNN SQLite gives them. */
function numberedParams(tokens: readonly Token[]): string[] {
  const slots = paramSlots(tokens);
  const byName = new Map(typeof slots === "string" ? [] : [...slots.names].map(([n, name]) => [name, n]));
  return tokens.map((x) => {
    const n = x.kind === "param" ? byName.get(x.text) : undefined;
    return n === undefined ? x.text : `?${n}`;
  });
}

// Words that are never a plain column or table name here.
const KEYWORDS = new Set(["SELECT", "FROM", "WHERE", "AND", "OR", "NOT", "LIMIT", "DISTINCT", "ALL", "AS", "JOIN", "ON", "USING"]);

interface Verdict {
  /** The guarded read compiled on the reading connection; null when it is not a point read. */
  st: Stmt | null;
  columns: string[];
  /** A rowid lookup: at most one row. */
  single: boolean;
  /** PRAGMA schema_version the verdict was made on. */
  version: number;
}

interface Conn {
  db: Db;
  schemaVersion: Stmt;
  reads: Map<string, Verdict>;
}

const MAX_CONNS = 64;
const MAX_READS = 256;
// One SEARCH on a table through the integer primary key, the primary key or an index.
const SEARCH = /^SEARCH (\S+) USING (?:INTEGER PRIMARY KEY|PRIMARY KEY|(?:COVERING )?INDEX \S+) \((.*)\)$/;

export class PointReader {
  private readonly conns = new Map<string, Conn>();

  /**
   * Runs the statement here when it is a point read on this database, else
   * returns undefined (the caller sends it to an engine process).
   */
  tryRun(path: string, s: EngineStatement, shape: PointShape, maxRows: number, maxBytes: number): EngineResult | undefined {
    const c = this.open(path);
    if (!c) return undefined;
    const budget: ReadBudget = { bytes: maxBytes };
    try {
      let v = c.reads.get(s.sql);
      // "not a point read" holds until the schema changes (an index may be added)
      if (v && !v.st && v.version !== schemaVersion(c)) {
        c.reads.delete(s.sql);
        v = undefined;
      }
      if (!v) {
        const k = classify(path, s, shape);
        const st = k.point ? compile(c.db, guardedRead(shape, k.version)) : null;
        v = { st, columns: st ? st.columns().map((x) => x.name) : [], single: k.single, version: k.version };
        if (c.reads.size >= MAX_READS) c.reads.delete(c.reads.keys().next().value as string);
        c.reads.set(s.sql, v);
      }
      if (!v.st) return undefined;
      let rows: EngineValue[][];
      try {
        const args = bindable(s.args) as SQLInputValue[];
        rows = v.single ? readOne(v.st, args, maxBytes) : readRows(v.st.iterate(...args), maxRows, maxBytes, budget);
      } catch (e) {
        if (!(e instanceof LimitError)) throw e;
        return { columns: [], rows: [], rowsRead: 0, rowsWritten: 0, error: e.message };
      }
      // nothing read: no such row, or the schema is no longer the verdict's
      if (rows.length === 0 && schemaVersion(c) !== v.version) {
        c.reads.delete(s.sql);
        return undefined;
      }
      return { columns: v.columns, rows, rowsRead: rows.length, rowsWritten: 0 };
    } catch {
      // anything unexpected (a bad bound value, a table dropped, busy, a
      // file replaced underneath): the engine path runs it and reports its
      // own error. The verdict stays: a request that fails on purpose must
      // not make every request re-check the plan; a changed schema is caught
      // by the guarded LIMIT anyway.
      return undefined;
    } finally {
      if (budget.abandoned) this.close(path);
    }
  }

  private open(path: string): Conn | undefined {
    const hit = this.conns.get(path);
    if (hit) return hit;
    const db = openQueryOnly(path);
    if (!db) return undefined;
    try {
      const schemaVersion = db.prepare("PRAGMA schema_version");
      schemaVersion.setReturnArrays(true);
      const c: Conn = { db, schemaVersion, reads: new Map() };
      if (this.conns.size >= MAX_CONNS) this.close(this.conns.keys().next().value as string);
      this.conns.set(path, c);
      return c;
    } catch {
      closeQuietly(db);
      return undefined;
    }
  }

  /** Closes the connection to a file (before the file is removed). */
  close(path: string): void {
    const c = this.conns.get(path);
    if (!c) return;
    this.conns.delete(path);
    closeQuietly(c.db);
  }

  closeAll(): void {
    for (const path of [...this.conns.keys()]) this.close(path);
  }
}

function openQueryOnly(path: string): Db | undefined {
  // The file is created by provisioning, never here (SQLite would create it).
  if (!existsSync(path)) return undefined;
  let db: Db | undefined;
  try {
    // double-quoted strings as the libsql engines take them (SQLite's default)
    db = new DatabaseSync(path, { enableDoubleQuotedStringLiterals: true, timeout: 0 });
    db.exec("PRAGMA query_only = ON");
    db.exec("PRAGMA trusted_schema = OFF");
    db.exec("PRAGMA busy_timeout = 0");
    return db;
  } catch {
    if (db) closeQuietly(db);
    return undefined;
  }
}

function closeQuietly(db: Db): void {
  try {
    db.close();
  } catch {
    // already closed
  }
}

function schemaVersion(c: Conn): number {
  return Number((c.schemaVersion.get() as unknown as unknown[])[0]);
}

/** A rowid lookup reads one row at most: get() steps once and resets. */
function readOne(st: Stmt, args: SQLInputValue[], maxBytes: number): EngineValue[][] {
  const raw = st.get(...args) as unknown as unknown[] | undefined;
  if (!raw) return [];
  let bytes = 0;
  for (const x of raw) bytes += sizeOf(x);
  if (bytes > maxBytes) throw tooManyBytes(maxBytes);
  return [raw.map(encode)];
}

function compile(db: Db, sql: string): Stmt | null {
  const st = db.prepare(sql);
  if (st.columns().length === 0) return null; // not a statement that returns rows
  st.setReturnArrays(true);
  st.setReadBigInts(true);
  return st;
}

/**
 * Decides from SQLite's plan whether the statement is a point read. Runs on
 * a connection of its own, closed afterwards: on the reading connection,
 * one-off statements (EXPLAIN after a read) were seen to keep the read
 * snapshot after COMMIT, so later reads missed newer commits.
 */
function classify(path: string, s: EngineStatement, shape: PointShape): { point: boolean; single: boolean; version: number } {
  const db = openQueryOnly(path);
  if (!db) return { point: false, single: false, version: -1 };
  const all = (sql: string, args: unknown[]) => {
    const st = db.prepare(sql);
    st.setReturnArrays(true);
    return st.all(...(args as SQLInputValue[])) as unknown as unknown[][];
  };
  // every check reads one snapshot: the version, the plan and the table's
  // definition belong to the same schema
  let open = false;
  // a failure after the version is known keeps that version: the "not a
  // point read" verdict then holds until the schema changes, instead of
  // being made again on every request
  let version = -1;
  try {
    db.exec("BEGIN");
    open = true;
    version = Number(all("PRAGMA schema_version", [])[0]![0]);
    const no = { point: false, single: false, version };
    // Statistics (after ANALYZE) can make the plan depend on the bound values
    // (stat4) or differ between connections (stat1): none of that here.
    if (all("SELECT 1 FROM main.sqlite_schema WHERE name IN ('sqlite_stat1', 'sqlite_stat4')", []).length > 0) return no;
    let plan: unknown[][];
    try {
      plan = all(`EXPLAIN QUERY PLAN ${shape.head}${shape.limit === undefined ? "" : ` LIMIT ${shape.limit}`}`, bindable(s.args));
    } catch {
      return no; // not compilable: the engine reports the error
    }
    if (plan.length !== 1) return no;
    const m = SEARCH.exec(String(plan[0]![3]));
    // the table read is the one named (a view over it may compute columns),
    // and every condition is answered by the key or index
    if (!m || m[1]!.toLowerCase() !== shape.table.toLowerCase() || m[2]!.split(" AND ").length !== shape.conditions) return no;
    const def = all("SELECT type, sql FROM main.sqlite_schema WHERE name = ? COLLATE NOCASE", [shape.table])[0];
    if (!def || def[0] !== "table" || /^\s*CREATE\s+VIRTUAL\b/i.test(String(def[1]))) return no;
    // generated columns are computed on read: their cost is unbounded
    if (all("SELECT hidden FROM pragma_table_xinfo(?) WHERE hidden IN (2, 3)", [shape.table]).length > 0) return no;
    // A partial index makes the plan depend on the bound values: SQLite
    // uses it when a bound value implies its WHERE and re-plans the
    // statement (maybe as a full scan) when another value is bound.
    if (all("SELECT 1 FROM pragma_index_list(?) WHERE partial", [shape.table]).length > 0) return no;
    // the statement that runs reads the table the same way (its LIMIT adds
    // only the schema-version subquery)
    const guarded = all(`EXPLAIN QUERY PLAN ${guardedRead(shape, version)}`, bindable(s.args))
      .map((r) => String(r[3]))
      .filter((d) => /^(SEARCH|SCAN) /.test(d) && !d.startsWith("SCAN pragma_schema_version VIRTUAL TABLE"));
    if (guarded.length !== 1 || guarded[0] !== String(plan[0]![3])) return no;
    return { point: true, single: m[2] === "rowid=?", version };
  } catch {
    return { point: false, single: false, version };
  } finally {
    try {
      if (open) db.exec("COMMIT");
    } catch {
      // closed below either way
    }
    closeQuietly(db);
  }
}
