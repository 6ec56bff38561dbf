// The shape of a point read, from the statement's tokens alone
// (point-reader.ts explains what a point read is; SQLite's plan decides).
// Loaded by the SQL analysis worker under Node's type stripping (see
// sql-analysis.ts): erasable syntax only, runtime imports name the .ts file.
import type { PointShape } from "./point-plan.ts";
import { paramSlots } from "./sql-params.ts";
import type { Token } from "./sql-tokenizer.ts";

/**
 * The table and conditions when the statement has the shape of a point read,
 * else undefined. Only the shape: SQLite's plan decides.
 */
export function pointReadShape(tokens: readonly Token[]): PointShape | undefined {
  // a point read is short: no need to look through a long statement
  if (tokens.length > MAX_POINT_TOKENS) return undefined;
  const t = tokens.filter((x) => x.kind !== "space" && x.kind !== "comment");
  let i = 0;
  const word = (w: string) => t[i]?.kind === "word" && t[i]!.text.toUpperCase() === w && (i++, true);
  const punct = (p: string) => t[i]?.kind === "punct" && t[i]!.text === p && (i++, true);
  const ident = () => (t[i]?.kind === "word" && !KEYWORDS.has(t[i]!.text.toUpperCase())) || t[i]?.kind === "qident" ? (i++, true) : false;
  const column = () => ident() && (!punct(".") || ident());
  const value = () => (t[i]?.kind === "param" || t[i]?.kind === "number" || t[i]?.kind === "string" ? (i++, true) : false);
  if (!word("SELECT")) return undefined;
  if (!punct("*")) {
    do if (!column()) return undefined;
    while (punct(","));
  }
  if (!word("FROM")) return undefined;
  const from = t[i];
  if (!from || !ident() || !word("WHERE")) return undefined;
  const table = from.kind === "qident" ? from.text.slice(1, -1) : from.text;
  let conditions = 0;
  do {
    if (!column() || !punct("=") || !value()) return undefined;
    conditions++;
  } while (word("AND"));
  const end = i;
  if (word("LIMIT") && !value()) return undefined;
  if (i !== t.length) return undefined;
  // tokens joined by spaces: the same statement (a string or quoted name is
  // one token), and a trailing comment cannot swallow the LIMIT added to it.
  // Named parameters become ?NNN with SQLite's own numbering (the values
  // arrive as a positional list, and node:sqlite binds a list to nameless
  // parameters only).
  const text = numberedParams(t);
  const head = text.slice(0, end).join(" ");
  return { table, conditions, head, limit: end < t.length ? text[t.length - 1] : undefined };
}

/** Token texts, named parameters (:a, @a, $a) rewritten to the ?NNN SQLite gives them. */
function numberedParams(tokens: readonly Token[]): string[] {
  const slots = paramSlots(tokens);
  const byName = new Map(typeof slots === "string" ? [] : [...slots.names].map(([n, name]) => [name, n]));
  return tokens.map((x) => {
    const n = x.kind === "param" ? byName.get(x.text) : undefined;
    return n === undefined ? x.text : `?${n}`;
  });
}

/** Tokens (white space included) of the longest statement considered: 500 columns named. */
const MAX_POINT_TOKENS = 2048;

// Words that are never a plain column or table name here.
const KEYWORDS = new Set(["SELECT", "FROM", "WHERE", "AND", "OR", "NOT", "LIMIT", "DISTINCT", "ALL", "AS", "JOIN", "ON", "USING"]);
