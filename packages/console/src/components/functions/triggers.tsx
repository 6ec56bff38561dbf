// The Triggers tab: every trigger of the function (HTTP with its auth mode,
// event, schedule) and the forms to add HTTP and event triggers (schedules
// have their own tab). A form is emptied after a successful Add; a signed
// trigger's secret is shown once, right after it was made or rotated.
import { useState } from "react";
import type { Function as Fn, Trigger } from "../../../../../gen/pulsebase/admin/v1/functions_pb.js";
import { TriggerKind } from "../../../../../gen/pulsebase/admin/v1/functions_pb.js";
import type { App } from "../../../../../gen/pulsebase/admin/v1/identity_pb.js";
import { Role } from "../../../../../gen/pulsebase/common/v1/options_pb.js";
import {
  createEventTrigger,
  createHttpTrigger,
  deleteTrigger,
  eventTargets,
  HTTP_AUTH_MODES,
  listTriggers,
  OPERATIONS,
  rotateSecret,
  setTriggerEnabled,
  type HttpTriggerInput,
  type Operation,
} from "../../data/functions/functions-query";
import { useRouter } from "../../router";
import { useCan } from "../../session";
import { Async, ErrorBox, Field, fmtTime, Table, useAction, useAsync } from "../../ui";
import "./functions.css";

const EMPTY_HTTP: HttpTriggerInput = { slug: "", auth: "consumer", signingSecret: "", signatureHeader: "", toleranceSeconds: "" };

export function triggerKindLabel(t: Trigger): string {
  return t.kind === TriggerKind.HTTP ? "HTTP" : t.kind === TriggerKind.SCHEDULE ? "schedule" : t.kind === TriggerKind.EVENT ? "event" : "unknown";
}

export function Triggers({ app, fn, scheduleHref }: { app: App; fn: Fn; scheduleHref(id: bigint): string }) {
  const canDev = useCan(app.teamId, Role.DEVELOPER);
  const list = useAsync(() => listTriggers(fn.id), [fn.id]);
  const { go } = useRouter();
  // The secret of the trigger just made or rotated: shown once, never again.
  const [secret, setSecret] = useState<{ id: bigint; slug: string; secret: string; header: string }>();
  const toggle = useAction(async (id: bigint, enabled: boolean) => {
    await setTriggerEnabled(id, enabled);
    list.reload();
  });
  const remove = useAction(async (id: bigint) => {
    await deleteTrigger(id);
    list.reload();
  });
  const rotate = useAction(async (t: Trigger) => {
    const r = await rotateSecret(t.id);
    setSecret({ id: t.id, slug: t.slug, secret: r.signingSecret ?? "", header: r.signatureHeader ?? "" });
  });
  const added = (t: Trigger) => {
    if (t.signingSecret) setSecret({ id: t.id, slug: t.slug, secret: t.signingSecret, header: t.signatureHeader ?? "" });
    list.reload();
  };
  return (
    <section className="card">
      <ErrorBox error={toggle.error ?? remove.error ?? rotate.error} />
      {secret && (
        <div className="notice" data-testid="signing-secret">
          <span>
            Signing secret of <code>{secret.slug}</code> (shown once; the caller sends <code>{secret.header}: t=&lt;unix seconds&gt;,v1=&lt;hex HMAC-SHA256 of "t.body"&gt;</code>):
          </span>
          <input readOnly className="mono wide" aria-label="Signing secret" value={secret.secret} onFocus={(e) => e.target.select()} />
          <button type="button" onClick={() => setSecret(undefined)}>
            Done
          </button>
        </div>
      )}
      <Async state={list} isEmpty={(d) => d.length === 0} empty="No triggers: the function runs only manually.">
        {(d) => (
          <Table
            label="Triggers"
            rows={d}
            rowKey={(t) => String(t.id)}
            columns={[
              { label: "Kind", cell: (t) => triggerKindLabel(t) },
              { label: "What calls it", cell: (t) => <TriggerWhat t={t} appKey={app.appKey} scheduleHref={scheduleHref} go={go} /> },
              {
                label: "Enabled",
                cell: (t) => <input type="checkbox" aria-label={`Trigger ${t.id} enabled`} checked={t.enabled} disabled={!canDev} onChange={(e) => void toggle.run(t.id, e.target.checked)} />,
              },
              {
                label: "Created",
                cell: (t) => fmtTime(t.createdAt),
              },
              {
                label: "",
                cell: (t) =>
                  canDev && (
                    <span className="fn-actions">
                      {t.kind === TriggerKind.HTTP && t.auth === "signed" && (
                        <button type="button" onClick={() => void rotate.run(t)}>
                          Rotate secret
                        </button>
                      )}
                      <button type="button" className="danger" aria-label={`Delete trigger ${t.id}`} onClick={() => void remove.run(t.id)}>
                        Delete
                      </button>
                    </span>
                  ),
              },
            ]}
          />
        )}
      </Async>
      {canDev && (
        <div className="fn-forms">
          <HttpForm fn={fn} onAdded={added} />
          <EventForm app={app} fn={fn} onAdded={added} />
        </div>
      )}
      {canDev && (
        <p className="hint">
          Schedules (cron) are on the <a href={scheduleHref(0n)} onClick={(e) => (e.preventDefault(), go(scheduleHref(0n)))}>Schedules</a> tab.
        </p>
      )}
    </section>
  );
}

function TriggerWhat({ t, appKey, scheduleHref, go }: { t: Trigger; appKey: string; scheduleHref(id: bigint): string; go(to: string): void }) {
  if (t.kind === TriggerKind.HTTP) {
    const auth = t.auth ?? "consumer";
    // Token-less callers name the application by its app key in the path (docs/functions.md, "Webhooks and public endpoints").
    return (
      <span className="fn-what">
        <code>{auth === "consumer" ? `/api/fn/${t.slug}` : `/api/fn/${appKey}/${t.slug}`}</code> <span className={`badge auth-${auth}`}>{auth}</span>
        {auth === "public" && (
          <span className="hint">
            anyone, no token; devices with a token also at <code>/api/fn/{t.slug}</code>
          </span>
        )}
        {auth === "signed" && (
          <span className="hint">
            signed in <code>{t.signatureHeader}</code>, ±{t.signatureToleranceSeconds} s
          </span>
        )}
        {auth === "consumer" && <span className="hint">devices with a consumer token</span>}
      </span>
    );
  }
  if (t.kind === TriggerKind.SCHEDULE) {
    const href = scheduleHref(t.id);
    return (
      <a href={href} onClick={(e) => (e.preventDefault(), go(href))}>
        <code>{t.cron}</code> ({t.timezone}) {t.enabled && t.nextRunAt ? `next ${fmtTime(t.nextRunAt)}` : "paused"}
      </a>
    );
  }
  return (
    <span>
      {t.source === "db" ? "table" : "content type"} <code>{t.target}</code>: {t.operations.join(", ")}
    </span>
  );
}

function HttpForm({ fn, onAdded }: { fn: Fn; onAdded(t: Trigger): void }) {
  const [f, setF] = useState<HttpTriggerInput>(EMPTY_HTTP);
  const add = useAction(async () => {
    onAdded(await createHttpTrigger(fn.id, f));
    setF(EMPTY_HTTP);
  });
  const mode = HTTP_AUTH_MODES.find((m) => m.value === f.auth)!;
  return (
    <form
      aria-label="New HTTP trigger"
      onSubmit={(e) => {
        e.preventDefault();
        void add.run();
      }}
    >
      <h3>HTTP trigger</h3>
      <Field label="Slug" hint={`Served at /api/fn/${f.slug || "{slug}"} on the public listener.`}>
        <input name="slug" required value={f.slug} onChange={(e) => setF({ ...f, slug: e.target.value })} />
      </Field>
      <Field label="Authentication" hint={mode.hint}>
        <select name="auth" value={f.auth} onChange={(e) => setF({ ...f, auth: e.target.value as HttpTriggerInput["auth"] })}>
          {HTTP_AUTH_MODES.map((m) => (
            <option key={m.value} value={m.value}>
              {m.label}
            </option>
          ))}
        </select>
      </Field>
      {f.auth === "signed" && (
        <>
          <Field label="Signing secret" hint="Empty: the server makes one and shows it once. Or paste the one your provider gave (16 to 256 bytes).">
            <input name="signing-secret" type="password" autoComplete="off" value={f.signingSecret} onChange={(e) => setF({ ...f, signingSecret: e.target.value })} />
          </Field>
          <Field label="Signature header" hint="Default pulsebase-signature (e.g. stripe-signature).">
            <input name="signature-header" placeholder="pulsebase-signature" value={f.signatureHeader} onChange={(e) => setF({ ...f, signatureHeader: e.target.value })} />
          </Field>
          <Field label="Tolerance (seconds)" hint="How far the signed timestamp may be from the server's clock; default 300.">
            <input name="tolerance" type="number" min={1} max={86400} placeholder="300" value={f.toleranceSeconds} onChange={(e) => setF({ ...f, toleranceSeconds: e.target.value })} />
          </Field>
        </>
      )}
      <button type="submit" disabled={add.busy}>
        Add HTTP trigger
      </button>
      <ErrorBox error={add.error} />
    </form>
  );
}

function EventForm({ app, fn, onAdded }: { app: App; fn: Fn; onAdded(t: Trigger): void }) {
  const empty = { source: "db" as "db" | "cms", target: "", operations: [...OPERATIONS] as Operation[] };
  const [ev, setEv] = useState(empty);
  const targets = useAsync(() => eventTargets(app.id, ev.source), [app.id, ev.source]);
  const add = useAction(async () => {
    onAdded(await createEventTrigger(fn.id, ev.source, ev.target, ev.operations));
    setEv({ ...empty, source: ev.source });
  });
  const listId = `event-targets-${fn.id}`;
  return (
    <form
      aria-label="New event trigger"
      onSubmit={(e) => {
        e.preventDefault();
        void add.run();
      }}
    >
      <h3>Event trigger</h3>
      <Field label="Source">
        <select name="source" value={ev.source} onChange={(e) => setEv({ ...ev, source: e.target.value as "db" | "cms", target: "" })}>
          <option value="db">database table</option>
          <option value="cms">CMS content type</option>
        </select>
      </Field>
      <Field label={ev.source === "db" ? "Table" : "Content type"} hint={targets.data?.length ? "Pick one from the list, or type a name." : undefined}>
        <input name="target" required list={listId} autoComplete="off" value={ev.target} onChange={(e) => setEv({ ...ev, target: e.target.value })} />
        <datalist id={listId}>
          {(targets.data ?? []).map((t) => (
            <option key={t} value={t} />
          ))}
        </datalist>
      </Field>
      <fieldset className="field">
        <legend className="field-label">Operations</legend>
        <div>
          {OPERATIONS.map((op) => (
            <label key={op} className="inline">
              <input
                type="checkbox"
                name={`op-${op}`}
                checked={ev.operations.includes(op)}
                onChange={(e) => setEv({ ...ev, operations: e.target.checked ? OPERATIONS.filter((o) => o === op || ev.operations.includes(o)) : ev.operations.filter((o) => o !== op) })}
              />
              {op}
            </label>
          ))}
        </div>
      </fieldset>
      <button type="submit" disabled={add.busy || ev.operations.length === 0}>
        Add event trigger
      </button>
      <ErrorBox error={add.error} />
    </form>
  );
}
