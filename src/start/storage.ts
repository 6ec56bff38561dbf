// Opens the PostgreSQL backend: a pg pool when DATABASE_URL is set, else the
// embedded PGlite in the data directory. Migrations run on open.
import { join } from "node:path";
import { mkdir } from "node:fs/promises";
import type { Config } from "../config/config.js";
import { migrate } from "../storage/migrate.js";
import { createPgSql } from "../storage/pg-sql.js";
import { createPgliteSql } from "../storage/pglite-sql.js";
import type { Sql } from "../storage/sql.js";

export async function openStorage(config: Config): Promise<Sql> {
  let sql: Sql;
  if (config.databaseUrl) {
    sql = createPgSql({ connectionString: config.databaseUrl, max: config.pgPoolSize });
  } else {
    const dir = join(config.dataDir, "pg");
    await mkdir(dir, { recursive: true });
    sql = await createPgliteSql(dir);
  }
  await migrate(sql);
  return sql;
}
