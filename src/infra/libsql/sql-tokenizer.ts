// Loaded by the SQL analysis worker under Node's type stripping (see
// sql-analysis.ts): erasable syntax only.
//
// A SQLite-aware tokenizer, just enough to split statements, check their
// first words and find bound parameters. It follows SQLite's own rules
// (tokenize.c): identifier characters are ASCII letters, digits, "_", "$"
// (not first) and every non-ASCII character; only ASCII space, tab, CR, LF
// and FF are white space.
export type TokenKind =
  | "space"
  | "comment"
  | "string" // '...'
  | "blob" // x'...'
  | "qident" // "...", [...], `...`
  | "word" // bare identifier or keyword
  | "number"
  | "param" // ?, ?NNN, :name, @name, $name
  | "semi"
  | "punct";

export interface Token {
  readonly kind: TokenKind;
  readonly start: number;
  readonly end: number;
  readonly text: string;
}

/**
 * A token whose text is cut from the source only when asked for: most of a
 * long statement's tokens are never read as text, and a string per token
 * was most of the tokenizer's time on a 100 KB statement.
 */
class SourceToken implements Token {
  readonly kind: TokenKind;
  readonly start: number;
  readonly end: number;
  private readonly src: string;

  constructor(kind: TokenKind, start: number, end: number, src: string) {
    this.kind = kind;
    this.start = start;
    this.end = end;
    this.src = src;
  }

  get text(): string {
    return this.src.slice(this.start, this.end);
  }
}

/** The token with its offsets counted from `base` in `src` (a statement cut out of a longer text). */
export function rebase(t: Token, base: number, src: string): Token {
  return new SourceToken(t.kind, t.start - base, t.end - base, src);
}

function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d || c === 0x0c;
}

function isDigit(c: number): boolean {
  return c >= 0x30 && c <= 0x39;
}

/** SQLite's IdChar: letters, digits, "_", "$" and any non-ASCII code unit. */
export function isIdChar(c: number): boolean {
  return (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || isDigit(c) || c === 0x5f || c === 0x24 || c >= 0x80;
}

function isIdStart(c: number): boolean {
  return isIdChar(c) && !isDigit(c) && c !== 0x24;
}

/** Finds the end of a quoted run where a doubled closing quote escapes it. */
function quotedEnd(s: string, from: number, close: string, doubled: boolean): number {
  let i = from;
  for (;;) {
    const j = s.indexOf(close, i);
    if (j < 0) return s.length; // unterminated: SQLite refuses it at prepare
    if (doubled && s[j + 1] === close) {
      i = j + 2;
      continue;
    }
    return j + 1;
  }
}

export function tokenize(s: string): Token[] {
  const out: Token[] = [];
  const n = s.length;
  let i = 0;
  const push = (kind: TokenKind, end: number) => {
    out.push(new SourceToken(kind, i, end, s));
    i = end;
  };
  while (i < n) {
    const c = s.charCodeAt(i);
    const d = i + 1 < n ? s.charCodeAt(i + 1) : -1;
    if (isSpace(c)) {
      let j = i + 1;
      while (j < n && isSpace(s.charCodeAt(j))) j++;
      push("space", j);
    } else if (c === 0x2d /* - */ && d === 0x2d) {
      const j = s.indexOf("\n", i + 2);
      push("comment", j < 0 ? n : j + 1);
    } else if (c === 0x2f /* / */ && d === 0x2a /* * */) {
      const j = s.indexOf("*/", i + 2);
      push("comment", j < 0 ? n : j + 2);
    } else if (c === 0x27 /* ' */) {
      push("string", quotedEnd(s, i + 1, "'", true));
    } else if ((c === 0x78 || c === 0x58) && d === 0x27 /* x' */) {
      push("blob", quotedEnd(s, i + 2, "'", false));
    } else if (c === 0x22 /* " */) {
      push("qident", quotedEnd(s, i + 1, '"', true));
    } else if (c === 0x60 /* ` */) {
      push("qident", quotedEnd(s, i + 1, "`", true));
    } else if (c === 0x5b /* [ */) {
      push("qident", quotedEnd(s, i + 1, "]", false));
    } else if (c === 0x3b /* ; */) {
      push("semi", i + 1);
    } else if (c === 0x3f /* ? */) {
      let j = i + 1;
      while (j < n && isDigit(s.charCodeAt(j))) j++;
      push("param", j);
    } else if (c === 0x3a /* : */ || c === 0x40 /* @ */) {
      let j = i + 1;
      while (j < n && isIdChar(s.charCodeAt(j))) j++;
      push(j > i + 1 ? "param" : "punct", j);
    } else if (c === 0x24 /* $ */) {
      // TCL-style names may contain "::" and end with "(...)".
      let j = i + 1;
      for (;;) {
        while (j < n && isIdChar(s.charCodeAt(j))) j++;
        if (s.startsWith("::", j)) {
          j += 2;
          continue;
        }
        if (s[j] === "(" && j > i + 1) {
          const k = s.indexOf(")", j);
          if (k >= 0 && !/\s/.test(s.slice(j, k))) j = k + 1;
        }
        break;
      }
      push(j > i + 1 ? "param" : "punct", j);
    } else if (isDigit(c) || (c === 0x2e && isDigit(d))) {
      let j = i + 1;
      while (j < n) {
        const e = s.charCodeAt(j);
        if (isIdChar(e) || e === 0x2e) j++;
        else if ((e === 0x2b || e === 0x2d) && /[eE]/.test(s[j - 1] ?? "") && !/^0[xX]/.test(s.slice(i, j))) j++;
        else break;
      }
      push("number", j);
    } else if (isIdStart(c)) {
      let j = i + 1;
      while (j < n && isIdChar(s.charCodeAt(j))) j++;
      push("word", j);
    } else {
      push("punct", i + 1);
    }
  }
  return out;
}

/** A name as a quoted SQLite identifier ("a""b" for a"b). */
export const quoteIdent = (s: string): string => `"${s.replace(/"/g, '""')}"`;
