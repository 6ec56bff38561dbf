// The real work behind pending -> provisioning -> active: an embedded
// database gets its file created with WAL journaling and the service's
// pragmas; a remote one must answer a query with the given token.
import { mkdir, rm } from "node:fs/promises";
import { dirname } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { createClient } from "@libsql/client";
import { withTimeout } from "../../kernel/deadlines.js";

export async function provisionEmbedded(absPath: string): Promise<void> {
  await mkdir(dirname(absPath), { recursive: true });
  // Through node:sqlite, like the point reader and the engines: one SQLite
  // library per file in this process (point-reader.ts). It closes at once,
  // and it is defensive like every connection to an application's file.
  const db = new DatabaseSync(absPath, { defensive: true });
  try {
    // journal_mode and auto_vacuum are stored in the file; the per-connection
    // pragmas (busy_timeout, synchronous, foreign_keys) are set by the engine.
    db.exec("PRAGMA auto_vacuum = INCREMENTAL");
    db.exec("PRAGMA journal_mode = WAL");
    const mode = (db.prepare("PRAGMA journal_mode").get() as { journal_mode?: unknown } | undefined)?.journal_mode;
    if (String(mode).toLowerCase() !== "wal") throw new Error(`could not enable WAL (journal_mode=${String(mode)})`);
    db.exec("CREATE TABLE IF NOT EXISTS _pb_probe (x); DROP TABLE _pb_probe"); // the file is writable
    db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
  } finally {
    db.close();
  }
}

export async function removeEmbedded(absPath: string): Promise<void> {
  await Promise.all([absPath, `${absPath}-wal`, `${absPath}-shm`].map((p) => rm(p, { force: true })));
}

export async function checkRemote(url: string, authToken: string, timeoutMs: number): Promise<void> {
  const client = createClient({ url, authToken: authToken || undefined });
  try {
    await withTimeout(client.execute("SELECT 1"), timeoutMs, () => new Error(`no answer within ${timeoutMs} ms`));
  } finally {
    client.close();
  }
}
