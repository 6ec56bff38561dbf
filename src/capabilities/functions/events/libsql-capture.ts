// The change-capture executor for remote libSQL databases (kind "remote":
// sqld, Turso), through @libsql/client. The capture SQL and the drainer are
// the same as for embedded files (change-capture.ts, event-worker.ts); only
// the way statements reach the database differs: one client per database
// (re-created when its URL or token changes, closed after being idle), the
// statements of a call sent as one atomic batch (one round trip; a single
// statement needs no transaction), each call bounded by a time limit so an
// unreachable server cannot hold up the drainer. @libsql/client's "file:"
// URLs take the same code path without a server (tests).
import { createClient, type Client, type InArgs, type ResultSet } from "@libsql/client";
import type { FunctionDbResult, FunctionDbStatement } from "../../database/index.js";
import { withTimeout } from "../../../kernel/deadlines.js";

export interface LibsqlTarget {
  /** The database id (one client per id). */
  id: number;
  url: string;
  authToken: string;
}

export interface LibsqlCaptureExecutor {
  /** Runs the statements in one transaction; a statement error rejects (nothing applied). */
  run(db: LibsqlTarget, statements: FunctionDbStatement[]): Promise<FunctionDbResult[]>;
  close(): void;
}

export interface LibsqlCaptureOptions {
  /** Time limit of one call (default 10 s); the client is dropped when it passes. */
  timeoutMs?: number;
  /** Clients unused this long are closed (default 5 minutes). */
  idleMs?: number;
}

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

function value(v: unknown): unknown {
  if (typeof v === "bigint") return v >= -MAX_SAFE && v <= MAX_SAFE ? Number(v) : v.toString();
  if (v instanceof ArrayBuffer) return Buffer.from(v).toString("hex").toUpperCase();
  return v;
}

function toResult(rs: ResultSet): FunctionDbResult {
  return {
    columns: [...rs.columns],
    rows: rs.rows.map((r) => Array.from(r, value)),
    rows_read: rs.rows.length,
    rows_written: rs.rowsAffected,
  };
}

function args(s: FunctionDbStatement): InArgs {
  if (s.params === undefined) return [];
  return s.params as InArgs;
}

export function createLibsqlCaptureExecutor(opts: LibsqlCaptureOptions = {}): LibsqlCaptureExecutor {
  const timeoutMs = opts.timeoutMs ?? 10_000;
  const idleMs = opts.idleMs ?? 5 * 60_000;
  const clients = new Map<number, { client: Client; key: string; used: number }>();

  const drop = (id: number) => {
    clients.get(id)?.client.close();
    clients.delete(id);
  };

  const clientOf = (db: LibsqlTarget): Client => {
    const now = Date.now();
    for (const [id, c] of clients) if (id !== db.id && now - c.used > idleMs) drop(id);
    const key = `${db.url}\n${db.authToken}`;
    const hit = clients.get(db.id);
    if (hit && hit.key === key) {
      hit.used = now;
      return hit.client;
    }
    if (hit) drop(db.id);
    const client = createClient({ url: db.url, authToken: db.authToken || undefined, intMode: "bigint" });
    clients.set(db.id, { client, key, used: now });
    return client;
  };

  return {
    async run(db, statements) {
      if (statements.length === 0) return [];
      const client = clientOf(db);
      const work =
        statements.length === 1
          ? client.execute({ sql: statements[0]!.sql, args: args(statements[0]!) }).then((rs) => [rs])
          : client.batch(
              statements.map((s) => ({ sql: s.sql, args: args(s) })),
              "write",
            );
      work.catch(() => {}); // abandoned on a timeout
      const results = await withTimeout(work, timeoutMs, () => {
        // Abandon the request: a new client is made on the next call.
        if (clients.get(db.id)?.client === client) drop(db.id);
        return new Error(`the remote database did not answer within ${timeoutMs} ms`);
      });
      return results.map(toResult);
    },
    close() {
      for (const id of [...clients.keys()]) drop(id);
    },
  };
}
