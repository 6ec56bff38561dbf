// The statement guard (docs/database.md, "Hostile tenants"). Two independent
// checks, both must pass:
//  1. the first tokens are an allowed prefix, compared token by token
//     (ASCII case-insensitive, only white space between the words);
//  2. no blocked keyword appears anywhere as a whole word, literals and
//     comments included. The text is NFKC-normalised and stripped of
//     invisible format characters first, so fullwidth or zero-width
//     look-alikes of a keyword are refused as well. The same word scan
//     refuses the file and SQL-running functions, the introspection tables
//     (sqlite_dbpage, sqlite_stmt, dbstat) and the service's _pulsebase_*
//     names; an INSERT, UPDATE or DELETE may not target a sqlite_* table.
// Embedded databases have a second layer under this one, in SQLite itself
// (sql-authorizer.ts, defensive mode); remote libSQL servers have none, so
// for them the temp schema is refused here too (checkRemoteStatement).
import type { Token } from "./sql-tokenizer.js";

const ALLOWED_PREFIXES: readonly (readonly string[])[] = [
  ["SELECT"],
  ["INSERT"],
  ["UPDATE"],
  ["DELETE"],
  ["CREATE", "TABLE"],
  ["CREATE", "INDEX"],
  ["CREATE", "UNIQUE", "INDEX"],
  ["ALTER", "TABLE"],
  ["DROP", "TABLE"],
  ["DROP", "INDEX"],
  ["BEGIN"],
  ["COMMIT"],
  ["ROLLBACK"],
];

export const BLOCKED_KEYWORDS = ["ATTACH", "DETACH", "PRAGMA", "VACUUM", "LOAD_EXTENSION", "SAVEPOINT", "RELEASE"] as const;
const blocked = new Set(BLOCKED_KEYWORDS.map((k) => k.toLowerCase()));

/**
 * Functions and table-valued functions some SQLite builds carry (the shell's
 * fileio and zipfile extensions, libSQL's sha3_query, which runs the SQL
 * text it is given, and its cipher configuration) that read, list or write
 * files of the server or run SQL the guard never saw: readfile('/etc/passwd'),
 * writefile(path, data), fsdir('/'), sha3_query(?). Like LOAD_EXTENSION they
 * would take a device out of its own database, so they are refused the same
 * way (whole words anywhere; docs/database.md). The engines' SQLite has none
 * of them; remote libSQL servers may.
 */
export const HOST_FUNCTIONS = ["READFILE", "WRITEFILE", "FSDIR", "EDIT", "ZIPFILE", "SHA3_QUERY", "FTS3_TOKENIZER"] as const;
const hostFunctions = new Set(HOST_FUNCTIONS.map((k) => k.toLowerCase()));

/**
 * Tables that show what is not the application's own data: raw database
 * pages (sqlite_dbpage is also writable, which rewrites the file), the SQL
 * text and literals of every statement the connection has prepared
 * (sqlite_stmt: other applications sharing a team database), page statistics
 * (dbstat) and the recovery modules. Refused as whole words anywhere, for
 * embedded and remote databases alike; embedded databases also refuse them
 * in the authorizer (sql-authorizer.ts).
 */
export const INTROSPECTION_TABLES = ["SQLITE_DBPAGE", "SQLITE_STMT", "DBSTAT", "SQLITE_DBDATA", "SQLITE_DBPTR"] as const;
const introspection = new Set(INTROSPECTION_TABLES.map((k) => k.toLowerCase()));

/** Upper-cases ASCII letters only (SQLite keywords are ASCII). */
function asciiUpper(s: string): string | undefined {
  // eslint-disable-next-line no-control-regex
  return /^[\x00-\x7f]*$/.test(s) ? s.toUpperCase() : undefined;
}

/** The statement's first words when they are bare words separated by white space. */
function leadingWords(tokens: readonly Token[], max: number): string[] {
  const words: string[] = [];
  for (let i = 0; i < tokens.length && words.length < max; i++) {
    const t = tokens[i]!;
    if (t.kind === "space") {
      if (i === 0) continue; // leading white space is fine
      continue;
    }
    if (t.kind !== "word") break;
    const w = asciiUpper(t.text);
    if (w === undefined) break;
    words.push(w);
    // the next token must be white space for a further word to count
    if (tokens[i + 1]?.kind !== "space") break;
  }
  return words;
}

export function hasAllowedPrefix(tokens: readonly Token[]): boolean {
  const first = tokens.find((t) => t.kind !== "space");
  if (!first || first.kind !== "word") return false; // comments, quotes, punctuation
  const words = leadingWords(tokens, 3);
  return ALLOWED_PREFIXES.some((p) => p.every((w, i) => words[i] === w));
}

/** The first word of the statement, upper-cased (for BEGIN/COMMIT checks). */
export function firstWord(tokens: readonly Token[]): string | undefined {
  const t = tokens.find((x) => x.kind !== "space");
  return t?.kind === "word" ? asciiUpper(t.text) : undefined;
}

// Default-ignorable and format characters (zero-width space/joiners, soft
// hyphen, BOM, ...) vanish before matching.
const invisible = /[\p{Cf}\u115f\u1160\u3164\uffa0]/gu; // marks (U+034F, ...) go with \p{M}
// A word is a run of letters, digits and "_" (so LOAD_EXTENSION is one word,
// and so is pragma_table_info, which is caught by its prefix).
const wordRe = /[\p{L}\p{N}_]+/gu;

// Common Cyrillic and Greek letters that look like Latin ones. SQLite itself
// reads them as identifier characters (never as a keyword), so this only
// makes the guard refuse more, never less.
const confusables: Record<string, string> = {
  а: "a", в: "b", с: "c", е: "e", һ: "h", і: "i", ј: "j", к: "k", м: "m", н: "h", о: "o", р: "p", ѕ: "s",
  т: "t", у: "y", х: "x", ԁ: "d", ԛ: "q", ԝ: "w", ӏ: "l",
  α: "a", β: "b", ε: "e", η: "n", ι: "i", κ: "k", μ: "m", ν: "v", ο: "o", ρ: "p", τ: "t", υ: "u", χ: "x", ζ: "z",
};
const confusableRe = new RegExp(`[${Object.keys(confusables).join("")}]`, "gu");

/** Folds the text to plain lower-case ASCII-looking letters for matching. */
export function foldForMatching(sql: string): string {
  return sql
    .normalize("NFKC")
    .toLowerCase()
    .normalize("NFD")
    .replace(/\p{M}/gu, "") // accents and combining dots (İ -> i)
    .replace(invisible, "")
    .replace(confusableRe, (c) => confusables[c] ?? c);
}

/** The first word of the folded text that the guard refuses, with the reason. */
function refusedWord(sql: string): string | undefined {
  const text = foldForMatching(sql);
  for (const m of text.matchAll(wordRe)) {
    const w = m[0];
    if (blocked.has(w)) return `The statement contains the blocked keyword ${w.toUpperCase()}.`;
    if (w.startsWith("pragma_")) return "The statement contains the blocked keyword PRAGMA.";
    if (hostFunctions.has(w)) return `The statement names ${w.toUpperCase()}, a function that reaches the server's files or runs other SQL.`;
    if (introspection.has(w)) return `The statement names ${w}, which shows more than the application's own data.`;
    if (w.startsWith("_pulsebase_")) return `The name ${w} is reserved for the service.`;
  }
  return undefined;
}

/** The blocked keyword found in the text, if any. */
export function findBlockedKeyword(sql: string): string | undefined {
  const text = foldForMatching(sql);
  for (const m of text.matchAll(wordRe)) {
    const w = m[0];
    if (blocked.has(w)) return w.toUpperCase();
    if (w.startsWith("pragma_")) return "PRAGMA";
  }
  return undefined;
}

/** A function of HOST_FUNCTIONS named in the text, if any. */
export function findHostFunction(sql: string): string | undefined {
  const text = foldForMatching(sql);
  for (const m of text.matchAll(wordRe)) if (hostFunctions.has(m[0])) return m[0].toUpperCase();
  return undefined;
}

/** A name token's text, unquoted and folded ("x", [x], `x`, x). */
function nameOf(t: Token | undefined): string | undefined {
  if (!t) return undefined;
  if (t.kind === "word") return foldForMatching(t.text);
  if (t.kind === "qident") return foldForMatching(t.text.slice(1, -1));
  return undefined;
}

/** The first `n` tokens that are not white space or comments. */
function leading(tokens: readonly Token[], n: number): Token[] {
  const out: Token[] = [];
  for (let i = 0; i < tokens.length && out.length < n; i++) {
    const k = tokens[i]!.kind;
    if (k !== "space" && k !== "comment") out.push(tokens[i]!);
  }
  return out;
}

/**
 * The table an INSERT, UPDATE or DELETE writes, and its schema if written
 * (`INSERT [OR x] INTO [s.]t`, `UPDATE [OR x] [s.]t`, `DELETE FROM [s.]t`).
 */
function writeTarget(tokens: readonly Token[]): { schema: string | undefined; table: string } | undefined {
  const t = leading(tokens, 8);
  const up = (i: number) => (t[i]?.kind === "word" ? t[i]!.text.toUpperCase() : undefined);
  let i = 1;
  const verb = up(0);
  if (verb !== "INSERT" && verb !== "UPDATE" && verb !== "DELETE") return undefined;
  if ((verb === "INSERT" || verb === "UPDATE") && up(i) === "OR") i += 2;
  if (verb === "INSERT" && up(i++) !== "INTO") return undefined;
  if (verb === "DELETE" && up(i++) !== "FROM") return undefined;
  const first = nameOf(t[i]);
  if (first === undefined) return undefined;
  if (t[i + 1]?.kind === "punct" && t[i + 1]!.text === ".") {
    const table = nameOf(t[i + 2]);
    return table === undefined ? undefined : { schema: first, table };
  }
  return { schema: undefined, table: first };
}

export type GuardVerdict = { ok: true } | { ok: false; reason: string };

export function checkStatement(sql: string, tokens: readonly Token[]): GuardVerdict {
  if (!hasAllowedPrefix(tokens)) {
    return { ok: false, reason: "The statement does not start with an allowed command." };
  }
  const word = refusedWord(sql);
  if (word) return { ok: false, reason: word };
  const target = writeTarget(tokens);
  if (target?.table.startsWith("sqlite_")) {
    return { ok: false, reason: `The statement writes ${target.table}, a table of SQLite itself.` };
  }
  return { ok: true };
}

/**
 * The further check for a remote libSQL database, where the service cannot
 * install an authorizer: no temp schema (a server may keep a connection, and
 * its temp tables, between requests of different applications). The names
 * the authorizer refuses on embedded databases are refused by
 * checkStatement for both kinds.
 */
export function checkRemoteStatement(tokens: readonly Token[]): GuardVerdict {
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]!;
    // SQLite compares schema names in ASCII, case-insensitively: "temp", [temp], "TEMPORARY"
    const len = t.end - t.start - (t.kind === "qident" ? 2 : 0);
    if ((t.kind !== "word" && t.kind !== "qident") || (len !== 4 && len !== 9)) continue;
    const n = (t.kind === "qident" ? t.text.slice(1, -1) : t.text).toLowerCase();
    if (n !== "temp" && n !== "temporary") continue;
    let j = i + 1;
    while (tokens[j]?.kind === "space" || tokens[j]?.kind === "comment") j++;
    if (tokens[j]?.kind === "punct" && tokens[j]!.end - tokens[j]!.start === 1 && tokens[j]!.text === ".") {
      return { ok: false, reason: "The temp schema is not available on a remote database." };
    }
  }
  return { ok: true };
}
