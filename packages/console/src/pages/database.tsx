// Database: the SQL editor (operator rights, results grid, errors in
// place), a table browser with paging, and the schema.
import { useState, type ReactNode } from "react";
import { DatabaseKind, DatabaseStatus } from "../../../../gen/pulsebase/admin/v1/database_pb.js";
import { toJson } from "@bufbuild/protobuf";
import { ListValueSchema } from "@bufbuild/protobuf/wkt";
import type { App } from "../../../../gen/pulsebase/admin/v1/identity_pb.js";
import type { ListValue } from "@bufbuild/protobuf/wkt";
import { Role } from "../../../../gen/pulsebase/common/v1/options_pb.js";
import { api } from "../api";
import { CodeEditor } from "../code-editor";
import { useCan } from "../session";
import { NeedApp } from "../shell";
import { Async, ErrorBox, Field, Tabs, useAction, useAsync } from "../ui";
import type { RunSqlResponse } from "../../../../gen/pulsebase/admin/v1/sql_pb.js";

type Tab = "sql" | "tables" | "schema";

export function DatabasePage() {
  const [tab, setTab] = useState<Tab>("sql");
  return (
    <div className="page">
      <h1>Database</h1>
      <Tabs<Tab> tabs={[["sql", "SQL editor"], ["tables", "Tables"], ["schema", "Schema"]]} current={tab} onChange={setTab} />
      <NeedApp>
        {(app) => (
          <Linked key={String(app.id)} app={app}>
            {tab === "sql" ? <SqlEditor app={app} /> : tab === "tables" ? <Tables app={app} /> : <Schema app={app} />}
          </Linked>
        )}
      </NeedApp>
    </div>
  );
}

/** The app's linked database, or a form to create and link one. */
function Linked({ app, children }: { app: App; children: ReactNode }) {
  const canDev = useCan(app.teamId, Role.DEVELOPER);
  const dbs = useAsync(() => api.databases.listDatabases({ teamId: app.teamId }), [app.teamId]);
  const [name, setName] = useState(`${app.name} db`);
  const [pick, setPick] = useState("");
  const link = useAction(async () => {
    const id = pick ? BigInt(pick) : (await api.databases.createDatabase({ teamId: app.teamId, name })).id;
    await api.databases.linkDatabase({ databaseId: id, appId: app.id });
    dbs.reload();
  });
  if (!dbs.data) return <Async state={dbs}>{() => null}</Async>;
  const linked = dbs.data.databases.find((d) => d.linkedAppIds.includes(app.id));
  if (linked) {
    return (
      <>
        <p className="muted">
          Database <strong>{linked.name}</strong> (#{String(linked.id)}, {linked.kind === DatabaseKind.REMOTE ? "remote libSQL" : "embedded"}, {DatabaseStatus[linked.status]?.toLowerCase()})
        </p>
        {children}
      </>
    );
  }
  const free = dbs.data.databases.filter((d) => d.status === DatabaseStatus.ACTIVE);
  return (
    <section className="card">
      <h2>No database is linked to {app.name}</h2>
      {!canDev ? (
        <p className="muted">A developer of the team can create and link one.</p>
      ) : (
        <form
          className="row-form"
          onSubmit={(e) => {
            e.preventDefault();
            void link.run();
          }}
        >
          {free.length > 0 && (
            <Field label="Link an existing database">
              <select value={pick} onChange={(e) => setPick(e.target.value)}>
                <option value="">— create a new one —</option>
                {free.map((d) => (
                  <option key={String(d.id)} value={String(d.id)}>
                    {d.name} (#{String(d.id)})
                  </option>
                ))}
              </select>
            </Field>
          )}
          {!pick && (
            <Field label="New database name">
              <input name="database-name" required value={name} onChange={(e) => setName(e.target.value)} />
            </Field>
          )}
          <button type="submit" className="primary" disabled={link.busy}>
            {pick ? "Link database" : "Create and link database"}
          </button>
        </form>
      )}
      <ErrorBox error={link.error} />
    </section>
  );
}

function cell(v: unknown): string {
  if (v === null) return "NULL";
  return typeof v === "object" ? JSON.stringify(v) : String(v);
}

function Grid({ columns, rows, label }: { columns: string[]; rows: ListValue[]; label: string }) {
  return (
    <div className="table-wrap">
      <table className="grid" aria-label={label}>
        <thead>
          <tr>
            {columns.map((c, i) => (
              <th key={i}>{c}</th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map((r, i) => (
            <tr key={i}>
              {(toJson(ListValueSchema, r) as unknown[]).map((v, j) => (
                <td key={j} className={v === null ? "null" : typeof v === "number" ? "num" : undefined}>
                  {cell(v)}
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function SqlEditor({ app }: { app: App }) {
  const canRun = useCan(app.teamId, Role.DEVELOPER);
  const [text, setText] = useState("SELECT name, type FROM sqlite_schema;");
  const [res, setRes] = useState<RunSqlResponse>();
  const run = useAction(async () => {
    setRes(undefined);
    setRes(await api.sql.runSql({ appId: app.id, sql: text }));
  });
  if (!canRun) return <div className="card empty">Running SQL needs the developer role; viewers can browse tables and the schema.</div>;
  return (
    <section className="card">
      <CodeEditor language="sql" label="SQL" value={text} onChange={setText} onRun={() => void run.run()} />
      <div className="row-form">
        <button type="button" className="primary" onClick={() => void run.run()} disabled={run.busy}>
          {run.busy ? "Running…" : "Run (Ctrl+Enter)"}
        </button>
        {res && <span className="muted">{res.durationMs} ms</span>}
      </div>
      <ErrorBox error={run.error} />
      {res?.results.map((r, i) => (
        <div key={i} className="result">
          <code className="stmt">{r.sql}</code>
          {r.error ? (
            <div className="error" role="alert">
              {r.error}
            </div>
          ) : r.columns.length ? (
            <>
              <Grid columns={r.columns} rows={r.rows} label={`Result ${i + 1}`} />
              <span className="muted">{r.rows.length} row(s)</span>
            </>
          ) : (
            <span className="muted">{String(r.rowsWritten)} row(s) changed</span>
          )}
        </div>
      ))}
    </section>
  );
}

function Tables({ app }: { app: App }) {
  const schema = useAsync(() => api.sql.getSchema({ appId: app.id }), [app.id]);
  const [table, setTable] = useState("");
  const [offset, setOffset] = useState(0);
  const pageSize = 25;
  const page = useAsync(async () => (table ? api.sql.browseTable({ appId: app.id, table, pageSize, offset: BigInt(offset) }) : undefined), [app.id, table, offset]);
  return (
    <section className="card">
      <Async state={schema} isEmpty={(d) => d.tables.length === 0} empty="No tables yet. Create one in the SQL editor.">
        {(d) => (
          <Field label="Table">
            <select
              value={table}
              onChange={(e) => {
                setTable(e.target.value);
                setOffset(0);
              }}
            >
              <option value="">Choose a table…</option>
              {d.tables.map((t) => (
                <option key={t.name} value={t.name}>
                  {t.name} {t.type === "view" ? "(view)" : ""}
                </option>
              ))}
            </select>
          </Field>
        )}
      </Async>
      {table && (
        <Async state={page} isEmpty={(d) => !d || Number(d.totalRows) === 0} empty="The table is empty.">
          {(d) => (
            <>
              <Grid columns={d!.columns} rows={d!.rows} label={`Rows of ${table}`} />
              <div className="pager">
                <span className="muted">
                  Rows {offset + 1}–{offset + d!.rows.length} of {String(d!.totalRows)}
                </span>
                <button type="button" disabled={offset === 0} onClick={() => setOffset(Math.max(0, offset - pageSize))}>
                  Previous
                </button>
                <button type="button" disabled={offset + pageSize >= Number(d!.totalRows)} onClick={() => setOffset(offset + pageSize)}>
                  Next
                </button>
              </div>
            </>
          )}
        </Async>
      )}
    </section>
  );
}

function Schema({ app }: { app: App }) {
  const schema = useAsync(() => api.sql.getSchema({ appId: app.id }), [app.id]);
  return (
    <Async state={schema} isEmpty={(d) => d.tables.length === 0} empty="No tables yet.">
      {(d) => (
        <div className="schema">
          {d.tables.map((t) => (
            <section key={t.name} className="card">
              <h3>
                {t.name} <span className="muted">{t.type}</span>
              </h3>
              <table aria-label={`Columns of ${t.name}`}>
                <thead>
                  <tr>
                    <th>Column</th>
                    <th>Type</th>
                    <th>Not null</th>
                    <th>Key</th>
                    <th>Default</th>
                  </tr>
                </thead>
                <tbody>
                  {t.columns.map((c) => (
                    <tr key={c.name}>
                      <td>{c.name}</td>
                      <td>{c.type}</td>
                      <td>{c.notNull ? "yes" : ""}</td>
                      <td>{c.primaryKey ? "primary" : ""}</td>
                      <td>{c.defaultValue}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
              {t.indexes.length > 0 && (
                <p>
                  Indexes:{" "}
                  {t.indexes.map((i) => (
                    <code key={i.name}>
                      {i.name}({i.columns.join(", ")}){i.unique ? " unique" : ""}{" "}
                    </code>
                  ))}
                </p>
              )}
              <details>
                <summary>SQL</summary>
                <pre>{t.sql}</pre>
              </details>
            </section>
          ))}
        </div>
      )}
    </Async>
  );
}
