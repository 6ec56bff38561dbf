// ChangeCaptureDb over the database module (src/database): statements run on
// the application's linked embedded database through the engine pool,
// without the /api/db guard (the service installs SQLite triggers and reads
// pragma_table_info). Remote (libsql://) databases are not captured: their
// changes do not pass through this service.
import { join } from "node:path";
import { appError } from "../../internal/errors.js";
import { DEFAULT_DATABASE_LIMITS } from "../../database/database-config.js";
import type { DatabaseStore } from "../../database/database-store.js";
import type { EnginePool } from "../../database/engine-pool.js";
import type { EngineValue } from "../../database/engine-protocol.js";
import type { FunctionDbResult } from "../function-db.js";
import type { ChangeCaptureDb } from "./change-capture.js";

const LIMITS = { maxRows: 10_000, maxBytes: 32 * 1024 * 1024, busyTimeoutMs: 5_000 };

export function changeCaptureFromDatabase(deps: {
  store: Pick<DatabaseStore, "linkedTo">;
  pool: Pick<EnginePool, "run">;
  /** The database module's dataDir (embedded files are relative to it). */
  dataDir: string;
  /** The database module's size limit (PRAGMA max_page_count); default DEFAULT_DATABASE_LIMITS. */
  maxDatabaseBytes?: number;
}): ChangeCaptureDb {
  const maxDatabaseBytes = deps.maxDatabaseBytes ?? DEFAULT_DATABASE_LIMITS.maxDatabaseBytes;
  return {
    async serviceBatch(appId, statements) {
      const db = await deps.store.linkedTo(appId);
      if (!db) throw appError("database_not_linked");
      if (db.kind !== "embedded" || !db.filePath) throw appError("failed_precondition", "Change capture needs an embedded database.");
      if (db.status !== "active") throw appError("database_unavailable");
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
          maxDatabaseBytes,
          ...LIMITS,
        },
        db.id,
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
    },
  };
}
