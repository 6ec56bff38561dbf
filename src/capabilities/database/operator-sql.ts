// Operator SQL (the console's SQL editor, `pulsebase db query`): runs on an
// application's linked database through the same engines as /api/db/query,
// under the same time limit and result caps, but without the device guard:
// PRAGMA introspection, CREATE VIEW/TRIGGER, WITH, EXPLAIN are allowed. What
// stays refused (operator-sql-guard): ATTACH/DETACH, extension loading, the
// file functions, VACUUM INTO, PRAGMAs that change settings, and writes to
// the service's _pulsebase_* tables, and the pragmas that print where the
// server keeps the file (hostPathReason).
import { join } from "node:path";
import { withTimeout } from "../../kernel/deadlines.js";
import { appError, Violations } from "../../kernel/errors.js";
import { DEFAULT_DATABASE_LIMITS, type DatabaseLimits } from "./database-config.js";
import type { DatabaseStore } from "./database-store.js";
import { EngineBusyError, EngineFailure, EngineMemoryError, EngineTimeoutError, type EnginePool } from "../../infra/libsql/engine-pool.js";
import type { EngineResult, EngineStatement, EngineValue } from "../../infra/libsql/engine-protocol.js";
import { checkOperatorStatement } from "./operator-sql-guard.js";
import type { RemoteExecutor } from "../../infra/libsql/remote-executor.js";
import { firstWord, foldForMatching } from "../../infra/libsql/sql-guard.js";
import { splitStatements, type SplitStatement } from "../../infra/libsql/sql-splitter.js";
import { tokenize } from "../../infra/libsql/sql-tokenizer.js";
import { isPageableRead, wrapPage } from "./sql-paging.js";

export interface OperatorSqlDeps {
  store: DatabaseStore;
  pool: EnginePool;
  remote: RemoteExecutor;
  dataDir: string;
  limits?: Partial<DatabaseLimits>;
}

export interface OperatorResult extends EngineResult {
  sql: string;
  /** Paged runs: the offset of the next page of this read statement, when it has more rows. */
  nextOffset?: number;
}

export interface OperatorRunOptions {
  /** Page read statements (sql-paging.ts): this many rows each, from `offset` (a single statement only). */
  pageSize?: number;
  offset?: number;
}

/** A statement the service built itself (the table editor): bound arguments, no guard needed. */
export interface BuiltStatement {
  sql: string;
  args: EngineValue[];
}

export interface OperatorSql {
  run(appId: number, sql: string, opts?: OperatorRunOptions): Promise<OperatorResult[]>;
  /** Statements built by the service from validated identifiers, their values bound; in one transaction when asked. */
  runBuilt(appId: number, statements: BuiltStatement[], transaction?: boolean): Promise<EngineResult[]>;
}

export function createOperatorSql(deps: OperatorSqlDeps): OperatorSql {
  const limits: DatabaseLimits = { ...DEFAULT_DATABASE_LIMITS, ...deps.limits };
  return {
    async run(appId, sql, opts = {}) {
      const v = new Violations();
      if (!sql.trim()) v.add("sql", "The sql field is required.");
      else if (sql.length > limits.maxSqlLength) v.add("sql", `The sql may not be longer than ${limits.maxSqlLength} characters.`);
      v.throwIfAny();
      const split = splitOperatorStatements(sql);
      if (split.length === 0) throw appError("validation_failed", "The sql contains no statement.", { fields: { sql: ["contains no statement"] } });
      if (split.length > limits.maxStatements) throw appError("validation_failed", `At most ${limits.maxStatements} statements.`, { fields: { sql: ["too many statements"] } });
      const statements: EngineStatement[] = split.map((s) => {
        const hostPath = hostPathReason(s.sql);
        if (hostPath) throw appError("forbidden_query", hostPath);
        const verdict = checkOperatorStatement(s.sql, s.tokens);
        if (!verdict.ok) throw appError("forbidden_query", verdict.reason);
        return { sql: s.sql, args: [], verb: firstWord(s.tokens) ?? "" };
      });
      const offset = opts.offset ?? 0;
      if (offset > 0 && statements.length !== 1) throw appError("validation_failed", "A later page is read for one statement only.", { fields: { sql: ["must be one statement"] } });
      // Read statements are paged (one row more than the page tells whether there is a next one).
      const paged = opts.pageSize ? split.map((s) => isPageableRead(s.tokens)) : split.map(() => false);
      if (offset > 0 && !paged[0]) throw appError("validation_failed", "Only a SELECT, VALUES or WITH ... SELECT is read by pages.", { fields: { sql: ["not a read statement"] } });
      const run = statements.map((st, i) => (paged[i] ? { ...st, sql: wrapPage(st.sql, opts.pageSize! + 1, offset), verb: "SELECT" } : st));
      const results = await execute(appId, run, Math.max(limits.maxRows, (opts.pageSize ?? 0) + 1));
      return results.map((r, i) => {
        const out: OperatorResult = { ...r, sql: statements[i]?.sql ?? "" };
        if (paged[i] && !r.error && r.rows.length > opts.pageSize!) {
          out.rows = r.rows.slice(0, opts.pageSize);
          out.nextOffset = offset + opts.pageSize!;
        }
        return out;
      });
    },
    async runBuilt(appId, built, transaction = false) {
      const statements = built.map((b) => ({ sql: b.sql, args: b.args, verb: (/^\s*(\w+)/.exec(b.sql)?.[1] ?? "").toUpperCase() }));
      return execute(appId, statements, limits.maxRows, transaction);
    },
  };

  async function execute(appId: number, statements: EngineStatement[], maxRows: number, transaction = false): Promise<EngineResult[]> {
    const db = await deps.store.linkedTo(appId);
    if (!db) throw appError("database_not_linked");
    if (db.status !== "active") throw appError("database_unavailable", `The linked database is ${db.status}, not active.`);
    let results: EngineResult[];
    try {
      if (db.kind === "embedded") {
        results = await deps.pool.run(
          {
            path: join(deps.dataDir, db.filePath ?? ""),
            statements,
            transaction,
            mayUseTemp: true,
            maxRows,
            maxBytes: limits.maxResultBytes,
            busyTimeoutMs: Math.max(0, limits.queryTimeoutMs - 100),
            maxDatabaseBytes: limits.maxDatabaseBytes,
            // No tenant authorizer (operators may use PRAGMA, views, triggers);
            // defensive mode and operator-sql-guard still apply.
            service: true,
          },
          db.id,
          // scheduled in the application's share, like its devices' requests
          { owner: appId },
        );
      } else {
        results = await withTimeout(
          deps.remote.run({ id: db.id, url: db.url ?? "", authToken: db.authToken ?? "" }, statements, transaction, {
            maxRows,
            maxBytes: limits.maxResultBytes,
          }),
          limits.queryTimeoutMs,
          () => new EngineTimeoutError(`the query ran longer than ${limits.queryTimeoutMs} ms`),
        );
      }
    } catch (e) {
      if (e instanceof EngineTimeoutError) throw appError("timeout", e.message, { cause: e });
      if (e instanceof EngineMemoryError) throw appError("query_too_large", e.message, { cause: e });
      // the engines are busy (this application's share, or its queue wait): retry, as on /api/db; not a 500
      if (e instanceof EngineBusyError) throw appError("database_unavailable", `${e.message}; retry later.`, { cause: e, retryAfterSeconds: 1 });
      if (e instanceof EngineFailure) throw appError("query_error", `The database backend failed: ${e.message}`, { cause: e });
      throw appError("query_error", e instanceof Error ? e.message : undefined, { cause: e });
    }
    return results;
  }
}

/**
 * Pragmas whose answer names a directory or file of the server's host
 * (database_list's `file` column is the database's absolute path): refused
 * as words anywhere in the folded text, so the PRAGMA form, the
 * pragma_* table-valued form, a schema prefix, any quoting, comments and
 * subqueries are all caught; a view or trigger naming them cannot be created.
 */
const HOST_PATH_WORDS = new Set(["database_list", "temp_store_directory", "data_store_directory"]);

export function hostPathReason(sql: string): string | undefined {
  for (const m of foldForMatching(sql).matchAll(/[\p{L}\p{N}_]+/gu)) {
    const w = m[0].startsWith("pragma_") ? m[0].slice(7) : m[0];
    if (HOST_PATH_WORDS.has(w)) return `${w} is not allowed: it shows the database file's path on the server.`;
  }
  return undefined;
}

const words = (st: SplitStatement) => st.tokens.filter((t) => t.kind === "word").map((t) => t.text.toUpperCase());

/**
 * splitStatements, keeping a CREATE TRIGGER's body (BEGIN ...; ...; END) in
 * one statement: devices cannot create triggers, operators can.
 */
export function splitOperatorStatements(sql: string): SplitStatement[] {
  const pieces = splitStatements(sql);
  // Where each piece starts in the text (pieces come in order, so search on from the last).
  const starts: number[] = [];
  let cursor = 0;
  for (const p of pieces) {
    const at = sql.indexOf(p.sql, cursor);
    starts.push(at);
    cursor = at + p.sql.length;
  }
  const out: SplitStatement[] = [];
  for (let i = 0; i < pieces.length; i++) {
    const w = words(pieces[i]!);
    const isTrigger = w[0] === "CREATE" && (w[1] === "TRIGGER" || ((w[1] === "TEMP" || w[1] === "TEMPORARY") && w[2] === "TRIGGER"));
    if (!isTrigger) {
      out.push(pieces[i]!);
      continue;
    }
    // Extend to the piece ending in END (the body's statements had their ";" split off).
    let j = i;
    while (words(pieces[j]!).at(-1) !== "END" && j + 1 < pieces.length) j++;
    const text = sql.slice(starts[i], starts[j]! + pieces[j]!.sql.length);
    out.push({ sql: text, tokens: tokenize(text) });
    i = j;
  }
  return out;
}
