// An engine process: owns libSQL connections (one per database file, kept
// open and reused, with a cache of compiled statements) and runs requests
// one at a time. It runs in its own process because the native driver
// steps statements synchronously on the calling thread and can only be
// stopped from outside by ending the process (see docs/database.md), so the
// service kills it on a runaway query and starts a new one.
//
// Runs with Node's built-in type stripping: erasable syntax only, and only
// type imports from the project.
import { existsSync } from "node:fs";
import { Socket } from "node:net";
import Database from "libsql";
import type { EngineMessage, EngineReply, EngineRequest, EngineResult } from "./engine-protocol.js";
// a runtime import under type stripping names the .ts file itself
import { bindable, readRows, type ReadBudget } from "./engine-values.ts";

type Db = InstanceType<typeof Database>;
type Stmt = ReturnType<Db["prepare"]>;

interface Conn {
  db: Db;
  stmts: Map<string, Stmt>;
  /** PRAGMA schema_version when the cached statements were compiled. */
  schemaVersion: number;
  schemaStmt: Stmt;
}

const MAX_CONNS = 64;
const MAX_STMTS = 256;
const conns = new Map<string, Conn>();

function open(path: string, busyTimeoutMs: number, maxDatabaseBytes: number): Conn {
  const hit = conns.get(path);
  if (hit) {
    conns.delete(path); // LRU: move to the end
    conns.set(path, hit);
    return hit;
  }
  if (conns.size >= MAX_CONNS) {
    const [oldest, c] = conns.entries().next().value as [string, Conn];
    closeConn(oldest, c);
  }
  // The file is created by provisioning, never here (libsql would create it).
  if (!existsSync(path)) throw new Error("the database file is missing");
  const db = new Database(path);
  db.exec(`PRAGMA busy_timeout = ${Math.max(0, Math.floor(busyTimeoutMs))}`);
  db.exec("PRAGMA synchronous = NORMAL");
  db.exec("PRAGMA foreign_keys = ON");
  db.exec("PRAGMA trusted_schema = OFF");
  // a write that would grow the file past the limit fails with SQLITE_FULL
  const pageSize = Number((db.prepare("PRAGMA page_size").raw(true).get([]) as unknown[])[0]) || 4096;
  db.exec(`PRAGMA max_page_count = ${Math.max(1, Math.floor(maxDatabaseBytes / pageSize))}`);
  try {
    db.prepare("SELECT count(*) FROM sqlite_schema").get([]); // unreadable or not a database: fail here
  } catch (e) {
    db.close();
    throw e;
  }
  const schemaStmt = db.prepare("PRAGMA schema_version");
  schemaStmt.raw(true);
  const conn: Conn = { db, stmts: new Map<string, Stmt>(), schemaVersion: -1, schemaStmt };
  conns.set(path, conn);
  return conn;
}

function closeConn(path: string, c: Conn): void {
  conns.delete(path);
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
  const v = Number((conn.schemaStmt.get([]) as unknown[])[0]);
  if (v !== conn.schemaVersion) {
    conn.stmts.clear();
    conn.schemaVersion = v;
  }
}

function prepare(conn: Conn, sql: string): Stmt {
  const hit = conn.stmts.get(sql);
  if (hit) return hit;
  const st = conn.db.prepare(sql);
  if (st.reader) st.raw(true); // raw() throws for statements that return no data
  st.safeIntegers(true);
  if (conn.stmts.size >= MAX_STMTS) conn.stmts.delete(conn.stmts.keys().next().value as string);
  conn.stmts.set(sql, st);
  return st;
}

function runOne(conn: Conn, s: EngineRequest["statements"][number], req: EngineRequest, budget: ReadBudget): EngineResult {
  const st = prepare(conn, s.sql);
  const args = bindable(s.args);
  if (!st.reader) {
    const info = st.run(args);
    return { columns: [], rows: [], rowsRead: 0, rowsWritten: info.changes };
  }
  const columns = st.columns().map((c) => c.name);
  const rows = readRows(st.iterate(args), req.maxRows, req.maxBytes, budget);
  let rowsWritten = 0;
  if (s.verb === "INSERT" || s.verb === "UPDATE" || s.verb === "DELETE") {
    rowsWritten = Number((prepare(conn, "SELECT changes()").get([]) as unknown[])[0]);
  }
  return { columns, rows, rowsRead: rows.length, rowsWritten };
}

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

function run(req: EngineRequest): EngineReply {
  let conn: Conn;
  try {
    conn = open(req.path, req.busyTimeoutMs, req.maxDatabaseBytes);
  } catch (e) {
    return { id: req.id, ok: false, fatal: message(e) };
  }
  const results: EngineResult[] = [];
  const budget: ReadBudget = { bytes: req.maxBytes };
  const db = conn.db;
  try {
    if (req.transaction) {
      // Take the write lock up front when the batch writes, so a WAL
      // read->write upgrade cannot fail with SQLITE_BUSY half-way.
      const writes = req.statements.some((s) => s.verb !== "SELECT");
      db.exec(writes ? "BEGIN IMMEDIATE" : "BEGIN");
    }
    checkSchema(conn);
    for (const s of req.statements) {
      try {
        results.push(runOne(conn, s, req, budget));
        if (s.verb === "CREATE" || s.verb === "ALTER" || s.verb === "DROP") checkSchema(conn);
      } catch (e) {
        conn.stmts.delete(s.sql); // never reuse a statement that failed half-way
        results.push({ columns: [], rows: [], rowsRead: 0, rowsWritten: 0, error: message(e) });
        if (req.transaction) break; // rolled back below; the rest do not run
      }
    }
    if (req.transaction && db.inTransaction) {
      if (results.some((r) => r.error !== undefined)) db.exec("ROLLBACK");
      else {
        try {
          db.exec("COMMIT");
        } catch (e) {
          const last = results[results.length - 1];
          if (last) last.error = `commit failed: ${message(e)}`;
        }
      }
    }
  } catch (e) {
    return { id: req.id, ok: false, fatal: message(e) };
  } finally {
    // A transaction the client opened and left open never outlives the request.
    try {
      if (db.inTransaction) db.exec("ROLLBACK");
    } catch {
      closeConn(req.path, conn);
    }
    // a cursor left open pins this connection's snapshot (engine-values.ts)
    if (budget.abandoned && conns.get(req.path) === conn) closeConn(req.path, conn);
    if (req.mayUseTemp && conns.get(req.path) === conn) {
      try {
        const temp = prepare(conn, "SELECT 1 FROM temp.sqlite_schema LIMIT 1").get([]);
        if (temp) closeConn(req.path, conn); // temp objects are connection state: drop it
      } catch {
        closeConn(req.path, conn);
      }
    }
  }
  return { id: req.id, ok: true, results };
}

function handle(m: EngineMessage): EngineReply {
  if (m.type === "close") {
    const c = conns.get(m.path);
    if (c) closeConn(m.path, c);
    return { id: m.id, ok: true, results: [] };
  }
  return run(m);
}

// The channel is file descriptor 3, a pipe to the service carrying one JSON
// message per line (JSON.stringify never writes a raw newline). Node's own
// IPC channel costs about three times more per round trip.
const channel = new Socket({ fd: 3, readable: true, writable: true });
channel.setEncoding("utf8");
let pending: string[] = [];
channel.on("data", (chunk: string) => {
  // Replies to the messages of one chunk go back in one write.
  const replies: string[] = [];
  let from = 0;
  for (let nl = chunk.indexOf("\n"); nl >= 0; nl = chunk.indexOf("\n", from)) {
    pending.push(chunk.slice(from, nl));
    const line = pending.join("");
    pending = [];
    from = nl + 1;
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
  if (from < chunk.length) pending.push(chunk.slice(from));
});
// the service went away: nothing left to do
channel.on("end", () => process.exit(0));
channel.on("error", () => process.exit(0));
