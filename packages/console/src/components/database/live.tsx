// The database page's Live tab: a table's inserts, updates and deletes as
// they are committed, by any writer on any server (RealtimeAdminService
// .WatchTable: the devices' change delivery, without rules: every row and
// column). Pause freezes the list while the watch stays open: the changes
// that arrive meanwhile wait (the newest LIVE_KEPT) and appear on Resume.
// The table and the pause are in the URL (?tab=live&table=T&paused=1).
import { useEffect, useRef, useState } from "react";
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import type { App } from "../../../../../gen/pulsebase/admin/v1/identity_pb.js";
import type { TableChange } from "../../../../../gen/pulsebase/admin/v1/realtime_pb.js";
import { api } from "../../api";
import { LIVE_KEPT, watchTable, type WatchState } from "../../data/realtime/realtime-query";
import { Async, ErrorBox, Field, fmtTime, useAsync } from "../../ui";
import "./live.css";

interface Shown {
  n: number;
  c: TableChange;
}

function cell(v: JsonValue | undefined): string {
  if (v === undefined) return "";
  if (v === null) return "NULL";
  return typeof v === "object" ? JSON.stringify(v) : String(v);
}

export function LiveTab({ app, table, paused, set }: { app: App; table: string; paused: boolean; set(patch: Record<string, string | undefined>): void }) {
  const schema = useAsync(() => api.sql.getSchema({ appId: app.id }), [app.id]);
  const tables = schema.data?.tables.filter((t) => t.type === "table" && !t.name.startsWith("_pulsebase_")) ?? [];
  const info = tables.find((t) => t.name === table);
  return (
    <section className="card">
      <Async state={schema} isEmpty={() => tables.length === 0} empty="No tables yet. Create one in the SQL editor.">
        {() => (
          <Field label="Table" hint="Changes committed from now on, by devices, functions, the SQL editor or the CMS, on any server.">
            <select value={table} onChange={(e) => set({ table: e.target.value || undefined, paused: undefined })}>
              <option value="">Choose a table…</option>
              {tables.map((t) => (
                <option key={t.name} value={t.name}>
                  {t.name}
                </option>
              ))}
            </select>
          </Field>
        )}
      </Async>
      {table && <LiveChanges key={`${String(app.id)}\u0000${table}`} appId={app.id} table={table} columns={info?.columns.map((c) => c.name) ?? []} paused={paused} setPaused={(p) => set({ paused: p ? "1" : undefined })} />}
    </section>
  );
}

function LiveChanges({ appId, table, columns, paused, setPaused }: { appId: bigint; table: string; columns: string[]; paused: boolean; setPaused(p: boolean): void }) {
  const [shown, setShown] = useState<Shown[]>([]);
  const [waiting, setWaiting] = useState(0);
  const [state, setState] = useState<WatchState>("connecting");
  const [error, setError] = useState<unknown>();
  const held = useRef<Shown[]>([]);
  const pausedRef = useRef(paused);
  const seq = useRef(0);
  useEffect(() => {
    pausedRef.current = paused;
    if (!paused && held.current.length) {
      const add = held.current.reverse();
      held.current = [];
      setWaiting(0);
      setShown((prev) => [...add, ...prev].slice(0, LIVE_KEPT));
    }
  }, [paused]);
  useEffect(
    () =>
      watchTable(appId, table, {
        change(c) {
          const s = { n: ++seq.current, c };
          if (pausedRef.current) {
            held.current.push(s);
            if (held.current.length > LIVE_KEPT) held.current.shift();
            setWaiting(held.current.length);
          } else setShown((prev) => [s, ...prev].slice(0, LIVE_KEPT));
        },
        state(s, e) {
          setState(s);
          setError(e);
        },
      }),
    [appId, table],
  );
  // the row's columns: the table's, then any the changes carry that the schema read did not have
  const cols = [...columns];
  for (const { c } of shown) for (const k of Object.keys(c.row ?? c.oldKey ?? {})) if (!cols.includes(k)) cols.push(k);
  const label = state === "live" ? (paused ? "Paused" : "● Live") : state === "connecting" ? "Connecting…" : state === "stopped" ? "Stopped" : "Reconnecting…";
  return (
    <>
      <div className="live-bar">
        <span className={`live-state ${paused && state === "live" ? "paused" : state}`} role="status" aria-live="polite" data-testid="live-state">
          {label}
        </span>
        <button type="button" onClick={() => setPaused(!paused)} aria-pressed={paused} disabled={state === "stopped"}>
          {paused ? "Resume" : "Pause"}
        </button>
        {paused && waiting > 0 && <span className="muted">{waiting} new change(s) waiting</span>}
        <button type="button" onClick={() => setShown([])} disabled={!shown.length}>
          Clear
        </button>
        <span className="hint">The newest {LIVE_KEPT} are kept here. Changes made while the watch was reconnecting are not shown.</span>
      </div>
      {(state === "reconnecting" || state === "stopped") && <ErrorBox error={error} />}
      {shown.length === 0 ? (
        <div className="empty">{state === "live" ? `No changes yet: inserts, updates and deletes of ${table} appear here as they happen.` : "Waiting for the watch to start…"}</div>
      ) : (
        <div className="rows-wrap">
          <table aria-label={`Live changes of ${table}`}>
            <thead>
              <tr>
                <th>When</th>
                <th>Change</th>
                {cols.map((c) => (
                  <th key={c}>{c}</th>
                ))}
              </tr>
            </thead>
            <tbody>
              {shown.map(({ n, c }) => {
                const values: JsonObject = (c.op === "delete" ? c.oldKey : c.row) ?? {};
                return (
                  <tr key={n} className={`live-${c.op}`}>
                    <td>{fmtTime(c.at)}</td>
                    <td>
                      <span className={`badge live-op ${c.op}`}>{c.op}</span>
                    </td>
                    {cols.map((k) => (
                      <td key={k} className={values[k] === null ? "null" : typeof values[k] === "number" ? "num" : undefined}>
                        {cell(values[k])}
                      </td>
                    ))}
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
    </>
  );
}
