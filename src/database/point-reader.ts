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
// The connection is query-only, has no busy wait (WAL readers do not wait
// for writers) and runs each read in its own read transaction, with the
// schema version checked in the same snapshot: a plan confirmed for one
// schema is never used on another.
import { existsSync } from "node:fs";
import Database from "libsql";
import type { EngineResult, EngineStatement, EngineValue } from "./engine-protocol.js";
import { bindable, encode, LimitError, readRows, sizeOf, tooManyBytes, type ReadBudget } from "./engine-values.js";
import type { Token } from "./sql-tokenizer.js";

type Db = InstanceType<typeof Database>;
type Stmt = ReturnType<Db["prepare"]>;

export interface PointShape {
  /** The table named after FROM, unquoted. */
  table: string;
  /** How many `col = value` conditions the WHERE clause has. */
  conditions: number;
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
  if (word("LIMIT") && !value()) return undefined;
  return i === t.length ? { table, conditions } : undefined;
}

// Words that are never a plain column or table name here.
const KEYWORDS = new Set(["SELECT", "FROM", "WHERE", "AND", "OR", "NOT", "LIMIT", "DISTINCT", "ALL", "AS", "JOIN", "ON", "USING"]);

interface Verdict {
  /** Compiled on the reading connection; null when it is not a point read. */
  st: Stmt | null;
  columns: string[];
  /** A rowid lookup: at most one row. */
  single: boolean;
  /** PRAGMA schema_version the verdict was made on. */
  version: number;
}

interface Conn {
  db: Db;
  begin: Stmt;
  commit: Stmt;
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
    let result: EngineResult | undefined;
    const budget: ReadBudget = { bytes: maxBytes };
    // Each call into the driver costs ~3-15 us once other work has cooled
    // the caches: as few as possible (no inTransaction getter).
    let open = false;
    try {
      c.begin.run([]);
      open = true;
      const version = Number((c.schemaVersion.get([]) as unknown[])[0]);
      let v = c.reads.get(s.sql);
      if (v && v.version !== version) {
        c.reads.delete(s.sql);
        v = undefined;
      }
      if (!v) {
        const k = classify(path, s, shape);
        // the verdict was made on another schema than this snapshot's (a
        // change committed in between): the engine runs it this time, and
        // nothing compiled on this snapshot is kept under the other version
        if (k.version !== version) return undefined;
        const st = k.point ? compile(c.db, s.sql) : null;
        v = { st, columns: st ? st.columns().map((x) => x.name) : [], single: k.single, version: k.version };
        if (c.reads.size >= MAX_READS) c.reads.delete(c.reads.keys().next().value as string);
        c.reads.set(s.sql, v);
      }
      if (v.st) {
        const columns = v.columns;
        try {
          const rows = v.single ? readOne(v.st, bindable(s.args), maxBytes) : readRows(v.st, bindable(s.args), maxRows, maxBytes, budget);
          result = { columns, rows, rowsRead: rows.length, rowsWritten: 0 };
        } catch (e) {
          if (!(e instanceof LimitError)) throw e;
          result = { columns: [], rows: [], rowsRead: 0, rowsWritten: 0, error: e.message };
        }
      }
    } catch {
      // anything unexpected (busy, a file replaced underneath): the engine
      // path runs it and reports its own error
      result = undefined;
    } finally {
      try {
        if (open) c.commit.run([]);
      } catch {
        budget.abandoned = true;
      }
      if (budget.abandoned) this.close(path);
    }
    return result;
  }

  private open(path: string): Conn | undefined {
    const hit = this.conns.get(path);
    if (hit) return hit;
    const db = openQueryOnly(path);
    if (!db) return undefined;
    try {
      const schemaVersion = db.prepare("PRAGMA schema_version");
      schemaVersion.raw(true);
      const c: Conn = { db, begin: db.prepare("BEGIN"), commit: db.prepare("COMMIT"), schemaVersion, reads: new Map() };
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
  // The file is created by provisioning, never here (libsql would create it).
  if (!existsSync(path)) return undefined;
  let db: Db | undefined;
  try {
    db = new Database(path);
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

/** A rowid lookup reads one row at most: get() steps once and resets. */
function readOne(st: Stmt, args: unknown[], maxBytes: number): EngineValue[][] {
  const raw = st.get(args) as unknown[] | undefined;
  if (!raw) return [];
  let bytes = 0;
  for (const x of raw) bytes += sizeOf(x);
  if (bytes > maxBytes) throw tooManyBytes(maxBytes);
  return [raw.map(encode)];
}

function compile(db: Db, sql: string): Stmt | null {
  const st = db.prepare(sql);
  if (!st.reader) return null;
  st.raw(true);
  st.safeIntegers(true);
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
    st.raw(true);
    return st.all(args) as unknown[][];
  };
  // every check reads one snapshot: the version, the plan and the table's
  // definition belong to the same schema
  let open = false;
  try {
    db.exec("BEGIN");
    open = true;
    const version = Number(all("PRAGMA schema_version", [])[0]![0]);
    const no = { point: false, single: false, version };
    // Statistics (after ANALYZE) can make the plan depend on the bound values
    // (stat4) or differ between connections (stat1): none of that here.
    if (all("SELECT 1 FROM main.sqlite_schema WHERE name IN ('sqlite_stat1', 'sqlite_stat4')", []).length > 0) return no;
    let plan: unknown[][];
    try {
      plan = all(`EXPLAIN QUERY PLAN ${s.sql}`, bindable(s.args));
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
    return { point: true, single: m[2] === "rowid=?", version };
  } catch {
    return { point: false, single: false, version: -1 };
  } finally {
    try {
      if (open) db.exec("COMMIT");
    } catch {
      // closed below either way
    }
    closeQuietly(db);
  }
}
