// Functions: create, the code editor and deploy, versions with a diff and
// activation, triggers (HTTP with every auth mode, event), schedules with
// their runs, a manual run with a payload, a live tail of invocations and
// logs with error stacks, dead-letter replay. The tab and the selected
// schedule or invocation are in the URL (?tab=…&schedule=…&inv=…), so each
// has a link and back and forward work.
import { useEffect, useState } from "react";
import { fromJsonString } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { diffLines } from "diff";
import type { Function as Fn, FunctionVersion, RunFunctionResponse } from "../../../../gen/pulsebase/admin/v1/functions_pb.js";
import type { App } from "../../../../gen/pulsebase/admin/v1/identity_pb.js";
import { Role } from "../../../../gen/pulsebase/common/v1/options_pb.js";
import { api } from "../api";
import { CodeEditor } from "../code-editor";
import { match, useRouter } from "../router";
import { useCan } from "../session";
import { AppLink, NeedApp } from "../shell";
import { Async, ErrorBox, Field, fmtTime, Json, Table, Tabs, useAction, useAsync } from "../ui";
import { ErrorStack } from "../components/functions/error-stack";
import { Invocations, LogList } from "../components/functions/invocations";
import { Schedules } from "../components/functions/schedules";
import { Triggers } from "../components/functions/triggers";

const TEMPLATE = `// A function: the default export receives the request and a context.
// HTTP trigger: req.body is the request's JSON; manual run: req is the payload.
export default async function (req, ctx) {
  const input = ctx.trigger === "manual" ? req : req?.body;
  console.log("called with", JSON.stringify(input));
  return { hello: input?.name ?? "world" };
}
`;

export function FunctionsPage() {
  const { loc, go } = useRouter();
  const m = match("/functions/:id", loc.path);
  return (
    <div className="page">
      <NeedApp>{(app) => (m ? <FunctionDetail key={m.id} app={app} id={BigInt(m.id!)} /> : <FunctionList app={app} onOpen={(id) => go(`/functions/${id}?app=${app.id}`)} />)}</NeedApp>
    </div>
  );
}

function FunctionList({ app, onOpen }: { app: App; onOpen(id: bigint): void }) {
  const canDev = useCan(app.teamId, Role.DEVELOPER);
  const list = useAsync(() => api.functions.listFunctions({ appId: app.id, pageSize: 500 }), [app.id]);
  const [name, setName] = useState("");
  const createFn = useAction(async () => {
    const f = await api.functions.createFunction({ appId: app.id, name });
    onOpen(f.id);
  });
  return (
    <>
      <h1>Functions</h1>
      {canDev && (
        <form
          className="card row-form"
          onSubmit={(e) => {
            e.preventDefault();
            void createFn.run();
          }}
        >
          <Field label="New function name">
            <input name="function-name" required value={name} onChange={(e) => setName(e.target.value)} />
          </Field>
          <button type="submit" className="primary" disabled={createFn.busy}>
            Create function
          </button>
          <ErrorBox error={createFn.error} />
        </form>
      )}
      <section className="card">
        <Async state={list} isEmpty={(d) => d.functions.length === 0} empty="No functions yet.">
          {(d) => (
            <Table
              label="Functions"
              rows={d.functions}
              rowKey={(f) => String(f.id)}
              onOpen={(f) => onOpen(f.id)}
              columns={[
                { label: "Name", cell: (f) => f.name },
                { label: "Active version", cell: (f) => (f.activeVersion ? `v${f.activeVersion}` : "none") },
                { label: "Latest", cell: (f) => `v${f.latestVersion}` },
                { label: "Timeout", cell: (f) => `${f.settings?.timeoutMs ?? 0} ms` },
                { label: "Updated", cell: (f) => fmtTime(f.updatedAt) },
              ]}
            />
          )}
        </Async>
      </section>
    </>
  );
}

type Tab = "code" | "versions" | "triggers" | "schedules" | "run" | "invocations" | "dead";
const TABS: [Tab, string][] = [["code", "Code"], ["versions", "Versions"], ["triggers", "Triggers"], ["schedules", "Schedules"], ["run", "Run"], ["invocations", "Invocations"], ["dead", "Dead letters"]];

/** An id from the query string, or undefined when absent or not a number. */
function idParam(q: URLSearchParams, name: string): bigint | undefined {
  const v = q.get(name);
  return v && /^\d{1,19}$/.test(v) ? BigInt(v) : undefined;
}

function FunctionDetail({ app, id }: { app: App; id: bigint }) {
  const fn = useAsync(() => api.functions.getFunction({ id }), [id]);
  const { loc, go } = useRouter();
  const q = loc.query;
  const tab: Tab = TABS.some(([t]) => t === q.get("tab")) ? (q.get("tab") as Tab) : "code";
  // Every tab and selection is a URL of its own (pushed, so back returns to the previous one).
  const href = (set: Record<string, string | undefined>) => {
    const next = new URLSearchParams(q);
    for (const [k, v] of Object.entries(set)) {
      if (v === undefined) next.delete(k);
      else next.set(k, v);
    }
    return `${loc.path}?${next.toString()}`;
  };
  const setTab = (t: Tab) => go(href({ tab: t === "code" ? undefined : t, schedule: undefined, inv: undefined, view: undefined }));
  return (
    <Async state={fn}>
      {(f) => (
        <>
          <p>
            <AppLink to="/functions">← Functions</AppLink>
          </p>
          <h1>
            {f.name} <span className="muted">{f.activeVersion ? `active v${f.activeVersion}` : "no active version"}</span>
          </h1>
          <Tabs<Tab> tabs={TABS} current={tab} onChange={setTab} />
          {tab === "code" && <Code app={app} fn={f} onDeployed={fn.reload} />}
          {tab === "versions" && <Versions app={app} fn={f} onChange={fn.reload} />}
          {tab === "triggers" && <Triggers app={app} fn={f} scheduleHref={(sid) => href({ tab: "schedules", schedule: sid ? String(sid) : undefined, inv: undefined, view: undefined })} />}
          {tab === "schedules" && (
            <Schedules
              app={app}
              fn={f}
              selected={idParam(q, "schedule")}
              select={(sid) => go(href({ schedule: sid === undefined ? undefined : String(sid) }))}
              openInvocation={(iid) => go(href({ tab: "invocations", schedule: undefined, inv: String(iid), view: undefined }))}
            />
          )}
          {tab === "run" && <Run app={app} fn={f} />}
          {tab === "invocations" && (
            <Invocations
              fn={f}
              selected={idParam(q, "inv")}
              select={(iid) => go(href({ inv: iid === undefined ? undefined : String(iid) }))}
              view={q.get("view") === "logs" ? "logs" : "table"}
              setView={(v) => go(href({ view: v === "logs" ? "logs" : undefined }))}
            />
          )}
          {tab === "dead" && <DeadLetters app={app} fn={f} />}
        </>
      )}
    </Async>
  );
}

function Code({ app, fn, onDeployed }: { app: App; fn: Fn; onDeployed(): void }) {
  const canDev = useCan(app.teamId, Role.DEVELOPER);
  const versions = useAsync(() => api.functions.listVersions({ functionId: fn.id, includeCode: true }), [fn.id]);
  const [code, setCode] = useState<string>();
  const [activate, setActivate] = useState(true);
  const [done, setDone] = useState<FunctionVersion>();
  useEffect(() => {
    if (code === undefined && versions.data) {
      const v = versions.data.versions.find((x) => x.active) ?? versions.data.versions.at(-1);
      setCode(v?.code ?? TEMPLATE);
    }
  }, [versions.data]);
  const deploy = useAction(async () => {
    setDone(await api.functions.deployVersion({ functionId: fn.id, code: code ?? "", activate }));
    versions.reload();
    onDeployed();
  });
  if (code === undefined) return <Async state={versions}>{() => null}</Async>;
  return (
    <section className="card">
      <CodeEditor language="javascript" label="Function code" value={code} onChange={setCode} readOnly={!canDev} minHeight="18rem" onRun={() => void deploy.run()} />
      {canDev && (
        <div className="row-form">
          <label className="inline">
            <input type="checkbox" checked={activate} onChange={(e) => setActivate(e.target.checked)} /> activate
          </label>
          <button type="button" className="primary" onClick={() => void deploy.run()} disabled={deploy.busy}>
            {deploy.busy ? "Deploying…" : "Deploy"}
          </button>
          {done && <span className="ok">Deployed v{done.version}{done.active ? " (active)" : ""}</span>}
        </div>
      )}
      <ErrorBox error={deploy.error} />
    </section>
  );
}

function Versions({ app, fn, onChange }: { app: App; fn: Fn; onChange(): void }) {
  const canDev = useCan(app.teamId, Role.DEVELOPER);
  const versions = useAsync(() => api.functions.listVersions({ functionId: fn.id, includeCode: true }), [fn.id]);
  const [pair, setPair] = useState<[number, number]>();
  const activate = useAction(async (v: number) => {
    await api.functions.activateVersion({ functionId: fn.id, version: v });
    versions.reload();
    onChange();
  });
  return (
    <section className="card">
      <ErrorBox error={activate.error} />
      <Async state={versions} isEmpty={(d) => d.versions.length === 0} empty="Nothing deployed yet.">
        {(d) => {
          const vs = [...d.versions].sort((a, b) => b.version - a.version);
          const [a, b] = pair ?? [vs[1]?.version ?? vs[0]!.version, vs[0]!.version];
          const left = vs.find((v) => v.version === a)?.code ?? "";
          const right = vs.find((v) => v.version === b)?.code ?? "";
          return (
            <>
              <Table
                label="Versions"
                rows={vs}
                rowKey={(v) => String(v.version)}
                columns={[
                  { label: "Version", cell: (v) => `v${v.version}` },
                  { label: "Size", cell: (v) => `${v.codeSize} B`, className: "num" },
                  { label: "Deployed", cell: (v) => fmtTime(v.createdAt) },
                  {
                    label: "State",
                    cell: (v) =>
                      v.active ? (
                        <span className="badge ok">active</span>
                      ) : canDev ? (
                        <button type="button" onClick={() => void activate.run(v.version)}>
                          Activate v{v.version}
                        </button>
                      ) : (
                        ""
                      ),
                  },
                ]}
              />
              <h3>Diff</h3>
              <div className="row-form">
                <Field label="From">
                  <select value={a} onChange={(e) => setPair([Number(e.target.value), b])}>
                    {vs.map((v) => (
                      <option key={v.version} value={v.version}>
                        v{v.version}
                      </option>
                    ))}
                  </select>
                </Field>
                <Field label="To">
                  <select value={b} onChange={(e) => setPair([a, Number(e.target.value)])}>
                    {vs.map((v) => (
                      <option key={v.version} value={v.version}>
                        v{v.version}
                      </option>
                    ))}
                  </select>
                </Field>
              </div>
              <pre className="diff" aria-label={`Diff from v${a} to v${b}`}>
                {diffLines(left, right).map((part, i) => (
                  <span key={i} className={part.added ? "add" : part.removed ? "del" : undefined}>
                    {part.value
                      .replace(/\n$/, "")
                      .split("\n")
                      .map((l) => `${part.added ? "+" : part.removed ? "-" : " "} ${l}\n`)
                      .join("")}
                  </span>
                ))}
              </pre>
            </>
          );
        }}
      </Async>
    </section>
  );
}

function Run({ app, fn }: { app: App; fn: Fn }) {
  const canDev = useCan(app.teamId, Role.DEVELOPER);
  const [payload, setPayload] = useState('{\n  "name": "console"\n}');
  const [res, setRes] = useState<RunFunctionResponse>();
  const run = useAction(async () => {
    setRes(undefined);
    setRes(await api.functions.runFunction({ functionId: fn.id, payload: payload.trim() ? fromJsonString(ValueSchema, payload) : undefined }));
  });
  if (!canDev) return <div className="card empty">Running a function needs the developer role.</div>;
  return (
    <section className="card">
      <Field label="Payload (JSON)">
        <textarea rows={6} value={payload} onChange={(e) => setPayload(e.target.value)} className="mono" />
      </Field>
      <button type="button" className="primary" onClick={() => void run.run()} disabled={run.busy}>
        {run.busy ? "Running…" : "Run"}
      </button>
      <ErrorBox error={run.error} />
      {res && (
        <div className="result" data-testid="run-result">
          <p>
            <span className={`badge ${res.outcome}`}>{res.outcome}</span> status {res.status} in {res.durationMs.toFixed(1)} ms (v{res.version}, invocation {String(res.invocationId)})
          </p>
          <ErrorStack functionId={fn.id} error={res.error} stack={res.errorStack} />
          <h4>Body</h4>
          <pre className="json">{res.body}</pre>
          <h4>Logs{res.logsTruncated && <span className="muted"> (cut: the function logged more)</span>}</h4>
          <LogList logs={res.logs} />
        </div>
      )}
    </section>
  );
}

function DeadLetters({ app, fn }: { app: App; fn: Fn }) {
  const canDev = useCan(app.teamId, Role.DEVELOPER);
  const list = useAsync(() => api.functions.listFunctionDeadLetters({ appId: app.id, functionId: fn.id, pageSize: 100 }), [fn.id]);
  const replay = useAction(async (ids: string[]) => {
    await api.functions.replayFunctionDeadLetters({ appId: app.id, functionId: fn.id, ids });
    list.reload();
  });
  return (
    <section className="card">
      <ErrorBox error={replay.error} />
      <Async state={list} isEmpty={(d) => d.deadLetters.length === 0} empty="No dead letters: every event reached the function.">
        {(d) => (
          <>
            <Table
              label="Dead letters"
              rows={d.deadLetters}
              rowKey={(x) => x.id}
              columns={[
                { label: "When", cell: (x) => fmtTime(x.deadLetteredAt) },
                { label: "Event", cell: (x) => `${x.source}:${x.target} ${x.operation}` },
                { label: "Attempts", cell: (x) => String(x.attempts) },
                { label: "Last error", cell: (x) => x.lastError },
                { label: "", cell: (x) => canDev && <button type="button" onClick={() => void replay.run([x.id])}>Replay</button> },
              ]}
            />
            {canDev && (
              <button type="button" onClick={() => void replay.run([])}>
                Replay all
              </button>
            )}
            <details>
              <summary>Events</summary>
              <Json value={d.deadLetters.map((x) => x.event)} />
            </details>
          </>
        )}
      </Async>
    </section>
  );
}
