// Splits one sql string into statements at top-level ";" tokens (never
// inside literals, quoted identifiers or comments). Pieces made only of
// white space and comments are dropped (DECISIONS 14).
import { tokenize, type Token } from "./sql-tokenizer.js";

export interface SplitStatement {
  /** The statement text without the terminating ";". */
  sql: string;
  tokens: Token[];
}

export function splitStatements(sql: string): SplitStatement[] {
  const out: SplitStatement[] = [];
  let current: Token[] = [];
  const flush = () => {
    if (current.some((t) => t.kind !== "space" && t.kind !== "comment")) {
      const first = current[0]!;
      const last = current[current.length - 1]!;
      const base = first.start;
      out.push({
        sql: sql.slice(base, last.end),
        tokens: current.map((t) => ({ ...t, start: t.start - base, end: t.end - base })),
      });
    }
    current = [];
  };
  for (const t of tokenize(sql)) {
    if (t.kind === "semi") flush();
    else current.push(t);
  }
  flush();
  return out;
}
