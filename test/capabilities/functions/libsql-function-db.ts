// A small real FunctionDb (ctx.db's query runner) for tests: one libSQL file
// per application in a temp dir, through @libsql/client (the database module
// provides the real one).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient, type Client, type InArgs, type ResultSet } from "@libsql/client";
import { appError } from "../../../src/kernel/errors.js";
import type { FunctionDb, FunctionDbResult } from "../../../src/capabilities/database/function-db.js";
import type { ChangeCaptureDb } from "../../../src/capabilities/functions/events/change-capture.js";

type EngineResult = Awaited<ReturnType<FunctionDb["query"]>>[number];
type EngineValue = EngineResult["rows"][number][number];

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
  // the query runner's shape
  const toEngine = (r: ResultSet) => {
    const x = toResult(r);
    return { columns: x.columns, rows: x.rows as EngineValue[][], rowsRead: 0, rowsWritten: x.rows_written };
  };
  const failed = (err: unknown) => ({ columns: [], rows: [], rowsRead: 0, rowsWritten: 0, error: (err as Error).message });
  const args = (p?: unknown): InArgs => (p ?? []) as InArgs;
  return {
    unlinked,
    client,
    async query(appId, { sql, params }) {
      // as the query runner's request-shape check
      if (typeof sql !== "string" || sql.trim() === "") throw appError("validation_failed", "The sql field is required.", { fields: { sql: ["The sql field is required."] } });
      try {
        return [toEngine(await client(appId).execute({ sql, args: args(params) }))];
      } catch (err) {
        if (unlinked.has(appId)) throw err;
        return [failed(err)];
      }
    },
    async batch(appId, statements, transaction) {
      const c = client(appId);
      if (transaction) {
        const rs = await c.batch(statements.map((s) => ({ sql: s.sql, args: args(s.params) })), "write");
        return rs.map(toEngine);
      }
      const out: EngineResult[] = [];
      for (const s of statements) {
        try {
          out.push(toEngine(await c.execute({ sql: s.sql, args: args(s.params) })));
        } catch (err) {
          out.push(failed(err));
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
