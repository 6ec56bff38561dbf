// The SQLite authorizer every connection that runs a tenant's SQL installs
// (engine processes and the in-process point reader): a second layer under
// the statement guard (sql-guard.ts), checked by SQLite itself while it
// compiles a statement, on the names the statement really reaches after
// parsing (quoting, views and triggers resolved). It allows what the guard's
// allowed prefixes imply and refuses the rest: writes to SQLite's own tables
// and to the service's reserved `_pulsebase_*` tables, the introspection
// tables (sqlite_dbpage, sqlite_stmt, dbstat, pragma_*), triggers, views and
// virtual tables, PRAGMA, ATTACH, SAVEPOINT, ANALYZE, and the file and
// extension functions. Statements the service runs for itself (change
// capture, the engine's own checks) run with it switched off
// (`setTenant(false)` in engine-process.ts).
//
// Imported by engine-process.ts under Node's type stripping: erasable
// syntax only, no runtime imports from the project.
import { constants as C } from "node:sqlite";

const OK = C.SQLITE_OK;
const DENY = C.SQLITE_DENY;

/** Reserved for the service (function event-trigger capture); sql-guard.ts refuses the name too. */
export const RESERVED_PREFIX = "_pulsebase_";

/**
 * Tables a tenant may not read: raw pages, the text of every statement the
 * connection has prepared (other applications' SQL and literals on a shared
 * database), page statistics, and the recovery and file modules some SQLite
 * builds carry. `pragma_*` table-valued functions are refused as a family.
 */
export const DENIED_TABLES: ReadonlySet<string> = new Set([
  "sqlite_dbpage",
  "sqlite_stmt",
  "dbstat",
  "sqlite_dbdata",
  "sqlite_dbptr",
  "fsdir",
  "zipfile",
]);

/** Functions that reach files, load code, run SQL text or change the connection. */
export const DENIED_FUNCTIONS: ReadonlySet<string> = new Set([
  "load_extension",
  "readfile",
  "writefile",
  "edit",
  "fsdir",
  "zipfile",
  "sha3_query",
  "fts3_tokenizer",
  "sqlite_dbpage",
]);

/** SQLite's schema tables: SQLite itself refuses writes to them unless writable_schema (PRAGMA, and defensive mode forbids it). */
const SCHEMA_TABLES: ReadonlySet<string> = new Set(["sqlite_master", "sqlite_schema", "sqlite_temp_master", "sqlite_temp_schema"]);

function reserved(name: string | null): boolean {
  return name !== null && name.toLowerCase().startsWith(RESERVED_PREFIX);
}

/** SQLite's own tables other than the schema tables (sqlite_sequence, sqlite_stat1, ...). */
function internal(name: string | null): boolean {
  if (name === null) return false;
  const n = name.toLowerCase();
  return n.startsWith("sqlite_") && !SCHEMA_TABLES.has(n);
}

function readable(table: string | null): boolean {
  if (table === null) return true;
  const t = table.toLowerCase();
  if (reserved(t) || DENIED_TABLES.has(t)) return false;
  // PRAGMA schema_version is only the schema cookie (the point reader's guarded LIMIT reads it)
  return !t.startsWith("pragma_") || t === "pragma_schema_version";
}

/**
 * The decision for one authorizer call (sqlite3_set_authorizer's arguments).
 * `inside` is the trigger or view whose body is being compiled, if any.
 * `ddl` is set while a CREATE, ALTER or DROP statement is compiled: SQLite
 * then keeps its own tables itself (the sqlite_sequence row of an
 * AUTOINCREMENT table, statistics of a dropped table) through statements it
 * writes, and those writes are allowed; a tenant's own statement can never
 * write them.
 */
export function tenantAuthorizer(action: number, a: string | null, b: string | null, _db: string | null, inside: string | null, ddl = false): number {
  // The service's capture triggers write its change table; tenants cannot
  // create triggers (below), so a trigger with this name is the service's.
  if (reserved(inside)) return OK;
  switch (action) {
    case C.SQLITE_SELECT:
    case C.SQLITE_RECURSIVE:
    case C.SQLITE_TRANSACTION: // BEGIN, COMMIT, ROLLBACK are allowed prefixes
      return OK;
    case C.SQLITE_READ: // a = table, b = column ("" when no column is read, as in count(*))
      return readable(a) ? OK : DENY;
    case C.SQLITE_INSERT:
    case C.SQLITE_UPDATE:
    case C.SQLITE_DELETE: // a = table
      return reserved(a) || (internal(a) && !ddl) ? DENY : OK;
    case C.SQLITE_CREATE_TABLE: // a = table (sqlite_sequence, made by the first AUTOINCREMENT table)
      return reserved(a) || (internal(a) && !(ddl && a!.toLowerCase() === "sqlite_sequence")) ? DENY : OK;
    case C.SQLITE_CREATE_TEMP_TABLE:
    case C.SQLITE_DROP_TABLE:
    case C.SQLITE_DROP_TEMP_TABLE: // a = table
      return reserved(a) || internal(a) ? DENY : OK;
    case C.SQLITE_CREATE_INDEX:
    case C.SQLITE_CREATE_TEMP_INDEX:
    case C.SQLITE_DROP_INDEX:
    case C.SQLITE_DROP_TEMP_INDEX: // a = index, b = table
      return reserved(a) || reserved(b) || internal(b) ? DENY : OK;
    case C.SQLITE_REINDEX: // part of CREATE INDEX (REINDEX itself is not an allowed prefix)
      return reserved(a) ? DENY : OK;
    case C.SQLITE_ALTER_TABLE: // a = schema, b = table
      return reserved(b) || internal(b) ? DENY : OK;
    case C.SQLITE_FUNCTION: // b = function name
      return b !== null && DENIED_FUNCTIONS.has(b.toLowerCase()) ? DENY : OK;
    case C.SQLITE_PRAGMA: // a = pragma, b = value; only reading the schema cookie
      return a !== null && a.toLowerCase() === "schema_version" && b === null ? OK : DENY;
    default:
      // triggers, views, virtual tables, ATTACH/DETACH, SAVEPOINT, ANALYZE,
      // and any action code a later SQLite adds
      return DENY;
  }
}
