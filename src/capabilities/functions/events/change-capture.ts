// Row-level change capture on an application's libSQL database. For every
// watched table the service installs SQLite triggers (one per watched
// operation) that append the change to `_pulsebase_changes`; the event worker
// drains that table in seq order. Rows are captured as JSON objects of their
// columns (blob values as hex strings). The column list is read when the
// trigger is installed, so the worker re-installs periodically to follow
// ALTER TABLE. The same SQL runs on embedded files and remote libSQL
// servers: ChangeCaptureDb is the executor (database-capture.ts).
import type { FunctionDbResult, FunctionDbStatement } from "../../database/index.js";
import { quoteIdent as ident } from "../../../infra/libsql/sql-tokenizer.js";

/** Privileged access to an application's libSQL database (no SQL guard). */
export interface ChangeCaptureDb {
  /** Runs the statements as the service, in one transaction, in order. */
  serviceBatch(appId: number, statements: FunctionDbStatement[]): Promise<FunctionDbResult[]>;
  /**
   * Looks up where the application's statements go (its linked database)
   * now and returns a ChangeCaptureDb for it whose serviceBatch needs no
   * service-database connection. A capture sync calls it before taking its
   * lock, which holds a service-database connection: the sync then never
   * waits for a second one (PULSEBASE_PG_POOL_SIZE may be 1). Unset when
   * serviceBatch itself needs no service-database connection.
   */
  pin?(appId: number): Promise<ChangeCaptureDb>;
  /** Releases connections (remote clients); called when the functions module closes. */
  close?(): void;
}

export const CHANGE_TABLE = "_pulsebase_changes";
const TRIGGER_PREFIX = "_pulsebase_t_";
const OPS = { insert: "INSERT", update: "UPDATE", delete: "DELETE" } as const;
export type Operation = keyof typeof OPS;

export interface CapturedChange {
  seq: number;
  table: string;
  operation: Operation;
  before: Record<string, unknown> | null;
  after: Record<string, unknown> | null;
  at: string;
}

const literal = (s: string) => `'${s.replace(/'/g, "''")}'`;

function checked(results: FunctionDbResult[]): FunctionDbResult[] {
  const failed = results.find((r) => r.error);
  if (failed) throw new Error(failed.error);
  return results;
}

function rowJson(alias: "NEW" | "OLD", columns: string[]): string {
  const parts = columns.map(
    (c) => `${literal(c)}, CASE typeof(${alias}.${ident(c)}) WHEN 'blob' THEN hex(${alias}.${ident(c)}) ELSE ${alias}.${ident(c)} END`,
  );
  return `json_object(${parts.join(", ")})`;
}

/**
 * Makes the database's triggers match `watch` (table -> operations): creates
 * the change table, (re)creates the triggers of watched tables and drops the
 * service's triggers nobody watches any more. Tables that do not exist yet
 * are skipped (and reported) so that the rest still works.
 */
export async function syncCapture(db: ChangeCaptureDb, appId: number, watch: Map<string, Set<Operation>>): Promise<{ missing: string[] }> {
  const tables = [...watch.keys()];
  const [, existing, ...cols] = checked(
    await db.serviceBatch(appId, [
      {
        sql: `CREATE TABLE IF NOT EXISTS ${CHANGE_TABLE} (seq INTEGER PRIMARY KEY AUTOINCREMENT, tbl TEXT NOT NULL, op TEXT NOT NULL,
          before TEXT, after TEXT, at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')))`,
      },
      { sql: `SELECT name FROM sqlite_master WHERE type = 'trigger' AND substr(name, 1, ${TRIGGER_PREFIX.length}) = ?`, params: [TRIGGER_PREFIX] },
      ...tables.map((t) => ({ sql: "SELECT name FROM pragma_table_info(?)", params: [t] })),
    ]),
  );
  const statements: FunctionDbStatement[] = [];
  for (const row of existing!.rows) statements.push({ sql: `DROP TRIGGER IF EXISTS ${ident(String(row[0]))}` });
  const missing: string[] = [];
  tables.forEach((table, i) => {
    const columns = (cols[i]?.rows ?? []).map((r) => String(r[0]));
    if (columns.length === 0) {
      missing.push(table);
      return;
    }
    for (const op of watch.get(table)!) {
      const name = ident(`${TRIGGER_PREFIX}${table}_${op}`);
      // Also dropped by name: another process may have created it since the listing above.
      statements.push({ sql: `DROP TRIGGER IF EXISTS ${name}` });
      const before = op === "insert" ? "NULL" : rowJson("OLD", columns);
      const after = op === "delete" ? "NULL" : rowJson("NEW", columns);
      statements.push({
        sql: `CREATE TRIGGER ${name} AFTER ${OPS[op]} ON ${ident(table)} BEGIN
          INSERT INTO ${CHANGE_TABLE} (tbl, op, before, after) VALUES (${literal(table)}, ${literal(op)}, ${before}, ${after});
        END`,
      });
    }
  });
  if (statements.length > 0) checked(await db.serviceBatch(appId, statements));
  return { missing };
}

/** The oldest captured changes, at most `limit`. */
export async function readChanges(db: ChangeCaptureDb, appId: number, limit: number): Promise<CapturedChange[]> {
  const [r] = checked(
    await db.serviceBatch(appId, [{ sql: `SELECT seq, tbl, op, before, after, at FROM ${CHANGE_TABLE} ORDER BY seq LIMIT ?`, params: [limit] }]),
  );
  return r!.rows.map((row) => ({
    seq: Number(row[0]),
    table: String(row[1]),
    operation: String(row[2]) as Operation,
    before: row[3] == null ? null : (JSON.parse(String(row[3])) as Record<string, unknown>),
    after: row[4] == null ? null : (JSON.parse(String(row[4])) as Record<string, unknown>),
    at: String(row[5]),
  }));
}

/** Forgets changes up to and including `seq` (after they were published). */
export async function deleteChanges(db: ChangeCaptureDb, appId: number, seq: number): Promise<void> {
  checked(await db.serviceBatch(appId, [{ sql: `DELETE FROM ${CHANGE_TABLE} WHERE seq <= ?`, params: [seq] }]));
}
