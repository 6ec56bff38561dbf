// An engine process: owns SQLite connections (one per database file, kept
// open and reused, with a cache of compiled statements) and runs requests
// one at a time. It runs in its own process because the driver steps
// statements synchronously on the calling thread and can only be stopped
// from outside by ending the process (see docs/database.md), so the
// service kills it on a runaway query and starts a new one.
//
// The driver is Node's built-in SQLite (node:sqlite), the library the
// service's point reader uses on the same files: it is the binding that
// exposes what a shared, hostile-tenant engine needs (docs/database.md,
// "Hostile tenants"): defensive mode (no writes to sqlite_dbpage or the
// schema, no writable_schema), an authorizer (sql-authorizer.ts) and
// run-time limits (SQLITE_LIMIT_LENGTH). The libsql package offers none of
// them.
//
// Runs with Node's built-in type stripping: erasable syntax only, and only
// type imports from the project except the .ts files named below.
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { Socket } from "node:net";
import { DatabaseSync, type SQLInputValue, type StatementSync } from "node:sqlite";
import type { EngineAccess, EngineMessage, EngineReply, EngineRequest, EngineResult, EngineSettings } from "./engine-protocol.js";
import { quoteIdent } from "./sql-tokenizer.ts";
import { accessAuthorizer, asciiLower, BASE_SETUP, CALLER_TABLE, insertIntoMain, RULE_ERROR, tableSetup, WRITTEN_TABLE, type AccessRules, type AccessState, type TableShape } from "./access-rules.ts";
import { lineSplitter } from "./engine-protocol.ts";
// a runtime import under type stripping names the .ts file itself
import { bindable, readRows, type ReadBudget } from "./engine-values.ts";
import { classifyPoint } from "./point-plan.ts";
import { tenantAuthorizer } from "./sql-authorizer.ts";

type Db = DatabaseSync;
type Stmt = StatementSync;

interface Conn {
  db: Db;
  /** Compiled tenant statements (under the authorizer), by text. */
  stmts: Map<string, Stmt>;
  /** Compiled service statements (capture, the engine's own checks), by text. */
  own: Map<string, Stmt>;
  /** PRAGMA schema_version when the cached statements were compiled. */
  schemaVersion: number;
  schemaStmt: Stmt;
  /** Set on a connection that runs one application's devices under its access rules. */
  access?: InstalledRules;
}

interface InstalledRules {
  /** The EngineAccess key (application and rules version) installed, and the schema it was installed on. */
  key: string;
  schemaVersion: number;
  state: AccessState;
  /** The caller last written to the caller table. */
  caller: string;
}

const MAX_CONNS = 64;
const MAX_STMTS = 256;
const conns = new Map<string, Conn>();

const settings = JSON.parse(process.argv[2] ?? "{}") as Partial<EngineSettings>;
const MAX_VALUE_BYTES = settings.maxValueBytes ?? 16 * 1024 * 1024;
const WAL_SIZE_LIMIT = settings.walSizeLimitBytes ?? 64 * 1024 * 1024;
const MAX_SCHEMA_BYTES = settings.maxSchemaBytes ?? 64 * 1024;
const MAX_SCHEMA_OBJECTS = settings.maxSchemaObjects ?? 256;
const MAX_COLUMNS = settings.maxColumnsPerTable ?? 100;

/**
 * Whether the statements being compiled are a tenant's. The authorizer is
 * consulted when a statement is compiled (and re-compiled after a schema
 * change, which happens while it runs), so this is set around every run.
 */
let tenant = true;
/** Whether the tenant statement being compiled or run is a CREATE, ALTER or DROP (sql-authorizer.ts). */
let ddl = false;

function open(path: string, busyTimeoutMs: number, maxDatabaseBytes: number, appKey?: string): Conn {
  // a rules connection is its application's own: its temp schema holds that application's rules
  const key = appKey === undefined ? path : `${path}\u0000${appKey}`;
  const hit = conns.get(key);
  if (hit) {
    conns.delete(key); // LRU: move to the end
    conns.set(key, hit);
    return hit;
  }
  if (conns.size >= MAX_CONNS) {
    const [oldest, c] = conns.entries().next().value as [string, Conn];
    closeConn(oldest, c);
  }
  // The file is created by provisioning, never here (SQLite would create it).
  if (!existsSync(path)) throw new Error("the database file is missing");
  const db = new DatabaseSync(path, {
    defensive: true,
    allowExtension: false,
    enableDoubleQuotedStringLiterals: false,
    timeout: Math.max(0, Math.floor(busyTimeoutMs)),
    // no value (string, blob, row) larger than this is made or read
    limits: { length: MAX_VALUE_BYTES, attach: 0 },
  });
  try {
    db.exec(`PRAGMA busy_timeout = ${Math.max(0, Math.floor(busyTimeoutMs))}`);
    db.exec("PRAGMA synchronous = NORMAL");
    db.exec("PRAGMA foreign_keys = ON");
    db.exec("PRAGMA trusted_schema = OFF");
    // a WAL grown by a big (or killed) write is cut back when it is reset
    db.exec(`PRAGMA journal_size_limit = ${Math.floor(WAL_SIZE_LIMIT)}`);
    // a write that would grow the file past the limit fails with SQLITE_FULL;
    // the connection's temp database (temp tables and indexes) gets the
    // same cap, and lives in files (SQLITE_TMPDIR), not in this process's memory
    const pageSize = Number((db.prepare("PRAGMA page_size").get() as { page_size?: unknown } | undefined)?.page_size) || 4096;
    const pages = Math.max(1, Math.floor(maxDatabaseBytes / pageSize));
    db.exec(`PRAGMA max_page_count = ${pages}`);
    db.exec("PRAGMA temp_store = FILE");
    db.exec(`PRAGMA temp.max_page_count = ${pages}`);
    db.prepare("SELECT count(*) FROM sqlite_schema").get(); // unreadable or not a database: fail here
  } catch (e) {
    db.close();
    throw e;
  }
  const schemaStmt = db.prepare("PRAGMA schema_version");
  schemaStmt.setReturnArrays(true);
  const conn: Conn = { db, stmts: new Map<string, Stmt>(), own: new Map<string, Stmt>(), schemaVersion: -1, schemaStmt };
  db.setAuthorizer((action, a, b, name, inside) => {
    if (!tenant) return 0;
    return conn.access ? accessAuthorizer(conn.access.state, action, a, b, name, inside) : tenantAuthorizer(action, a, b, name, inside, ddl);
  });
  conns.set(key, conn);
  return conn;
}

function closeConn(key: string, c: Conn): void {
  if (conns.get(key) === c) conns.delete(key);
  try {
    c.db.close();
  } catch {
    // already closed
  }
}

/**
 * Drops compiled statements when the schema changed (here or through another
 * connection): SQLite recompiles them itself, but the column list a cached
 * statement reports would be stale.
 */
function checkSchema(conn: Conn): void {
  // (under own(): SQLite re-compiles it after any schema change, the temp schema's included)
  const v = Number((own(() => conn.schemaStmt.get()) as unknown as unknown[])[0]);
  if (v !== conn.schemaVersion) {
    conn.stmts.clear();
    conn.own.clear();
    conn.schemaVersion = v;
  }
}

function prepare(conn: Conn, sql: string): Stmt {
  const cache = tenant ? conn.stmts : conn.own;
  const hit = cache.get(sql);
  if (hit) return hit;
  const st = conn.db.prepare(sql);
  st.setReturnArrays(true);
  st.setReadBigInts(true);
  // Named parameters are bound by their full name (":t" and "@t" are two parameters).
  st.setAllowBareNamedParameters(false);
  if (cache.size >= MAX_STMTS) cache.delete(cache.keys().next().value as string);
  cache.set(sql, st);
  return st;
}

/** Runs one of the engine's own statements (no authorizer, no caps). */
function own<T>(fn: () => T): T {
  const was = tenant;
  tenant = false;
  try {
    return fn();
  } finally {
    tenant = was;
  }
}

function firstRow(conn: Conn, sql: string, args: SQLInputValue[] = []): unknown[] {
  return own(() => prepare(conn, sql).get(...args) as unknown as unknown[]);
}

/** The cap the schema is over, as a statement error, or undefined. */
function schemaOverCaps(conn: Conn): string | undefined {
  const wide = own(() =>
    prepare(
      conn,
      "SELECT s.name, count(*) FROM main.sqlite_schema s, pragma_table_xinfo(s.name, 'main') c WHERE s.type = 'table' GROUP BY s.name HAVING count(*) > ? LIMIT 1",
    ).get(BigInt(MAX_COLUMNS)),
  ) as unknown as unknown[] | undefined;
  if (wide) return `too many columns: a table may have at most ${MAX_COLUMNS} columns (${String(wide[0])} would have ${String(wide[1])})`;
  const [objects, bytes] = firstRow(conn, "SELECT count(*), coalesce(sum(octet_length(sql)), 0) FROM main.sqlite_schema").map(Number);
  if (bytes! > MAX_SCHEMA_BYTES) {
    return `schema too large: the database schema may hold at most ${MAX_SCHEMA_BYTES} bytes of definitions (this statement would make it ${bytes})`;
  }
  if (objects! > MAX_SCHEMA_OBJECTS) {
    return `schema too large: the database schema may hold at most ${MAX_SCHEMA_OBJECTS} tables, indexes, views and triggers (this statement would make it ${objects})`;
  }
  return undefined;
}

function runOne(conn: Conn, s: EngineRequest["statements"][number], req: EngineRequest, budget: ReadBudget): EngineResult {
  ddl = s.verb === "CREATE" || s.verb === "ALTER" || s.verb === "DROP";
  const rules = conn.access;
  if (rules) return runUnderRules(conn, rules, s, req, budget);
  const st = prepare(conn, s.sql);
  const values = bindable(s.args) as SQLInputValue[];
  // A statement with only named parameters binds them by name (sql-params.ts
  // remoteBinding), so a bare parameter selected as a column keeps its name.
  const named = s.names ? (Object.fromEntries(s.names.map((n, i) => [n, values[i]!])) as Record<string, SQLInputValue>) : undefined;
  if (st.columns().length === 0) {
    const info = named ? st.run(named) : st.run(...values);
    // sqlite3_changes() keeps the last write's count through BEGIN, COMMIT and DDL
    const writes = s.verb === "INSERT" || s.verb === "UPDATE" || s.verb === "DELETE";
    return { columns: [], rows: [], rowsRead: 0, rowsWritten: writes ? Number(info.changes) : 0 };
  }
  const columns = st.columns().map((c) => c.name);
  const rows = readRows(named ? st.iterate(named) : st.iterate(...values), req.maxRows, req.maxBytes, budget);
  let rowsWritten = 0;
  if (s.verb === "INSERT" || s.verb === "UPDATE" || s.verb === "DELETE") {
    rowsWritten = Number(firstRow(conn, "SELECT changes()")[0]);
  }
  return { columns, rows, rowsRead: rows.length, rowsWritten };
}

/**
 * A tenant's CREATE or ALTER statement, inside a savepoint: when the schema
 * it leaves is over a cap, it is undone and answered as a statement error.
 * The caps keep every schema small enough to load in a millisecond or two
 * (the point reader loads it on the service thread).
 */
function runSchemaChange(conn: Conn, s: EngineRequest["statements"][number], req: EngineRequest, budget: ReadBudget): EngineResult {
  own(() => conn.db.exec("SAVEPOINT pulsebase_schema"));
  let done = false;
  try {
    const r = runOne(conn, s, req, budget);
    const over = schemaOverCaps(conn);
    if (over === undefined) {
      own(() => conn.db.exec("RELEASE pulsebase_schema"));
      done = true;
      return r;
    }
    return { columns: [], rows: [], rowsRead: 0, rowsWritten: 0, error: over };
  } finally {
    if (!done) {
      try {
        own(() => {
          conn.db.exec("ROLLBACK TO pulsebase_schema");
          conn.db.exec("RELEASE pulsebase_schema");
        });
      } catch {
        // some errors (SQLITE_FULL, ...) already rolled the transaction back
      }
    }
  }
}

/**
 * A device's statement on its application's rules connection
 * (access-rules.ts). Rows written through a rule view are counted by the
 * view's triggers (changes() of a view is 0); a refusal by the authorizer
 * is reported with its reason instead of SQLite's "not authorized".
 */
function runUnderRules(conn: Conn, rules: InstalledRules, s: EngineRequest["statements"][number], req: EngineRequest, budget: ReadBudget): EngineResult {
  const writes = s.verb === "INSERT" || s.verb === "UPDATE" || s.verb === "DELETE";
  const sql = s.verb === "INSERT" ? insertIntoMain(s.sql, rules.state.tables) : s.sql;
  rules.state.refusal = undefined;
  let st: Stmt;
  try {
    st = prepare(conn, sql);
  } catch (e) {
    const why = rules.state.refusal;
    rules.state.refusal = undefined;
    // SQLite's text for a refused read names the column ("access to t.c is prohibited"): the reason instead
    if (why !== undefined && /not authorized|is prohibited/i.test(message(e))) throw new Error(why, { cause: e });
    // a write to a rule view the rules give no trigger for (SQLite says so before asking the authorizer)
    const view = /^cannot modify (.+) because it is a view$/.exec(message(e));
    if (view && rules.state.tables.has(view[1]!.toLowerCase())) throw new Error(`${RULE_ERROR}: ${s.verb.toLowerCase()} on ${view[1]} is not allowed`, { cause: e });
    throw e;
  }
  if (writes && s.verb !== "INSERT") own(() => conn.db.exec(`UPDATE temp.${WRITTEN_TABLE} SET n = 0`));
  const values = bindable(s.args) as SQLInputValue[];
  const named = s.names ? (Object.fromEntries(s.names.map((n, i) => [n, values[i]!])) as Record<string, SQLInputValue>) : undefined;
  const viaViews = () => (writes && s.verb !== "INSERT" ? Number(firstRow(conn, `SELECT n FROM temp.${WRITTEN_TABLE}`)[0]) : 0);
  if (st.columns().length === 0) {
    const info = named ? st.run(named) : st.run(...values);
    return { columns: [], rows: [], rowsRead: 0, rowsWritten: writes ? Number(info.changes) + viaViews() : 0 };
  }
  const columns = st.columns().map((c) => c.name);
  const rows = readRows(named ? st.iterate(named) : st.iterate(...values), req.maxRows, req.maxBytes, budget);
  const rowsWritten = writes ? Number(firstRow(conn, "SELECT changes()")[0]) + viaViews() : 0;
  return { columns, rows, rowsRead: rows.length, rowsWritten };
}

/** What installing the rules needs to know of one table, or undefined when main has no such table. */
function tableShape(conn: Conn, name: string): TableShape | undefined {
  const found = own(() => prepare(conn, "SELECT name, wr FROM pragma_table_list WHERE schema = 'main' AND type = 'table' AND name = ? COLLATE NOCASE").get(name)) as unknown as unknown[] | undefined;
  if (!found) return undefined;
  const table = String(found[0]);
  const cols = own(() => prepare(conn, "SELECT name, hidden, pk, dflt_value, upper(type) FROM pragma_table_xinfo(?, 'main')").all(table)) as unknown as unknown[][];
  const pk = cols.filter((c) => Number(c[2]) > 0).sort((x, y) => Number(x[2]) - Number(y[2])).map((c) => String(c[0]));
  const withoutRowid = Number(found[1]) === 1;
  const columns = cols
    .filter((c) => Number(c[1]) !== 1)
    .map((c) => ({
      name: String(c[0]),
      generated: Number(c[1]) >= 2,
      dflt: c[3] === null ? null : String(c[3]),
      // the INTEGER PRIMARY KEY of a rowid table is the rowid itself
      rowidAlias: !withoutRowid && pk.length === 1 && Number(c[2]) === 1 && c[4] === "INTEGER",
    }));
  return { name: table, columns, pk, withoutRowid };
}

/**
 * Installs `rules` in the connection's temp schema (access-rules.ts): the
 * objects of an earlier version are dropped first. A table whose objects
 * cannot be made (its rule no longer compiles after a schema change) is
 * left without them, so devices cannot see it at all. Returns the errors.
 */
function installRules(conn: Conn, key: string, rules: AccessRules): string[] {
  const errors: string[] = [];
  const db = conn.db;
  const state: AccessState = { tables: new Map(), trusted: new Set(), mainViews: new Set(), mainTriggers: new Set(), mainTables: new Set(), fkParents: new Set() };
  const token = randomBytes(6).toString("hex");
  own(() => {
    const old = prepare(conn, "SELECT type, name FROM temp.sqlite_schema WHERE type IN ('view', 'trigger')").all() as unknown as unknown[][];
    for (const [type, name] of old) db.exec(`DROP ${type === "view" ? "VIEW" : "TRIGGER"} IF EXISTS temp.${quoteIdent(String(name))}`);
    for (const stmt of BASE_SETUP) db.exec(stmt);
    db.exec(`DELETE FROM temp.${CALLER_TABLE}; INSERT INTO temp.${CALLER_TABLE} VALUES (NULL, NULL, NULL); DELETE FROM temp.${WRITTEN_TABLE}; INSERT INTO temp.${WRITTEN_TABLE} VALUES (0)`);
    for (const v of prepare(conn, "SELECT lower(name), type FROM main.sqlite_schema WHERE type IN ('view', 'trigger', 'table')").all() as unknown as unknown[][]) {
      (v[1] === "view" ? state.mainViews : v[1] === "trigger" ? state.mainTriggers : state.mainTables).add(String(v[0]));
    }
  });
  conn.stmts.clear();
  conn.access = { key, schemaVersion: conn.schemaVersion, state, caller: "" };
  let index = 0;
  for (const [name, tr] of Object.entries(rules.tables)) {
    const shape = own(() => tableShape(conn, name));
    if (!shape) {
      errors.push(`no such table: ${name}`);
      continue;
    }
    const setup = tableSetup(shape, tr, index++, token);
    if (setup.error !== undefined) {
      errors.push(setup.error);
      continue;
    }
    const T = quoteIdent(shape.name);
    try {
      own(() => {
        for (const stmt of setup.statements) db.exec(stmt);
      });
      for (const n of setup.names) state.trusted.add(n);
      state.tables.set(asciiLower(shape.name), tr);
      for (const f of own(() => prepare(conn, "SELECT lower(\"table\") FROM pragma_foreign_key_list(?, 'main')").all(shape.name)) as unknown as unknown[][]) state.fkParents.add(String(f[0]));
      // Compile what a device would, under the device's authorizer: a rule
      // is compiled when a statement using it is (the view's when it is read,
      // the triggers' when a write is), and one that reads what devices may
      // not (an operator's view) fails here, not in a device's request.
      const probes = [`SELECT * FROM ${T} LIMIT 0`];
      const first = shape.columns.find((c) => !c.generated)?.name;
      if (tr.insert !== undefined) probes.push(`INSERT INTO main.${T} DEFAULT VALUES`);
      if (tr.update !== undefined && first !== undefined && (!tr.updateColumns || tr.updateColumns.length > 0)) {
        const col = quoteIdent(tr.updateColumns?.[0] ?? first);
        probes.push(`UPDATE ${T} SET ${col} = ${col} WHERE 0`);
      }
      if (tr.delete !== undefined) probes.push(`DELETE FROM ${T} WHERE 0`);
      for (const probe of probes) {
        state.refusal = undefined;
        try {
          db.prepare(probe); // compiled, never run
        } catch (e) {
          throw new Error(state.refusal ?? message(e), { cause: e });
        }
      }
    } catch (e) {
      state.tables.delete(asciiLower(shape.name));
      for (const n of setup.names) state.trusted.delete(n);
      errors.push(`the rules of ${shape.name}: ${message(e)}`);
      own(() => {
        // the view a device names first (it reads the rows view), then the service's objects
        db.exec(`DROP VIEW IF EXISTS temp.${T}`);
        for (const n of setup.names) {
          db.exec(`DROP TRIGGER IF EXISTS temp.${quoteIdent(n)}`);
          db.exec(`DROP VIEW IF EXISTS temp.${quoteIdent(n)}`);
        }
      });
    }
  }
  conn.stmts.clear();
  return errors;
}

/** The connection a device of an application in rules mode uses, with those rules and that caller in place. */
function rulesConnection(req: EngineRequest, access: EngineAccess): Conn {
  const conn = open(req.path, req.busyTimeoutMs, req.maxDatabaseBytes, access.key.split("@")[0]);
  checkSchema(conn);
  if (!conn.access || conn.access.key !== access.key || conn.access.schemaVersion !== conn.schemaVersion) installRules(conn, access.key, access.rules);
  const c = access.caller;
  const caller = `${c.consumerId}\u0000${c.userId}\u0000${c.appId}`;
  if (conn.access!.caller !== caller) {
    own(() => {
      prepare(conn, `UPDATE temp.${CALLER_TABLE} SET consumer_id = ?, user_id = ?, app_id = ?`).run(BigInt(c.consumerId), c.userId, BigInt(c.appId));
      // the connection's last_insert_rowid() and changes() were the previous caller's: reset both
      prepare(conn, `REPLACE INTO temp.${WRITTEN_TABLE} (rowid, n) VALUES (1, 0)`).run();
    });
    conn.access!.caller = caller;
  }
  return conn;
}

/** EngineRequest.checkRules: the rules installed on a connection of their own, then closed. */
function checkRules(req: EngineRequest, rules: AccessRules): EngineReply {
  // the probes compile as a device's statements would: under the authorizer
  tenant = true;
  const key = `${req.path}\u0000check`;
  let conn: Conn;
  try {
    conn = open(req.path, req.busyTimeoutMs, req.maxDatabaseBytes, "check");
  } catch (e) {
    return { id: req.id, ok: false, fatal: message(e) };
  }
  try {
    checkSchema(conn);
    const errors = installRules(conn, "check", rules);
    return { id: req.id, ok: true, results: [{ columns: [], rows: [], rowsRead: 0, rowsWritten: 0, ruleErrors: errors }] };
  } catch (e) {
    return { id: req.id, ok: true, results: [{ columns: [], rows: [], rowsRead: 0, rowsWritten: 0, ruleErrors: [message(e)] }] };
  } finally {
    closeConn(key, conn);
  }
}

function tryOpen(req: EngineRequest): Conn | undefined {
  try {
    return open(req.path, req.busyTimeoutMs, req.maxDatabaseBytes);
  } catch {
    return undefined;
  }
}

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

function run(req: EngineRequest): EngineReply {
  if (req.checkRules) return checkRules(req, req.checkRules);
  let conn: Conn;
  tenant = req.service !== true;
  try {
    conn = req.access && tenant ? rulesConnection(req, req.access) : open(req.path, req.busyTimeoutMs, req.maxDatabaseBytes);
  } catch (e) {
    tenant = true;
    return { id: req.id, ok: false, fatal: message(e) };
  }
  const connKey = conn.access ? `${req.path}\u0000${req.access!.key.split("@")[0]}` : req.path;
  const results: EngineResult[] = [];
  const budget: ReadBudget = { bytes: req.maxBytes };
  const db = conn.db;
  try {
    if (req.transaction) {
      // Take the write lock up front when the batch writes, so a WAL
      // read->write upgrade cannot fail with SQLITE_BUSY half-way.
      const writes = req.statements.some((s) => s.verb !== "SELECT");
      own(() => db.exec(writes ? "BEGIN IMMEDIATE" : "BEGIN"));
    }
    checkSchema(conn);
    for (const s of req.statements) {
      try {
        const ddl = s.verb === "CREATE" || s.verb === "ALTER";
        results.push(tenant && ddl ? runSchemaChange(conn, s, req, budget) : runOne(conn, s, req, budget));
        if (ddl || s.verb === "DROP") checkSchema(conn);
      } catch (e) {
        (tenant ? conn.stmts : conn.own).delete(s.sql); // never reuse a statement that failed half-way
        results.push({ columns: [], rows: [], rowsRead: 0, rowsWritten: 0, error: message(e) });
      }
      if (req.transaction && results[results.length - 1]!.error !== undefined) break; // rolled back below; the rest do not run
    }
    if (req.transaction && db.isTransaction) {
      if (req.rollback || results.some((r) => r.error !== undefined)) own(() => db.exec("ROLLBACK"));
      else {
        try {
          own(() => db.exec("COMMIT"));
        } catch (e) {
          const last = results[results.length - 1];
          if (last) last.error = `commit failed: ${message(e)}`;
        }
      }
    }
  } catch (e) {
    tenant = true; // the next request starts as a tenant's, whatever this one was
    return { id: req.id, ok: false, fatal: message(e) };
  } finally {
    // A transaction the client opened and left open never outlives the request.
    try {
      if (db.isOpen && db.isTransaction) own(() => db.exec("ROLLBACK"));
    } catch {
      closeConn(connKey, conn);
    }
    // a cursor left open pins this connection's snapshot (engine-values.ts)
    if (budget.abandoned && conns.get(connKey) === conn) closeConn(connKey, conn);
    // (a rules connection's temp schema is the service's: devices cannot create anything there)
    if (req.mayUseTemp && !conn.access && conns.get(connKey) === conn) {
      try {
        const temp = firstRow(conn, "SELECT 1 FROM temp.sqlite_schema LIMIT 1");
        if (temp) closeConn(connKey, conn); // temp objects are connection state: drop it
      } catch {
        closeConn(connKey, conn);
      }
    }
  }
  const one = results[0];
  if (req.classify && results.length === 1 && one!.error === undefined && conns.get(connKey) === conn && !db.isTransaction) {
    const shape = req.classify;
    // the table's own plan: a rules connection would plan the rule view
    const plain = conn.access ? tryOpen(req) : conn;
    if (plain && !plain.db.isTransaction) one!.verdict = own(() => classifyPoint(plain.db, shape, bindable(req.statements[0]!.args), MAX_SCHEMA_BYTES));
  }
  tenant = true;
  return { id: req.id, ok: true, results };
}

function checkpoint(m: Extract<EngineMessage, { type: "checkpoint" }>): EngineReply {
  // A killed writer leaves its frames in the WAL (never committed, but the
  // file keeps its size): copy back what was committed and truncate it.
  // A connection of its own (the cached ones carry a request's settings).
  let db: Db | undefined;
  try {
    if (existsSync(m.path)) {
      // no busy wait: requests queue behind this; with a reader still in the
      // file it does what it can, and journal_size_limit trims the rest later
      db = new DatabaseSync(m.path, { defensive: true, timeout: 0 });
      db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
    }
  } catch {
    // busy (a reader) or unreadable: journal_size_limit cuts it back at the next reset
  } finally {
    db?.close();
  }
  return { id: m.id, ok: true, results: [] };
}

function handle(m: EngineMessage): EngineReply {
  if (m.type === "close") {
    // the tenant connection and every application's rules connection on the file
    for (const [key, c] of [...conns]) if (key === m.path || key.startsWith(`${m.path}\u0000`)) closeConn(key, c);
    return { id: m.id, ok: true, results: [] };
  }
  if (m.type === "checkpoint") return checkpoint(m);
  return run(m);
}

// The channel is file descriptor 3, a pipe to the service carrying one JSON
// message per line (JSON.stringify never writes a raw newline). Node's own
// IPC channel costs about three times more per round trip.
const channel = new Socket({ fd: 3, readable: true, writable: true });
channel.setEncoding("utf8");
const lines = lineSplitter();
channel.on("data", (chunk: string) => {
  // Replies to the messages of one chunk go back in one write.
  const replies: string[] = [];
  for (const line of lines(chunk)) {
    let reply: EngineReply;
    const m = JSON.parse(line) as EngineMessage;
    try {
      reply = handle(m);
    } catch (e) {
      reply = { id: m.id, ok: false, fatal: message(e) };
    }
    replies.push(`${JSON.stringify(reply)}\n`);
  }
  if (replies.length) channel.write(replies.join(""));
});
// the service went away: nothing left to do
channel.on("end", () => process.exit(0));
channel.on("error", () => process.exit(0));
