// Stack traces of a function's errors, as the operator reads them
// (docs/functions.md, "Debugging: errors and logs"). The function's module is
// compiled as it was deployed, with nothing prepended or transformed, under
// the file name moduleFileName() gives, so V8's own frames already carry the
// deployed source's line and column. What is left to do happens on the host,
// once a run failed (nothing of it on a successful run): keep the module's
// frames and V8's built-in ones, and show every other frame (the bootstrap,
// the Web APIs, the timers, anything isolated-vm appends from the host side)
// as one "at <platform>", so no platform line, host path or Node internal
// reaches a record; then cap the result.

/** Frames kept in an error's stack; more are cut (with a line saying how many). */
export const MAX_STACK_FRAMES = 20;
/** Characters of an error's stack (its "Name: message" line included). */
export const MAX_STACK_CHARS = 4096;
/** An error's name and message, and its "Name: message" text, are cut at this many characters (bootstrap.ts). */
export const MAX_ERROR_CHARS = 4096;
/** What the isolate hands out of an error's raw stack (its frames), at most (bootstrap.ts). */
export const MAX_RAW_STACK_CHARS = 64 * 1024;

/** The module's file name in stack frames: `<function name>@v<version>.js` (names are letters, digits, - and _). */
export function moduleFileName(functionName: string, version: number): string {
  return `${functionName}@v${version}.js`;
}

const FRAME = /^\s+at /;
const PLATFORM = "    at <platform>";

/**
 * One frame line: kept (the module's own, or a V8 built-in such as
 * `at Array.map (<anonymous>)`, `at async Promise.all (index 0)`), or
 * undefined for a platform frame.
 */
function keepFrame(line: string, fileName: string): string | undefined {
  const body = line.replace(FRAME, "");
  let loc = body;
  if (body.endsWith(")")) {
    // the parenthesis matching the last one (an eval frame's location has parentheses in it)
    let depth = 0;
    let open = body.length - 1;
    for (; open >= 0; open--) {
      if (body[open] === ")") depth++;
      else if (body[open] === "(" && --depth === 0) break;
    }
    if (open < 1 || body[open - 1] !== " ") return undefined;
    loc = body.slice(open + 1, -1);
  }
  if (isModuleLocation(loc, fileName) || loc === "<anonymous>" || loc === "native" || /^index \d+$/.test(loc)) return `    at ${body}`;
  // code the module made with eval or new Function: "eval at f (<file>:1:2), <anonymous>:3:4"
  const ev = /^eval at [^()]* \((.*)\), <anonymous>:\d+:\d+$/.exec(loc);
  if (ev && isModuleLocation(ev[1]!, fileName)) return `    at ${body}`;
  return undefined;
}

function isModuleLocation(loc: string, fileName: string): boolean {
  return loc.startsWith(fileName) && /^:\d+:\d+$/.test(loc.slice(fileName.length));
}

/**
 * Text with frame lines in it (a console line showing an error, V8's
 * `error.stack`): the module's and V8's frames kept, each run of platform
 * frames shown as one "at <platform>", every other line as it is.
 */
export function cleanFrames(text: string, fileName: string): string {
  const lines = text.split("\n");
  const out: string[] = [];
  for (const line of lines) {
    if (!FRAME.test(line)) {
      out.push(line);
      continue;
    }
    const kept = keepFrame(line, fileName);
    if (kept !== undefined) out.push(kept);
    else if (out[out.length - 1] !== PLATFORM) out.push(PLATFORM);
  }
  return out.join("\n");
}

/** A console line that shows a stack (the only ones with frames in them): cleaned; any other line as it is. */
export function cleanLogLine(message: string, fileName: string): string {
  return message.includes("\n    at ") ? cleanFrames(message, fileName) : message;
}

/**
 * The stack recorded for a thrown error: `header` (its "Name: message",
 * never re-read from the raw stack, which the function may have rewritten)
 * and the cleaned frames of `raw`, at most MAX_STACK_FRAMES of them and
 * MAX_STACK_CHARS in all; "" when the raw stack has no frame.
 */
export function errorStack(header: string, raw: string, fileName: string): string {
  const frames = cleanFrames(raw, fileName)
    .split("\n")
    .filter((l) => FRAME.test(l));
  if (frames.length === 0) return "";
  let out = header.length > MAX_STACK_CHARS / 2 ? `${header.slice(0, MAX_STACK_CHARS / 2)}…` : header;
  let shown = 0;
  for (const f of frames.slice(0, MAX_STACK_FRAMES)) {
    if (out.length + 1 + f.length > MAX_STACK_CHARS - 40) break;
    out += `\n${f}`;
    shown++;
  }
  const more = frames.length - shown;
  if (more > 0) out += `\n    ... ${more} more frame${more === 1 ? "" : "s"}`;
  return out;
}
