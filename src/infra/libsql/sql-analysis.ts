// What the service learns from one sql string alone, before it knows the
// database: the statements, their parameter numbering, the guard's verdicts
// and whether each has a point read's shape. Hot strings hit a cache.
//
// Analysing a long string costs time on whichever thread does it (a 100 KB
// string of one-character tokens took 3-30 ms on the development machine),
// and a batch may carry 100 of them. So a request whose new (uncached) SQL
// is longer than ANALYSE_INLINE_CHARS is analysed on a worker thread
// (sql-analysis-pool.ts) and the service thread only waits for it; short and
// cached SQL, the point reads among them, is analysed here at once.
//
// Loaded by that worker under Node's type stripping: erasable syntax only,
// runtime imports name the .ts file.
import type { PointShape } from "./point-plan.ts";
import { pointReadShape } from "./point-shape.ts";
import { checkRemoteStatement, checkStatement, firstWord, type GuardVerdict } from "./sql-guard.ts";
import { paramSlots, positionalSql, remoteBinding, type ParamSlots, type RemoteBinding } from "./sql-params.ts";
import { splitStatements } from "./sql-splitter.ts";

export interface AnalysedStatement {
  sql: string;
  /** The text the engines run (named parameters as ?NNN). */
  engineSql: string;
  /** First word upper-cased. */
  verb: string;
  verdict: GuardVerdict;
  /** The further check for remote databases (sql-guard.ts). */
  remoteVerdict: GuardVerdict;
  /** Set when the string is one statement with a point read's shape (point-shape.ts). */
  point: PointShape | undefined;
  /** The form a libSQL server takes (sql-params.ts). */
  remote: RemoteBinding;
}

export interface Analysis {
  statements: AnalysedStatement[];
  slots: ParamSlots[] | string;
}

/** Uncached SQL characters of one request analysed on the service thread; more goes to the worker. */
export const ANALYSE_INLINE_CHARS = 8192;

const CACHE_MAX = 2000;
/** Strings longer than this are not cached. */
export const CACHED_SQL_CHARS = 4096;
const cache = new Map<string, Analysis>();

/** The cached analysis of this exact string, if any. */
export function cachedAnalysis(sql: string): Analysis | undefined {
  return cache.get(sql);
}

/** Keeps an analysis (made here or by the worker) for the next request with the same string. */
export function remember(sql: string, a: Analysis): void {
  if (sql.length > CACHED_SQL_CHARS) return;
  if (cache.size >= CACHE_MAX) cache.clear();
  cache.set(sql, a);
}

/** Splits, numbers parameters and runs the guard. */
export function analyseSql(sql: string): Analysis {
  const split = splitStatements(sql);
  let slots: ParamSlots[] | string = [];
  for (const s of split) {
    const slot = paramSlots(s.tokens);
    if (typeof slot === "string") {
      slots = slot;
      break;
    }
    slots.push(slot);
  }
  const numbered = slots;
  return {
    statements: split.map((s, i) => ({
      sql: s.sql,
      engineSql: typeof numbered === "string" ? s.sql : positionalSql(s.sql, s.tokens, numbered[i]!),
      verb: firstWord(s.tokens) ?? "",
      verdict: checkStatement(s.sql, s.tokens),
      remoteVerdict: checkRemoteStatement(s.tokens),
      point: split.length === 1 ? pointReadShape(s.tokens) : undefined,
      remote: typeof numbered === "string" ? { sql: s.sql, names: undefined } : remoteBinding(s.sql, s.tokens, numbered[i]!),
    })),
    slots,
  };
}

/** analyseSql through the cache. */
export function analyse(sql: string): Analysis {
  const hit = sql.length <= CACHED_SQL_CHARS ? cache.get(sql) : undefined;
  if (hit) return hit;
  const a = analyseSql(sql);
  remember(sql, a);
  return a;
}
