// A windowed results grid: only the rows in view (and a few either side)
// are in the DOM, so 100,000 rows scroll like 100. TanStack Virtual keeps
// the window (rows have one fixed height, so nothing is measured); columns
// get a width from their header and the first and last rows' text. ARIA grid
// semantics (role=table, aria-rowcount and aria-rowindex) tell assistive
// technology the real size.
import { useMemo, useRef } from "react";
import { useVirtualizer } from "@tanstack/react-virtual";
import "./grid.css";

export const ROW_HEIGHT = 28;
const OVERSCAN = 10;

function text(v: unknown): string {
  if (v === null || v === undefined) return "NULL";
  return typeof v === "object" ? JSON.stringify(v) : String(v);
}

/** Column widths in ch: the header and the widest of the first and last 100 rows, 4..40. */
function widths(columns: string[], rows: readonly unknown[][]): number[] {
  const sample = rows.length <= 200 ? rows : [...rows.slice(0, 100), ...rows.slice(-100)];
  return columns.map((c, i) => {
    let w = c.length;
    for (const r of sample) w = Math.max(w, text(r[i]).length);
    return Math.min(40, Math.max(4, w)) + 2;
  });
}

export function VirtualGrid({ columns, rows, label, height = 420 }: { columns: string[]; rows: readonly unknown[][]; label: string; height?: number }) {
  const box = useRef<HTMLDivElement>(null);
  const virtualizer = useVirtualizer({ count: rows.length, getScrollElement: () => box.current, estimateSize: () => ROW_HEIGHT, overscan: OVERSCAN });
  // Widths are measured again only when the row count gains a digit: pages streaming in do not make the columns jump at every page.
  const w = useMemo(() => widths(columns, rows), [columns, String(rows.length).length]);
  const numberWidth = String(rows.length).length + 2;
  const template = `${numberWidth}ch ${w.map((x) => `${x}ch`).join(" ")}`;
  const visible = virtualizer.getVirtualItems().map(({ index: i, start }) => {
    const r = rows[i]!;
    return (
      <div key={i} role="row" aria-rowindex={i + 2} className="vrow" style={{ transform: `translateY(${start}px)`, gridTemplateColumns: template }}>
        <span role="rowheader" className="vnum">
          {i + 1}
        </span>
        {columns.map((_, j) => {
          const v = r[j];
          const t = text(v);
          return (
            <span key={j} role="cell" className={v === null ? "vcell null" : typeof v === "number" ? "vcell num" : "vcell"} title={t.length > 30 ? t : undefined}>
              {t}
            </span>
          );
        })}
      </div>
    );
  });
  return (
    <div
      ref={box}
      className="vgrid"
      role="table"
      aria-label={label}
      aria-rowcount={rows.length + 1}
      tabIndex={0}
      style={{ maxHeight: height }}
    >
      <div role="rowgroup" className="vhead">
        <div role="row" aria-rowindex={1} className="vrow head" style={{ gridTemplateColumns: template }}>
          <span role="columnheader" className="vnum">
            #
          </span>
          {columns.map((c, i) => (
            <span key={i} role="columnheader" className="vcell">
              {c}
            </span>
          ))}
        </div>
      </div>
      <div role="rowgroup" className="vbody" style={{ height: virtualizer.getTotalSize(), minWidth: `calc(${numberWidth + w.reduce((a, b) => a + b, 0)}ch + ${(columns.length + 1) * 0.8}rem)` }}>
        {visible}
      </div>
    </div>
  );
}
