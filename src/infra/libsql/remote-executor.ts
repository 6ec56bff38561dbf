// Runs requests on a remote libSQL server over the Hrana protocol
// (@libsql/hrana-client, the protocol layer of @libsql/client; one client
// per database, kept open). Network I/O does not block the event loop; the
// time limit abandons the wait (the server applies its own limits).
//
// A request runs on one Hrana stream (one server connection), as a request
// on an embedded file runs on one connection: a BEGIN ... COMMIT the client
// wrote spans its statements, and closing the stream rolls back a
// transaction the client left open. Without `transaction` the statements
// are pipelined (one round trip, each run whatever the previous ones gave);
// with it, see inTransaction.
//
// rows_read is the number of rows returned and rows_written the server's
// affected-row count for INSERT/UPDATE/DELETE, as on embedded files.
import { BatchCond, openHttp, openWs, parseLibsqlUrl, Stmt, type Client, type InValue, type RowsResult, type Stream } from "@libsql/hrana-client";
import { Semaphore } from "../../kernel/semaphore.js";
import type { EngineResult, EngineStatement, EngineValue } from "./engine-protocol.js";

/** A statement as a libSQL server takes it (see remoteBinding in sql-params.ts). */
export interface RemoteStatement extends EngineStatement {
  /** Parameter names by index - 1: the arguments are sent by name. */
  names?: readonly string[] | undefined;
}

/** Requests in flight to one database at once; more wait (as @libsql/client's default). */
const CONCURRENCY = 20;

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

function encode(v: unknown): EngineValue {
  if (v === null || v === undefined) return null;
  if (typeof v === "bigint") return v >= -MAX_SAFE && v <= MAX_SAFE ? Number(v) : v.toString();
  if (typeof v === "number" || typeof v === "string") return v;
  if (v instanceof ArrayBuffer) return Buffer.from(v).toString("base64");
  if (v instanceof Uint8Array) return Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString("base64");
  return String(v);
}

function arg(v: EngineValue): InValue {
  // Integers go as INTEGER (a JS number would be sent as REAL).
  return typeof v === "number" && Number.isSafeInteger(v) ? BigInt(v) : v;
}

function stmt(s: RemoteStatement): Stmt {
  const st = new Stmt(s.sql);
  if (s.names) s.args.forEach((v, i) => st.bindName(s.names![i]!, arg(v)));
  else st.bindIndexes(s.args.map(arg));
  return st;
}

export interface RemoteLimits {
  maxRows: number;
  maxBytes: number;
}

function failed(error: string): EngineResult {
  return { columns: [], rows: [], rowsRead: 0, rowsWritten: 0, error };
}

function toResult(s: EngineStatement, rs: RowsResult, limits: RemoteLimits, budget: { bytes: number }): EngineResult {
  if (rs.rows.length > limits.maxRows) {
    return failed(`result too large: more than ${limits.maxRows} rows; use LIMIT and OFFSET to page`);
  }
  const rows = rs.rows.map((r) => Array.from(r, encode));
  for (const row of rows) for (const v of row) budget.bytes -= v === null ? 4 : typeof v === "number" ? 8 : v.length + 2;
  if (budget.bytes < 0) return failed(`result too large: more than ${limits.maxBytes} bytes in this response; select fewer rows or columns`);
  const writes = s.verb === "INSERT" || s.verb === "UPDATE" || s.verb === "DELETE";
  return { columns: rs.columnNames.map((c) => c ?? ""), rows, rowsRead: rows.length, rowsWritten: writes ? rs.affectedRowCount : 0 };
}

/**
 * A statement's error as SQLite words it, as on embedded files: the server
 * prefixes "SQLite error: " (and the client the error code).
 */
function message(e: unknown): string {
  const m = e instanceof Error ? e.message : String(e);
  return m.replace(/^SQLite error: /, "");
}

/** SQL and argument errors of one statement, as opposed to network, protocol and authentication failures. */
function isStatementError(e: unknown): boolean {
  const code = (e as { code?: unknown })?.code;
  return typeof code === "string" && (code.startsWith("SQLITE_") || code.startsWith("SQL_") || code.startsWith("ARGS_"));
}

/** The result of each statement, or its error; stops after the first error when `untilError`. */
async function collect(
  statements: readonly EngineStatement[],
  pending: readonly Promise<RowsResult | undefined>[],
  limits: RemoteLimits,
  untilError: boolean,
): Promise<EngineResult[]> {
  const results: EngineResult[] = [];
  const budget = { bytes: limits.maxBytes };
  for (let i = 0; i < pending.length; i++) {
    let r: EngineResult;
    try {
      const rs = await pending[i]!;
      if (rs === undefined) break; // not run: an earlier statement of the transaction failed
      r = toResult(statements[i]!, rs, limits, budget);
    } catch (e) {
      if (!isStatementError(e)) throw e;
      r = failed(message(e));
    }
    results.push(r);
    if (untilError && r.error !== undefined) break;
  }
  return results;
}

/** Without a transaction: every statement runs; one round trip, the stream's close included. */
async function pipelined(client: Client, statements: readonly RemoteStatement[], limits: RemoteLimits): Promise<EngineResult[]> {
  const stream = client.openStream();
  const pending = statements.map((s) => {
    const p = stream.query(stmt(s));
    p.catch(() => {}); // read in collect
    return p;
  });
  stream.closeGracefully();
  return collect(statements, pending, limits, false);
}

const beginOf = (statements: readonly EngineStatement[]) =>
  // The write lock up front when the batch writes, as on embedded files.
  statements.some((s) => s.verb !== "SELECT") ? "BEGIN IMMEDIATE" : "BEGIN";

/**
 * With a transaction: BEGIN and the statements in one batch, each run only
 * if the previous one succeeded; then COMMIT (results within the limits) or
 * ROLLBACK, and the close. The server refuses a whole batch when one of its
 * statements does not parse (nothing runs): then one statement at a time,
 * to report it where it is.
 */
async function inTransaction(client: Client, statements: readonly RemoteStatement[], limits: RemoteLimits): Promise<EngineResult[]> {
  const stream = client.openStream();
  try {
    const batch = stream.batch(false);
    let prev = batch.step();
    const begun = prev.run(beginOf(statements));
    begun.catch(() => {});
    const pending = statements.map((s) => {
      const step = batch.step().condition(BatchCond.ok(prev));
      prev = step;
      const p = step.query(stmt(s));
      p.catch(() => {}); // read in collect
      return p;
    });
    try {
      await batch.execute();
    } catch (e) {
      if (!isStatementError(e)) throw e;
      stream.close();
      return await oneByOne(client, statements, limits);
    }
    try {
      await begun;
    } catch (e) {
      if (!isStatementError(e)) throw e;
      return [failed(message(e))];
    }
    return await end(stream, await collect(statements, pending, limits, true), statements.length);
  } finally {
    if (!stream.closed) stream.close(); // a failure before the graceful close; the server rolls back
  }
}

async function oneByOne(client: Client, statements: readonly RemoteStatement[], limits: RemoteLimits): Promise<EngineResult[]> {
  const stream = client.openStream();
  try {
    await stream.run(beginOf(statements));
    const results: EngineResult[] = [];
    for (const s of statements) {
      const p = stream.query(stmt(s));
      const [r] = await collect([s], [p], limits, true);
      results.push(r!);
      if (r!.error !== undefined) break;
    }
    return await end(stream, results, statements.length);
  } finally {
    if (!stream.closed) stream.close();
  }
}

/** COMMIT when every statement ran within the limits, ROLLBACK otherwise; the close in the same round trip. */
async function end(stream: Stream, results: EngineResult[], count: number): Promise<EngineResult[]> {
  const ok = results.length === count && results.every((r) => r.error === undefined);
  const done = stream.run(ok ? "COMMIT" : "ROLLBACK");
  stream.closeGracefully();
  try {
    await done;
  } catch (e) {
    if (!isStatementError(e)) throw e;
    // A failed ROLLBACK leaves nothing behind: the closed stream rolls back.
    if (ok) results[results.length - 1]!.error = `commit failed: ${message(e)}`;
  }
  return results;
}

function openClient(url: string, authToken: string): Client {
  const parsed = parseLibsqlUrl(url);
  const token = authToken || parsed.authToken;
  const client = parsed.hranaHttpUrl !== undefined ? openHttp(parsed.hranaHttpUrl, token) : openWs(parsed.hranaWsUrl!, token);
  client.intMode = "bigint";
  return client;
}

export class RemoteExecutor {
  private readonly clients = new Map<number, { client: Client; key: string; slots: Semaphore }>();

  private client(id: number, url: string, authToken: string) {
    const key = `${url}\n${authToken}`;
    const hit = this.clients.get(id);
    if (hit && hit.key === key) return hit;
    hit?.client.close();
    const entry = { client: openClient(url, authToken), key, slots: new Semaphore(CONCURRENCY) };
    this.clients.set(id, entry);
    return entry;
  }

  /** Throws only for backend failures (server down); statement errors are in the results. */
  async run(
    db: { id: number; url: string; authToken: string },
    statements: RemoteStatement[],
    transaction: boolean,
    limits: RemoteLimits,
  ): Promise<EngineResult[]> {
    const { client, slots } = this.client(db.id, db.url, db.authToken);
    await slots.acquire();
    try {
      return transaction ? await inTransaction(client, statements, limits) : await pipelined(client, statements, limits);
    } finally {
      slots.release();
    }
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
