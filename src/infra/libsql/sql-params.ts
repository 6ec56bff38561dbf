// Binds request params to statements by SQLite's own numbering, so every
// statement is run with a complete positional argument list (a driver may
// keep the previous values of unbound parameters of a reused statement, so a
// short list must never reach it). Named parameters reach the engines as
// the ?NNN SQLite gives them (positionalSql).
//
// SQLite numbering: "?" takes the largest index so far + 1, "?NNN" takes
// NNN, a named parameter (:a, @a, $a) takes the next index the first time
// it appears and the same index afterwards.
//
// Request params (docs/database.md):
//  - array: positional. When one sql string holds several statements, the
//    values are consumed in order, each statement taking as many as its
//    highest index.
//  - object: by name; a key without prefix matches :key, @key and $key, a key
//    with a prefix matches only that spelling. Statements may share names.
// Mismatches (too few or too many values, a missing name, a key no
// statement uses, "?" placeholders with an object) are request-shape errors
// (422 on `params`/`statements.N.params`), found before anything runs.
import type { Token } from "./sql-tokenizer.js";

export type SqlArg = number | string | null;

export interface ParamSlots {
  /** Highest parameter index (the number of values to bind). */
  count: number;
  /** Named parameters by index (index -> name with prefix). */
  names: Map<number, string>;
  /** Whether a nameless "?" / "?NNN" placeholder appears. */
  hasPositional: boolean;
}

export const MAX_PARAM_INDEX = 32766; // SQLite's SQLITE_MAX_VARIABLE_NUMBER

export function paramSlots(tokens: readonly Token[]): ParamSlots | string {
  let max = 0;
  let hasPositional = false;
  const byName = new Map<string, number>();
  const names = new Map<number, string>();
  for (const t of tokens) {
    if (t.kind !== "param") continue;
    if (t.text.startsWith("?")) {
      hasPositional = true;
      if (t.text.length === 1) max += 1;
      else {
        const n = Number(t.text.slice(1));
        if (!Number.isInteger(n) || n < 1 || n > MAX_PARAM_INDEX) return `invalid parameter ${t.text}`;
        max = Math.max(max, n);
      }
    } else if (!byName.has(t.text)) {
      max += 1;
      byName.set(t.text, max);
      names.set(max, t.text);
    }
  }
  return { count: max, names, hasPositional };
}

export type JsonParams = readonly unknown[] | Readonly<Record<string, unknown>> | undefined;

/** Validates a param value (scalars only); booleans become 1/0. */
export function toArg(v: unknown): SqlArg | undefined {
  if (v === null) return null;
  if (typeof v === "number") return Number.isFinite(v) ? v : undefined;
  if (typeof v === "string") return v;
  if (typeof v === "boolean") return v ? 1 : 0;
  return undefined;
}

/**
 * Binds params to the statements of one sql string. Returns the argument
 * lists, or an error message for the params field.
 */
export function bindParams(slots: readonly ParamSlots[], params: JsonParams): SqlArg[][] | string {
  const out: SqlArg[][] = [];
  if (params === undefined) {
    const needs = slots.find((s) => s.count > 0);
    return needs ? `the statement has ${needs.count} parameter(s) but no params were given` : slots.map(() => []);
  }
  if (Array.isArray(params)) {
    let at = 0;
    for (const s of slots) {
      if (at + s.count > params.length) {
        return `${params.length} value(s) given, but the statements need ${slots.reduce((a, x) => a + x.count, 0)}`;
      }
      out.push(params.slice(at, at + s.count).map((v) => toArg(v) as SqlArg));
      at += s.count;
    }
    if (at !== params.length) return `${params.length} value(s) given, but the statements need ${at}`;
    return out;
  }
  const obj = params as Readonly<Record<string, unknown>>;
  const used = new Set<string>();
  const lookup = (name: string): string | undefined => {
    if (Object.hasOwn(obj, name)) return name;
    const bare = name.slice(1);
    return Object.hasOwn(obj, bare) ? bare : undefined;
  };
  for (const s of slots) {
    if (s.hasPositional) return "the statement uses ? placeholders; pass params as an array";
    const args: SqlArg[] = [];
    for (let i = 1; i <= s.count; i++) {
      const name = s.names.get(i)!;
      const key = lookup(name);
      if (key === undefined) return `no value for parameter ${name}`;
      used.add(key);
      args.push(toArg(obj[key]) as SqlArg);
    }
    out.push(args);
  }
  const unused = Object.keys(obj).filter((k) => !used.has(k));
  if (unused.length > 0) return `no statement uses the parameter(s) ${unused.join(", ")}`;
  return out;
}

/**
 * The statement with its named parameters (:a, @a, $a) written as the ?NNN
 * SQLite gives them, everything else as it was: the engines bind the
 * positional list bindParams builds, and node:sqlite binds a list to
 * nameless and ?NNN parameters only.
 */
export function positionalSql(sql: string, tokens: readonly Token[], slots: ParamSlots): string {
  if (slots.names.size === 0) return sql;
  const index = new Map([...slots.names].map(([n, name]) => [name, n]));
  let out = "";
  let from = 0;
  for (const t of tokens) {
    const n = t.kind === "param" ? index.get(t.text) : undefined;
    if (n === undefined) continue;
    out += `${sql.slice(from, t.start)}?${n}`;
    from = t.end;
  }
  return out + sql.slice(from);
}

/**
 * How a statement's arguments reach a libSQL server (Hrana). The server
 * binds either every argument by position or every one by name, never a
 * mix, and a named parameter only by name. So: no named parameter, the
 * argument list as is; only named ones, by name (with their prefix, one
 * name per index); named ones and "?"/"?NNN" together (array params), the
 * named ones rewritten to "?NNN" of their own index (positionalSql), which
 * keeps SQLite's numbering and so the argument list. Computed once per sql text.
 */
export interface RemoteBinding {
  sql: string;
  /** Parameter names by index - 1; undefined: bind by position. */
  names: readonly string[] | undefined;
}

export function remoteBinding(sql: string, tokens: readonly Token[], slots: ParamSlots): RemoteBinding {
  if (slots.names.size === 0) return { sql, names: undefined };
  if (!slots.hasPositional) return { sql, names: Array.from({ length: slots.count }, (_, i) => slots.names.get(i + 1)!) };
  return { sql: positionalSql(sql, tokens, slots), names: undefined };
}
