// The database capability as a server module (src/kernel/module.ts): both
// services, and the engine processes stopped with the server.
import { DatabaseService as AdminDatabaseService } from "../../../gen/pulsebase/admin/v1/database_pb.js";
import { DatabaseService } from "../../../gen/pulsebase/platform/v1/database_pb.js";
import { SqlService } from "../../../gen/pulsebase/admin/v1/sql_pb.js";
import { registerEngineMetrics } from "../../server/metrics.js";
import { binding, type PulsebaseModule } from "../../kernel/module.js";
import type { Sql } from "../../infra/storage/sql.js";
import type { DatabaseConfig } from "./database-config.js";
import { createDatabaseModule } from "./database-module.js";

export async function createDatabasePulsebaseModule(config: DatabaseConfig, deps: { sql: Sql }): Promise<PulsebaseModule> {
  const m = await createDatabaseModule(config, deps);
  return {
    name: "database",
    device: [binding(DatabaseService, m.platform)],
    admin: [binding(AdminDatabaseService, m.admin), binding(SqlService, m.sqlAdmin)],
    stop: () => m.close(),
    registerMetrics: (registry) => registerEngineMetrics(registry, { engines: () => m.pool.stats(), remote: () => m.runner.remoteStats() }),
  };
}
