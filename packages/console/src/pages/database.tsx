// Database: the SQL editor (operator rights; read results paged into a
// windowed grid, CSV export, the account's history and saved queries), the
// table editor (sort, filter, search, jump to a page, insert, edit and
// delete rows), the schema and the access rules (components/database/rules.tsx).
// The Live tab (components/database/live.tsx) shows a table's changes as they happen.
// The tab, the table and its view (page, sort, filters, search) are in the URL.
import { useEffect, useRef, useState, type ReactNode } from "react";
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { DatabaseKind, DatabaseStatus } from "../../../../gen/pulsebase/admin/v1/database_pb.js";
import type { App } from "../../../../gen/pulsebase/admin/v1/identity_pb.js";
import type { ColumnInfo, TableInfo } from "../../../../gen/pulsebase/admin/v1/sql_pb.js";
import { Role } from "../../../../gen/pulsebase/common/v1/options_pb.js";
import { api, errorText } from "../api";
import { CodeEditor } from "../code-editor";
import { LiveTab } from "../components/database/live";
import { RulesTab } from "../components/database/rules";
import { VirtualGrid } from "../components/grid/virtual-grid";
import {
  deleteSaved,
  exportCsv,
  GRID_AUTO_ROWS,
  listHistory,
  listSaved,
  readPage,
  runSql,
  saveQuery,
  type ResultView,
} from "../data/database/sql-query";
import {
  browse,
  deleteRow,
  insertRow,
  NO_VALUE_OPS,
  OPS,
  PAGE_SIZES,
  readTableView,
  tableViewPatch,
  updateRow,
  withParams,
  type Filter,
  type TablePage,
  type TableView,
} from "../data/database/table-query";
import { useRouter } from "../router";
import { useCan } from "../session";
import { NeedApp } from "../shell";
import { Async, ErrorBox, Field, fmtTime, Tabs, useAction, useAsync } from "../ui";

type Tab = "sql" | "tables" | "live" | "schema" | "rules";
const TABS: [Tab, string][] = [["sql", "SQL editor"], ["tables", "Tables"], ["live", "Live"], ["schema", "Schema"], ["rules", "Rules"]];

/** Query parameters of this page, changed together (keeps ?app= and the rest). */
function useParams() {
  const { loc, go } = useRouter();
  return { q: loc.query, set: (patch: Record<string, string | undefined>) => go(withParams(loc.path, loc.query, patch)) };
}

export function DatabasePage() {
  const { q, set } = useParams();
  const tab = (TABS.find(([t]) => t === q.get("tab"))?.[0] ?? "sql") as Tab;
  return (
    <div className="page">
      <h1>Database</h1>
      <Tabs<Tab> tabs={TABS} current={tab} onChange={(t) => set({ tab: t === "sql" ? undefined : t })} />
      <NeedApp>
        {(app) => (
          <Linked key={String(app.id)} app={app}>
            {tab === "sql" ? <SqlEditor app={app} /> : tab === "tables" ? <Tables app={app} /> : tab === "live" ? <LiveTab app={app} table={q.get("table") ?? ""} paused={q.get("paused") === "1"} set={set} /> : tab === "rules" ? <RulesTab app={app} /> : <Schema app={app} />}
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
  // Empty with the suggestion as placeholder: typing replaces it instead of appending to it.
  const suggested = `${app.name} db`;
  const [name, setName] = useState("");
  const [pick, setPick] = useState("");
  const link = useAction(async () => {
    const id = pick ? BigInt(pick) : (await api.databases.createDatabase({ teamId: app.teamId, name: name.trim() || suggested })).id;
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
            <Field label="New database name" hint={`Empty: “${suggested}”.`}>
              <input name="database-name" value={name} placeholder={suggested} onChange={(e) => setName(e.target.value)} />
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

// ---------------------------------------------------------------- SQL editor

interface LiveResult extends ResultView {
  /** Pages are being read in the background. */
  streaming: boolean;
  streamError?: string;
}

function SqlEditor({ app }: { app: App }) {
  const canRun = useCan(app.teamId, Role.DEVELOPER);
  const [text, setText] = useState("SELECT name, type FROM sqlite_schema;");
  const [results, setResults] = useState<LiveResult[]>();
  const [duration, setDuration] = useState<number>();
  const history = useAsync(() => (canRun ? listHistory(app.id) : Promise.resolve([])), [app.id, canRun]);
  const saved = useAsync(() => (canRun ? listSaved(app.id) : Promise.resolve([])), [app.id, canRun]);
  // One run at a time: a new run stops the previous one's page reads.
  const runAbort = useRef<AbortController | undefined>(undefined);
  useEffect(() => () => runAbort.current?.abort(), []);

  const update = (i: number, f: (r: LiveResult) => LiveResult) => setResults((rs) => rs?.map((r, j) => (j === i ? f(r) : r)));

  /** Reads the result's next pages into the grid, up to GRID_AUTO_ROWS (then the user asks for more). */
  const stream = async (i: number, r: ResultView, signal: AbortSignal, upTo: number) => {
    let next = r.next;
    let have = r.rows.length;
    update(i, (x) => ({ ...x, streaming: true, streamError: undefined }));
    try {
      while (next && have < upTo && !signal.aborted) {
        const page = await readPage(app.id, r.sql, next, undefined, signal);
        // A later run replaced these results: its rows must not get this page.
        if (signal.aborted) return;
        next = page.next;
        have += page.rows.length;
        const n = next;
        update(i, (x) => ({ ...x, rows: x.rows.concat(page.rows), next: n }));
      }
      update(i, (x) => ({ ...x, streaming: false }));
    } catch (e) {
      // Stopped: the rows so far stay, with "Load more rows".
      if (!signal.aborted) update(i, (x) => ({ ...x, streaming: false, streamError: errorText(e) }));
    }
  };

  const run = useAction(async () => {
    runAbort.current?.abort();
    const ctl = new AbortController();
    runAbort.current = ctl;
    setResults(undefined);
    try {
      const res = await runSql(app.id, text);
      setDuration(res.durationMs);
      setResults(res.results.map((r) => ({ ...r, streaming: false })));
      res.results.forEach((r, i) => r.next && void stream(i, r, ctl.signal, GRID_AUTO_ROWS));
    } finally {
      history.reload();
    }
  });

  if (!canRun) return <div className="card empty">Running SQL needs the developer role; viewers can browse tables and the schema.</div>;
  return (
    <div className="db-layout">
      <section className="card" aria-label="SQL editor">
        <CodeEditor language="sql" label="SQL" value={text} onChange={setText} onRun={() => void run.run()} />
        <div className="row-form">
          <button type="button" className="primary" onClick={() => void run.run()} disabled={run.busy}>
            {run.busy ? "Running…" : "Run (Ctrl+Enter)"}
          </button>
          <SaveForm app={app} sql={text} onSaved={saved.reload} />
          {duration !== undefined && results && <span className="muted">{duration} ms</span>}
        </div>
        <ErrorBox error={run.error} />
        {results?.map((r, i) => (
          <ResultBlock
            key={i}
            app={app}
            index={i}
            r={r}
            onMore={() => {
              const ctl = runAbort.current;
              if (ctl) void stream(i, r, ctl.signal, r.rows.length + GRID_AUTO_ROWS);
            }}
            onStop={() => {
              // Stops every result's reads; a fresh controller lets "Load more rows" go on later.
              runAbort.current?.abort();
              runAbort.current = new AbortController();
              setResults((rs) => rs?.map((x) => ({ ...x, streaming: false })));
            }}
          />
        ))}
      </section>
      <aside className="card db-side" aria-label="Saved queries and history">
        <h3>Saved queries</h3>
        <Async state={saved} isEmpty={(d) => d.length === 0} empty="None yet: name a query and Save it.">
          {(list) => (
            <ul aria-label="Saved queries">
              {list.map((sq) => (
                <li key={String(sq.id)}>
                  <button type="button" className="load" title={sq.sql} onClick={() => setText(sq.sql)}>
                    {sq.name}
                  </button>
                  <button type="button" className="link" aria-label={`Delete saved query ${sq.name}`} onClick={() => void deleteSaved(app.id, sq.id).then(saved.reload)}>
                    ×
                  </button>
                </li>
              ))}
            </ul>
          )}
        </Async>
        <h3>History</h3>
        <Async state={history} isEmpty={(d) => d.length === 0} empty="Statements you run appear here.">
          {(list) => (
            <ul aria-label="History">
              {list.map((h) => (
                <li key={String(h.id)}>
                  <button type="button" className="load" title={h.sql} onClick={() => setText(h.sql)}>
                    {h.error ? "⚠ " : ""}
                    {h.sql}
                  </button>
                  <span className="when">{fmtTime(h.ranAt)}</span>
                </li>
              ))}
            </ul>
          )}
        </Async>
      </aside>
    </div>
  );
}

function SaveForm({ app, sql, onSaved }: { app: App; sql: string; onSaved(): void }) {
  const [name, setName] = useState("");
  const save = useAction(async () => {
    await saveQuery(app.id, name.trim(), sql);
    setName("");
    onSaved();
  });
  return (
    <form
      className="row-form"
      onSubmit={(e) => {
        e.preventDefault();
        void save.run();
      }}
    >
      <input aria-label="Query name" placeholder="Query name" value={name} maxLength={100} onChange={(e) => setName(e.target.value)} />
      <button type="submit" disabled={!name.trim() || save.busy}>
        Save query
      </button>
      <ErrorBox error={save.error} />
    </form>
  );
}

function ResultBlock({ app, index, r, onMore, onStop }: { app: App; index: number; r: LiveResult; onMore(): void; onStop(): void }) {
  const [exporting, setExporting] = useState<number>();
  const [exported, setExported] = useState<string>();
  const csv = useAction(async () => {
    setExporting(r.rows.length);
    setExported(undefined);
    try {
      const out = await exportCsv(app.id, r, `result-${index + 1}.csv`, setExporting);
      setExported(out.cut ? `Exported the first ${out.rows.toLocaleString("en-US")} rows (the export limit).` : `Exported ${out.rows.toLocaleString("en-US")} rows.`);
    } finally {
      setExporting(undefined);
    }
  });
  const count = r.rows.length.toLocaleString("en-US");
  return (
    <div className="result">
      <code className="stmt">{r.sql}</code>
      {r.error ? (
        <div className="error" role="alert">
          {r.error}
        </div>
      ) : r.columns.length ? (
        <>
          <VirtualGrid columns={r.columns} rows={r.rows} label={`Result ${index + 1}`} />
          <div className="result-bar">
            <span className="muted" role="status">
              {r.streaming ? `Loading… ${count} rows so far` : r.next ? `First ${count} rows (more to load)` : `${count} row(s)`}
            </span>
            {r.streaming && (
              <button type="button" onClick={onStop}>
                Stop
              </button>
            )}
            {!r.streaming && r.next && (
              <button type="button" onClick={onMore}>
                Load more rows
              </button>
            )}
            <button type="button" onClick={() => void csv.run()} disabled={csv.busy}>
              {exporting !== undefined ? `Exporting… ${exporting.toLocaleString("en-US")}` : "Export CSV"}
            </button>
            {exported && <span className="muted">{exported}</span>}
          </div>
          {r.streamError && <div className="error">{r.streamError}</div>}
          <ErrorBox error={csv.error} />
        </>
      ) : (
        <span className="muted">{String(r.rowsWritten)} row(s) changed</span>
      )}
    </div>
  );
}

// ---------------------------------------------------------------- Table editor

function cellText(v: JsonValue): string {
  if (v === null) return "NULL";
  return typeof v === "object" ? JSON.stringify(v) : String(v);
}

function Tables({ app }: { app: App }) {
  const { q, set } = useParams();
  const view = readTableView(q);
  const canDev = useCan(app.teamId, Role.DEVELOPER);
  const schema = useAsync(() => api.sql.getSchema({ appId: app.id }), [app.id]);
  const key = JSON.stringify(view);
  const page = useAsync(async () => (view.table ? browse(app.id, view) : undefined), [app.id, key]);
  const [editing, setEditing] = useState<{ mode: "insert" } | { mode: "edit"; row: JsonValue[]; key: JsonValue[] }>();
  const [notice, setNotice] = useState("");
  const info = schema.data?.tables.find((t) => t.name === view.table);
  const setView = (v: Partial<TableView>) => set(tableViewPatch(v));
  const done = (msg: string) => {
    setNotice(msg);
    setEditing(undefined);
    page.reload();
  };
  return (
    <section className="card">
      <Async state={schema} isEmpty={(d) => d.tables.length === 0} empty="No tables yet. Create one in the SQL editor.">
        {(d) => (
          <Field label="Table">
            <select
              value={view.table}
              onChange={(e) => {
                setNotice("");
                setEditing(undefined);
                // A new table starts from its first page, unsorted and unfiltered.
                setView({ table: e.target.value, page: 1, sort: "", desc: false, search: "", filters: [] });
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
      {view.table && info && (
        <>
          <TableTools view={view} columns={info.columns.map((c) => c.name)} setView={setView} />
          {notice && (
            <p className="notice" role="status">
              {notice}
            </p>
          )}
          {page.data && canDev && page.data.editable && !editing && (
            <button type="button" className="primary" onClick={() => (setNotice(""), setEditing({ mode: "insert" }))}>
              Insert row
            </button>
          )}
          {page.data && !page.data.editable && <p className="muted">{info.type === "view" ? "A view: its rows are read-only." : "The service's table: read-only."}</p>}
          {!canDev && <p className="muted">Viewers browse; editing rows needs the developer role.</p>}
          {editing && (
            <RowForm
              app={app}
              table={info}
              page={page.data!}
              editing={editing}
              onCancel={() => setEditing(undefined)}
              onDone={done}
            />
          )}
        </>
      )}
      {view.table && (
        <Async state={page} isEmpty={(d) => !d || d.total === 0} empty={view.filters.length || view.search ? "No rows match." : "The table is empty."}>
          {(d) => <RowsTable app={app} view={view} d={d!} canEdit={canDev && d!.editable} setView={setView} onEdit={(row, k) => (setNotice(""), setEditing({ mode: "edit", row, key: k }))} onDeleted={done} />}
        </Async>
      )}
    </section>
  );
}

function TableTools({ view, columns, setView }: { view: TableView; columns: string[]; setView(v: Partial<TableView>): void }) {
  const [search, setSearch] = useState(view.search);
  const [col, setCol] = useState(columns[0] ?? "");
  const [op, setOp] = useState("eq");
  const [value, setValue] = useState("");
  useEffect(() => setSearch(view.search), [view.search]);
  useEffect(() => setCol((c) => (columns.includes(c) ? c : (columns[0] ?? ""))), [columns.join("\u0000")]);
  const remove = (i: number) => setView({ filters: view.filters.filter((_, j) => j !== i), page: 1 });
  return (
    <>
      <div className="table-tools">
        <form
          className="table-tools"
          role="search"
          onSubmit={(e) => {
            e.preventDefault();
            setView({ search: search.trim(), page: 1 });
          }}
        >
          <Field label="Search rows">
            <input type="search" value={search} maxLength={1000} onChange={(e) => setSearch(e.target.value)} placeholder="Text in any column" />
          </Field>
          <button type="submit">Search</button>
        </form>
        <form
          className="table-tools"
          aria-label="Add a filter"
          onSubmit={(e) => {
            e.preventDefault();
            if (view.filters.length >= 10) return;
            setView({ filters: [...view.filters, { column: col, op, value: NO_VALUE_OPS.has(op) ? "" : value }], page: 1 });
            setValue("");
          }}
        >
          <Field label="Filter column">
            <select value={col} onChange={(e) => setCol(e.target.value)}>
              {columns.map((c) => (
                <option key={c}>{c}</option>
              ))}
            </select>
          </Field>
          <Field label="Operator">
            <select value={op} onChange={(e) => setOp(e.target.value)}>
              {OPS.map(([k, label]) => (
                <option key={k} value={k}>
                  {label}
                </option>
              ))}
            </select>
          </Field>
          {!NO_VALUE_OPS.has(op) && (
            <Field label="Value">
              <input value={value} maxLength={1000} onChange={(e) => setValue(e.target.value)} />
            </Field>
          )}
          <button type="submit" disabled={view.filters.length >= 10}>
            Add filter
          </button>
        </form>
      </div>
      {(view.filters.length > 0 || view.search) && (
        <div className="chips" aria-label="Active filters">
          {view.search && <FilterChip label={`contains “${view.search}”`} onRemove={() => setView({ search: "", page: 1 })} />}
          {view.filters.map((f: Filter, i) => (
            <FilterChip key={i} label={`${f.column} ${OPS.find(([k]) => k === f.op)?.[1] ?? f.op}${NO_VALUE_OPS.has(f.op) ? "" : ` ${f.value}`}`} onRemove={() => remove(i)} />
          ))}
        </div>
      )}
    </>
  );
}

function FilterChip({ label, onRemove }: { label: string; onRemove(): void }) {
  return (
    <span className="chip">
      {label}
      <button type="button" aria-label={`Remove filter ${label}`} onClick={onRemove}>
        ×
      </button>
    </span>
  );
}

function RowsTable({ app, view, d, canEdit, setView, onEdit, onDeleted }: {
  app: App;
  view: TableView;
  d: TablePage;
  canEdit: boolean;
  setView(v: Partial<TableView>): void;
  onEdit(row: JsonValue[], key: JsonValue[]): void;
  onDeleted(msg: string): void;
}) {
  const [confirm, setConfirm] = useState<number>();
  const del = useAction(async (i: number) => {
    await deleteRow(app.id, view.table, d.keyColumns, d.keys[i]!);
    setConfirm(undefined);
    onDeleted(`Row ${d.keys[i]!.map(cellText).join(", ")} deleted.`);
  });
  const pages = Math.max(1, Math.ceil(d.total / view.size));
  const from = (view.page - 1) * view.size;
  const sortBy = (c: string) => setView(view.sort === c ? (view.desc ? { sort: "", desc: false, page: 1 } : { desc: true, page: 1 }) : { sort: c, desc: false, page: 1 });
  return (
    <>
      <div className="rows-wrap">
        <table aria-label={`Rows of ${view.table}`}>
          <thead>
            <tr>
              {d.columns.map((c) => (
                <th key={c} aria-sort={view.sort === c ? (view.desc ? "descending" : "ascending") : undefined}>
                  <button type="button" onClick={() => sortBy(c)} title="Sort by this column">
                    {c} {view.sort === c ? (view.desc ? "▼" : "▲") : ""}
                  </button>
                </th>
              ))}
              {canEdit && <th>Actions</th>}
            </tr>
          </thead>
          <tbody>
            {d.rows.map((r, i) => (
              <tr key={i}>
                {r.map((v, j) => (
                  <td key={j} className={v === null ? "null" : typeof v === "number" ? "num" : undefined} title={typeof v === "string" && v.length > 30 ? v : undefined}>
                    {cellText(v)}
                  </td>
                ))}
                {canEdit && (
                  <td className="actions">
                    {confirm === i ? (
                      <>
                        <button type="button" className="danger" disabled={del.busy} onClick={() => void del.run(i)}>
                          Confirm delete
                        </button>
                        <button type="button" onClick={() => setConfirm(undefined)}>
                          Cancel
                        </button>
                      </>
                    ) : (
                      <>
                        <button type="button" onClick={() => onEdit(r, d.keys[i]!)}>
                          Edit
                        </button>
                        <button type="button" className="danger" onClick={() => setConfirm(i)}>
                          Delete
                        </button>
                      </>
                    )}
                  </td>
                )}
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <ErrorBox error={del.error} />
      <Pager view={view} pages={pages} total={d.total} from={from} shown={d.rows.length} setView={setView} />
    </>
  );
}

function Pager({ view, pages, total, from, shown, setView }: { view: TableView; pages: number; total: number; from: number; shown: number; setView(v: Partial<TableView>): void }) {
  const [jump, setJump] = useState(String(view.page));
  useEffect(() => setJump(String(view.page)), [view.page]);
  const go = (p: number) => setView({ page: Math.min(pages, Math.max(1, p)) });
  return (
    <nav className="pager jump" aria-label="Pages">
      <span className="muted">
        Rows {from + 1}–{from + shown} of {total}
      </span>
      <button type="button" disabled={view.page <= 1} onClick={() => go(1)}>
        First
      </button>
      <button type="button" disabled={view.page <= 1} onClick={() => go(view.page - 1)}>
        Previous
      </button>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          go(Math.floor(Number(jump)) || 1);
        }}
      >
        <label>
          Page <input type="number" min={1} max={pages} value={jump} aria-label="Page number" onChange={(e) => setJump(e.target.value)} /> of {pages}
        </label>{" "}
        <button type="submit">Go</button>
      </form>
      <button type="button" disabled={view.page >= pages} onClick={() => go(view.page + 1)}>
        Next
      </button>
      <button type="button" disabled={view.page >= pages} onClick={() => go(pages)}>
        Last
      </button>
      <label>
        Rows per page{" "}
        <select value={view.size} onChange={(e) => setView({ size: Number(e.target.value), page: 1 })}>
          {PAGE_SIZES.map((n) => (
            <option key={n}>{n}</option>
          ))}
        </select>
      </label>
    </nav>
  );
}

/** Insert or edit one row: a field per column; an empty field on insert takes the column's default. */
function RowForm({ app, table, page, editing, onCancel, onDone }: {
  app: App;
  table: TableInfo;
  page: TablePage;
  editing: { mode: "insert" } | { mode: "edit"; row: JsonValue[]; key: JsonValue[] };
  onCancel(): void;
  onDone(msg: string): void;
}) {
  const initial = (c: ColumnInfo): { text: string; isNull: boolean } => {
    if (editing.mode === "insert") return { text: "", isNull: false };
    const v = editing.row[page.columns.indexOf(c.name)] ?? null;
    return v === null ? { text: "", isNull: true } : { text: typeof v === "object" ? JSON.stringify(v) : String(v), isNull: false };
  };
  const [fields, setFields] = useState(() => Object.fromEntries(table.columns.map((c) => [c.name, initial(c)])));
  const save = useAction(async () => {
    const values: JsonObject = {};
    for (const c of table.columns) {
      const f = fields[c.name]!;
      const before = initial(c);
      if (editing.mode === "insert") {
        if (f.isNull) values[c.name] = null;
        else if (f.text !== "") values[c.name] = f.text;
      } else if (f.isNull !== before.isNull || f.text !== before.text) {
        values[c.name] = f.isNull ? null : f.text;
      }
    }
    if (editing.mode === "insert") {
      const r = await insertRow(app.id, table.name, values);
      onDone(r.id ? `Row ${String(r.id)} inserted.` : "Row inserted.");
    } else {
      if (!Object.keys(values).length) return onCancel();
      await updateRow(app.id, table.name, page.keyColumns, editing.key, values);
      onDone(`Row ${editing.key.map(cellText).join(", ")} saved.`);
    }
  });
  return (
    <form
      className="card"
      aria-label={editing.mode === "insert" ? "Insert a row" : "Edit the row"}
      onSubmit={(e) => {
        e.preventDefault();
        void save.run();
      }}
    >
      <h3>{editing.mode === "insert" ? `New row in ${table.name}` : `Row ${editing.key.map(cellText).join(", ")} of ${table.name}`}</h3>
      <div className="row-editor">
        {table.columns.map((c) => {
          const f = fields[c.name]!;
          const setF = (p: Partial<typeof f>) => setFields((all) => ({ ...all, [c.name]: { ...all[c.name]!, ...p } }));
          return (
            <div key={c.name}>
              <Field label={c.name} hint={[c.type || "any", c.primaryKey ? "primary key" : "", c.notNull ? "not null" : "", c.defaultValue ? `default ${c.defaultValue}` : ""].filter(Boolean).join(", ")}>
                <input name={c.name} value={f.text} disabled={f.isNull} onChange={(e) => setF({ text: e.target.value })} />
              </Field>
              {!c.notNull && (
                <label className="null-toggle">
                  <input type="checkbox" checked={f.isNull} onChange={(e) => setF({ isNull: e.target.checked })} /> NULL
                </label>
              )}
            </div>
          );
        })}
      </div>
      <div className="row-form">
        <button type="submit" className="primary" disabled={save.busy}>
          {editing.mode === "insert" ? "Insert" : "Save row"}
        </button>
        <button type="button" onClick={onCancel}>
          Cancel
        </button>
      </div>
      <ErrorBox error={save.error} />
    </form>
  );
}

// ---------------------------------------------------------------- Schema

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
              <div className="rows-wrap">
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
              </div>
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
