// Analytics: events over time for a chosen range with the metadata
// breakdown of that range; crash and error groups (stack trace, versions,
// occurrences, users affected, attachments); breadcrumbs; queue health and
// dead letters. The tab, the selected record and the range are in the URL.
import type { App } from "../../../../gen/pulsebase/admin/v1/identity_pb.js";
import type { LogRecord } from "../../../../gen/pulsebase/admin/v1/analytics_pb.js";
import { api } from "../api";
import { day, eventBreakdown, eventDailyCounts, listBreadcrumbs, listEvents, listLogs, rangeOf, rangeTimestamps } from "../data/analytics/analytics-query";
import { useQueryState, useRouter, useSetQuery } from "../router";
import { useSession } from "../session";
import { NeedApp } from "../shell";
import { Async, BarList, download, ErrorBox, Field, fmtTime, Json, LineChart, Table, Tabs, useAction, useAsync } from "../ui";

type Tab = "events" | "logs" | "breadcrumbs" | "queue";
const TABS: [Tab, string][] = [["events", "Events"], ["logs", "Crashes & errors"], ["breadcrumbs", "Breadcrumbs"], ["queue", "Queue"]];

export function AnalyticsPage() {
  // The tab, the selection and the range are in the URL: ?tab=logs&log=12&from=…&to=…
  const [tabParam] = useQueryState("tab", "events");
  const setQuery = useSetQuery();
  const tab: Tab = TABS.some(([t]) => t === tabParam) ? (tabParam as Tab) : "events";
  return (
    <div className="page">
      <h1>Analytics</h1>
      {/* A tab names its own selection: the others' are dropped. */}
      <Tabs<Tab> tabs={TABS} current={tab} onChange={(t) => setQuery({ tab: t === "events" ? undefined : t, event: undefined, log: undefined, crumb: undefined })} />
      <NeedApp>
        {(app) =>
          tab === "events" ? <Events app={app} /> : tab === "logs" ? <Logs app={app} /> : tab === "breadcrumbs" ? <Breadcrumbs app={app} /> : <Queue />
        }
      </NeedApp>
    </div>
  );
}

function Range() {
  const { from, to } = useRange().range;
  const setQuery = useSetQuery();
  const set = (f: string, t: string) => setQuery({ from: f, to: t });
  return (
    <div className="row-form">
      <Field label="From">
        <input type="date" value={from} max={to} onChange={(e) => e.target.value && set(e.target.value, to)} />
      </Field>
      <Field label="To">
        <input type="date" value={to} min={from} onChange={(e) => e.target.value && set(from, e.target.value)} />
      </Field>
      {[7, 30, 90].map((n) => (
        <button key={n} type="button" onClick={() => set(day(new Date(Date.now() - (n - 1) * 86400_000)), day(new Date()))}>
          Last {n} days
        </button>
      ))}
    </div>
  );
}

/** The chosen range, from the URL (default: the last 14 days). */
function useRange() {
  const { loc } = useRouter();
  const range = rangeOf(loc.query.get("from"), loc.query.get("to"));
  return { range, key: `${range.from}/${range.to}` };
}

/** The selected record's id from the URL (?event=ID), and a setter that keeps the rest. */
function useSelected(key: string): [bigint | undefined, (id: bigint | undefined) => void] {
  const [v, set] = useQueryState(key);
  const id = /^\d+$/.test(v) ? BigInt(v) : undefined;
  return [id, (x) => set(x === undefined ? undefined : String(x))];
}

function Events({ app }: { app: App }) {
  const { range, key } = useRange();
  const [openId, setOpen] = useSelected("event");
  const list = useAsync(() => listEvents(app.id, range), [app.id, key]);
  // The selection is read by id: a link to an event outside the loaded page still opens it.
  const open = useAsync(async () => (openId !== undefined ? api.analytics.getEvent({ id: openId }) : undefined), [openId]);
  const counts = useAsync(async () => (openId !== undefined ? eventDailyCounts(openId, range) : undefined), [openId, key]);
  const breakdown = useAsync(async () => (openId !== undefined ? eventBreakdown(openId, range) : undefined), [openId, key]);
  return (
    <>
      <Range />
      <div className="split">
        <section className="card">
          <h2>Events</h2>
          <p className="range-note">Active between {range.from} and {range.to}; counts are all-time.</p>
          <Async state={list} isEmpty={(d) => d.events.length === 0} empty="No events in this range: they appear when devices send them.">
            {(d) => (
              <Table
                label="Events"
                rows={d.events}
                rowKey={(e) => String(e.id)}
                onOpen={(e) => setOpen(e.id)}
                selected={(e) => e.id === openId}
                columns={[
                  { label: "Name", cell: (e) => e.name },
                  { label: "Occurrences", cell: (e) => String(e.occurrences), className: "num" },
                  { label: "Users", cell: (e) => String(e.uniqueUsers), className: "num" },
                  { label: "Last seen", cell: (e) => fmtTime(e.updatedAt) },
                ]}
              />
            )}
          </Async>
        </section>
        {openId === undefined ? (
          <section className="card empty">Choose an event to see it over time and its metadata.</section>
        ) : (
          <section className="card" aria-label="Event">
            <Async state={open}>
              {(ev) => (
                <>
                  <h2>{ev?.name}</h2>
                  <Async state={counts}>
                    {(d) => <LineChart label={`${ev?.name} per day`} points={(d?.days ?? []).map((x) => ({ x: x.day, y: Number(x.occurrences), y2: Number(x.uniqueUsers) }))} />}
                  </Async>
                  <h3>Metadata</h3>
                  <Async state={breakdown}>
                    {(b) => <Breakdown values={b?.values ?? []} total={Number(b?.total ?? 0n)} truncated={!!b?.truncated} />}
                  </Async>
                </>
              )}
            </Async>
          </section>
        )}
      </div>
    </>
  );
}

function Breakdown({ values, total, truncated }: { values: { key: string; value: string; occurrences: bigint }[]; total: number; truncated: boolean }) {
  if (total === 0) return <div className="empty">No occurrence in this range.</div>;
  if (values.length === 0) return <div className="empty">The {total} occurrences of this range carry no metadata.</div>;
  const byKey = values.reduce<Record<string, { label: string; value: number }[]>>((acc, x) => {
    (acc[x.key] ??= []).push({ label: x.value, value: Number(x.occurrences) });
    return acc;
  }, {});
  return (
    <div data-testid="breakdown">
      <p className="range-note">
        {total.toLocaleString()} occurrences in the range{truncated ? " (the newest 100,000 counted)" : ""}.
      </p>
      {Object.entries(byKey).map(([key, items]) => (
        <div key={key}>
          <h4>{key}</h4>
          <BarList items={items} />
        </div>
      ))}
    </div>
  );
}

function Logs({ app }: { app: App }) {
  const { range, key } = useRange();
  const [type, setType] = useQueryState("type");
  const [openId, setOpen] = useSelected("log");
  const list = useAsync(() => listLogs(app.id, type, range), [app.id, type, key]);
  const open = useAsync(async () => (openId !== undefined ? api.analytics.getLog({ id: openId }) : undefined), [openId]);
  return (
    <>
      <Range />
      <div className="split">
        <section className="card">
          <h2>Crash and error groups</h2>
          <Field label="Type">
            <select value={type} onChange={(e) => setType(e.target.value, { replace: true })}>
              <option value="">All</option>
              <option value="crash">Crashes</option>
              <option value="error">Errors</option>
            </select>
          </Field>
          <Async state={list} isEmpty={(d) => d.logs.length === 0} empty="No crashes or errors in this range. Good news.">
            {(d) => (
              <Table
                label="Crash and error groups"
                rows={d.logs}
                rowKey={(l) => String(l.id)}
                onOpen={(l) => setOpen(l.id)}
                selected={(l) => l.id === openId}
                columns={[
                  { label: "Type", cell: (l) => <span className={`badge ${l.type}`}>{l.type}</span> },
                  { label: "Class", cell: (l) => l.classFqn },
                  { label: "Message", cell: (l) => l.message },
                  { label: "Occurrences", cell: (l) => String(l.occurrences), className: "num" },
                  { label: "Users", cell: (l) => String(l.usersAffected), className: "num" },
                  { label: "Last seen", cell: (l) => fmtTime(l.lastSeenAt) },
                ]}
              />
            )}
          </Async>
        </section>
        {openId === undefined ? (
          <section className="card empty">Choose a group to see its stack trace and occurrences.</section>
        ) : (
          <Async state={open}>{(log) => (log ? <LogDetail key={String(log.id)} log={log} range={range} /> : null)}</Async>
        )}
      </div>
    </>
  );
}

function LogDetail({ log, range }: { log: LogRecord; range: { from: string; to: string } }) {
  const occ = useAsync(() => api.analytics.listLogOccurrences({ logId: log.id, pageSize: 50, ...rangeTimestamps(range) }), [log.id, range.from, range.to]);
  const get = useAction(async (id: bigint) => {
    const a = await api.analytics.getLogAttachment({ occurrenceId: id });
    download(a.filename, a.contentType, a.data);
  });
  return (
    <section className="card" aria-label="Crash group">
      <h2>
        {log.classFqn} <span className={`badge ${log.type}`}>{log.type}</span>
      </h2>
      <p>{log.message}</p>
      <dl className="props">
        <dt>Versions</dt>
        <dd>{log.appVersions}</dd>
        <dt>Occurrences</dt>
        <dd>{String(log.occurrences)}</dd>
        <dt>Users affected</dt>
        <dd>{String(log.usersAffected)}</dd>
        <dt>Where</dt>
        <dd>
          {log.fileName || "—"}
          {log.lineNumber ? `:${log.lineNumber}` : ""}
        </dd>
        <dt>First / last seen</dt>
        <dd>
          {fmtTime(log.createdAt)} / {fmtTime(log.lastSeenAt)}
        </dd>
      </dl>
      <h3>Stack trace</h3>
      <pre className="stack" data-testid="stack-trace">{log.stackTrace || "(none)"}</pre>
      {log.context && Object.keys(log.context).length > 0 && <Json value={log.context} />}
      <h3>Occurrences</h3>
      <ErrorBox error={get.error} />
      <Async state={occ} isEmpty={(d) => d.occurrences.length === 0} empty="No occurrences in the range.">
        {(d) => (
          <Table
            label="Occurrences"
            rows={d.occurrences}
            rowKey={(o) => String(o.id)}
            columns={[
              { label: "When", cell: (o) => fmtTime(o.createdAt) },
              { label: "User", cell: (o) => o.userId },
              { label: "Version", cell: (o) => o.appVersion },
              { label: "Consumer", cell: (o) => String(o.consumerId) },
              {
                label: "Attachment",
                cell: (o) =>
                  o.attachment ? (
                    <button type="button" onClick={() => void get.run(o.id)}>
                      Download {o.attachment.filename} ({String(o.attachment.size)} B)
                    </button>
                  ) : (
                    "—"
                  ),
              },
            ]}
          />
        )}
      </Async>
    </section>
  );
}

function Breadcrumbs({ app }: { app: App }) {
  const { range, key } = useRange();
  const [openId, setOpen] = useSelected("crumb");
  const list = useAsync(() => listBreadcrumbs(app.id, range), [app.id, key]);
  const occ = useAsync(async () => (openId !== undefined ? api.analytics.listBreadcrumbOccurrences({ breadcrumbId: openId, pageSize: 100, ...rangeTimestamps(range) }) : undefined), [openId, key]);
  const open = list.data?.breadcrumbs.find((b) => b.id === openId);
  return (
    <>
      <Range />
      <div className="split">
        <section className="card">
          <h2>Breadcrumbs</h2>
          <Async state={list} isEmpty={(d) => d.breadcrumbs.length === 0} empty="No breadcrumbs in this range.">
            {(d) => (
              <Table
                label="Breadcrumbs"
                rows={d.breadcrumbs}
                rowKey={(b) => String(b.id)}
                onOpen={(b) => setOpen(b.id)}
                selected={(b) => b.id === openId}
                columns={[
                  { label: "Name", cell: (b) => b.name },
                  { label: "Occurrences", cell: (b) => String(b.occurrences), className: "num" },
                  { label: "Last seen", cell: (b) => fmtTime(b.lastSeenAt) },
                ]}
              />
            )}
          </Async>
        </section>
        {openId !== undefined ? (
          <section className="card">
            <h2>{open?.name ?? `Breadcrumb ${openId}`}</h2>
            <Async state={occ} isEmpty={(d) => !d || d.occurrences.length === 0} empty="No occurrences in this range.">
              {(d) => (
                <Table
                  label="Breadcrumb occurrences"
                  rows={d!.occurrences}
                  rowKey={(o) => String(o.id)}
                  columns={[
                    { label: "When", cell: (o) => fmtTime(o.createdAt) },
                    { label: "Consumer", cell: (o) => String(o.consumerId) },
                    { label: "Session", cell: (o) => String(o.sessionId || "—") },
                  ]}
                />
              )}
            </Async>
          </section>
        ) : (
          <section className="card empty">Choose a breadcrumb to see its occurrences.</section>
        )}
      </div>
    </>
  );
}

function Queue() {
  const { me } = useSession();
  const stats = useAsync(() => api.analytics.getQueueStats({}), []);
  const dead = useAsync(async () => (me.admin ? api.analytics.listDeadLetters({ pageSize: 100 }) : undefined), [me.admin]);
  const replay = useAction(async () => {
    await api.analytics.replayDeadLetters({ ids: [] });
    stats.reload();
    dead.reload();
  });
  return (
    <section className="card">
      <h2>Ingestion queue</h2>
      <Async state={stats}>
        {(q) => (
          <dl className="props">
            <dt>Backend</dt>
            <dd>{q.backend}</dd>
            <dt>Lag</dt>
            <dd>{String(q.lag)}</dd>
            <dt>In flight</dt>
            <dd>{String(q.inFlight)}</dd>
            <dt>Dead letters</dt>
            <dd>{String(q.deadLetters)}</dd>
          </dl>
        )}
      </Async>
      <h3>Dead letters</h3>
      {!me.admin ? (
        <p className="muted">Dead letters hold every application's batches: only the instance administrator reads them.</p>
      ) : (
        <Async state={dead} isEmpty={(d) => !d || d.deadLetters.length === 0} empty="No dead letters.">
          {(d) => (
            <>
              <Json value={d!.deadLetters.slice(0, 20)} />
              <button type="button" onClick={() => void replay.run()} disabled={replay.busy}>
                Replay all
              </button>
              <ErrorBox error={replay.error} />
            </>
          )}
        </Async>
      )}
    </section>
  );
}
