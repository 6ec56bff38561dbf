// A function error's stack as the runtime records it ("Name: message", then
// one "at" line per frame: the function's own frames as
// "at default (stock@v2.js:7:26)" in the code as deployed, the platform's as
// "at <platform>"), split into frames the page can show with source lines.

export interface Frame {
  /** The whole "at …" line, trimmed. */
  text: string;
  /** What ran: "default", a helper's name, or "" for an anonymous frame. */
  fn: string;
  /** Frames in the function's own code: the file, its version, line and column (1-based). */
  file?: string;
  version?: number;
  line?: number;
  column?: number;
}

const FRAME = /^at (?:(.*?) \()?([^()\s]+?)@v(\d+)\.js:(\d+):(\d+)\)?$/;

/** The frames of a stack (the lines after the "Name: message" head). */
export function parseStack(stack: string): { head: string; frames: Frame[] } {
  const lines = stack.split("\n");
  const at = lines.findIndex((l) => l.trim().startsWith("at "));
  const head = (at < 0 ? lines : lines.slice(0, at)).join("\n").trim();
  const frames = (at < 0 ? [] : lines.slice(at))
    .map((l) => l.trim())
    .filter((l) => l.startsWith("at "))
    .map((text): Frame => {
      const m = FRAME.exec(text);
      if (!m) return { text, fn: text.slice(3) };
      return { text, fn: m[1] ?? "", file: `${m[2]}@v${m[3]}.js`, version: Number(m[3]), line: Number(m[4]), column: Number(m[5]) };
    });
  return { head, frames };
}

/** Lines around `line` (1-based) of `code`, for a frame's source excerpt. */
export function excerpt(code: string, line: number, around = 2): { n: number; text: string }[] {
  const lines = code.split("\n");
  const from = Math.max(1, line - around);
  const to = Math.min(lines.length, line + around);
  const out: { n: number; text: string }[] = [];
  for (let n = from; n <= to; n++) out.push({ n, text: lines[n - 1] ?? "" });
  return out;
}
