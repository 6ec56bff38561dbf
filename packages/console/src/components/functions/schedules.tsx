// The Schedules tab: a function's cron schedules (made here or with
// `pulsebase functions triggers create --cron`), each with its expression,
// time zone, missed-tick policy, next run and state; create, edit, pause and
// resume, delete; the selected schedule (?schedule=ID in the URL) shows its
// run history, newest first, refreshed while it is open.
import { useEffect, useState } from "react";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { Function as Fn, ScheduleRun, Trigger } from "../../../../../gen/pulsebase/admin/v1/functions_pb.js";
import type { App } from "../../../../../gen/pulsebase/admin/v1/identity_pb.js";
import { Role } from "../../../../../gen/pulsebase/common/v1/options_pb.js";
import {
  createSchedule,
  deleteTrigger,
  isSchedule,
  listTriggers,
  scheduleRuns,
  setTriggerEnabled,
  updateSchedule,
  type MissedTicks,
  type ScheduleInput,
} from "../../data/functions/functions-query";
import { useCan } from "../../session";
import { Async, ErrorBox, Field, fmtTime, Table, useAction, useAsync } from "../../ui";
import "./functions.css";

/** While a schedule's page is open its runs and next tick are read again this often. */
const REFRESH_MS = 3000;

const PRESETS: [string, string][] = [
  ["* * * * *", "every minute"],
  ["*/15 * * * *", "every 15 minutes"],
  ["0 * * * *", "every hour"],
  ["0 3 * * *", "every day at 03:00"],
  ["0 9 * * 1-5", "weekdays at 09:00"],
  ["0 8 * * 1", "Mondays at 08:00"],
  ["0 0 1 * *", "the 1st of each month at 00:00"],
];

const ZONES: string[] = (() => {
  try {
    return ["UTC", ...Intl.supportedValuesOf("timeZone").filter((z) => z !== "UTC")];
  } catch {
    return ["UTC"];
  }
})();

export const describeCron = (cron: string) => PRESETS.find(([c]) => c === cron)?.[1];

export function Schedules({ app, fn, selected, select, openInvocation }: {
  app: App;
  fn: Fn;
  /** The schedule shown with its runs (from the URL), if any. */
  selected?: bigint;
  select(id: bigint | undefined): void;
  openInvocation(id: bigint): void;
}) {
  const canDev = useCan(app.teamId, Role.DEVELOPER);
  const list = useAsync(() => listTriggers(fn.id).then((ts) => ts.filter(isSchedule)), [fn.id]);
  const [confirm, setConfirm] = useState<bigint>();
  const toggle = useAction(async (t: Trigger) => {
    await setTriggerEnabled(t.id, !t.enabled);
    list.reload();
  });
  const remove = useAction(async (id: bigint) => {
    await deleteTrigger(id);
    setConfirm(undefined);
    if (selected === id) select(undefined);
    list.reload();
  });
  // The next tick moves on as runs happen: read the list again while one is open.
  useEffect(() => {
    if (selected === undefined) return;
    const t = setInterval(list.reload, REFRESH_MS);
    return () => clearInterval(t);
  }, [selected, list.reload]);
  const current = list.data?.find((t) => t.id === selected);
  return (
    <>
      <section className="card">
        <ErrorBox error={toggle.error ?? remove.error} />
        <Async state={list} isEmpty={(d) => d.length === 0} empty="No schedules: add one below to run the function on a cron expression.">
          {(d) => (
            <Table
              label="Schedules"
              rows={d}
              rowKey={(t) => String(t.id)}
              onOpen={(t) => select(t.id)}
              columns={[
                {
                  label: "Schedule",
                  cell: (t) => (
                    <span className="fn-what">
                      <code>{t.cron}</code>
                      {describeCron(t.cron ?? "") && <span className="hint">{describeCron(t.cron ?? "")}</span>}
                    </span>
                  ),
                },
                { label: "Time zone", cell: (t) => t.timezone },
                { label: "Missed ticks", cell: (t) => (t.missedTicks === "run_once" ? "run once" : "skip") },
                { label: "Next run", cell: (t) => (t.enabled ? fmtTime(t.nextRunAt) : "—") },
                { label: "State", cell: (t) => <span className={`badge ${t.enabled ? "ok" : "paused"}`}>{t.enabled ? "active" : "paused"}</span> },
                {
                  label: "",
                  cell: (t) => (
                    <span className="fn-actions" onClick={(e) => e.stopPropagation()} onKeyDown={(e) => e.stopPropagation()}>
                      <button type="button" onClick={() => select(t.id)}>
                        {canDev ? "Edit and runs" : "Runs"}
                      </button>
                      {canDev && (
                        <button type="button" onClick={() => void toggle.run(t)} aria-label={`${t.enabled ? "Pause" : "Resume"} schedule ${t.id}`}>
                          {t.enabled ? "Pause" : "Resume"}
                        </button>
                      )}
                      {canDev &&
                        (confirm === t.id ? (
                          <button type="button" className="danger" onClick={() => void remove.run(t.id)}>
                            Delete with its runs?
                          </button>
                        ) : (
                          <button type="button" className="danger" aria-label={`Delete schedule ${t.id}`} onClick={() => setConfirm(t.id)}>
                            Delete
                          </button>
                        ))}
                    </span>
                  ),
                },
              ]}
            />
          )}
        </Async>
      </section>
      {current && <ScheduleDetail key={String(current.id)} trigger={current} canDev={canDev} onSaved={list.reload} onClose={() => select(undefined)} openInvocation={openInvocation} />}
      {selected !== undefined && list.data && !current && <div className="card empty">Schedule {String(selected)} is not one of this function's.</div>}
      {canDev && !current && <NewSchedule fn={fn} onAdded={list.reload} />}
    </>
  );
}

function ScheduleFields({ value, onChange, prefix }: { value: ScheduleInput; onChange(v: ScheduleInput): void; prefix: string }) {
  const listId = `${prefix}-presets`;
  return (
    <div className="fn-grid">
      <Field label="Cron expression" hint={describeCron(value.cron) ?? "5 fields (minute hour day month weekday), or 6 with leading seconds."}>
        <input name="cron" className="mono" required list={listId} autoComplete="off" value={value.cron} onChange={(e) => onChange({ ...value, cron: e.target.value })} />
        <datalist id={listId}>
          {PRESETS.map(([c, label]) => (
            <option key={c} value={c}>
              {label}
            </option>
          ))}
        </datalist>
      </Field>
      <Field label="Time zone">
        <select name="timezone" value={value.timezone} onChange={(e) => onChange({ ...value, timezone: e.target.value })}>
          {(ZONES.includes(value.timezone) ? ZONES : [value.timezone, ...ZONES]).map((z) => (
            <option key={z} value={z}>
              {z}
            </option>
          ))}
        </select>
      </Field>
      <Field label="Missed ticks" hint="Ticks due while no server ran.">
        <select name="missed-ticks" value={value.missedTicks} onChange={(e) => onChange({ ...value, missedTicks: e.target.value as MissedTicks })}>
          <option value="skip">skip them</option>
          <option value="run_once">run the newest once</option>
        </select>
      </Field>
    </div>
  );
}

const EMPTY: ScheduleInput = { cron: "", timezone: "UTC", missedTicks: "skip" };

function NewSchedule({ fn, onAdded }: { fn: Fn; onAdded(): void }) {
  const [s, setS] = useState(EMPTY);
  const [paused, setPaused] = useState(false);
  const add = useAction(async () => {
    await createSchedule(fn.id, s, !paused);
    setS(EMPTY);
    setPaused(false);
    onAdded();
  });
  return (
    <form
      className="card"
      aria-label="New schedule"
      onSubmit={(e) => {
        e.preventDefault();
        void add.run();
      }}
    >
      <h3>New schedule</h3>
      <ScheduleFields value={s} onChange={setS} prefix="new-schedule" />
      <div className="row-form">
        <label className="inline">
          <input type="checkbox" checked={paused} onChange={(e) => setPaused(e.target.checked)} /> start paused
        </label>
        <button type="submit" className="primary" disabled={add.busy}>
          Add schedule
        </button>
      </div>
      {!fn.activeVersion && <p className="hint">The function has no active version yet: ticks are recorded as errors until one is deployed.</p>}
      <ErrorBox error={add.error} />
    </form>
  );
}

function ScheduleDetail({ trigger, canDev, onSaved, onClose, openInvocation }: { trigger: Trigger; canDev: boolean; onSaved(): void; onClose(): void; openInvocation(id: bigint): void }) {
  const [s, setS] = useState<ScheduleInput>({ cron: trigger.cron ?? "", timezone: trigger.timezone ?? "UTC", missedTicks: (trigger.missedTicks as MissedTicks) ?? "skip" });
  const [saved, setSaved] = useState(false);
  const save = useAction(async () => {
    await updateSchedule(trigger.id, s);
    setSaved(true);
    onSaved();
  });
  return (
    <section className="card" aria-label={`Schedule ${trigger.id}`}>
      <div className="fn-head">
        <h2>
          Schedule <code>{trigger.cron}</code> <span className="muted">({trigger.timezone})</span>
        </h2>
        <button type="button" onClick={onClose}>
          Close
        </button>
      </div>
      {canDev && (
        <form
          aria-label="Edit schedule"
          onSubmit={(e) => {
            e.preventDefault();
            void save.run();
          }}
        >
          <ScheduleFields value={s} onChange={(v) => (setS(v), setSaved(false))} prefix={`schedule-${trigger.id}`} />
          <div className="row-form">
            <button type="submit" className="primary" disabled={save.busy}>
              Save schedule
            </button>
            {saved && <span className="ok">Saved; next run {fmtTime(trigger.nextRunAt)}</span>}
          </div>
          <ErrorBox error={save.error} />
        </form>
      )}
      <h3>Run history</h3>
      <Runs trigger={trigger} openInvocation={openInvocation} />
    </section>
  );
}

function duration(r: ScheduleRun): string {
  if (!r.startedAt || !r.finishedAt) return r.status === "running" ? "running" : "—";
  const ms = timestampDate(r.finishedAt).getTime() - timestampDate(r.startedAt).getTime();
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}

function Runs({ trigger, openInvocation }: { trigger: Trigger; openInvocation(id: bigint): void }) {
  const first = useAsync(() => scheduleRuns(trigger.id), [trigger.id]);
  const [older, setOlder] = useState<{ runs: ScheduleRun[]; next: string }>();
  const more = useAction(async () => {
    const from = older?.next ?? first.data?.next ?? "";
    const page = await scheduleRuns(trigger.id, from);
    setOlder({ runs: [...(older?.runs ?? []), ...page.runs], next: page.next });
  });
  useEffect(() => {
    const t = setInterval(first.reload, REFRESH_MS);
    return () => clearInterval(t);
  }, [first.reload]);
  return (
    <Async state={first} isEmpty={(d) => d.runs.length === 0} empty={trigger.enabled ? `No runs yet; the next is due ${fmtTime(trigger.nextRunAt)}.` : "No runs yet (paused)."}>
      {(d) => {
        // Newest page first, then the older pages loaded with "Older runs"; a run is listed once.
        const seen = new Set(d.runs.map((r) => r.id));
        const rows = [...d.runs, ...(older?.runs ?? []).filter((r) => !seen.has(r.id))];
        const next = older ? older.next : d.next;
        return (
          <>
            <Table
              label="Schedule runs"
              rows={rows}
              rowKey={(r) => String(r.id)}
              columns={[
                { label: "Tick", cell: (r) => fmtTime(r.scheduledFor) },
                { label: "Status", cell: (r) => <span className={`badge ${r.status}`}>{r.status}</span> },
                { label: "Missed", cell: (r) => (r.missed ? String(r.missed) : ""), className: "num" },
                { label: "Took", cell: duration, className: "num" },
                {
                  label: "Invocation",
                  cell: (r) =>
                    r.invocationId > 0n ? (
                      <button type="button" className="link" onClick={() => openInvocation(r.invocationId)}>
                        #{String(r.invocationId)}
                      </button>
                    ) : (
                      ""
                    ),
                },
                { label: "Error", cell: (r) => (r.error ? <span className="fn-run-error">{r.error}</span> : "") },
              ]}
            />
            {next && (
              <button type="button" onClick={() => void more.run()} disabled={more.busy}>
                Older runs
              </button>
            )}
            <ErrorBox error={more.error} />
          </>
        );
      }}
    </Async>
  );
}
