// The Invocations tab: a live tail of the function's invocations and their
// log lines. It lists the newest page, then follows new ones as any server
// records them (FollowInvocations, the operation `pulsebase functions logs
// --follow` reads), with Pause and Resume (resuming catches up from the last
// one shown); the page keeps the newest MAX_KEPT. The selected invocation
// (?inv=ID) shows its error with the stack and source lines, and its logs.
import { useEffect, useRef, useState } from "react";
import type { Function as Fn, Invocation } from "../../../../../gen/pulsebase/admin/v1/functions_pb.js";
import { followInvocations, invocationsPage } from "../../data/functions/functions-query";
import { ErrorBox, fmtTime, Loading, Table } from "../../ui";
import { ErrorStack } from "./error-stack";
import "./functions.css";

/** Invocations kept in the page: older ones drop off the end as new ones arrive. */
export const MAX_KEPT = 200;
/** Log lines shown in the log view (of the kept invocations). */
const MAX_LINES = 1000;

type TailState = "loading" | "live" | "paused" | "reconnecting";

/** The newest invocations, kept up to date while not paused. */
function useTail(functionId: bigint, paused: boolean) {
  const [items, setItems] = useState<Invocation[]>();
  const [state, setState] = useState<TailState>("loading");
  const [error, setError] = useState<unknown>();
  const newest = useRef(0n);
  useEffect(() => {
    let live = true;
    setItems(undefined);
    newest.current = 0n;
    invocationsPage(functionId).then(
      (page) => {
        if (!live) return;
        newest.current = page[0]?.id ?? 0n;
        setItems(page.slice(0, MAX_KEPT));
      },
      (e) => live && setError(e),
    );
    return () => {
      live = false;
    };
  }, [functionId]);
  const loaded = items !== undefined;
  useEffect(() => {
    if (!loaded) return;
    if (paused) {
      setState("paused");
      return;
    }
    setState("reconnecting");
    return followInvocations(functionId, newest.current, {
      invocation(inv) {
        if (inv.id > newest.current) newest.current = inv.id;
        setItems((prev) => [inv, ...(prev ?? []).filter((x) => x.id !== inv.id)].slice(0, MAX_KEPT));
      },
      state(s, e) {
        setState(s);
        setError(e);
      },
    });
  }, [functionId, paused, loaded]);
  return { items, state, error };
}

export function Invocations({ fn, selected, select, view, setView }: {
  fn: Fn;
  selected?: bigint;
  select(id: bigint | undefined): void;
  view: "table" | "logs";
  setView(v: "table" | "logs"): void;
}) {
  const [paused, setPaused] = useState(false);
  const { items, state, error } = useTail(fn.id, paused);
  const open = items?.find((i) => i.id === selected);
  return (
    <section className="card">
      <div className="fn-tail-bar">
        <span className={`fn-live ${state}`} role="status" aria-live="polite" data-testid="tail-state">
          {state === "live" ? "● Live" : state === "paused" ? "Paused" : state === "loading" ? "Loading…" : "Reconnecting…"}
        </span>
        <button type="button" onClick={() => setPaused(!paused)} aria-pressed={paused}>
          {paused ? "Resume" : "Pause"}
        </button>
        <span className="fn-seg" role="group" aria-label="View">
          <button type="button" aria-pressed={view === "table"} onClick={() => setView("table")}>
            Invocations
          </button>
          <button type="button" aria-pressed={view === "logs"} onClick={() => setView("logs")}>
            Log lines
          </button>
        </span>
        <span className="hint">The newest {MAX_KEPT} are kept here; the CLI has them all (pulsebase functions invocations).</span>
      </div>
      {state === "reconnecting" && <ErrorBox error={error} />}
      {items === undefined ? (
        error ? <ErrorBox error={error} /> : <Loading />
      ) : items.length === 0 ? (
        <div className="empty">No invocations yet{paused ? "" : ": new ones appear here as they happen"}.</div>
      ) : view === "logs" ? (
        <LogLines items={items} follow={!paused} onOpen={select} />
      ) : (
        <Table
          label="Invocations"
          rows={items}
          rowKey={(i) => String(i.id)}
          onOpen={(i) => select(selected === i.id ? undefined : i.id)}
          columns={[
            { label: "#", cell: (i) => String(i.id), className: "num" },
            { label: "When", cell: (i) => fmtTime(i.createdAt) },
            { label: "Trigger", cell: (i) => i.triggerKind },
            { label: "Version", cell: (i) => `v${i.version}` },
            { label: "Outcome", cell: (i) => <span className={`badge ${i.outcome}`}>{i.outcome}</span> },
            { label: "Status", cell: (i) => String(i.status) },
            { label: "Duration", cell: (i) => `${i.durationMs.toFixed(1)} ms`, className: "num" },
            { label: "Error", cell: (i) => (i.error ? <span className="fn-run-error">{i.error}</span> : "") },
          ]}
        />
      )}
      {selected !== undefined && items && (open ? <InvocationDetail fn={fn} inv={open} onClose={() => select(undefined)} /> : <div className="empty">Invocation #{String(selected)} is not among the newest {MAX_KEPT} shown here.</div>)}
    </section>
  );
}

export function InvocationDetail({ fn, inv, onClose }: { fn: Fn; inv: Invocation; onClose?(): void }) {
  return (
    <div className="drawer" data-testid="invocation-logs" aria-label={`Invocation ${inv.id}`}>
      <div className="fn-head">
        <h4>
          Invocation #{String(inv.id)} <span className={`badge ${inv.outcome}`}>{inv.outcome}</span>
        </h4>
        {onClose && (
          <button type="button" onClick={onClose}>
            Close
          </button>
        )}
      </div>
      <p className="muted">
        {fmtTime(inv.createdAt)} · {inv.triggerKind} · v{inv.version} · status {inv.status} · {inv.durationMs.toFixed(1)} ms
        {inv.requestId && ` · request ${inv.requestId}`}
      </p>
      <ErrorStack functionId={fn.id} error={inv.error} stack={inv.errorStack} />
      <h4>Logs{inv.logsTruncated && <span className="muted"> (cut: the function logged more)</span>}</h4>
      <LogList logs={inv.logs} />
    </div>
  );
}

export function LogList({ logs }: { logs: { level: string; message: string }[] }) {
  if (!logs.length) return <div className="muted">No log lines.</div>;
  return (
    <pre className="logs">
      {logs.map((l, i) => (
        <span key={i} className={`fn-log level-${l.level}`}>
          [{l.level}] {l.message}
          {"\n"}
        </span>
      ))}
    </pre>
  );
}

/** Every log line of the kept invocations, oldest first, like `tail -f`; stays at the bottom while following. */
function LogLines({ items, follow, onOpen }: { items: Invocation[]; follow: boolean; onOpen(id: bigint): void }) {
  const ref = useRef<HTMLPreElement>(null);
  const lines: { inv: Invocation; level: string; message: string }[] = [];
  for (const inv of [...items].reverse()) {
    for (const l of inv.logs) lines.push({ inv, level: l.level, message: l.message });
    if (inv.error) lines.push({ inv, level: "error", message: inv.error });
  }
  const shown = lines.slice(-MAX_LINES);
  useEffect(() => {
    if (follow && ref.current) ref.current.scrollTop = ref.current.scrollHeight;
  }, [shown.length, follow]);
  if (!shown.length) return <div className="empty">No log lines in the newest invocations.</div>;
  return (
    <pre className="logs fn-tail" ref={ref} aria-label="Log lines" data-testid="log-lines">
      {shown.map((l, i) => (
        <span key={i} className={`fn-log level-${l.level}`}>
          <button type="button" className="link fn-inv-link" onClick={() => onOpen(l.inv.id)}>
            #{String(l.inv.id)}
          </button>{" "}
          {fmtTime(l.inv.createdAt)} [{l.level}] {l.message}
          {"\n"}
        </span>
      ))}
    </pre>
  );
}
