// The database page's Rules tab (issue #31): the application's access mode,
// each table's rules (select, insert, update and its check, delete, the
// column lists) in SQL editors, templates for the common cases, Save with
// the version it was edited from (a conflict offers to reload), "try as
// consumer" under the draft, and the version history. Viewers see it all
// read-only. The table shown and the version opened are in the URL
// (?tab=rules&rtable=notes&rversion=3).
import { useEffect, useMemo, useState } from "react";
import type { AccessRules } from "../../../../../gen/pulsebase/admin/v1/access_rules_pb.js";
import type { App } from "../../../../../gen/pulsebase/admin/v1/identity_pb.js";
import type { TableInfo } from "../../../../../gen/pulsebase/admin/v1/sql_pb.js";
import { Role } from "../../../../../gen/pulsebase/common/v1/options_pb.js";
import { api } from "../../api";
import { CodeEditor } from "../../code-editor";
import {
  applyTemplate,
  COLUMN_LISTS,
  draftOf,
  emptyRules,
  getRules,
  GROUP_COLUMNS,
  guessColumn,
  hasRules,
  isConflict,
  listVersions,
  membersById,
  OPERATIONS,
  OWNER_COLUMNS,
  sameDraft,
  saveRules,
  TEMPLATES,
  tryAsConsumer,
  type ColumnListKey,
  type Mode,
  type RuleDraft,
  type RulesDraft,
  type TemplateId,
  type TryResult,
} from "../../data/database/rules-query";
import { useQueryState } from "../../router";
import { useCan } from "../../session";
import { Async, ErrorBox, Field, fmtTime, Loading, useAction, useAsync } from "../../ui";
import { VirtualGrid } from "../grid/virtual-grid";
import "./rules.css";

const MODE_TEXT: Record<Mode, string> = {
  open:
    "Devices may run any SQL the platform's device API allows, on every table and every row (the default). " +
    "Use it only for data that every user of the app may read and change.",
  rules:
    "Devices may only SELECT, INSERT, UPDATE and DELETE on tables that have rules, and only on the rows the rules admit; " +
    "tables without rules are invisible to them, and schema changes are yours (console, CLI, operator SQL).",
};

/** Tables the rules can name: the schema's tables (not views or the service's own), and any table the rules still name. */
function ruleTables(schema: TableInfo[], draft: RulesDraft): { name: string; columns: string[]; missing: boolean }[] {
  const out = schema
    .filter((t) => t.type === "table" && !t.name.startsWith("_pulsebase_") && !t.name.startsWith("sqlite_"))
    .map((t) => ({ name: t.name, columns: t.columns.map((c) => c.name), missing: false }));
  for (const name of Object.keys(draft.tables)) if (!out.some((t) => t.name === name)) out.push({ name, columns: [], missing: true });
  return out;
}

function savedByText(by: bigint, members: Map<bigint, string> | undefined): string {
  if (by === 0n) return "the operator token";
  return members?.get(by) ?? `user #${String(by)}`;
}

export function RulesTab({ app }: { app: App }) {
  const canDev = useCan(app.teamId, Role.DEVELOPER);
  const rules = useAsync(() => getRules(app.id), [app.id]);
  const schema = useAsync(() => api.sql.getSchema({ appId: app.id }), [app.id]);
  const versions = useAsync(() => listVersions(app.id), [app.id]);
  const members = useAsync(() => membersById(app.teamId).catch(() => new Map<bigint, string>()), [app.teamId]);
  // What the editor started from (the version a save expects) and the edits.
  const [loaded, setLoaded] = useState<AccessRules>();
  const [draft, setDraft] = useState<RulesDraft>({ mode: "open", tables: {} });
  const [conflict, setConflict] = useState(false);
  const [notice, setNotice] = useState("");
  useEffect(() => {
    if (!rules.data) return;
    setLoaded(rules.data);
    setDraft(draftOf(rules.data));
    setConflict(false);
  }, [rules.data]);

  const save = useAction(async () => {
    if (!loaded) return;
    setConflict(false);
    setNotice("");
    try {
      const saved = await saveRules(app.id, draft, loaded.version);
      setLoaded(saved);
      setDraft(draftOf(saved));
      setNotice(`Saved: version ${saved.version} is in force.`);
    } catch (e) {
      if (isConflict(e)) setConflict(true);
      throw e;
    } finally {
      versions.reload();
    }
  });

  if (!loaded || !schema.data) {
    return (
      <section className="card">
        {rules.error || schema.error ? <ErrorBox error={rules.error ?? schema.error} retry={() => (rules.reload(), schema.reload())} /> : <Loading />}
      </section>
    );
  }
  const dirty = !sameDraft(draft, draftOf(loaded));
  const readOnly = !canDev;
  const setTable = (name: string, r: RuleDraft | undefined) =>
    setDraft((d) => {
      const tables = { ...d.tables };
      if (r) tables[name] = r;
      else delete tables[name];
      return { ...d, tables };
    });

  return (
    <div className="rules-tab">
      <section className="card" aria-label="Access mode">
        <h2>Access mode</h2>
        <p className="muted" role="status" aria-label="Rules in force">
          {loaded.version === 0
            ? "No rules saved yet: the application is in open mode."
            : `Version ${loaded.version} in force (${loaded.mode}), saved by ${savedByText(loaded.savedBy, members.data)} on ${fmtTime(loaded.savedAt)}.`}
        </p>
        <fieldset className="mode-switch" disabled={readOnly}>
          <legend className="visually-hidden">Mode</legend>
          {(["open", "rules"] as const).map((m) => (
            <label key={m} className={draft.mode === m ? "mode-option chosen" : "mode-option"}>
              <input type="radio" name="access-mode" value={m} checked={draft.mode === m} aria-describedby={`mode-${m}`} onChange={() => setDraft((d) => ({ ...d, mode: m }))} />
              <span>
                <strong>{m === "open" ? "Open" : "Rules"}</strong>
                <span className="hint" id={`mode-${m}`}>
                  {MODE_TEXT[m]}
                </span>
              </span>
            </label>
          ))}
        </fieldset>
        {readOnly && <p className="muted">Viewers see the rules and their history; changing them needs the developer role.</p>}
      </section>

      <TablesEditor app={app} schema={schema.data.tables} draft={draft} readOnly={readOnly} setTable={setTable} />

      {canDev && (
        <section className={dirty || conflict || save.error ? "card save-bar pending" : "card save-bar"} aria-label="Save the rules">
          <div className="row-form">
            <button type="button" className="primary" disabled={save.busy || !dirty} onClick={() => void save.run()}>
              {save.busy ? "Saving…" : "Save rules"}
            </button>
            <button type="button" disabled={!dirty || save.busy} onClick={() => (setDraft(draftOf(loaded)), save.clear(), setConflict(false))}>
              Discard changes
            </button>
            <span className="muted">{dirty ? `Unsaved changes (editing version ${loaded.version}).` : "No unsaved changes."}</span>
          </div>
          {notice && !dirty && (
            <p className="notice" role="status">
              {notice}
            </p>
          )}
          {conflict ? (
            <div className="error" role="alert">
              <span>
                Someone else saved the rules after version {loaded.version} was loaded, so this save was refused (nothing was overwritten). Reload to see
                their version, then make your edit again.
              </span>{" "}
              <button type="button" onClick={() => (rules.reload(), versions.reload(), save.clear(), setNotice(""))}>
                Reload the rules
              </button>
            </div>
          ) : (
            <ErrorBox error={save.error} />
          )}
        </section>
      )}

      {canDev && <TryAsConsumer app={app} draft={draft} />}

      <History
        versions={versions}
        members={members.data}
        current={loaded.version}
        canLoad={canDev}
        onLoad={(v) => {
          setDraft(draftOf(v));
          setNotice("");
        }}
      />
    </div>
  );
}

// ---------------------------------------------------------------- tables

function TablesEditor({ app, schema, draft, readOnly, setTable }: {
  app: App;
  schema: TableInfo[];
  draft: RulesDraft;
  readOnly: boolean;
  setTable(name: string, r: RuleDraft | undefined): void;
}) {
  const tables = ruleTables(schema, draft);
  const [picked, setPicked] = useQueryState("rtable");
  const current = tables.find((t) => t.name === picked) ?? tables[0];
  if (!tables.length) {
    return <section className="card empty">No tables yet. Create them in the SQL editor; then give each the rules devices need.</section>;
  }
  return (
    <section className="card rules-tables" aria-label="Table rules">
      <nav aria-label="Tables">
        <h2>Tables</h2>
        <ul>
          {tables.map((t) => {
            const on = hasRules(draft.tables[t.name]);
            return (
              <li key={t.name}>
                <button type="button" className={current?.name === t.name ? "load chosen" : "load"} aria-current={current?.name === t.name ? "true" : undefined} onClick={() => setPicked(t.name)}>
                  {t.name} <span className={on ? "badge ok" : "badge"}>{on ? "rules" : "no access"}</span>
                  {t.missing && <span className="badge error">not in the schema</span>}
                </button>
              </li>
            );
          })}
        </ul>
        <p className="hint">In rules mode a device can use only the tables with rules.</p>
      </nav>
      {current && (
        <TableRulesForm
          key={`${String(app.id)}:${current.name}`}
          table={current.name}
          columns={current.columns}
          rules={draft.tables[current.name] ?? emptyRules()}
          readOnly={readOnly}
          tableNames={tables.map((t) => t.name)}
          schema={schema}
          onChange={(r) => setTable(current.name, r)}
        />
      )}
    </section>
  );
}

function TableRulesForm({ table, columns, rules, readOnly, tableNames, schema, onChange }: {
  table: string;
  columns: string[];
  rules: RuleDraft;
  readOnly: boolean;
  tableNames: string[];
  schema: TableInfo[];
  onChange(r: RuleDraft | undefined): void;
}) {
  const set = (patch: Partial<RuleDraft>) => onChange({ ...rules, ...patch });
  const toggle = (key: ColumnListKey, col: string, on: boolean) =>
    set({ [key]: on ? [...rules[key], col].filter((c, i, a) => a.indexOf(c) === i) : rules[key].filter((c) => c !== col) });
  return (
    <div className="table-rules" aria-label={`Rules of ${table}`} role="group">
      <h3>
        Rules of <code>{table}</code>
      </h3>
      <p className="hint">
        Each rule is a SQL boolean expression over the row's columns and the caller: <code>:user_id</code> (the consumer's user id), <code>:consumer_id</code>,{" "}
        <code>:app_id</code>. <code>true</code> allows every row; an empty rule allows nothing. Rules may read other tables (a membership table).
      </p>
      {!readOnly && <TemplatePicker table={table} columns={columns} tableNames={tableNames} schema={schema} onApply={(id, p) => onChange(applyTemplate(id, p, rules))} />}
      <div className="rule-fields">
        {OPERATIONS.map((o) => (
          <div key={o.key} className="field">
            <span className="field-label">{o.label}</span>
            <CodeEditor
              key={`${table}:${o.key}:${readOnly ? "ro" : "rw"}`}
              language="sql"
              label={`${o.label} rule of ${table}`}
              value={rules[o.key]}
              readOnly={readOnly}
              minHeight="2.2rem"
              onChange={(v) => set({ [o.key]: v })}
            />
            <span className="hint">{o.hint}</span>
          </div>
        ))}
      </div>
      {columns.length > 0 && (
        <div className="column-lists">
          {COLUMN_LISTS.map((l) => (
            <ColumnList key={l.key} legend={l.legend} hint={l.hint} columns={columns} checked={rules[l.key]} readOnly={readOnly} onToggle={(c, on) => toggle(l.key, c, on)} />
          ))}
        </div>
      )}
      {!readOnly && hasRules(rules) && (
        <button type="button" className="danger" onClick={() => onChange(undefined)}>
          Remove the rules of {table}
        </button>
      )}
    </div>
  );
}

function ColumnList({ legend, hint, columns, checked, readOnly, onToggle }: { legend: string; hint: string; columns: string[]; checked: string[]; readOnly: boolean; onToggle(c: string, on: boolean): void }) {
  return (
    <fieldset className="column-list" disabled={readOnly}>
      <legend className="field-label">{legend}</legend>
      {columns.map((c) => (
        <label key={c} className="inline">
          <input type="checkbox" checked={checked.includes(c)} onChange={(e) => onToggle(c, e.target.checked)} /> {c}
        </label>
      ))}
      <span className="hint">{hint}</span>
    </fieldset>
  );
}

function TemplatePicker({ table, columns, tableNames, schema, onApply }: {
  table: string;
  columns: string[];
  tableNames: string[];
  schema: TableInfo[];
  onApply(id: TemplateId, p: { owner?: string; group?: string; membership?: string; memberUser?: string }): void;
}) {
  const [id, setId] = useState<TemplateId>("owner");
  const [owner, setOwner] = useState(() => guessColumn(columns, OWNER_COLUMNS));
  const [group, setGroup] = useState(() => guessColumn(columns, GROUP_COLUMNS));
  const otherTables = tableNames.filter((t) => t !== table);
  const [membership, setMembership] = useState(() => otherTables.find((t) => /member/i.test(t)) ?? otherTables[0] ?? "");
  const memberColumns = useMemo(() => schema.find((t) => t.name === membership)?.columns.map((c) => c.name) ?? [], [schema, membership]);
  const [memberUser, setMemberUser] = useState("");
  useEffect(() => setMemberUser((u) => (memberColumns.includes(u) ? u : guessColumn(memberColumns, ["user_id", "member_id", "uid"]))), [memberColumns.join("\u0000")]);
  const tpl = TEMPLATES.find((t) => t.id === id)!;
  const colSelect = (label: string, value: string, set: (v: string) => void, list: string[]) => (
    <Field label={label}>
      <select aria-label={label} value={value} onChange={(e) => set(e.target.value)}>
        {list.map((c) => (
          <option key={c}>{c}</option>
        ))}
      </select>
    </Field>
  );
  return (
    <form
      className="row-form template-picker"
      aria-label="Start from a template"
      onSubmit={(e) => {
        e.preventDefault();
        onApply(id, { owner, group, membership, memberUser });
      }}
    >
      <Field label="Template" hint={tpl.hint}>
        <select aria-label="Template" value={id} onChange={(e) => setId(e.target.value as TemplateId)}>
          {TEMPLATES.map((t) => (
            <option key={t.id} value={t.id}>
              {t.label}
            </option>
          ))}
        </select>
      </Field>
      {(id === "owner" || id === "public-read") && colSelect("Owner column", owner, setOwner, columns)}
      {id === "members" && (
        <>
          {colSelect("Group column", group, setGroup, columns)}
          {colSelect("Membership table", membership, setMembership, otherTables)}
          {colSelect("Member's user column", memberUser, setMemberUser, memberColumns)}
        </>
      )}
      <button type="submit">Apply template</button>
    </form>
  );
}

// ---------------------------------------------------------------- try as consumer

function TryAsConsumer({ app, draft }: { app: App; draft: RulesDraft }) {
  const [consumer, setConsumer] = useQueryState("rconsumer");
  const [sql, setSql] = useState("SELECT * FROM sqlite_schema");
  const [useDraft, setUseDraft] = useState(true);
  const [out, setOut] = useState<{ results: TryResult[]; durationMs: number; consumer: string }>();
  const run = useAction(async () => {
    setOut(undefined);
    const id = consumer.trim();
    if (!/^\d+$/.test(id)) throw new Error("The consumer id is a number (Apps › Consumers lists them).");
    const r = await tryAsConsumer(app.id, BigInt(id), sql, useDraft ? draft : undefined);
    setOut({ ...r, consumer: id });
  });
  return (
    <section className="card" aria-label="Try as consumer">
      <h2>Try as consumer</h2>
      <p className="hint">
        Runs SQL as one consumer's device would, with that consumer's <code>:user_id</code>, under the rules (as in rules mode), in a transaction that is
        rolled back: nothing it writes is kept.
      </p>
      <div className="row-form">
        <Field label="Consumer id">
          <input inputMode="numeric" value={consumer} onChange={(e) => setConsumer(e.target.value, { replace: true })} placeholder="e.g. 42" size={10} />
        </Field>
        <label className="inline">
          <input type="checkbox" checked={useDraft} onChange={(e) => setUseDraft(e.target.checked)} /> Use the rules being edited (unsaved draft)
        </label>
      </div>
      <CodeEditor language="sql" label="SQL to try as the consumer" value={sql} onChange={setSql} onRun={() => void run.run()} minHeight="4rem" />
      <div className="row-form">
        <button type="button" className="primary" disabled={run.busy} onClick={() => void run.run()}>
          {run.busy ? "Running…" : "Run as consumer"}
        </button>
        {out && <span className="muted">{out.durationMs} ms</span>}
      </div>
      <ErrorBox error={run.error} />
      {out?.results.map((r, i) => (
        <div key={i} className="result">
          <code className="stmt">{r.sql}</code>
          {r.error ? (
            <div className="error" role="alert">
              {r.error}
            </div>
          ) : r.columns.length ? (
            <>
              <VirtualGrid columns={r.columns} rows={r.rows} label={`Result as consumer ${out.consumer}`} height={240} />
              <span className="muted" role="status">
                {r.rows.length.toLocaleString("en-US")} row(s) as consumer {out.consumer}
              </span>
            </>
          ) : (
            <span className="muted" role="status">
              {r.rowsWritten} row(s) changed (rolled back)
            </span>
          )}
        </div>
      ))}
    </section>
  );
}

// ---------------------------------------------------------------- history

function History({ versions, members, current, canLoad, onLoad }: {
  versions: ReturnType<typeof useAsync<AccessRules[]>>;
  members: Map<bigint, string> | undefined;
  current: number;
  canLoad: boolean;
  onLoad(v: AccessRules): void;
}) {
  const [open, setOpen] = useQueryState("rversion");
  return (
    <section className="card" aria-label="Versions">
      <h2>Versions</h2>
      <Async state={versions} isEmpty={(d) => d.length === 0} empty="No version saved yet.">
        {(list) => (
          <div className="table-wrap">
            <table aria-label="Rule versions">
              <thead>
                <tr>
                  <th className="num">Version</th>
                  <th>Mode</th>
                  <th>Tables with rules</th>
                  <th>Saved by</th>
                  <th>Saved at</th>
                </tr>
              </thead>
              <tbody>
                {list.map((v) => {
                  const n = String(v.version);
                  const sel = open === n;
                  return (
                    <tr
                      key={n}
                      tabIndex={0}
                      className={sel ? "clickable selected" : "clickable"}
                      aria-current={sel ? "true" : undefined}
                      onClick={() => setOpen(sel ? undefined : n)}
                      onKeyDown={(e) => e.key === "Enter" && setOpen(sel ? undefined : n)}
                    >
                      <td className="num">
                        {n} {v.version === current && <span className="badge ok">in force</span>}
                      </td>
                      <td>{v.mode}</td>
                      <td>{v.tables.map((t) => t.table).join(", ") || "—"}</td>
                      <td>{savedByText(v.savedBy, members)}</td>
                      <td>{fmtTime(v.savedAt)}</td>
                    </tr>
                  );
                })}
              </tbody>
            </table>
          </div>
        )}
      </Async>
      {versions.data?.filter((v) => String(v.version) === open).map((v) => (
        <div key={open} className="drawer" aria-label={`Version ${open}`} role="region">
          <h3>Version {open}</h3>
          <pre className="json">
            {JSON.stringify(
              { mode: v.mode, tables: Object.fromEntries(v.tables.map((t) => [t.table, Object.fromEntries(Object.entries(draftOf({ mode: v.mode, tables: [t] }).tables[t.table]!).filter(([, x]) => (Array.isArray(x) ? x.length : x !== "")))])) },
              null,
              2,
            )}
          </pre>
          {canLoad && v.version !== current && (
            <button type="button" onClick={() => onLoad(v)}>
              Load version {open} into the editor
            </button>
          )}
        </div>
      ))}
    </section>
  );
}
