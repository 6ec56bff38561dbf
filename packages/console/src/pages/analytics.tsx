// Analytics: events over time for a chosen range with the metadata
// breakdown; crash and error groups (stack trace, versions, occurrences,
// users affected, attachments); breadcrumbs; queue health and dead letters.
import { useState } from "react";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { App } from "../../../../gen/pulsebase/admin/v1/identity_pb.js";
import type { EventRecord, LogRecord, BreadcrumbRecord } from "../../../../gen/pulsebase/admin/v1/analytics_pb.js";
import { api } from "../api";
import { useSession } from "../session";
import { NeedApp } from "../shell";
import { Async, BarList, download, ErrorBox, Field, fmtTime, Json, LineChart, Table, Tabs, useAction, useAsync } from "../ui";

type Tab = "events" | "logs" | "breadcrumbs" | "queue";

const day = (d: Date) => d.toISOString().slice(0, 10);

export function AnalyticsPage() {
  const [tab, setTab] = useState<Tab>("events");
  return (
    <div className="page">
      <h1>Analytics</h1>
      <Tabs<Tab> tabs={[["events", "Events"], ["logs", "Crashes & errors"], ["breadcrumbs", "Breadcrumbs"], ["queue", "Queue"]]} current={tab} onChange={setTab} />
      <NeedApp>
        {(app) =>
          tab === "events" ? <Events app={app} /> : tab === "logs" ? <Logs app={app} /> : tab === "breadcrumbs" ? <Breadcrumbs app={app} /> : <Queue />
        }
      </NeedApp>
    </div>
  );
}

function Range({ from, to, onChange }: { from: string; to: string; onChange(from: string, to: string): void }) {
  return (
    <div className="row-form">
      <Field label="From">
        <input type="date" value={from} onChange={(e) => onChange(e.target.value, to)} />
      </Field>
      <Field label="To">
        <input type="date" value={to} onChange={(e) => onChange(from, e.target.value)} />
      </Field>
      {[7, 30, 90].map((n) => (
        <button key={n} type="button" onClick={() => onChange(day(new Date(Date.now() - (n - 1) * 86400_000)), day(new Date()))}>
          Last {n} days
        </button>
      ))}
    </div>
  );
}

function useRange() {
  const [range, setRange] = useState({ from: day(new Date(Date.now() - 13 * 86400_000)), to: day(new Date()) });
  const ts = {
    from: timestampFromDate(new Date(range.from + "T00:00:00Z")),
    to: timestampFromDate(new Date(new Date(range.to + "T00:00:00Z").getTime() + 86400_000)),
  };
  return { range, setRange, ts };
}

function Events({ app }: { app: App }) {
  const { range, setRange, ts } = useRange();
  const [open, setOpen] = useState<EventRecord>();
  const list = useAsync(() => api.analytics.listEvents({ filter: { appId: app.id, pageSize: 200 } }), [app.id]);
  const counts = useAsync(async () => (open ? api.analytics.getEventDailyCounts({ eventId: open.id, from: ts.from, to: ts.to }) : undefined), [open?.id, range.from, range.to]);
  return (
    <div className="split">
      <section className="card">
        <h2>Events</h2>
        <Async state={list} isEmpty={(d) => d.events.length === 0} empty="No events yet: they appear when devices send them.">
          {(d) => (
            <Table
              label="Events"
              rows={d.events}
              rowKey={(e) => String(e.id)}
              onOpen={setOpen}
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
      {open ? (
        <section className="card">
          <h2>{open.name}</h2>
          <Range from={range.from} to={range.to} onChange={(from, to) => setRange({ from, to })} />
          <Async state={counts}>
            {(d) => <LineChart label={`${open.name} per day`} points={(d?.days ?? []).map((x) => ({ x: x.day, y: Number(x.occurrences), y2: Number(x.uniqueUsers) }))} />}
          </Async>
          <h3>Metadata</h3>
          {open.eventData.length === 0 ? (
            <div className="empty">This event carries no metadata.</div>
          ) : (
            Object.entries(
              open.eventData.reduce<Record<string, { label: string; value: number }[]>>((acc, x) => {
                (acc[x.key] ??= []).push({ label: x.value, value: Number(x.occurrences) });
                return acc;
              }, {}),
            ).map(([key, items]) => (
              <div key={key}>
                <h4>{key}</h4>
                <BarList items={items.sort((a, b) => b.value - a.value)} />
              </div>
            ))
          )}
        </section>
      ) : (
        <section className="card empty">Choose an event to see it over time and its metadata.</section>
      )}
    </div>
  );
}

function Logs({ app }: { app: App }) {
  const [type, setType] = useState("");
  const [open, setOpen] = useState<LogRecord>();
  const list = useAsync(() => api.analytics.listLogs({ filter: { appId: app.id, pageSize: 200 }, type }), [app.id, type]);
  return (
    <div className="split">
      <section className="card">
        <h2>Crash and error groups</h2>
        <Field label="Type">
          <select value={type} onChange={(e) => setType(e.target.value)}>
            <option value="">All</option>
            <option value="crash">Crashes</option>
            <option value="error">Errors</option>
          </select>
        </Field>
        <Async state={list} isEmpty={(d) => d.logs.length === 0} empty="No crashes or errors reported. Good news.">
          {(d) => (
            <Table
              label="Crash and error groups"
              rows={d.logs}
              rowKey={(l) => String(l.id)}
              onOpen={setOpen}
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
      {open ? <LogDetail key={String(open.id)} log={open} /> : <section className="card empty">Choose a group to see its stack trace and occurrences.</section>}
    </div>
  );
}

function LogDetail({ log }: { log: LogRecord }) {
  const occ = useAsync(() => api.analytics.listLogOccurrences({ logId: log.id, pageSize: 50 }), [log.id]);
  const get = useAction(async (id: bigint) => {
    const a = await api.analytics.getLogAttachment({ occurrenceId: id });
    download(a.filename, a.contentType, a.data);
  });
  return (
    <section className="card">
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
  const [open, setOpen] = useState<BreadcrumbRecord>();
  const list = useAsync(() => api.analytics.listBreadcrumbs({ filter: { appId: app.id, pageSize: 200 } }), [app.id]);
  const occ = useAsync(async () => (open ? api.analytics.listBreadcrumbOccurrences({ breadcrumbId: open.id, pageSize: 100 }) : undefined), [open?.id]);
  return (
    <div className="split">
      <section className="card">
        <h2>Breadcrumbs</h2>
        <Async state={list} isEmpty={(d) => d.breadcrumbs.length === 0} empty="No breadcrumbs yet.">
          {(d) => (
            <Table
              label="Breadcrumbs"
              rows={d.breadcrumbs}
              rowKey={(b) => String(b.id)}
              onOpen={setOpen}
              columns={[
                { label: "Name", cell: (b) => b.name },
                { label: "Occurrences", cell: (b) => String(b.occurrences), className: "num" },
                { label: "Last seen", cell: (b) => fmtTime(b.lastSeenAt) },
              ]}
            />
          )}
        </Async>
      </section>
      {open ? (
        <section className="card">
          <h2>{open.name}</h2>
          <Async state={occ} isEmpty={(d) => !d || d.occurrences.length === 0} empty="No occurrences.">
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
