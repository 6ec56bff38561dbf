// Applications: create, the app key and its rotation, the plan, strict
// token mode, consumers (search, view, delete).
import { useState } from "react";
import { create } from "@bufbuild/protobuf";
import { PlanSchema, type App, type ConsumerRecord } from "../../../../gen/pulsebase/admin/v1/identity_pb.js";
import { Role } from "../../../../gen/pulsebase/common/v1/options_pb.js";
import { api } from "../api";
import { useQueryState } from "../router";
import { useCan, useSession } from "../session";
import { NeedApp, useApps } from "../shell";
import { Async, ErrorBox, Field, fmtTime, Json, Table, useAction, useAsync } from "../ui";

export function AppsPage() {
  const session = useSession();
  const { apps, select, reload, loading } = useApps();
  const teams = session.me.teams.filter((t) => session.roleIn(t.teamId) >= Role.DEVELOPER);
  const [name, setName] = useState("");
  const [teamId, setTeamId] = useState(teams[0] ? String(teams[0].teamId) : "");
  const createApp = useAction(async () => {
    const a = await api.identity.createApp({ teamId: BigInt(teamId), name });
    setName("");
    reload();
    select(a.id);
  });
  return (
    <div className="page">
      <h1>Applications</h1>
      {teams.length > 0 && (
        <form
          className="card row-form"
          onSubmit={(e) => {
            e.preventDefault();
            void createApp.run();
          }}
        >
          <Field label="New application name">
            <input name="app-name" required value={name} onChange={(e) => setName(e.target.value)} />
          </Field>
          <Field label="Team">
            <select value={teamId} onChange={(e) => setTeamId(e.target.value)}>
              {teams.map((t) => (
                <option key={String(t.teamId)} value={String(t.teamId)}>
                  {t.teamName}
                </option>
              ))}
            </select>
          </Field>
          <button type="submit" className="primary" disabled={createApp.busy}>
            Create application
          </button>
          <ErrorBox error={createApp.error} />
        </form>
      )}
      {!loading && apps.length === 0 ? <div className="empty">No applications yet.</div> : <NeedApp>{(app) => <AppDetail key={String(app.id)} app={app} />}</NeedApp>}
    </div>
  );
}

function AppDetail({ app }: { app: App }) {
  const { reload } = useApps();
  const canDev = useCan(app.teamId, Role.DEVELOPER);
  const canOwn = useCan(app.teamId, Role.OWNER);
  const rotate = useAction(async () => {
    if (!window.confirm("Rotate the app key? Tokens carrying the old key stop working at once.")) return;
    await api.identity.rotateAppKey({ appId: app.id });
    reload();
  });
  const strict = useAction(async (on: boolean) => {
    await api.identity.updateAppSettings({ appId: app.id, strictTokenMode: on });
    reload();
  });
  const plan = app.plan!;
  const [draft, setDraft] = useState({ ...plan, cmsRequestsPerDay: String(plan.cmsRequestsPerDay) });
  const savePlan = useAction(async () => {
    await api.identity.setAppPlan({ appId: app.id, plan: create(PlanSchema, { ...draft, cmsRequestsPerDay: BigInt(draft.cmsRequestsPerDay || "0") }) });
    reload();
  });
  const num = (k: "functionInvocationsPerMinute" | "cmsRequestsPerSecond" | "functionMaxTimeoutMs" | "functionMaxMemoryMb") => (
    <input type="number" min={0} value={draft[k]} disabled={!canOwn} onChange={(e) => setDraft({ ...draft, [k]: Number(e.target.value) })} />
  );
  return (
    <>
      <section className="card">
        <h2>
          {app.name} <span className="muted">#{String(app.id)}</span>
        </h2>
        <dl className="props">
          <dt>App key</dt>
          <dd>
            <code data-testid="app-key">{app.appKey}</code>{" "}
            {canDev && (
              <button type="button" onClick={() => void rotate.run()} disabled={rotate.busy}>
                Rotate key
              </button>
            )}
            <ErrorBox error={rotate.error} />
          </dd>
          <dt>Strict token mode</dt>
          <dd>
            <label className="inline">
              <input type="checkbox" checked={app.strictTokenMode} disabled={!canDev || strict.busy} onChange={(e) => void strict.run(e.target.checked)} /> token issue also requires the device id
            </label>
            <ErrorBox error={strict.error} />
          </dd>
          <dt>Created</dt>
          <dd>{fmtTime(app.createdAt)}</dd>
        </dl>
      </section>
      <section className="card">
        <h2>Plan</h2>
        {!canOwn && <p className="muted">Only team owners change plans.</p>}
        <form
          className="grid-form"
          onSubmit={(e) => {
            e.preventDefault();
            void savePlan.run();
          }}
        >
          <Field label="Name">
            <input value={draft.name} disabled={!canOwn} onChange={(e) => setDraft({ ...draft, name: e.target.value })} />
          </Field>
          <Field label="Functions enabled">
            <input type="checkbox" checked={draft.functionsEnabled} disabled={!canOwn} onChange={(e) => setDraft({ ...draft, functionsEnabled: e.target.checked })} />
          </Field>
          <Field label="Invocations / minute (0 = unlimited)">{num("functionInvocationsPerMinute")}</Field>
          <Field label="CMS requests / day">
            <input type="number" min={0} value={draft.cmsRequestsPerDay} disabled={!canOwn} onChange={(e) => setDraft({ ...draft, cmsRequestsPerDay: e.target.value })} />
          </Field>
          <Field label="CMS requests / second">{num("cmsRequestsPerSecond")}</Field>
          <Field label="Function max timeout (ms)">{num("functionMaxTimeoutMs")}</Field>
          <Field label="Function max memory (MB)">{num("functionMaxMemoryMb")}</Field>
          {canOwn && (
            <button type="submit" className="primary" disabled={savePlan.busy}>
              Save plan
            </button>
          )}
          <ErrorBox error={savePlan.error} />
        </form>
      </section>
      <Consumers app={app} canDelete={canDev} />
    </>
  );
}

function Consumers({ app, canDelete }: { app: App; canDelete: boolean }) {
  const [token, setToken] = useState("");
  const [tokens, setTokens] = useState<string[]>([]);
  const [search, setSearch] = useState("");
  // The open consumer is in the URL (?consumer=ID): a link opens it, back closes it.
  const [openParam, setOpenParam] = useQueryState("consumer");
  const setOpen = (c: ConsumerRecord | undefined) => setOpenParam(c ? String(c.id) : undefined);
  const list = useAsync(() => api.identity.listConsumers({ appId: app.id, pageSize: 100, pageToken: token }), [app.id, token]);
  const open = list.data?.consumers.find((c) => String(c.id) === openParam);
  const sessions = useAsync(async () => (open ? api.identity.listSessions({ consumerId: open.id, pageSize: 20 }) : undefined), [open?.id]);
  const del = useAction(async (c: ConsumerRecord) => {
    if (!window.confirm(`Delete consumer ${c.id} (${c.userId})? Its tokens stop working at once.`)) return;
    await api.identity.deleteConsumer({ consumerId: c.id });
    setOpen(undefined);
    list.reload();
  });
  const q = search.trim().toLowerCase();
  return (
    <section className="card">
      <h2>Consumers</h2>
      <input type="search" placeholder="Search user, email, device, model, country…" aria-label="Search consumers" value={search} onChange={(e) => setSearch(e.target.value)} />
      <Async state={list} isEmpty={(d) => d.consumers.length === 0} empty="No consumer has registered yet.">
        {(d) => {
          const rows = d.consumers.filter((c) => !q || [c.userId, c.userEmail, c.deviceId, c.deviceModel, c.os, c.country, String(c.id)].some((v) => v.toLowerCase().includes(q)));
          return (
            <>
              <Table
                label="Consumers"
                rows={rows}
                rowKey={(c) => String(c.id)}
                onOpen={setOpen}
                selected={(c) => String(c.id) === openParam}
                columns={[
                  { label: "ID", cell: (c) => String(c.id) },
                  { label: "User", cell: (c) => c.userId },
                  { label: "Email", cell: (c) => c.userEmail || "—" },
                  { label: "Device", cell: (c) => `${c.deviceModel} (${c.os})` },
                  { label: "Country", cell: (c) => c.country },
                  { label: "Registered", cell: (c) => fmtTime(c.createdAt) },
                ]}
              />
              {rows.length === 0 && <div className="empty">No consumer on this page matches.</div>}
              <div className="pager">
                <button type="button" disabled={!tokens.length} onClick={() => (setToken(tokens.at(-1) ?? ""), setTokens(tokens.slice(0, -1)))}>
                  Previous
                </button>
                <button type="button" disabled={!d.nextPageToken} onClick={() => (setTokens([...tokens, token]), setToken(d.nextPageToken))}>
                  Next
                </button>
              </div>
            </>
          );
        }}
      </Async>
      {open && (
        <div className="drawer" role="dialog" aria-label={`Consumer ${open.id}`}>
          <h3>Consumer {String(open.id)}</h3>
          <Json value={open} />
          <h4>Sessions</h4>
          <Async state={sessions} isEmpty={(d) => !d || d.sessions.length === 0} empty="No sessions.">
            {(d) => (
              <ul>
                {d!.sessions.map((s) => (
                  <li key={String(s.sessionId)}>
                    #{String(s.sessionId)} {fmtTime(s.startedAt)} → {s.endedAt ? fmtTime(s.endedAt) : "active"}
                  </li>
                ))}
              </ul>
            )}
          </Async>
          <div className="actions">
            {canDelete && (
              <button type="button" className="danger" onClick={() => void del.run(open)} disabled={del.busy}>
                Delete consumer
              </button>
            )}
            <button type="button" onClick={() => setOpen(undefined)}>
              Close
            </button>
          </div>
          <ErrorBox error={del.error} />
        </div>
      )}
    </section>
  );
}
