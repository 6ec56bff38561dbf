// Access rules for table subscriptions (docs/realtime.md, "Under access
// rules"): which subscribers' select rule admits a captured row, decided by
// SQLite, never in JS. One statement per row version evaluates the table's
// select rule for every distinct caller at once:
//
//   SELECT 0 WHERE EXISTS (SELECT 1 FROM (SELECT <row> ) AS "T" WHERE (<rule for caller 0>))
//   UNION ALL SELECT 1 WHERE EXISTS (... <rule for caller 1>) ...
//
// The row is the captured one (the change as it was committed, not the row
// as it is now), one column per table column under the table's name, each
// value carrying its column's affinity (CAST to the declared type's affinity
// when the value already has that storage class, so the value is unchanged
// and comparisons apply the same conversions as on the table). The caller's
// values replace :consumer_id, :user_id and :app_id (bindCaller) as CASTs
// with the caller table's types. It runs on the service's connection to the
// application's database, in a read-only transaction.
//
// A select rule that reads other tables (a SELECT inside it) cannot be
// evaluated that way: on a device's connection those tables are read
// through their own rules for that caller, which one statement for many
// callers cannot reproduce. For it, callerStatement builds one statement
// per caller and row version,
//
//   SELECT 1 FROM (SELECT <row> ) AS "T" WHERE (<rule for the caller>)
//
// which tables.ts runs as that caller's device would (the query runner with
// the caller: the application's rules connection, the device guard), at
// most MAX_TABLE_READING_CALLERS callers per table (docs).
import { asciiLower, bindCaller, isTrueRule, type TableRules } from "../../infra/libsql/access-rules.js";
import { quoteIdent as q, tokenize } from "../../infra/libsql/sql-tokenizer.js";
import type { Row } from "./change-log.js";

export interface Column {
  name: string;
  /** The declared type (affinity). */
  type: string;
  /** Position in the primary key (1-based), 0 when not in it. */
  pk: number;
}

export interface Caller {
  consumerId: number;
  userId: string;
  appId: number;
}

/** Callers per statement (the rule's text is repeated once per caller). */
const CALLERS_PER_STATEMENT = 100;

/**
 * Distinct callers (consumer and user id) a server evaluates a rule that
 * reads other tables for, per table: one statement per caller and row
 * version for each change. A subscription past it is refused (docs).
 */
export const MAX_TABLE_READING_CALLERS = 200;

/** The rules of a table, matched as SQLite matches names (ASCII case). */
export function rulesOf(tables: Record<string, TableRules>, table: string): TableRules | undefined {
  const t = asciiLower(table);
  for (const [name, r] of Object.entries(tables)) if (asciiLower(name) === t) return r;
  return undefined;
}

/** Whether the rule reads tables (has a SELECT of its own). */
export function readsTables(rule: string): boolean {
  return tokenize(rule).some((t) => t.kind === "word" && t.text.toUpperCase() === "SELECT");
}

/** Whether a device may read the column (select_columns). */
export function readable(rules: TableRules, column: string): boolean {
  return !rules.selectColumns || rules.selectColumns.some((c) => asciiLower(c) === asciiLower(column));
}

/** The row as a device reads it: columns select_columns hides are null. */
export function shown(rules: TableRules | undefined, row: Row): Row {
  if (!rules?.selectColumns) return row;
  const out: Row = {};
  for (const [k, v] of Object.entries(row)) out[k] = readable(rules, k) ? v : null;
  return out;
}

type Affinity = "INTEGER" | "TEXT" | "BLOB" | "REAL" | "NUMERIC";

/** SQLite's affinity of a declared type (sqlite.org/datatype3.html, 3.1). */
export function affinityOf(declared: string): Affinity {
  const t = declared.toUpperCase();
  if (t.includes("INT")) return "INTEGER";
  if (t.includes("CHAR") || t.includes("CLOB") || t.includes("TEXT")) return "TEXT";
  if (t.includes("BLOB") || t === "") return "BLOB";
  if (t.includes("REAL") || t.includes("FLOA") || t.includes("DOUB")) return "REAL";
  return "NUMERIC";
}

/** A value of the row as SQL with its column's affinity where its storage class allows it unchanged. */
function valueSql(col: Column, v: unknown, param: number): string {
  const a = affinityOf(col.type);
  if (typeof v === "number") {
    if (a === "REAL") return `CAST(?${param} AS REAL)`;
    // (INTEGER and NUMERIC compare alike; CAST AS NUMERIC keeps 1.5 as 1.5)
    if (a === "INTEGER" || a === "NUMERIC") return `CAST(?${param} AS NUMERIC)`;
  }
  if (typeof v === "string" && a === "TEXT") return `CAST(?${param} AS TEXT)`;
  return `?${param}`;
}

const lit = (s: string) => `'${s.replace(/'/g, "''")}'`;

export interface Statement {
  sql: string;
  params: Array<number | string | null>;
}

/**
 * The statements that answer, for `row` of `table`, which callers (by index
 * into `callers`) the select rule admits: each result row is one index.
 * Undefined when the rule admits every row (true) or none (no select rule).
 */
export function admitStatements(table: string, columns: Column[], rules: TableRules, row: Row, callers: Caller[]): Statement[] | "all" | "none" {
  if (rules.select === undefined) return "none";
  if (isTrueRule(rules.select)) return "all";
  const { from, params } = rowSource(table, columns, row);
  const out: Statement[] = [];
  for (let i = 0; i < callers.length; i += CALLERS_PER_STATEMENT) {
    const parts: string[] = [];
    for (let k = i; k < Math.min(callers.length, i + CALLERS_PER_STATEMENT); k++) {
      parts.push(`SELECT ${k} WHERE EXISTS (SELECT 1 FROM ${from} WHERE (${ruleFor(table, rules.select, callers[k]!)}))`);
    }
    out.push({ sql: parts.join(" UNION ALL "), params });
  }
  return out;
}

/**
 * One caller's statement for `row` (a rule that reads other tables, run as
 * that caller's device): a result row when the select rule admits it.
 */
export function callerStatement(table: string, columns: Column[], select: string, row: Row, caller: Caller): Statement {
  const { from, params } = rowSource(table, columns, row);
  return { sql: `SELECT 1 FROM ${from} WHERE (${ruleFor(table, select, caller)})`, params };
}

/** The captured row as a one-row table under the table's name, its values as parameters. */
function rowSource(table: string, columns: Column[], row: Row): { from: string; params: Array<number | string | null> } {
  const params: Array<number | string | null> = [];
  const cols = columns.map((c) => {
    const v = row[c.name];
    params.push(v === undefined || v === null ? null : typeof v === "number" || typeof v === "string" ? v : typeof v === "boolean" ? Number(v) : JSON.stringify(v));
    return `${valueSql(c, v, params.length)} AS ${q(c.name)}`;
  });
  return { from: `(SELECT ${cols.join(", ")}) AS ${q(table)}`, params };
}

/** The select rule with the caller's values for :user_id, :consumer_id and :app_id. */
function ruleFor(table: string, select: string, c: Caller): string {
  const bound = bindCaller(select, (name) => (name === "user_id" ? `CAST(${lit(c.userId)} AS TEXT)` : `CAST(${name === "consumer_id" ? c.consumerId : c.appId} AS INTEGER)`));
  if (typeof bound !== "string") throw new Error(`the select rule of ${table}: ${bound.error}`);
  return bound;
}
