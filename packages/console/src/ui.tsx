// Shared pieces: async state (loading, empty, error everywhere), tables that
// work from the keyboard, forms, tabs, a small SVG chart.
import { useCallback, useEffect, useRef, useState, type ReactNode } from "react";
import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import { errorText } from "./api";

export interface AsyncState<T> {
  data?: T;
  error?: unknown;
  loading: boolean;
  reload(): void;
}

export function useAsync<T>(fn: () => Promise<T>, deps: unknown[]): AsyncState<T> {
  const [state, setState] = useState<{ data?: T; error?: unknown; loading: boolean }>({ loading: true });
  const [n, setN] = useState(0);
  useEffect(() => {
    let live = true;
    setState((s) => ({ data: s.data, loading: true }));
    fn().then(
      (data) => live && setState({ data, loading: false }),
      (error) => live && setState({ error, loading: false }),
    );
    return () => {
      live = false;
    };
  }, [...deps, n]);
  const reload = useCallback(() => setN((x) => x + 1), []);
  return { ...state, reload };
}

/** A button's action: busy while it runs, its error shown next to it. */
export function useAction<A extends unknown[]>(fn: (...a: A) => Promise<unknown>) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();
  const run = async (...a: A) => {
    setBusy(true);
    setError(undefined);
    try {
      await fn(...a);
      return true;
    } catch (e) {
      setError(e);
      return false;
    } finally {
      setBusy(false);
    }
  };
  return { run, busy, error, clear: () => setError(undefined) };
}

export function Loading({ text = "Loading…" }: { text?: string }) {
  return (
    <div className="loading" role="status" aria-live="polite">
      <span className="spinner" aria-hidden="true" /> {text}
    </div>
  );
}

export function ErrorBox({ error, retry }: { error: unknown; retry?: () => void }) {
  if (!error) return null;
  return (
    <div className="error" role="alert">
      <span>{errorText(error)}</span>
      {retry && (
        <button type="button" className="link" onClick={retry}>
          Retry
        </button>
      )}
    </div>
  );
}

export function Empty({ children }: { children: ReactNode }) {
  return <div className="empty">{children}</div>;
}

export function Async<T>({ state, children, isEmpty, empty }: { state: AsyncState<T>; children: (d: T) => ReactNode; isEmpty?: (d: T) => boolean; empty?: ReactNode }) {
  if (state.error) return <ErrorBox error={state.error} retry={state.reload} />;
  if (state.data === undefined) return <Loading />;
  if (isEmpty?.(state.data)) return <Empty>{empty ?? "Nothing here yet."}</Empty>;
  return <>{children(state.data)}</>;
}

export interface Column<R> {
  label: string;
  cell(r: R): ReactNode;
  className?: string;
}

export function Table<R>({ rows, columns, onOpen, rowKey, label, selected }: { rows: R[]; columns: Column<R>[]; onOpen?: (r: R) => void; rowKey: (r: R) => string; label: string; selected?: (r: R) => boolean }) {
  return (
    <div className="table-wrap">
      <table aria-label={label}>
        <thead>
          <tr>
            {columns.map((c) => (
              <th key={c.label} className={c.className}>
                {c.label}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map((r) => (
            <tr
              key={rowKey(r)}
              tabIndex={onOpen ? 0 : undefined}
              className={[onOpen ? "clickable" : "", selected?.(r) ? "selected" : ""].join(" ").trim() || undefined}
              aria-current={selected?.(r) ? "true" : undefined}
              onClick={onOpen ? () => onOpen(r) : undefined}
              onKeyDown={onOpen ? (e) => e.key === "Enter" && onOpen(r) : undefined}
            >
              {columns.map((c) => (
                <td key={c.label} className={c.className}>
                  {c.cell(r)}
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

export function Field({ label, children, hint }: { label: string; children: ReactNode; hint?: ReactNode }) {
  return (
    <label className="field">
      <span className="field-label">{label}</span>
      {children}
      {hint && <span className="hint">{hint}</span>}
    </label>
  );
}

export function Tabs<T extends string>({ tabs, current, onChange }: { tabs: [T, string][]; current: T; onChange(t: T): void }) {
  const refs = useRef<(HTMLButtonElement | null)[]>([]);
  return (
    <div className="tabs" role="tablist">
      {tabs.map(([id, label], i) => (
        <button
          key={id}
          ref={(el) => {
            refs.current[i] = el;
          }}
          type="button"
          role="tab"
          aria-selected={current === id}
          tabIndex={current === id ? 0 : -1}
          className={current === id ? "tab active" : "tab"}
          onClick={() => onChange(id)}
          onKeyDown={(e) => {
            const d = e.key === "ArrowRight" ? 1 : e.key === "ArrowLeft" ? -1 : 0;
            if (!d) return;
            const j = (i + d + tabs.length) % tabs.length;
            onChange(tabs[j]![0]);
            refs.current[j]?.focus();
          }}
        >
          {label}
        </button>
      ))}
    </div>
  );
}

export function fmtTime(t: Timestamp | undefined): string {
  if (!t) return "—";
  return timestampDate(t).toLocaleString();
}

export function Json({ value }: { value: unknown }) {
  return <pre className="json">{JSON.stringify(value, (_k, v) => (typeof v === "bigint" ? Number(v) : v), 2)}</pre>;
}

/** The element's width in CSS pixels, following resizes. */
function useWidth<E extends HTMLElement>(): [(el: E | null) => void, number] {
  const [width, setWidth] = useState(0);
  const obs = useRef<ResizeObserver | null>(null);
  const ref = useCallback((el: E | null) => {
    obs.current?.disconnect();
    if (!el) return;
    setWidth(el.clientWidth);
    obs.current = new ResizeObserver(() => setWidth(el.clientWidth));
    obs.current.observe(el);
  }, []);
  return [ref, width];
}

/**
 * Occurrences per day as an SVG line chart (no library: a handful of
 * points). The drawing is as wide as its box in CSS pixels, so the axis
 * labels are 12 px on every screen (a scaled viewBox made them 6 px).
 */
export function LineChart({ points, label }: { points: { x: string; y: number; y2?: number }[]; label: string }) {
  const [ref, measured] = useWidth<HTMLElement>();
  const w = Math.max(260, measured || 640);
  const h = 220;
  const left = 44;
  const right = 16;
  const top = 16;
  const bottom = 28;
  if (!points.length) return <Empty>No data in this range.</Empty>;
  const max = Math.max(1, ...points.map((p) => Math.max(p.y, p.y2 ?? 0)));
  const sx = (i: number) => left + (points.length === 1 ? (w - left - right) / 2 : (i * (w - left - right)) / (points.length - 1));
  const sy = (v: number) => h - bottom - (v / max) * (h - top - bottom);
  const line = (f: (p: (typeof points)[number]) => number) => points.map((p, i) => `${i ? "L" : "M"}${sx(i).toFixed(1)},${sy(f(p)).toFixed(1)}`).join(" ");
  // A date label needs about 48 px.
  const step = Math.max(1, Math.ceil(points.length / Math.max(2, Math.floor((w - left - right) / 48))));
  const ticks = [0, Math.round(max / 2), max].filter((v, i, a) => a.indexOf(v) === i);
  return (
    <figure className="chart" ref={ref}>
      <svg width={w} height={h} viewBox={`0 0 ${w} ${h}`} role="img" aria-label={label}>
        {ticks.map((v) => (
          <g key={v}>
            <line x1={left} y1={sy(v)} x2={w - right} y2={sy(v)} className={v === 0 ? "axis" : "grid"} />
            <text x={left - 6} y={sy(v) + 4} className="tick" textAnchor="end">
              {v}
            </text>
          </g>
        ))}
        <path d={line((p) => p.y)} className="series" />
        {points.some((p) => p.y2 !== undefined) && <path d={line((p) => p.y2 ?? 0)} className="series two" />}
        {points.map((p, i) => (
          <g key={p.x}>
            <circle cx={sx(i)} cy={sy(p.y)} r={3} className="dot">
              <title>{`${p.x}: ${p.y}${p.y2 !== undefined ? ` (${p.y2} users)` : ""}`}</title>
            </circle>
            {i % step === 0 && (
              <text x={sx(i)} y={h - 8} className="tick" textAnchor="middle">
                {p.x.slice(5)}
              </text>
            )}
          </g>
        ))}
      </svg>
      <figcaption>
        <span className="key one" /> occurrences {points.some((p) => p.y2 !== undefined) && (<><span className="key two" /> users</>)}
      </figcaption>
    </figure>
  );
}

export function BarList({ items }: { items: { label: string; value: number }[] }) {
  const max = Math.max(1, ...items.map((i) => i.value));
  return (
    <ul className="bars">
      {items.map((i) => (
        <li key={i.label}>
          <span className="bar-label">{i.label}</span>
          <span className="bar" style={{ width: `${(i.value / max) * 100}%` }} />
          <span className="bar-value">{i.value}</span>
        </li>
      ))}
    </ul>
  );
}

export function Pager({ next, onNext, onFirst, hasPrev }: { next?: string; onNext(): void; onFirst(): void; hasPrev: boolean }) {
  return (
    <div className="pager">
      <button type="button" disabled={!hasPrev} onClick={onFirst}>
        First page
      </button>
      <button type="button" disabled={!next} onClick={onNext}>
        Next page
      </button>
    </div>
  );
}

export function download(name: string, type: string, data: Uint8Array | string): void {
  const blob = new Blob([data as BlobPart], { type });
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  a.click();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}
