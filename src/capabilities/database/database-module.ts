// The database capability's module definition: one engine pool and remote
// executor per process, the store on the service's SQL, the query runner,
// the device service (with its REST JSON paths), the operator services and
// ctx.db for functions.
// `stop()` must run at shutdown (it stops the engine processes).
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { DatabaseService as AdminDatabaseService } from "../../../gen/pulsebase/admin/v1/database_pb.js";
import { DatabaseService } from "../../../gen/pulsebase/platform/v1/database_pb.js";
import { SqlService } from "../../../gen/pulsebase/admin/v1/sql_pb.js";
import { AccessRulesService } from "../../../gen/pulsebase/admin/v1/access_rules_pb.js";
import { createAccessRulesStore } from "./access-rules-store.js";
import { createAccessRulesServiceImpl } from "./access-rules-service.js";
import type { ChangeBus } from "../../infra/cluster/change-bus.js";
import type { Sql } from "../../infra/storage/sql.js";
import { binding, type PulsebaseModule } from "../../kernel/module.js";
import { createDatabaseAdminServiceImpl } from "./admin-service.js";
import { DEFAULT_DATABASE_LIMITS, type DatabaseConfig } from "./database-config.js";
import { createDatabaseManager, type DatabaseManager } from "./database-manager.js";
import { createDatabaseStore, type DatabaseStore } from "./database-store.js";
import { dbCapability } from "./function-db.js";
import { EnginePool } from "../../infra/libsql/engine-pool.js";
// (generated from the fast_codec option: bin/protoc-gen-fastcodec.js)
import { decodeQueryRequest, encodeQueryResponse } from "../../../gen/fastcodec/pulsebase/platform/v1/database.js";
import { createDatabaseJsonPaths, createDatabaseServiceImpl } from "./platform-service.js";
import { PointReader } from "../../infra/libsql/point-reader.js";
import { createQueryRunner, type QueryRunner } from "./query-runner.js";
import { RemoteExecutor } from "../../infra/libsql/remote-executor.js";
import { createOperatorSql } from "./operator-sql.js";
import { createSqlServiceImpl } from "./sql-service.js";
import { createSqlQueryStore } from "./sql-query-store.js";
import type { HandlerContext } from "@connectrpc/connect";

export interface DatabaseModule extends PulsebaseModule {
  store: DatabaseStore;
  manager: DatabaseManager;
  runner: QueryRunner;
  pool: EnginePool;
  stop(): Promise<void>;
}

/**
 * `changes`: links, statuses and deletions go out to, and come in from, the other processes.
 * `callerId`: the console account of an admin call (0 for the operator
 * token), for the SQL editor's per-account history and saved queries; the
 * server reads it from the admin listener's policy, which this capability
 * does not import.
 */
export async function createDatabaseModule(
  config: DatabaseConfig,
  deps: { sql: Sql; changes?: ChangeBus; callerId?: (ctx: HandlerContext) => number },
): Promise<DatabaseModule> {
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
      void deps.changes?.publish("database", 0);
    },
  });
  deps.changes?.subscribe("database", () => runner.invalidate());
  const json = createDatabaseJsonPaths(runner);
  return {
    name: "database",
    store,
    manager,
    runner,
    pool,
    device: [
      binding(DatabaseService, createDatabaseServiceImpl({ runner }), {
        query: { json: json.query, decode: decodeQueryRequest, encode: encodeQueryResponse },
        batch: { json: json.batch, encode: encodeQueryResponse },
      }),
    ],
    admin: [
      binding(AdminDatabaseService, createDatabaseAdminServiceImpl({ manager })),
      binding(
        AccessRulesService,
        createAccessRulesServiceImpl({
          store: createAccessRulesStore(deps.sql),
          runner,
          callerId: deps.callerId,
          changed: () => {
            runner.invalidate();
            void deps.changes?.publish("database", 0);
          },
        }),
      ),
      binding(
        SqlService,
        createSqlServiceImpl({
          operator: createOperatorSql({ store, pool, remote, dataDir: config.dataDir, limits }),
          queries: createSqlQueryStore(deps.sql),
          callerId: deps.callerId,
        }),
      ),
    ],
    gauges: { engines: { engines: () => pool.stats(), remote: () => runner.remoteStats() } },
    hostCapabilities: [dbCapability(runner)],
    async stop() {
      remote.close();
      reader?.closeAll();
      await pool.close();
    },
  };
}
