// The /api/db/query and /api/db/batch logic, transport-free. Checks run in
// this order (docs/database.md): request shape (422), linked database (403
// database_not_linked), guard (403 forbidden_query), status (503
// database_unavailable); then the statements run on the database's
// executor (embedded: the engine pool; remote: @libsql/client). Both are
// shared by every application, so both are scheduled per application
// (fair-queue.ts): a bounded share running, a bounded queue and a bounded
// wait, 503 database_unavailable past them (docs/database.md, "Scheduling").
import { createHash } from "node:crypto";
import { join } from "node:path";
import { withTimeout } from "../../kernel/deadlines.js";
import { appError, Violations } from "../../kernel/errors.js";
import { TtlCache } from "../../kernel/ttl-cache.js";
import { DEFAULT_DATABASE_LIMITS, type DatabaseLimits } from "./database-config.js";
import type { DatabaseStore, LinkedDatabase } from "./database-store.js";
import { EngineBusyError, EngineCancelledError, EngineFailure, EngineMemoryError, EngineTimeoutError, type EnginePool } from "../../infra/libsql/engine-pool.js";
import { FairQueue, type FairJob, type RefusalReason } from "../../infra/libsql/fair-queue.js";
import type { EngineAccess, EngineResult, EngineStatement } from "../../infra/libsql/engine-protocol.js";
import type { AccessCaller, AccessRules } from "../../infra/libsql/access-rules.js";
import type { PointReader, PointShape } from "../../infra/libsql/point-reader.js";
import type { RemoteExecutor } from "../../infra/libsql/remote-executor.js";
import { analyse, ANALYSE_INLINE_CHARS, CACHED_SQL_CHARS, cachedAnalysis, remember, type Analysis } from "../../infra/libsql/sql-analysis.js";
import { analyseOffThread } from "../../infra/libsql/sql-analysis-pool.js";
import type { GuardVerdict } from "../../infra/libsql/sql-guard.js";
import { bindParams, toArg, type JsonParams, type RemoteBinding } from "../../infra/libsql/sql-params.js";

export interface StatementInput {
  sql: string;
  /** JSON array, JSON object, or undefined/null for none. */
  params?: unknown;
}

export interface QueryRunnerDeps {
  store: DatabaseStore;
  pool: EnginePool;
  /** Serves point reads of embedded databases in this process (optional). */
  reader?: PointReader;
  remote: RemoteExecutor;
  dataDir: string;
  limits?: Partial<DatabaseLimits>;
  linkCacheMs?: number;
}

/** Per call: what ties a request to the run that made it (a function's ctx.db). */
export interface QueryOptions {
  /** When it fires, the request is dropped if still waiting, and stopped if running. */
  signal?: AbortSignal;
  /**
   * The device (consumer) the statements run for. When the application is
   * in `rules` mode they run under its access rules as this caller
   * (docs/database.md, "Access rules"); without a caller (a function's
   * ctx.db) they keep the operator's rights.
   */
  caller?: AccessCaller;
  /** With a caller: these rules instead of the ones in force (the console's preview of a draft). */
  rules?: AccessRules;
  /** A batch in a transaction that is rolled back at the end: nothing it writes is kept (the preview). */
  rollback?: boolean;
}

export interface QueryRunner {
  /** POST /api/db/query: one sql string (maybe several statements). */
  query(appId: number, input: StatementInput, opts?: QueryOptions): Promise<EngineResult[]>;
  /** POST /api/db/batch. */
  batch(appId: number, statements: readonly StatementInput[], transaction: boolean, opts?: QueryOptions): Promise<EngineResult[]>;
  /**
   * query(), with the results at once (no promise) when no wait is needed:
   * the app's link is cached and the sql is one point read the reader
   * answers (see point-reader.ts). Throws at once what query() would for a
   * request-shape, link or guard problem found without waiting.
   */
  queryNow(appId: number, input: StatementInput, opts?: QueryOptions): EngineResult[] | Promise<EngineResult[]>;
  /**
   * Compiles access rules against the application's linked database (on a
   * connection of their own); the errors, none when they compile.
   */
  checkRules(appId: number, rules: AccessRules): Promise<string[]>;
  /** Forget cached app -> database lookups (after operator changes). */
  invalidate(): void;
  /** Requests waiting for and running on remote servers, per application (metrics). */
  remoteStats(): { queued: number; running: number; refused: Record<RefusalReason, number> };
}

/** A request to a remote server, waiting for its application's turn. */
interface RemoteJob extends FairJob {
  start(): void;
}

interface Planned extends EngineStatement {
  /** The text the engines run (named parameters as ?NNN). */
  engineSql: string;
  /** Field path of the entry it came from, e.g. "statements.2.sql". */
  field: string;
  index: number;
  verdict: GuardVerdict;
  /** The further check for remote databases (sql-guard.ts). */
  remoteVerdict: GuardVerdict;
  /** Set when the statement has a point read's shape (see point-reader.ts). */
  point: PointShape | undefined;
  /** The form a libSQL server takes (sql-params.ts). */
  remote: RemoteBinding;
}

/**
 * Why rules mode is refused on a remote libSQL server (docs/database.md,
 * "Access rules"): the rules are enforced by SQLite on the connection that
 * runs the device's statement (an authorizer and temp views and triggers);
 * a libSQL server offers no authorizer over Hrana and refuses CREATE TEMP
 * and PRAGMA recursive_triggers, and rewriting the statement's text instead
 * would be guessing, not enforcement.
 */
export const REMOTE_RULES =
  "Access rules cannot be enforced on a remote libSQL server (it has no authorizer and refuses temp views and triggers): use an embedded database for an application in rules mode (docs/database.md, \"Access rules\").";

const TX_WORDS = new Set(["BEGIN", "COMMIT", "ROLLBACK", "END"]);
const SCHEMA_WORDS = new Set(["CREATE", "ALTER", "DROP"]);

/** A link as cached here: an embedded database's file path resolved once. */
type Linked = LinkedDatabase & { path?: string };

export function createQueryRunner(deps: QueryRunnerDeps): QueryRunner {
  const limits: DatabaseLimits = { ...DEFAULT_DATABASE_LIMITS, ...deps.limits };
  const cacheMs = deps.linkCacheMs ?? 1000;
  // Remote servers run statements themselves; what the service bounds is
  // how many of one application's requests it has outstanding at once.
  const remoteQueue = new FairQueue<RemoteJob>({ running: limits.remoteAppRunning, queued: limits.appQueued, waitMs: limits.queueWaitMs });
  const pumpRemote = () => {
    for (let j = remoteQueue.take(); j; j = remoteQueue.take()) j.start();
  };
  const cache = new TtlCache<number, { db: Linked | undefined }>(cacheMs, 10_000);

  async function linked(appId: number): Promise<Linked | undefined> {
    const hit = cache.get(appId);
    if (hit) return hit.db;
    const db: Linked | undefined = await deps.store.linkedTo(appId);
    if (db?.kind === "embedded") db.path = join(deps.dataDir, db.filePath ?? "");
    cache.set(appId, { db });
    return db;
  }

  /**
   * The analyses of the request's SQL made on the worker thread, when its
   * new SQL is too long to analyse here (sql-analysis.ts); undefined when
   * plan() can analyse it at once.
   */
  function offThread(entries: readonly StatementInput[]): Promise<Map<string, Analysis>> | undefined {
    if (entries.length > limits.maxStatements) return undefined; // refused before any analysis
    const sqls: string[] = [];
    let chars = 0;
    for (const e of entries) {
      // (a long string is never cached: no need to hash it for a lookup)
      if (typeof e.sql !== "string" || e.sql.length > limits.maxSqlLength || (e.sql.length <= CACHED_SQL_CHARS && cachedAnalysis(e.sql))) continue;
      sqls.push(e.sql);
      chars += e.sql.length;
    }
    if (chars <= ANALYSE_INLINE_CHARS) return undefined;
    return analyseOffThread(sqls).then(
      (made) => {
        const m = new Map<string, Analysis>();
        sqls.forEach((q, i) => {
          m.set(q, made[i]!);
          remember(q, made[i]!);
        });
        return m;
      },
      (e: unknown) => {
        throw appError("internal_error", "The SQL could not be analysed.", { cause: e });
      },
    );
  }

  /** Request-shape checks; returns the statements to run. */
  function plan(entries: readonly StatementInput[], batch: boolean, transaction: boolean, made?: Map<string, Analysis>): Planned[] {
    const v = new Violations();
    const out: Planned[] = [];
    if (batch && entries.length === 0) v.add("statements", "At least one statement is required.");
    if (batch && entries.length > limits.maxStatements) {
      v.add("statements", `At most ${limits.maxStatements} statements are allowed in one batch.`);
      v.throwIfAny();
    }
    entries.forEach((e, i) => {
      const prefix = batch ? `statements.${i}.` : "";
      const sqlField = `${prefix}sql`;
      const paramsField = `${prefix}params`;
      if (typeof e.sql !== "string" || e.sql.trim() === "") {
        v.add(sqlField, "The sql field is required.");
        return;
      }
      if (e.sql.length > limits.maxSqlLength) {
        v.add(sqlField, `The sql may not be longer than ${limits.maxSqlLength} characters.`);
        return;
      }
      let params: JsonParams;
      const p = e.params;
      if (p === undefined || p === null) params = undefined;
      else if (Array.isArray(p)) params = p;
      else if (typeof p === "object") params = p as Record<string, unknown>;
      else {
        v.add(paramsField, "The params must be an array (positional) or an object (named).");
        return;
      }
      if (params) {
        const entriesOf = Array.isArray(params) ? params.map((x, k) => [String(k), x] as const) : Object.entries(params);
        if (entriesOf.length > limits.maxParams) {
          v.add(paramsField, `At most ${limits.maxParams} parameter values are allowed.`);
          return;
        }
        let bad = false;
        for (const [k, x] of entriesOf) {
          if (toArg(x) === undefined) {
            v.add(`${paramsField}.${k}`, "A parameter value must be a number, string, boolean or null.");
            bad = true;
          }
        }
        if (bad) return;
      }
      const a = made?.get(e.sql) ?? analyse(e.sql);
      if (a.statements.length === 0) {
        v.add(sqlField, "The sql contains no statement.");
        return;
      }
      if (transaction && a.statements.some((s) => TX_WORDS.has(s.verb))) {
        v.add(sqlField, "BEGIN, COMMIT and ROLLBACK are not allowed when transaction is true; the server adds them.");
        return;
      }
      if (typeof a.slots === "string") {
        v.add(sqlField, `Invalid parameter: ${a.slots}.`);
        return;
      }
      const bound = bindParams(a.slots, params);
      if (typeof bound === "string") {
        v.add(paramsField, `The params do not match the statement: ${bound}.`);
        return;
      }
      a.statements.forEach((s, k) => {
        out.push({ sql: s.sql, engineSql: s.engineSql, args: bound[k]!, verb: s.verb, field: sqlField, index: i, verdict: s.verdict, remoteVerdict: s.remoteVerdict, point: s.point, remote: s.remote });
      });
    });
    if (out.length > limits.maxStatements) {
      v.add(batch ? "statements" : "sql", `At most ${limits.maxStatements} statements are allowed in one request.`);
    }
    v.throwIfAny();
    return out;
  }

  /** The checks after the link is known, in the order of the file comment. */
  function admit(db: Linked | undefined, planned: Planned[], opts: QueryOptions | undefined): asserts db is Linked {
    if (!db) throw appError("database_not_linked");
    const ruled = rulesOf(db, opts) !== undefined;
    for (const p of planned) {
      const verdict = p.verdict.ok && db.kind === "remote" ? p.remoteVerdict : p.verdict;
      const where = p.field === "sql" ? "" : ` (${p.field})`;
      if (!verdict.ok) throw appError("forbidden_query", `${verdict.reason}${where}`);
      if (ruled && SCHEMA_WORDS.has(p.verb)) {
        throw appError("forbidden_query", `The application uses access rules: schema changes (${p.verb}) are made by the operator (console, CLI or operator SQL), not by devices${where}.`);
      }
    }
    if (db.status !== "active") {
      throw appError("database_unavailable", `The linked database is ${db.status}, not active.`);
    }
  }

  /** A point read answered here, or undefined. */
  function pointRead(db: Linked, planned: Planned[], transaction: boolean, opts: QueryOptions | undefined): EngineResult | undefined {
    const p = planned.length === 1 && !transaction ? planned[0]! : undefined;
    if (!p?.point || !deps.reader || db.kind !== "embedded") return undefined;
    const rules = rulesOf(db, opts);
    if (rules) return opts!.rules ? undefined : deps.reader.tryRunUnderRules(db.path!, p, p.point, rules, opts!.caller!, limits.maxRows, limits.maxResultBytes);
    return deps.reader.tryRun(db.path!, p, p.point, limits.maxRows, limits.maxResultBytes);
  }

  /** The shape the engine should classify (point-plan.ts) when the reader has no verdict for the statement. */
  function toClassify(db: Linked, planned: Planned[], transaction: boolean, access: EngineAccess | undefined): PointShape | undefined {
    // (under access rules too: the verdict is the table's plan for the device's conditions, made on a plain connection)
    void access;
    const p = planned.length === 1 && !transaction ? planned[0]! : undefined;
    if (!p?.point || !deps.reader || db.kind !== "embedded") return undefined;
    return deps.reader.wantsVerdict(db.path!, p.sql) ? p.point : undefined;
  }

  async function execute(appId: number, planned: Planned[], transaction: boolean, opts: QueryOptions | undefined): Promise<EngineResult[]> {
    const db = await linked(appId);
    admit(db, planned, opts);
    const r = pointRead(db, planned, transaction, opts);
    return r ? [r] : executeOn(appId, db, planned, transaction, opts);
  }

  /** A remote request, when its application's turn comes. */
  function remoteTurn(appId: number, signal: AbortSignal | undefined, run: () => Promise<EngineResult[]>): Promise<EngineResult[]> {
    return new Promise((resolve, reject) => {
      let settled = false;
      const job: RemoteJob = {
        owner: appId,
        signal,
        refuse: (reason) => reject(refusalOf(reason)),
        // the server goes on with it; the caller stops waiting, the slot stays taken until it ends
        onAbort: () => {
          settled = true;
          reject(new EngineCancelledError("the request was cancelled: the run that made it ended"));
        },
        start() {
          withTimeout(run(), limits.queryTimeoutMs, () => new EngineTimeoutError(`the query ran longer than ${limits.queryTimeoutMs} ms`))
            .then(
              (r) => !settled && resolve(r),
              (e: unknown) => !settled && reject(e),
            )
            .finally(() => {
              remoteQueue.finish(job);
              pumpRemote();
            });
        },
      };
      remoteQueue.push(job);
      pumpRemote();
    });
  }

  function refusalOf(reason: RefusalReason): Error {
    if (reason === "queue_full") return new EngineBusyError(`too many requests of this application are waiting for the database (at most ${limits.appQueued})`, reason);
    if (reason === "queue_timeout") return new EngineBusyError(`the database is busy: the request could not start within ${limits.queueWaitMs} ms`, reason);
    if (reason === "cancelled") return new EngineCancelledError("the request was cancelled: the run that made it ended");
    return new EngineFailure("the database is shut down");
  }

  /** On the engine processes or the remote server (the link admitted, no point read). */
  async function executeOn(appId: number, db: Linked, planned: Planned[], transaction: boolean, opts: QueryOptions | undefined): Promise<EngineResult[]> {
    const signal = opts?.signal;
    const rules = rulesOf(db, opts);
    // a draft gets a connection of its own (its key never names the rules in force)
    const key = opts?.rules ? `${appId}~draft@${draftKey(opts.rules)}` : `${appId}@${rules?.version ?? 0}`;
    const access: EngineAccess | undefined = rules ? { key, rules, caller: opts!.caller! } : undefined;
    if (access && db.kind !== "embedded") {
      throw appError("database_unavailable", REMOTE_RULES);
    }
    try {
      if (db.kind === "embedded") {
        // The same binding as a libSQL server's (named by name), so both answer alike.
        const statements: EngineStatement[] = planned.map((p) => (p.remote.names ? { sql: p.remote.sql, args: p.args, verb: p.verb, names: p.remote.names } : { sql: p.engineSql, args: p.args, verb: p.verb }));
        const path = db.path!;
        const classify = toClassify(db, planned, transaction, access);
        const results = await deps.pool.run(
          {
            path,
            statements,
            transaction,
            mayUseTemp: planned.some((p) => /temp/i.test(p.sql)),
            maxRows: limits.maxRows,
            maxBytes: limits.maxResultBytes,
            busyTimeoutMs: Math.max(0, limits.queryTimeoutMs - 100),
            maxDatabaseBytes: limits.maxDatabaseBytes,
            ...(classify ? { classify } : {}),
            ...(access ? { access } : {}),
            ...(opts?.rollback && transaction ? { rollback: true } : {}),
          },
          db.id,
          { owner: appId, signal },
        );
        const verdict = results[0]?.verdict;
        if (verdict) {
          delete results[0]!.verdict;
          deps.reader?.learn(path, planned[0]!.sql, verdict);
        }
        return results;
      }
      return await remoteTurn(appId, signal, () =>
        deps.remote.run(
          { id: db.id, url: db.url ?? "", authToken: db.authToken ?? "" },
          planned.map((p) => ({ sql: p.remote.sql, args: p.args, verb: p.verb, names: p.remote.names })),
          transaction,
          { maxRows: limits.maxRows, maxBytes: limits.maxResultBytes },
        ),
      );
    } catch (e) {
      if (e instanceof EngineTimeoutError) throw appError("timeout", e.message, { cause: e });
      if (e instanceof EngineMemoryError) throw appError("query_too_large", e.message, { cause: e });
      if (e instanceof EngineBusyError) {
        throw appError("database_unavailable", `${capitalised(e.message)}; retry later.`, { cause: e, retryAfterSeconds: 1 });
      }
      if (e instanceof EngineCancelledError) throw appError("unavailable", capitalised(e.message), { cause: e });
      if (e instanceof EngineFailure) throw appError("query_error", `The database backend failed: ${e.message}`, { cause: e });
      throw appError("query_error", undefined, { cause: e });
    }
  }

  function queryNow(appId: number, input: StatementInput, opts?: QueryOptions): EngineResult[] | Promise<EngineResult[]> {
    const made = offThread([input]);
    if (made) return made.then((m) => execute(appId, plan([input], false, false, m), false, opts));
    const planned = plan([input], false, false);
    const hit = cache.get(appId);
    if (!hit) return execute(appId, planned, false, opts);
    admit(hit.db, planned, opts);
    const r = pointRead(hit.db, planned, false, opts);
    return r ? [r] : executeOn(appId, hit.db, planned, false, opts);
  }

  return {
    query(appId, input, opts) {
      const r = queryNow(appId, input, opts);
      return Array.isArray(r) ? Promise.resolve(r) : r;
    },
    queryNow,
    batch(appId, statements, transaction, opts) {
      const made = offThread(statements);
      if (made) return made.then((m) => execute(appId, plan(statements, true, transaction, m), transaction, opts));
      return execute(appId, plan(statements, true, transaction), transaction, opts);
    },
    async checkRules(appId, rules) {
      const db = await deps.store.linkedTo(appId);
      if (!db) throw appError("failed_precondition", "The application has no linked database: link one before saving rules.");
      if (db.kind !== "embedded") throw appError("failed_precondition", REMOTE_RULES);
      if (db.status !== "active") throw appError("database_unavailable", `The linked database is ${db.status}, not active.`);
      try {
        const [r] = await deps.pool.run(
          {
            path: join(deps.dataDir, db.filePath ?? ""),
            statements: [],
            transaction: false,
            mayUseTemp: false,
            maxRows: 0,
            maxBytes: 0,
            busyTimeoutMs: Math.max(0, limits.queryTimeoutMs - 100),
            maxDatabaseBytes: limits.maxDatabaseBytes,
            checkRules: rules,
          },
          db.id,
          { owner: appId },
        );
        return r?.ruleErrors ?? [];
      } catch (e) {
        throw appError("database_unavailable", `The rules could not be checked: ${(e as Error).message}`, { cause: e, retryAfterSeconds: 1 });
      }
    },
    invalidate() {
      cache.clear();
    },
    remoteStats: () => ({ queued: remoteQueue.queuedCount, running: remoteQueue.runningCount, refused: { ...remoteQueue.refused } }),
  };
}

/** The rules a request runs under: a device's (a caller) in rules mode, or a preview's draft; none for trusted callers. */
function rulesOf(db: LinkedDatabase, opts: QueryOptions | undefined): AccessRules | undefined {
  if (!opts?.caller) return undefined;
  return opts.rules ?? db.access;
}

/** A short stable name of a draft rule set (its engine connection). */
function draftKey(rules: AccessRules): string {
  return createHash("sha256").update(JSON.stringify(rules.tables)).digest("hex").slice(0, 16);
}

function capitalised(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}
