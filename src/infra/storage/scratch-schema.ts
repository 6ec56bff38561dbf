// Throw-away schemas on a PostgreSQL server: tests give each file one, the
// bench gives each run one, so they never see each other's rows.
import { randomBytes } from "node:crypto";
import pg from "pg";

async function run(url: string, text: string): Promise<void> {
  const c = new pg.Client({ connectionString: url });
  // A connection lost between statements emits 'error' (uncaught without a
  // listener); the statement's own promise reports the failure.
  c.on("error", () => {});
  await c.connect();
  try {
    await c.query(text);
  } finally {
    await c.end();
  }
}

/** Creates a schema named `<prefix>_<random>` and returns its name. */
export async function createScratchSchema(url: string, prefix: string): Promise<string> {
  const schema = `${prefix}_${Date.now().toString(36)}_${randomBytes(4).toString("hex")}`;
  await run(url, `CREATE SCHEMA ${schema}`);
  return schema;
}

export async function dropScratchSchema(url: string, schema: string): Promise<void> {
  await run(url, `DROP SCHEMA ${schema} CASCADE`);
}
