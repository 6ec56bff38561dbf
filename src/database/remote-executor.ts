// Runs requests on a remote libSQL server through @libsql/client (one client
// per database, kept open). Network I/O does not block the event loop; the
// time limit abandons the wait (the server applies its own limits).
// rows_read is the number of rows returned and rows_written the driver's
// rowsAffected for INSERT/UPDATE/DELETE: the client API exposes no engine
// counters.
import { createClient, type Client, type InArgs, type ResultSet, type Transaction } from "@libsql/client";
import type { EngineResult, EngineStatement, EngineValue } from "./engine-protocol.js";

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

function encode(v: unknown): EngineValue {
  if (v === null || v === undefined) return null;
  if (typeof v === "bigint") return v >= -MAX_SAFE && v <= MAX_SAFE ? Number(v) : v.toString();
  if (typeof v === "number" || typeof v === "string") return v;
  if (v instanceof ArrayBuffer) return Buffer.from(v).toString("base64");
  if (v instanceof Uint8Array) return Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString("base64");
  return String(v);
}

function args(s: EngineStatement): InArgs {
  return s.args.map((v) => (typeof v === "number" && Number.isSafeInteger(v) ? BigInt(v) : v));
}

export interface RemoteLimits {
  maxRows: number;
  maxBytes: number;
}

function toResult(s: EngineStatement, rs: ResultSet, limits: RemoteLimits, budget: { bytes: number }): EngineResult {
  if (rs.rows.length > limits.maxRows) {
    return { columns: [], rows: [], rowsRead: 0, rowsWritten: 0, error: `result too large: more than ${limits.maxRows} rows; use LIMIT and OFFSET to page` };
  }
  const rows = rs.rows.map((r) => Array.from(r, encode));
  for (const row of rows) for (const v of row) budget.bytes -= v === null ? 4 : typeof v === "number" ? 8 : v.length + 2;
  if (budget.bytes < 0) {
    return { columns: [], rows: [], rowsRead: 0, rowsWritten: 0, error: `result too large: more than ${limits.maxBytes} bytes in this response` };
  }
  const writes = s.verb === "INSERT" || s.verb === "UPDATE" || s.verb === "DELETE";
  return { columns: rs.columns, rows, rowsRead: rows.length, rowsWritten: writes ? rs.rowsAffected : 0 };
}

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

export class RemoteExecutor {
  private readonly clients = new Map<number, { client: Client; key: string }>();

  private client(id: number, url: string, authToken: string): Client {
    const key = `${url}\n${authToken}`;
    const hit = this.clients.get(id);
    if (hit && hit.key === key) return hit.client;
    hit?.client.close();
    const client = createClient({ url, authToken: authToken || undefined, intMode: "bigint" });
    this.clients.set(id, { client, key });
    return client;
  }

  /** Throws only for backend failures (server down); statement errors are in the results. */
  async run(
    db: { id: number; url: string; authToken: string },
    statements: EngineStatement[],
    transaction: boolean,
    limits: RemoteLimits,
  ): Promise<EngineResult[]> {
    const client = this.client(db.id, db.url, db.authToken);
    const results: EngineResult[] = [];
    const budget = { bytes: limits.maxBytes };
    if (transaction) {
      const tx: Transaction = await client.transaction("write");
      try {
        for (const s of statements) {
          try {
            results.push(toResult(s, await tx.execute({ sql: s.sql, args: args(s) }), limits, budget));
          } catch (e) {
            if (isBackendFailure(e)) throw e;
            results.push({ columns: [], rows: [], rowsRead: 0, rowsWritten: 0, error: message(e) });
          }
          if (results[results.length - 1]!.error !== undefined) break;
        }
        if (results.some((r) => r.error !== undefined)) await tx.rollback();
        else await tx.commit();
      } finally {
        tx.close();
      }
      return results;
    }
    // One statement per call: a BEGIN sent by the client does not outlive
    // its call on the server's side, so nothing leaks between requests.
    for (const s of statements) {
      try {
        results.push(toResult(s, await client.execute({ sql: s.sql, args: args(s) }), limits, budget));
      } catch (e) {
        if (isBackendFailure(e)) throw e;
        results.push({ columns: [], rows: [], rowsRead: 0, rowsWritten: 0, error: message(e) });
      }
    }
    return results;
  }

  /** Closes the client of a database (deleted, or its URL/token changed). */
  forget(id: number): void {
    this.clients.get(id)?.client.close();
    this.clients.delete(id);
  }

  close(): void {
    for (const { client } of this.clients.values()) client.close();
    this.clients.clear();
  }
}

/** Network and protocol failures, as opposed to SQLite errors of a statement. */
function isBackendFailure(e: unknown): boolean {
  const code = (e as { code?: string })?.code ?? "";
  return !(code.startsWith("SQLITE_") || code.startsWith("SQL_") || code.startsWith("ARGS_"));
}
