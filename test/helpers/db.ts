// Per-test-file databases: a fresh schema on the real PostgreSQL server
// (TEST_DATABASE_URL, default postgres://root@127.0.0.1:5432/test), or an
// in-memory PGlite. Migrations are applied; drop() removes the schema.
import { randomBytes } from "node:crypto";
import { createPgSql } from "../../src/infra/storage/pg-sql.js";
import { createPgliteSql } from "../../src/infra/storage/pglite-sql.js";
import { migrate } from "../../src/infra/storage/migrate.js";
import { createScratchSchema, dropScratchSchema } from "../../src/infra/storage/scratch-schema.js";
import type { Sql } from "../../src/infra/storage/sql.js";

export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL ?? "postgres://root@127.0.0.1:5432/test";
export const TEST_NATS_URL = process.env.TEST_NATS_URL ?? "nats://127.0.0.1:4222";

export interface TestDb {
  sql: Sql;
  kind: "postgres" | "pglite";
  /** Connection string with the schema selected (for child processes). */
  url?: string;
  schema?: string;
  drop(): Promise<void>;
}

export function uniqueName(prefix = "t"): string {
  return `${prefix}_${Date.now().toString(36)}_${randomBytes(4).toString("hex")}`;
}

export async function createTestDb(kind: "postgres" | "pglite" = "postgres"): Promise<TestDb> {
  if (kind === "pglite") {
    const sql = await createPgliteSql();
    await migrate(sql);
    return { sql, kind, drop: () => sql.close() };
  }
  const schema = await createScratchSchema(TEST_DATABASE_URL, "pb");
  // application_name = the schema: a fault test can find (and terminate)
  // exactly this file's connections in pg_stat_activity.
  const sql = createPgSql({ connectionString: TEST_DATABASE_URL, schema, max: 8, applicationName: schema });
  await migrate(sql);
  return {
    sql,
    kind,
    schema,
    url: TEST_DATABASE_URL,
    async drop() {
      await sql.close();
      await dropScratchSchema(TEST_DATABASE_URL, schema);
    },
  };
}

/** A team and one application per name (plan `{}`, app key `pk_<name>`), straight in the schema; their ids in order. */
export async function createApps<N extends string[]>(db: TestDb, ...names: N): Promise<{ [K in keyof N]: number }> {
  const team = await db.sql.query<{ id: number }>("INSERT INTO teams (name) VALUES ('t') RETURNING id");
  const ids: number[] = [];
  for (const n of names) {
    const r = await db.sql.query<{ id: number }>("INSERT INTO apps (team_id, name, app_key, plan) VALUES ($1, $2, $3, '{}') RETURNING id", [team.rows[0]!.id, n, `pk_${n}`]);
    ids.push(Number(r.rows[0]!.id));
  }
  return ids as { [K in keyof N]: number };
}
