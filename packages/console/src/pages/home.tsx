// Home: the instance at a glance (applications with their last 24 hours,
// the ingestion queues, the databases), each number a link to its page.
import { useSession } from "../session";
import { Link } from "../router";
import { bytes, capped, loadOverview, mergeOverviews } from "../data/home/overview-query";
import { Async, Table, useAsync } from "../ui";

export function HomePage() {
  const { me } = useSession();
  const state = useAsync(async () => mergeOverviews(await loadOverview(me)), [me.userId, me.teams.length]);
  const teamName = (id: bigint) => me.teams.find((t) => t.teamId === id)?.teamName ?? `team ${id}`;
  return (
    <div className="page">
      <h1>Overview</h1>
      <Async state={state}>
        {(o) => {
          const sum = (f: (a: (typeof o.apps)[number]) => bigint) => o.apps.reduce((n, a) => n + Number(f(a)), 0);
          const lag = o.queues.reduce((n, q) => n + Number(q.lag), 0);
          return (
            <>
              <section className="stats" aria-label="At a glance">
                <Stat label="Applications" value={o.totalApps.toLocaleString()} to="/apps" />
                <Stat label="Events, last 24 h" value={capped(sum((a) => a.events24h), o.cap)} to="/analytics" />
                <Stat label="Crashes and errors, last 24 h" value={capped(sum((a) => a.errors24h), o.cap)} to="/analytics?tab=logs" tone={sum((a) => a.errors24h) > 0 ? "bad" : undefined} />
                <Stat label="Function failures, last 24 h" value={capped(sum((a) => a.functionFailures24h), o.cap)} to="/functions" tone={sum((a) => a.functionFailures24h) > 0 ? "bad" : undefined} />
                <Stat label="Queue lag" value={lag.toLocaleString()} to="/analytics?tab=queue" tone={lag > 0 ? "warn" : undefined} />
                <Stat label="Databases" value={String(o.databases.length)} to="/database" />
              </section>
              <section className="card">
                <h2>Applications</h2>
                {o.apps.length === 0 ? (
                  <div className="empty">
                    No application yet. <Link to="/apps">Create one</Link>, or run <code>npx pulsebase apps create --name demo</code>.
                  </div>
                ) : (
                  <>
                    <Table
                      label="Applications, last 24 hours"
                      rows={o.apps}
                      rowKey={(a) => String(a.appId)}
                      columns={[
                        { label: "Application", cell: (a) => <Link to={`/apps?app=${a.appId}`}>{a.name}</Link> },
                        { label: "Team", cell: (a) => teamName(a.teamId) },
                        { label: "Events", className: "num", cell: (a) => <Link to={`/analytics?app=${a.appId}`}>{capped(a.events24h, o.cap)}</Link> },
                        { label: "Errors", className: "num", cell: (a) => <Link to={`/analytics?app=${a.appId}&tab=logs`}>{capped(a.errors24h, o.cap)}</Link> },
                        { label: "Function runs", className: "num", cell: (a) => capped(a.functionRuns24h, o.cap) },
                        { label: "Failed", className: "num", cell: (a) => <Link to={`/functions?app=${a.appId}`}>{capped(a.functionFailures24h, o.cap)}</Link> },
                      ]}
                    />
                    {o.totalApps > o.apps.length && <p className="muted">The {o.apps.length} newest of {o.totalApps} applications.</p>}
                  </>
                )}
              </section>
              <div className="split">
                <section className="card">
                  <h2>Ingestion queues</h2>
                  {o.queues.length === 0 ? (
                    <div className="empty">No queue answered.</div>
                  ) : (
                    <Table
                      label="Queues"
                      rows={o.queues}
                      rowKey={(q) => q.name}
                      columns={[
                        { label: "Queue", cell: (q) => q.name },
                        { label: "Backend", cell: (q) => q.backend },
                        { label: "Lag", className: "num", cell: (q) => q.lag.toLocaleString() },
                        { label: "In flight", className: "num", cell: (q) => q.inFlight.toLocaleString() },
                        { label: "Dead letters", className: "num", cell: (q) => q.deadLetters.toLocaleString() },
                      ]}
                    />
                  )}
                </section>
                <section className="card">
                  <h2>Databases</h2>
                  {o.databases.length === 0 ? (
                    <div className="empty">No database yet: link one on the Database page.</div>
                  ) : (
                    <Table
                      label="Databases"
                      rows={o.databases}
                      rowKey={(d) => String(d.databaseId)}
                      columns={[
                        { label: "Database", cell: (d) => d.name },
                        { label: "Status", cell: (d) => d.status },
                        { label: "Size", className: "num", cell: (d) => (d.kind === "remote" ? "remote" : bytes(d.sizeBytes)) },
                        { label: "Apps", cell: (d) => d.appIds.map((id) => o.apps.find((a) => a.appId === id)?.name ?? `#${id}`).join(", ") || "—" },
                      ]}
                    />
                  )}
                </section>
              </div>
            </>
          );
        }}
      </Async>
    </div>
  );
}

function Stat({ label, value, to, tone }: { label: string; value: string; to: string; tone?: "bad" | "warn" }) {
  return (
    <Link to={to} className={`stat card${tone ? ` ${tone}` : ""}`}>
      <span className="stat-value" data-testid={`stat-${label.split(",")[0]!.toLowerCase().replace(/\W+/g, "-")}`}>
        {value}
      </span>
      <span className="stat-label">{label}</span>
    </Link>
  );
}
