// Per-test-file databases: a fresh database on the real PostgreSQL server
// (TEST_DATABASE_URL, default postgres://root@127.0.0.1:5432/test), copied
// from a migrated template, or an in-memory PGlite loaded from a migrated
// snapshot. drop() removes it.
import { createHash, randomBytes } from "node:crypto";
import { cp, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { PGlite } from "@electric-sql/pglite";
import pg from "pg";
import { createPgSql } from "../../src/infra/storage/pg-sql.js";
import { PGLITE_OPTIONS, pgliteSql } from "../../src/infra/storage/pglite-sql.js";
import { loadMigrations, migrate, type Migration } from "../../src/infra/storage/migrate.js";
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
    const sql = pgliteSql(await PGlite.create(undefined, { ...PGLITE_OPTIONS, loadDataDir: await pgliteSnapshot() }));
    return { sql, kind, drop: () => sql.close() };
  }
  // A database of its own, copied from the migrated template (tens of
  // milliseconds, where migrating a fresh schema took 0.4-0.7 s). Its one
  // schema is renamed to the database's name, unique on the server:
  // application_name = the schema lets a fault test find (and terminate)
  // exactly this file's connections in pg_stat_activity.
  const template = await (templateDb ??= templateDatabase());
  const name = uniqueName(TEST_DB_PREFIX);
  await (await admin()).query(`CREATE DATABASE ${name} TEMPLATE ${template}`);
  const url = databaseUrl(name);
  await onDatabase(url, (c) => c.query(`ALTER SCHEMA ${TEMPLATE_SCHEMA} RENAME TO ${name}`));
  const sql = createPgSql({ connectionString: url, schema: name, max: 8, applicationName: name });
  return {
    sql,
    kind,
    schema: name,
    url,
    async drop() {
      await sql.close();
      dropLater(name);
    },
  };
}

// The template: a database whose schema TEMPLATE_SCHEMA has every migration
// applied, named by a hash of the migration files, so a changed or added
// migration makes a new one (an old one stays for runs still using it; see
// docs/conventions.md, Tests). Made once, by whichever process comes first
// (the others wait on an advisory lock, then find it); it takes no
// connections, so copying it never fails on a session left in it.
const TEMPLATE_SCHEMA = "pb_template";
const TEST_DB_PREFIX = "pbt";
const TEMPLATE_LOCK = 7_020_252; // beside migrate.ts's 7_020_251
let templateDb: Promise<string> | undefined;

function databaseUrl(name: string): string {
  const u = new URL(TEST_DATABASE_URL);
  u.pathname = `/${name}`;
  return u.toString();
}

async function onDatabase<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: url });
  c.on("error", () => {});
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

/** A hash of the migration files (and `also`): a changed or added migration changes it. */
function migrationsHash(migrations: Migration[], also = ""): string {
  const hash = createHash("sha256").update(also).update("\0");
  for (const m of migrations) hash.update(m.name).update("\0").update(m.sql).update("\0");
  return hash.digest("hex").slice(0, 16);
}

async function templateDatabase(): Promise<string> {
  const migrations = await loadMigrations();
  const name = `pb_tpl_${migrationsHash(migrations)}`;
  return onDatabase(TEST_DATABASE_URL, async (c) => {
    await c.query("SELECT pg_advisory_lock($1)", [TEMPLATE_LOCK]);
    try {
      await sweepLeftovers(c);
      if ((await c.query("SELECT 1 FROM pg_database WHERE datname = $1", [name])).rowCount) return name;
      // Built under another name and renamed when complete: a process killed
      // half-way leaves no template that lacks a migration.
      const building = `${name}_building`;
      await c.query(`DROP DATABASE IF EXISTS ${building} WITH (FORCE)`);
      await c.query(`CREATE DATABASE ${building}`);
      const url = databaseUrl(building);
      await onDatabase(url, (b) => b.query(`CREATE SCHEMA ${TEMPLATE_SCHEMA}`));
      const sql = createPgSql({ connectionString: url, schema: TEMPLATE_SCHEMA, max: 1 });
      try {
        await migrate(sql, migrations);
      } finally {
        await sql.close();
      }
      await c.query(`ALTER DATABASE ${building} RENAME TO ${name}`);
      await c.query(`ALTER DATABASE ${name} WITH IS_TEMPLATE true ALLOW_CONNECTIONS false`);
      return name;
    } finally {
      await c.query("SELECT pg_advisory_unlock($1)", [TEMPLATE_LOCK]);
    }
  });
}

// One connection per process to TEST_DATABASE_URL creates and drops the
// file's databases. A database is dropped without waiting for it (a DROP
// DATABASE takes 0.1-0.5 s): the connection is open, so the statement is
// written at once and runs to its end on the server even if this process
// exits right after. Test databases a killed run left behind (older than an
// hour, no one connected) are dropped when a process next looks for the
// template.
let adminClient: Promise<pg.Client> | undefined;

function admin(): Promise<pg.Client> {
  return (adminClient ??= (async () => {
    const c = new pg.Client({ connectionString: TEST_DATABASE_URL });
    c.on("error", () => {});
    await c.connect();
    return c;
  })());
}

function dropLater(name: string): void {
  void admin()
    .then((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))
    .catch(() => {});
}

// The in-memory PGlite: a fresh one spends 4-7 s in initdb on this machine
// before the migrations; loading a snapshot of a migrated one (dumpDataDir)
// takes under 1.5 s. The snapshot is a file in the temporary directory named
// by the migrations and the PGlite version; the first process to need it
// writes it (to a temporary name, then renamed: a reader never sees half a
// file; two writers at once write the same content).
let snapshot: Promise<Blob> | undefined;

/** The migrations and the PGlite version, hashed. */
async function snapshotKey(): Promise<string> {
  // (its package.json is not among the package's exports: read beside its entry point)
  const entry = createRequire(import.meta.url).resolve("@electric-sql/pglite");
  const version = (JSON.parse(await readFile(join(dirname(entry), "..", "package.json"), "utf8")) as { version: string }).version;
  return migrationsHash(await loadMigrations(), version);
}

function pgliteSnapshot(): Promise<Blob> {
  return (snapshot ??= (async () => {
    const migrations = await loadMigrations();
    const file = join(tmpdir(), `pulsebase-test-pglite-${await snapshotKey()}.tar`);
    try {
      return new Blob([await readFile(file)]);
    } catch {
      // not made yet
    }
    const db = await PGlite.create(undefined, PGLITE_OPTIONS);
    try {
      await migrate(pgliteSql(db), migrations);
      const dump = await db.dumpDataDir("none");
      const part = `${file}.${process.pid}.${randomBytes(4).toString("hex")}`;
      await writeFile(part, new Uint8Array(await dump.arrayBuffer()));
      await rename(part, file);
      return dump;
    } finally {
      await db.close();
    }
  })());
}

/**
 * Fills `dir` (a server's `<data dir>/pg`) with a migrated embedded database,
 * as a server leaves it when it stops: a child server started on it skips the
 * first start's initdb (4-7 s). For tests of anything but that first start
 * (test/e2e/embedded.test.ts and the README walkthrough start from nothing).
 * The directory copied is made once per migration set from the snapshot.
 */
export async function seedEmbeddedDb(dir: string): Promise<void> {
  const made = await (embeddedDir ??= embeddedDataDir());
  await cp(made, dir, { recursive: true });
}

let embeddedDir: Promise<string> | undefined;

async function embeddedDataDir(): Promise<string> {
  const blob = await pgliteSnapshot();
  const dir = join(tmpdir(), `pulsebase-test-pglite-${await snapshotKey()}.d`);
  if (await stat(join(dir, "PG_VERSION")).then(() => true, () => false)) return dir;
  const part = `${dir}.${process.pid}.${randomBytes(4).toString("hex")}`;
  const db = await PGlite.create(part, { ...PGLITE_OPTIONS, loadDataDir: blob });
  await db.close();
  // Another process may have made it meanwhile: then theirs is kept.
  await rename(part, dir).catch(() => rm(part, { recursive: true, force: true }));
  return dir;
}

async function sweepLeftovers(c: pg.Client): Promise<void> {
  const { rows } = await c.query<{ datname: string }>(
    "SELECT datname FROM pg_database WHERE datname LIKE $1 AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.datname = pg_database.datname)",
    [`${TEST_DB_PREFIX}\\_%`],
  );
  const hourAgo = Date.now() - 3600_000;
  for (const { datname } of rows) {
    const made = parseInt(datname.split("_")[1] ?? "", 36);
    if (made < hourAgo) await c.query(`DROP DATABASE IF EXISTS ${datname}`).catch(() => {});
  }
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
