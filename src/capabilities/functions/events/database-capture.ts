// ChangeCaptureDb over the database module (src/capabilities/database): the capture
// statements run on the application's linked database without the /api/db
// guard (the service installs SQLite triggers and reads pragma_table_info).
// Embedded files go through the engine pool; remote databases (sqld, Turso)
// through @libsql/client (libsql-capture.ts). The capture SQL and the
// drainer are the same for both: the triggers live in the database itself,
// so every write is captured, also writes that do not pass through this
// service (another client of a remote database).
import { join } from "node:path";
import { appError } from "../../../kernel/errors.js";
import { DEFAULT_DATABASE_LIMITS, type DatabaseStore, type FunctionDbResult, type FunctionDbStatement, type LinkedDatabase } from "../../database/index.js";
import type { EnginePool } from "../../../infra/libsql/engine-pool.js";
import type { EngineValue } from "../../../infra/libsql/engine-protocol.js";
import type { ChangeCaptureDb } from "./change-capture.js";
import { createLibsqlCaptureExecutor, type LibsqlCaptureExecutor } from "./libsql-capture.js";

const LIMITS = { maxRows: 10_000, maxBytes: 32 * 1024 * 1024, busyTimeoutMs: 5_000 };

export function changeCaptureFromDatabase(deps: {
  store: Pick<DatabaseStore, "linkedTo">;
  pool: Pick<EnginePool, "run">;
  /** The database module's dataDir (embedded files are relative to it). */
  dataDir: string;
  /** The database module's size limit (PRAGMA max_page_count); default DEFAULT_DATABASE_LIMITS. */
  maxDatabaseBytes?: number;
  /** Remote databases; default: a client per database owned by this capture (closed by close()). */
  remote?: LibsqlCaptureExecutor;
}): ChangeCaptureDb & { close(): void } {
  const maxDatabaseBytes = deps.maxDatabaseBytes ?? DEFAULT_DATABASE_LIMITS.maxDatabaseBytes;
  const remote = deps.remote ?? createLibsqlCaptureExecutor();
  async function linked(appId: number): Promise<LinkedDatabase> {
    const db = await deps.store.linkedTo(appId);
    if (!db) throw appError("database_not_linked");
    if (db.status !== "active") throw appError("database_unavailable");
    return db;
  }
  async function runOn(appId: number, db: LinkedDatabase, statements: FunctionDbStatement[]): Promise<FunctionDbResult[]> {
    if (db.kind === "remote") {
      if (!db.url) throw appError("database_unavailable");
      return remote.run({ id: db.id, url: db.url, authToken: db.authToken ?? "" }, statements);
    }
    if (!db.filePath) throw appError("database_unavailable");
    const results = await deps.pool.run(
      {
        path: join(deps.dataDir, db.filePath),
        statements: statements.map((s) => ({
          sql: s.sql,
          args: (Array.isArray(s.params) ? s.params : []) as EngineValue[],
          verb: (/^\s*([A-Za-z]+)/.exec(s.sql)?.[1] ?? "").toUpperCase(),
        })),
        transaction: true,
        mayUseTemp: false,
        // the service's own statements: no tenant authorizer or schema caps
        // (the engine's connection is defensive all the same)
        service: true,
        maxDatabaseBytes,
        ...LIMITS,
      },
      db.id,
      // the application's own share of the engines (engine-pool.ts)
      { owner: appId },
    );
    return results.map(
      (r): FunctionDbResult => ({
        columns: r.columns,
        rows: r.rows,
        rows_read: r.rowsRead,
        rows_written: r.rowsWritten,
        ...(r.error !== undefined ? { error: r.error } : {}),
      }),
    );
  }
  return {
    async serviceBatch(appId, statements) {
      return runOn(appId, await linked(appId), statements);
    },
    async pin(appId) {
      const db = await linked(appId);
      return { serviceBatch: (_appId, statements) => runOn(appId, db, statements) };
    },
    close() {
      if (!deps.remote) remote.close();
    },
  };
}
