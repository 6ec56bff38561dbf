// A small real FunctionDb for tests: one libSQL file per application in a
// temp dir, through @libsql/client (the database module provides the real one).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient, type Client, type InArgs, type ResultSet } from "@libsql/client";
import { appError } from "../../../src/kernel/errors.js";
import type { FunctionDb, FunctionDbParams, FunctionDbResult } from "../../../src/capabilities/functions/function-db.js";
import type { ChangeCaptureDb } from "../../../src/capabilities/functions/events/change-capture.js";

export interface TestFunctionDb extends FunctionDb, ChangeCaptureDb {
  client(appId: number): Client;
  /** Applications without a linked database. */
  unlinked: Set<number>;
  close(): void;
}

export function createTestFunctionDb(): TestFunctionDb {
  const dir = mkdtempSync(join(tmpdir(), "pb-fn-db-"));
  const clients = new Map<number, Client>();
  const unlinked = new Set<number>();
  const client = (appId: number): Client => {
    if (unlinked.has(appId)) throw appError("database_not_linked");
    let c = clients.get(appId);
    if (!c) {
      c = createClient({ url: `file:${join(dir, `app-${appId}.db`)}` });
      clients.set(appId, c);
    }
    return c;
  };
  const toResult = (r: ResultSet): FunctionDbResult => ({
    columns: [...r.columns],
    rows: r.rows.map((row) => Array.from(row, (v) => (typeof v === "bigint" ? Number(v) : v))),
    rows_read: 0,
    rows_written: r.rowsAffected,
  });
  const args = (p?: FunctionDbParams): InArgs => (p ?? []) as InArgs;
  return {
    unlinked,
    client,
    async query(appId, sql, params) {
      try {
        return [toResult(await client(appId).execute({ sql, args: args(params) }))];
      } catch (err) {
        if (unlinked.has(appId)) throw err;
        return [{ columns: [], rows: [], rows_read: 0, rows_written: 0, error: (err as Error).message }];
      }
    },
    async batch(appId, statements, { transaction }) {
      const c = client(appId);
      if (transaction) {
        const rs = await c.batch(statements.map((s) => ({ sql: s.sql, args: args(s.params) })), "write");
        return rs.map(toResult);
      }
      const out: FunctionDbResult[] = [];
      for (const s of statements) {
        try {
          out.push(toResult(await c.execute({ sql: s.sql, args: args(s.params) })));
        } catch (err) {
          out.push({ columns: [], rows: [], rows_read: 0, rows_written: 0, error: (err as Error).message });
        }
      }
      return out;
    },
    async serviceBatch(appId, statements) {
      const rs = await client(appId).batch(statements.map((s) => ({ sql: s.sql, args: args(s.params) })), "write");
      return rs.map(toResult);
    },
    close() {
      for (const c of clients.values()) c.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
