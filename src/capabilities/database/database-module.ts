// Wires the capability: one engine pool and remote executor per process,
// the store on the service's SQL, the query runner and both ServiceImpls.
// `close()` must run at shutdown (it stops the engine processes).
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import type { ServiceImpl } from "@connectrpc/connect";
import type { DatabaseService as AdminDatabaseService } from "../../../gen/pulsebase/admin/v1/database_pb.js";
import type { DatabaseService } from "../../../gen/pulsebase/platform/v1/database_pb.js";
import type { Sql } from "../../infra/storage/sql.js";
import { createDatabaseAdminServiceImpl } from "./admin-service.js";
import { DEFAULT_DATABASE_LIMITS, type DatabaseConfig } from "./database-config.js";
import { createDatabaseManager, type DatabaseManager } from "./database-manager.js";
import { createDatabaseStore, type DatabaseStore } from "./database-store.js";
import { EnginePool } from "../../infra/libsql/engine-pool.js";
import { createDatabaseServiceImpl } from "./platform-service.js";
import { PointReader } from "../../infra/libsql/point-reader.js";
import { createQueryRunner, type QueryRunner } from "./query-runner.js";
import { RemoteExecutor } from "../../infra/libsql/remote-executor.js";
import { createOperatorSql } from "./operator-sql.js";
import { createSqlServiceImpl } from "./sql-service.js";
import type { SqlService } from "../../../gen/pulsebase/admin/v1/sql_pb.js";

export interface DatabaseModule {
  store: DatabaseStore;
  manager: DatabaseManager;
  runner: QueryRunner;
  pool: EnginePool;
  /** pulsebase.platform.v1.DatabaseService (device API, /api/db/*). */
  platform: ServiceImpl<typeof DatabaseService>;
  /** pulsebase.admin.v1.DatabaseService (operator API). */
  admin: ServiceImpl<typeof AdminDatabaseService>;
  /** pulsebase.admin.v1.SqlService (operator SQL, operator-sql.ts). */
  sqlAdmin: ServiceImpl<typeof SqlService>;
  close(): Promise<void>;
}

/** `onChange`: a link, status or deletion changed through this process (the server tells the other processes). */
export async function createDatabaseModule(config: DatabaseConfig, deps: { sql: Sql; onChange?: () => void }): Promise<DatabaseModule> {
  await mkdir(config.dataDir, { recursive: true });
  const limits = { ...DEFAULT_DATABASE_LIMITS, ...config.limits };
  const store = createDatabaseStore(deps.sql);
  // SQLite's temp files (temp tables, sorts) go next to the databases, not to a /tmp that may live in memory
  const tempDir = join(config.dataDir, "engine-tmp");
  await mkdir(tempDir, { recursive: true });
  const pool = new EnginePool({
    processes: config.engineProcesses,
    timeoutMs: limits.queryTimeoutMs,
    maxMemoryBytes: limits.maxEngineMemoryBytes,
    tempDir,
    settings: {
      maxValueBytes: limits.maxValueBytes,
      walSizeLimitBytes: limits.walSizeLimitBytes,
      maxSchemaBytes: limits.maxSchemaBytes,
      maxSchemaObjects: limits.maxSchemaObjects,
      maxColumnsPerTable: limits.maxColumnsPerTable,
    },
    appRunning: limits.appRunning,
    appQueued: limits.appQueued,
    queueWaitMs: limits.queueWaitMs,
    abandonGraceMs: limits.abandonGraceMs,
    nice: config.engineNice,
  });
  const remote = new RemoteExecutor();
  // the reader copies no value larger than a response may carry
  const reader = config.pointReads === false ? undefined : new PointReader({ maxValueBytes: Math.min(limits.maxValueBytes, limits.maxResultBytes) });
  const runner = createQueryRunner({ store, pool, reader, remote, dataDir: config.dataDir, limits, linkCacheMs: config.linkCacheMs });
  const manager = createDatabaseManager({
    store,
    files: {
      async closeFile(path) {
        reader?.close(path);
        await pool.closeFile(path);
      },
    },
    remote,
    dataDir: config.dataDir,
    remoteCheckTimeoutMs: config.remoteCheckTimeoutMs,
    onChange: () => {
      runner.invalidate();
      deps.onChange?.();
    },
  });
  return {
    store,
    manager,
    runner,
    pool,
    platform: createDatabaseServiceImpl({ runner }),
    admin: createDatabaseAdminServiceImpl({ manager }),
    sqlAdmin: createSqlServiceImpl({ operator: createOperatorSql({ store, pool, remote, dataDir: config.dataDir, limits }) }),
    async close() {
      remote.close();
      reader?.closeAll();
      await pool.close();
    },
  };
}
