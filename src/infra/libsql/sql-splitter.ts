// Splits one sql string into statements at top-level ";" tokens (never
// inside literals, quoted identifiers or comments). Pieces made only of
// white space and comments are dropped.
// (runtime imports name the .ts file: the SQL analysis worker loads this under Node's type stripping)
import { rebase, tokenize, type Token } from "./sql-tokenizer.ts";

export interface SplitStatement {
  /** The statement text without the terminating ";". */
  sql: string;
  tokens: Token[];
}

export function splitStatements(sql: string): SplitStatement[] {
  const out: SplitStatement[] = [];
  const all = tokenize(sql);
  const flush = (from: number, to: number) => {
    let code = false;
    for (let i = from; i < to && !code; i++) code = all[i]!.kind !== "space" && all[i]!.kind !== "comment";
    if (!code) return;
    const base = all[from]!.start;
    const text = sql.slice(base, all[to - 1]!.end);
    // offsets relative to the statement; a statement that is the whole text keeps its tokens
    if (from === 0 && to === all.length) out.push({ sql: text, tokens: all });
    else out.push({ sql: text, tokens: all.slice(from, to).map((t) => (base === 0 ? t : rebase(t, base, text))) });
  };
  let from = 0;
  for (let i = 0; i < all.length; i++) {
    if (all[i]!.kind !== "semi") continue;
    flush(from, i);
    from = i + 1;
  }
  flush(from, all.length);
  return out;
}
