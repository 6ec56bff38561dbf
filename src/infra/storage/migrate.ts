// A small migration runner: numbered .sql files in src/storage/migrations,
// applied in name order, each recorded in schema_migrations. One transaction
// under an advisory lock, so several processes starting at once apply each
// migration exactly once. The same files run on PostgreSQL and PGlite.
import { readdir, readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import type { Sql } from "./sql.js";

const defaultDir = fileURLToPath(new URL("./migrations/", import.meta.url));
const LOCK_KEY = 7_020_251; // arbitrary, stable

export interface Migration {
  name: string;
  sql: string;
}

export async function loadMigrations(dir = defaultDir): Promise<Migration[]> {
  const files = (await readdir(dir)).filter((f) => f.endsWith(".sql")).sort();
  return Promise.all(files.map(async (name) => ({ name, sql: await readFile(dir + name, "utf8") })));
}

/** Applies pending migrations; returns the names applied. */
export async function migrate(sql: Sql, migrations?: Migration[]): Promise<string[]> {
  const all = migrations ?? (await loadMigrations());
  return sql.transaction(async (tx) => {
    await tx.query("SELECT pg_advisory_xact_lock($1)", [LOCK_KEY]);
    await tx.query(
      "CREATE TABLE IF NOT EXISTS schema_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())",
    );
    const done = new Set((await tx.query<{ name: string }>("SELECT name FROM schema_migrations")).rows.map((r) => r.name));
    const applied: string[] = [];
    for (const m of all) {
      if (done.has(m.name)) continue;
      await tx.exec(m.sql);
      await tx.query("INSERT INTO schema_migrations (name) VALUES ($1)", [m.name]);
      applied.push(m.name);
    }
    return applied;
  });
}
