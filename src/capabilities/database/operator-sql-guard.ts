// What operator SQL may not do, though the device guard is off: leave the
// database (ATTACH, VACUUM INTO, the file functions, extensions), change the
// connection's settings and limits (PRAGMA assignments, writable_schema), or
// write the service's _pulsebase_* capture tables. Word matching on the
// folded text, as the device guard does (sql-guard.ts).
import { findHostFunction, foldForMatching, type GuardVerdict } from "../../infra/libsql/sql-guard.js";
import type { Token } from "../../infra/libsql/sql-tokenizer.js";

const NEVER = new Set(["attach", "detach", "load_extension"]);

/** PRAGMAs that only read (bare, or with a table/index argument). */
const READ_PRAGMAS = new Set([
  "table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo", "foreign_key_list",
  "foreign_key_check", "integrity_check", "quick_check", "compile_options", "page_count", "page_size",
  "freelist_count", "schema_version", "user_version", "collation_list", "function_list", "module_list",
  "pragma_list", "database_list", "encoding", "journal_mode", "foreign_keys", "application_id", "data_version",
]);

const wordRe = /[\p{L}\p{N}_]+/gu;

export function checkOperatorStatement(sql: string, tokens: readonly Token[]): GuardVerdict {
  const text = foldForMatching(sql);
  const words = [...text.matchAll(wordRe)].map((m) => m[0]);
  for (const w of words) {
    if (NEVER.has(w)) return { ok: false, reason: `${w.toUpperCase()} is not allowed: it reaches outside the application's database.` };
  }
  const host = findHostFunction(sql);
  if (host) return { ok: false, reason: `The statement names ${host}, a function that reaches the server's files.` };
  const code = tokens.filter((t) => t.kind !== "space" && t.kind !== "comment");
  const first = code[0]?.text.toLowerCase() ?? "";
  if (first === "vacuum" && words.includes("into")) return { ok: false, reason: "VACUUM INTO writes a file on the server; plain VACUUM is allowed." };
  if (first === "pragma") {
    // PRAGMA [schema.]name [= value | (arg)]: reading ones only, and no assignment.
    let i = 1;
    if (code[i + 1]?.text === ".") i += 2;
    const name = (code[i]?.text ?? "").toLowerCase().replace(/^["`[]|["`\]]$/g, "");
    const next = code[i + 1]?.text;
    if (!READ_PRAGMAS.has(name)) return { ok: false, reason: `PRAGMA ${name} is not allowed; read-only PRAGMAs are (table_info, index_list, integrity_check, ...).` };
    if (next === "=") return { ok: false, reason: "PRAGMA assignments are not allowed: the service sets the connection's settings." };
    if (next === "(" && ["journal_mode", "foreign_keys", "user_version", "application_id"].includes(name)) {
      return { ok: false, reason: "PRAGMA assignments are not allowed: the service sets the connection's settings." };
    }
    return { ok: true };
  }
  for (const w of words) {
    if (w.startsWith("pragma_") && !READ_PRAGMAS.has(w.slice(7))) return { ok: false, reason: `${w} is not allowed.` };
  }
  // The capture tables: readable (SELECT, EXPLAIN), never written or dropped.
  if (words.some((w) => w.startsWith("_pulsebase_")) && first !== "select" && first !== "explain") {
    return { ok: false, reason: "The _pulsebase_* tables belong to the service (function event capture): operators may read them only." };
  }
  return { ok: true };
}
