// Point reads served in the service process, without the hop to an engine
// process. Embedded databases normally run in engine processes because a
// runaway statement can only be stopped by killing its process
// (docs/database.md). A point read cannot run away: it is recognised from its
// text (`SELECT <columns> FROM <table> WHERE <col> = <value> [AND ...]
// [LIMIT n]`: no expressions, functions, joins or subqueries) and confirmed
// by SQLite's own plan (one SEARCH on a real table whose index or primary key
// uses every condition), so it touches only the rows it returns, at most
// maxRows + 1. Everything else, and any point read that fails here, goes to
// the engine processes unchanged. The plan is checked by the engine process
// that runs the statement the first time (point-plan.ts), never here:
// loading a schema and planning on this thread would hold up every
// application; the reader only loads schemas the engine found within the
// schema caps (a millisecond or two).
//
// The reading connection is Node's built-in SQLite (node:sqlite), the same
// library the engine processes use on the same files, with a thin binding (a
// PK get() in about 3 us). Every connection this process opens on a
// database file goes through this one library: SQLite tracks POSIX locks per
// process inside the library, and two copies of it on one file in one
// process could each think the other's locks are theirs
// (https://sqlite.org/howtocorrupt.html, 2.2.1); provisioning uses
// node:sqlite as well.
//
// The connection is query-only, defensive, compiles reads under the tenant
// authorizer (sql-authorizer.ts), has a value-size limit, and has no busy wait (WAL
// readers do not wait for writers). A plan confirmed for one schema is
// never used on another: the statement that runs is the read with its LIMIT rewritten to
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
import { guardedRead, type PointShape, type PointVerdict } from "./point-plan.js";
import { tenantAuthorizer } from "./sql-authorizer.js";
import { asciiLower, bindCaller, isTrueRule, type AccessCaller, type AccessRules } from "./access-rules.js";
import { tokenize } from "./sql-tokenizer.js";

export { guardedRead, type PointShape, type PointVerdict } from "./point-plan.js";
export { pointReadShape } from "./point-shape.js";

type Db = DatabaseSync;
type Stmt = StatementSync;

interface Verdict extends PointVerdict {
  /**
   * The guarded read compiled on the reading connection: null when it is not
   * a point read, undefined until its first use.
   */
  st: Stmt | null | undefined;
  columns: string[];
}

interface Conn {
  db: Db;
  schemaVersion: Stmt;
  reads: Map<string, Verdict>;
  /** Point reads under an application's access rules, by statement, application and rules version (null: not served here). */
  ruled: Map<string, { st: Stmt; columns: string[]; values: readonly string[] } | null>;
}

const MAX_CONNS = 64;
const MAX_READS = 256;

export interface PointReaderOptions {
  /**
   * SQLITE_LIMIT_LENGTH of the reading connections: a larger stored value
   * fails here and the statement goes to the engine (which reports it). At
   * most the response size limit, so no value this thread cannot send is
   * ever copied on it.
   */
  maxValueBytes?: number;
}

export class PointReader {
  private readonly conns = new Map<string, Conn>();
  private readonly maxValueBytes: number;

  constructor(opts: PointReaderOptions = {}) {
    this.maxValueBytes = opts.maxValueBytes ?? 8 * 1024 * 1024;
  }

  /**
   * Runs the statement here when it is a point read on this database, else
   * returns undefined (the caller sends it to an engine process, asking for
   * a verdict when wantsVerdict() says so).
   */
  tryRun(path: string, s: EngineStatement, shape: PointShape, maxRows: number, maxBytes: number): EngineResult | undefined {
    const c = this.conns.get(path);
    const v = c?.reads.get(s.sql);
    if (!c || !v) return undefined;
    try {
      if (!v.point) {
        // "not a point read" holds until the schema changes (an index may be added)
        if (v.version !== schemaVersion(c)) c.reads.delete(s.sql);
        return undefined;
      }
      if (v.st === undefined) {
        // compiling loads the schema here if this connection has not yet:
        // the engine found it within the caps when it made the verdict
        v.st = compileAuthorized(c.db, guardedRead(shape, v.version));
        v.columns = v.st ? v.st.columns().map((x) => x.name) : [];
        if (!v.st) {
          c.reads.delete(s.sql);
          return undefined;
        }
      }
    } catch {
      return undefined; // the engine path runs it and reports its own error
    }
    return this.read(path, c, v, v.st!, v.columns, bindable(s.args) as SQLInputValue[], maxRows, maxBytes, () => c.reads.delete(s.sql));
  }

  /**
   * A point read of a device under its application's access rules
   * (access-rules.ts), served here when the engine found the statement a
   * point read and the table's select rule reads only the row and the caller
   * (no subquery, no table): the read with `AND (rule)` added, the caller's
   * values bound after the statement's own. It reads the one row the plain
   * read would, so the rule costs one expression. Anything else goes to the
   * engine's rules connection.
   */
  tryRunUnderRules(path: string, s: EngineStatement, shape: PointShape, rules: AccessRules, caller: AccessCaller, maxRows: number, maxBytes: number): EngineResult | undefined {
    const c = this.conns.get(path);
    const v = c?.reads.get(s.sql);
    if (!c || !v?.point) return undefined;
    const key = `${s.sql}\u0000${caller.appId}@${rules.version}`;
    let made = c.ruled.get(key);
    if (made === undefined) {
      made = null;
      const table = Object.keys(rules.tables).find((t) => asciiLower(t) === asciiLower(shape.table));
      const tr = table === undefined ? undefined : rules.tables[table];
      if (tr?.select !== undefined && !tr.selectColumns && rowOnly(tr.select)) {
        // the caller's values the rule names, numbered after the statement's own
        // parameters in the order they first appear (a statement binds exactly
        // as many values as it has parameters)
        const n = s.args.length;
        const values: string[] = [];
        const rule = isTrueRule(tr.select)
          ? "1"
          : bindCaller(tr.select, (name) => {
              if (!values.includes(name)) values.push(name);
              // with the affinity the engine's caller table gives them (an INTEGER
              // or TEXT column), so a rule compares alike on both paths
              return `CAST(?${n + 1 + values.indexOf(name)} AS ${name === "user_id" ? "TEXT" : "INTEGER"})`;
            });
        if (typeof rule === "string") {
          try {
            const st = compileAuthorized(c.db, guardedRead({ ...shape, head: `${shape.head} AND (${rule})` }, v.version));
            if (st) made = { st, columns: st.columns().map((x) => x.name), values };
          } catch {
            // the engine reports it
          }
        }
      }
      if (c.ruled.size >= MAX_READS) c.ruled.delete(c.ruled.keys().next().value as string);
      c.ruled.set(key, made);
    }
    if (!made) return undefined;
    const of = { consumer_id: BigInt(caller.consumerId), user_id: caller.userId, app_id: BigInt(caller.appId) } as Record<string, SQLInputValue>;
    const args = [...(bindable(s.args) as SQLInputValue[]), ...made.values.map((name) => of[name]!)];
    return this.read(path, c, v, made.st, made.columns, args, maxRows, maxBytes, () => {
      c.reads.delete(s.sql);
      c.ruled.delete(key);
    });
  }

  /**
   * One compiled point read: its rows (or the statement's size error), or
   * undefined for the engine path: nothing read on a schema that is no longer
   * the verdict's (`stale` forgets it), or anything unexpected (a bad bound
   * value, a table dropped, busy, a file replaced underneath: the engine path
   * runs it and reports its own error; the verdict stays, so a request that
   * fails on purpose does not make every request re-check the plan, and a
   * changed schema is caught by the guarded LIMIT anyway).
   */
  private read(path: string, c: Conn, v: Verdict, st: Stmt, columns: string[], args: SQLInputValue[], maxRows: number, maxBytes: number, stale: () => void): EngineResult | undefined {
    const budget: ReadBudget = { bytes: maxBytes };
    try {
      let rows: EngineValue[][];
      try {
        rows = v.single ? readOne(st, args, maxBytes) : readRows(st.iterate(...args), maxRows, maxBytes, budget);
      } catch (e) {
        if (!(e instanceof LimitError)) throw e;
        return { columns: [], rows: [], rowsRead: 0, rowsWritten: 0, error: e.message };
      }
      // nothing read: no such row, or the schema is no longer the verdict's
      if (rows.length === 0 && schemaVersion(c) !== v.version) {
        stale();
        return undefined;
      }
      return { columns, rows, rowsRead: rows.length, rowsWritten: 0 };
    } catch {
      return undefined;
    } finally {
      if (budget.abandoned) this.close(path);
    }
  }

  /** True when the engine should make a verdict for this statement (none is kept). */
  wantsVerdict(path: string, sql: string): boolean {
    return this.conns.get(path)?.reads.has(sql) !== true;
  }

  /** Keeps the verdict an engine process made for this statement (point-plan.ts). */
  learn(path: string, sql: string, verdict: PointVerdict): void {
    const c = this.open(path);
    if (!c) return;
    if (c.reads.size >= MAX_READS) c.reads.delete(c.reads.keys().next().value as string);
    c.reads.set(sql, { point: verdict.point, single: verdict.single, version: verdict.version, st: verdict.point ? undefined : null, columns: [] });
  }

  private open(path: string): Conn | undefined {
    const hit = this.conns.get(path);
    if (hit) return hit;
    const db = openQueryOnly(path, this.maxValueBytes);
    if (!db) return undefined;
    try {
      const schemaVersion = db.prepare("PRAGMA schema_version");
      schemaVersion.setReturnArrays(true);
      const c: Conn = { db, schemaVersion, reads: new Map(), ruled: new Map() };
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

function openQueryOnly(path: string, maxValueBytes: number): Db | undefined {
  // The file is created by provisioning, never here (SQLite would create it).
  if (!existsSync(path)) return undefined;
  let db: Db | undefined;
  try {
    // double-quoted strings are identifiers only, as in the engines
    db = new DatabaseSync(path, {
      defensive: true,
      allowExtension: false,
      enableDoubleQuotedStringLiterals: false,
      timeout: 0,
      limits: { length: maxValueBytes, attach: 0 },
    });
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

/** A rule that reads only the row and the caller: no subquery, and no `IN table`. */
function rowOnly(rule: string): boolean {
  const t = tokenize(rule).filter((x) => x.kind !== "space" && x.kind !== "comment");
  return t.every((x, i) => {
    if (x.kind !== "word") return true;
    const w = x.text.toUpperCase();
    if (w === "SELECT") return false;
    return w !== "IN" || (t[i + 1]?.kind === "punct" && t[i + 1]!.text === "(");
  });
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

/**
 * Compiles under the tenant authorizer (sql-authorizer.ts), which is then
 * taken off again: with it in place every read would call into JavaScript
 * (the guarded LIMIT's pragma_schema_version compiles a PRAGMA each time,
 * ~0.6 us). SQLite re-compiles a statement itself later (after a schema
 * change, or because the authorizer changed) without asking it again, but a
 * re-compiled read on another schema reads nothing (its LIMIT is 0), and on
 * the same schema the same text gets the same decision.
 */
function compileAuthorized(db: Db, sql: string): Stmt | null {
  db.setAuthorizer(tenantAuthorizer);
  try {
    return compile(db, sql);
  } finally {
    db.setAuthorizer(null);
  }
}

function compile(db: Db, sql: string): Stmt | null {
  const st = db.prepare(sql);
  if (st.columns().length === 0) return null; // not a statement that returns rows
  st.setReturnArrays(true);
  st.setReadBigInts(true);
  return st;
}
