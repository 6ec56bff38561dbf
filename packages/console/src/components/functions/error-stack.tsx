// A function error as the operator debugs it: the "Name: message" head, each
// frame with its line and column, and for frames in the function's own code
// the source lines of the deployed version with the column marked.
import { useEffect, useState } from "react";
import { excerpt, parseStack, type Frame } from "../../data/functions/stack";
import { versionCode } from "../../data/functions/functions-query";

export function ErrorStack({ functionId, error, stack }: { functionId: bigint; error: string; stack: string }) {
  if (!error && !stack) return null;
  const { head, frames } = parseStack(stack);
  return (
    <div className="fn-error" data-testid="error-stack">
      <div className="error" role="alert">
        {head || error}
      </div>
      {frames.length > 0 && (
        <ol className="fn-frames" aria-label="Stack frames">
          {frames.map((f, i) => (
            <li key={i}>
              <FrameView functionId={functionId} frame={f} open={i === firstOwn(frames)} />
            </li>
          ))}
        </ol>
      )}
    </div>
  );
}

/** The first frame in the function's own code opens with its source; the others on demand. */
const firstOwn = (frames: Frame[]) => frames.findIndex((f) => f.line !== undefined);

function FrameView({ functionId, frame, open }: { functionId: bigint; frame: Frame; open: boolean }) {
  if (frame.line === undefined) return <code className="fn-frame platform">{frame.text}</code>;
  return (
    <details open={open} className="fn-frame-details">
      <summary>
        <code className="fn-frame">
          at {frame.fn ? `${frame.fn} ` : ""}
          <strong>
            {frame.file}:{frame.line}:{frame.column}
          </strong>
        </code>{" "}
        <span className="muted">
          line {frame.line}, column {frame.column}
        </span>
      </summary>
      <Source functionId={functionId} frame={frame} />
    </details>
  );
}

function Source({ functionId, frame }: { functionId: bigint; frame: Frame }) {
  const [code, setCode] = useState<string | null>();
  useEffect(() => {
    let live = true;
    void versionCode(functionId, frame.version!).then((c) => live && setCode(c ?? null));
    return () => {
      live = false;
    };
  }, [functionId, frame.version]);
  if (code === undefined) return <div className="muted">Loading the source of v{frame.version}…</div>;
  if (code === null) return <div className="muted">The code of v{frame.version} is not available.</div>;
  const lines = excerpt(code, frame.line!);
  return (
    <pre className="fn-source" aria-label={`Source of ${frame.file} around line ${frame.line}`}>
      {lines.map((l) => (
        <span key={l.n} className={l.n === frame.line ? "hit" : undefined}>
          {String(l.n).padStart(4)} | {l.text}
          {"\n"}
          {l.n === frame.line && `${" ".repeat(4)} | ${" ".repeat(Math.max(0, frame.column! - 1))}^\n`}
        </span>
      ))}
    </pre>
  );
}
