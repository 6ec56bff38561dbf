// CMS: content types with a fields editor; entries with filters; an entry
// form generated from the field types (rich text, media picker with upload
// and preview, relation picker, select, date); publish and unpublish.
import { useState } from "react";
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import type { ContentField, ContentType, Entry } from "../../../../gen/pulsebase/admin/v1/cms_pb.js";
import type { App } from "../../../../gen/pulsebase/admin/v1/identity_pb.js";
import { Role } from "../../../../gen/pulsebase/common/v1/options_pb.js";
import { api } from "../api";
import { RichText } from "../rich-text";
import { match, useQueryState, useRouter } from "../router";
import { listTypeSlugs, mediaNames, mediaUrl } from "../data/cms/cms-query";
import { useCan } from "../session";
import { AppLink, NeedApp } from "../shell";
import { Async, ErrorBox, Field, fmtTime, Table, useAction, useAsync } from "../ui";

const FIELD_TYPES = ["text", "rich_text", "number", "boolean", "date", "date_time", "email", "url", "select", "media", "relation", "json"];

export function CmsPage() {
  const { loc } = useRouter();
  const entry = match("/cms/:type/:entry", loc.path);
  const type = match("/cms/:type", loc.path);
  const edit = match("/cms/:type/schema", loc.path);
  return (
    <div className="page">
      <NeedApp>
        {(app) =>
          edit || loc.path === "/cms/new-type" ? (
            <TypeEditor key={edit?.type ?? "new"} app={app} slug={edit?.type} />
          ) : entry ? (
            <EntryEditor key={entry.entry} app={app} typeSlug={entry.type!} entryId={entry.entry === "new" ? undefined : entry.entry} />
          ) : type ? (
            <Entries key={type.type} app={app} slug={type.type!} />
          ) : (
            <Types app={app} />
          )
        }
      </NeedApp>
    </div>
  );
}

function Types({ app }: { app: App }) {
  const canDev = useCan(app.teamId, Role.DEVELOPER);
  const { go } = useRouter();
  const list = useAsync(() => api.cms.listContentTypes({ appId: app.id }), [app.id]);
  return (
    <>
      <h1>Content</h1>
      {canDev && (
        <p>
          <AppLink to="/cms/new-type" className="button primary">
            New content type
          </AppLink>
        </p>
      )}
      <section className="card">
        <Async state={list} isEmpty={(d) => d.contentTypes.length === 0} empty="No content types yet.">
          {(d) => (
            <Table
              label="Content types"
              rows={d.contentTypes}
              rowKey={(t) => t.slug}
              onOpen={(t) => go(`/cms/${t.slug}?app=${app.id}`)}
              columns={[
                { label: "Name", cell: (t) => t.name },
                { label: "Slug", cell: (t) => <code>{t.slug}</code> },
                { label: "Fields", cell: (t) => t.fields.map((f) => f.name).join(", ") },
                { label: "Indexes", cell: (t) => (t.indexesReady ? "ready" : "building") },
                { label: "Updated", cell: (t) => fmtTime(t.updatedAt) },
              ]}
            />
          )}
        </Async>
      </section>
    </>
  );
}

interface FieldDraft {
  name: string;
  type: string;
  label: string;
  required: boolean;
  searchable: boolean;
  filterable: boolean;
  sortable: boolean;
  options: string[];
  multi: boolean;
  target: string;
  previousName: string;
}

function draftOf(t: ContentType | undefined): { slug: string; name: string; description: string; fields: FieldDraft[] } {
  if (!t) return { slug: "", name: "", description: "", fields: [blankField()] };
  return {
    slug: t.slug,
    name: t.name,
    description: t.description,
    fields: t.fields.map((f) => ({
      name: f.name, type: f.type, label: f.label, required: f.required, searchable: t.searchableFields.includes(f.name),
      filterable: t.filterableFields.includes(f.name), sortable: t.sortableFields.includes(f.name), options: [...f.options],
      multi: f.multi, target: f.target, previousName: f.name,
    })),
  };
}

function blankField(): FieldDraft {
  return { name: "", type: "text", label: "", required: false, searchable: false, filterable: false, sortable: false, options: [], multi: false, target: "", previousName: "" };
}

function TypeEditor({ app, slug }: { app: App; slug?: string }) {
  const { go } = useRouter();
  const existing = useAsync(async () => (slug ? api.cms.getContentType({ appId: app.id, slug }) : undefined), [slug]);
  // Relation targets are chosen from the application's content types (this one included: a type may point at itself).
  const types = useAsync(() => listTypeSlugs(app.id), [app.id]);
  const [draft, setDraft] = useState<ReturnType<typeof draftOf>>();
  const d = draft ?? (existing.data !== undefined || !slug ? draftOf(existing.data) : undefined);
  const save = useAction(async () => {
    const input = {
      slug: d!.slug,
      name: d!.name,
      description: d!.description,
      fields: d!.fields.map((f) => ({
        name: f.name, type: f.type, label: f.label, required: f.required, options: f.options.map((o) => o.trim()).filter(Boolean),
        multi: f.multi, target: f.target, previousName: slug ? f.previousName : "",
      })),
      filterableFields: d!.fields.filter((f) => f.filterable).map((f) => f.name),
      sortableFields: d!.fields.filter((f) => f.sortable).map((f) => f.name),
      searchableFields: d!.fields.filter((f) => f.searchable).map((f) => f.name),
    };
    const t = slug ? await api.cms.updateContentType({ appId: app.id, slug, contentType: input }) : await api.cms.createContentType({ appId: app.id, contentType: input });
    go(`/cms/${t.slug}?app=${app.id}`);
  });
  if (!d) return <Async state={existing}>{() => null}</Async>;
  const set = (patch: Partial<typeof d>) => setDraft({ ...d, ...patch });
  const setField = (i: number, patch: Partial<FieldDraft>) => set({ fields: d.fields.map((f, j) => (j === i ? { ...f, ...patch } : f)) });
  return (
    <>
      <p>
        <AppLink to={slug ? `/cms/${slug}` : "/cms"}>← Back</AppLink>
      </p>
      <h1>{slug ? `Edit ${d.name}` : "New content type"}</h1>
      <form
        className="card"
        onSubmit={(e) => {
          e.preventDefault();
          void save.run();
        }}
      >
        <div className="grid-form">
          <Field label="Name">
            <input name="type-name" required value={d.name} onChange={(e) => set({ name: e.target.value, slug: slug ? d.slug : e.target.value.toLowerCase().replace(/[^a-z0-9]+/g, "_").replace(/^_|_$/g, "") })} />
          </Field>
          <Field label="Slug">
            <input name="type-slug" required value={d.slug} disabled={!!slug} onChange={(e) => set({ slug: e.target.value })} />
          </Field>
          <Field label="Description">
            <input value={d.description} onChange={(e) => set({ description: e.target.value })} />
          </Field>
        </div>
        <h2>Fields</h2>
        <table className="fields-editor" aria-label="Fields">
          <thead>
            <tr>
              <th>Name</th>
              <th>Type</th>
              <th>Label</th>
              <th>Required</th>
              <th>Search</th>
              <th>Filter</th>
              <th>Sort</th>
              <th>Options / target</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {d.fields.map((f, i) => (
              <tr key={i}>
                <td>
                  <input aria-label={`Field ${i + 1} name`} required value={f.name} onChange={(e) => setField(i, { name: e.target.value })} />
                </td>
                <td>
                  <select aria-label={`Field ${i + 1} type`} value={f.type} onChange={(e) => setField(i, { type: e.target.value })}>
                    {FIELD_TYPES.map((t) => (
                      <option key={t}>{t}</option>
                    ))}
                  </select>
                </td>
                <td>
                  <input aria-label={`Field ${i + 1} label`} value={f.label} onChange={(e) => setField(i, { label: e.target.value })} />
                </td>
                {(["required", "searchable", "filterable", "sortable"] as const).map((k) => (
                  <td key={k}>
                    <input type="checkbox" aria-label={`Field ${i + 1} ${k}`} checked={f[k]} onChange={(e) => setField(i, { [k]: e.target.checked })} />
                  </td>
                ))}
                <td>
                  {f.type === "select" && <OptionsEditor label={`Field ${i + 1} options`} value={f.options} onChange={(options) => setField(i, { options })} />}
                  {f.type === "relation" && (
                    <select aria-label={`Field ${i + 1} target`} required value={f.target} onChange={(e) => setField(i, { target: e.target.value })}>
                      <option value="">Choose a content type…</option>
                      {[...new Set([...(types.data ?? []).map((t) => t.slug), ...(d.slug ? [d.slug] : []), ...(f.target ? [f.target] : [])])].map((slug) => (
                        <option key={slug} value={slug}>
                          {(types.data ?? []).find((t) => t.slug === slug)?.name ?? (slug === d.slug ? `${d.name || slug} (this type)` : slug)}
                        </option>
                      ))}
                    </select>
                  )}
                  {(f.type === "select" || f.type === "relation") && (
                    <label className="inline">
                      <input type="checkbox" checked={f.multi} onChange={(e) => setField(i, { multi: e.target.checked })} /> multi
                    </label>
                  )}
                </td>
                <td>
                  <button type="button" aria-label={`Remove field ${i + 1}`} onClick={() => set({ fields: d.fields.filter((_, j) => j !== i) })}>
                    ✕
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
        <button type="button" onClick={() => set({ fields: [...d.fields, blankField()] })}>
          Add field
        </button>
        <ErrorBox error={save.error} />
        <div className="actions">
          <button type="submit" className="primary" disabled={save.busy}>
            Save content type
          </button>
        </div>
      </form>
    </>
  );
}

/** Select options as a list: one input per option, added and removed one by one. */
function OptionsEditor({ label, value, onChange }: { label: string; value: string[]; onChange(v: string[]): void }) {
  const [draft, setDraft] = useState("");
  const add = () => {
    const v = draft.trim();
    if (v && !value.includes(v)) onChange([...value, v]);
    setDraft("");
  };
  return (
    <div className="list-editor" role="group" aria-label={label}>
      {value.map((o, j) => (
        <div className="list-row" key={j}>
          <input aria-label={`${label}: option ${j + 1}`} value={o} onChange={(e) => onChange(value.map((x, k) => (k === j ? e.target.value : x)))} />
          <button type="button" aria-label={`Remove option ${o || j + 1}`} onClick={() => onChange(value.filter((_, k) => k !== j))}>
            ✕
          </button>
        </div>
      ))}
      <div className="list-row">
        <input
          aria-label={`${label}: new option`}
          placeholder="New option"
          value={draft}
          onChange={(e) => setDraft(e.target.value)}
          onKeyDown={(e) => {
            // Enter adds the option rather than submitting the whole form.
            if (e.key === "Enter") {
              e.preventDefault();
              add();
            }
          }}
        />
        <button type="button" onClick={add} disabled={!draft.trim()}>
          Add option
        </button>
      </div>
    </div>
  );
}

function Entries({ app, slug }: { app: App; slug: string }) {
  const canDev = useCan(app.teamId, Role.DEVELOPER);
  const { go } = useRouter();
  const type = useAsync(() => api.cms.getContentType({ appId: app.id, slug }), [slug]);
  const [token, setToken] = useState("");
  const list = useAsync(() => api.cms.listEntries({ appId: app.id, contentType: slug, pageSize: 100, pageToken: token }), [slug, token]);
  // Filters are in the URL (?status=draft&q=…): a filtered list can be linked.
  const [status, setStatusParam] = useQueryState("status", "all");
  const [q, setQParam] = useQueryState("q");
  const setStatus = (v: string) => setStatusParam(v, { replace: true });
  const setQ = (v: string) => setQParam(v, { replace: true });
  const title = (e: Entry) => {
    const t = type.data?.fields.find((f) => f.type === "text");
    const v = t ? (e.data as JsonObject | undefined)?.[t.name] : undefined;
    return typeof v === "string" && v ? v : e.id;
  };
  return (
    <>
      <p>
        <AppLink to="/cms">← Content types</AppLink>
      </p>
      <h1>{type.data?.name ?? slug}</h1>
      <div className="row-form">
        {canDev && (
          <AppLink to={`/cms/${slug}/new`} className="button primary">
            New entry
          </AppLink>
        )}
        {canDev && <AppLink to={`/cms/${slug}/schema`} className="button">Edit fields</AppLink>}
        <Field label="Status">
          <select value={status} onChange={(e) => setStatus(e.target.value)}>
            <option value="all">All</option>
            <option value="published">Published</option>
            <option value="draft">Drafts</option>
          </select>
        </Field>
        <Field label="Filter">
          <input type="search" value={q} onChange={(e) => setQ(e.target.value)} placeholder="Text in any field" />
        </Field>
      </div>
      <section className="card">
        <Async state={list} isEmpty={(d) => d.entries.length === 0} empty="No entries yet.">
          {(d) => {
            const rows = d.entries.filter(
              (e) => (status === "all" || e.published === (status === "published")) && (!q || JSON.stringify(e.data ?? {}).toLowerCase().includes(q.toLowerCase())),
            );
            return (
              <>
                <Table
                  label="Entries"
                  rows={rows}
                  rowKey={(e) => e.id}
                  onOpen={(e) => go(`/cms/${slug}/${e.id}?app=${app.id}`)}
                  columns={[
                    { label: "Entry", cell: title },
                    { label: "Status", cell: (e) => <span className={`badge ${e.published ? "ok" : "draft"}`}>{e.published ? "published" : "draft"}</span> },
                    { label: "Updated", cell: (e) => fmtTime(e.updatedAt) },
                    { label: "Published", cell: (e) => fmtTime(e.publishedAt) },
                  ]}
                />
                {rows.length === 0 && <div className="empty">No entry matches the filters.</div>}
                <div className="pager">
                  <button type="button" disabled={!token} onClick={() => setToken("")}>
                    First page
                  </button>
                  <button type="button" disabled={!d.nextPageToken} onClick={() => setToken(d.nextPageToken)}>
                    Next page
                  </button>
                </div>
              </>
            );
          }}
        </Async>
      </section>
    </>
  );
}

function EntryEditor({ app, typeSlug, entryId }: { app: App; typeSlug: string; entryId?: string }) {
  const canDev = useCan(app.teamId, Role.DEVELOPER);
  const { go } = useRouter();
  const type = useAsync(() => api.cms.getContentType({ appId: app.id, slug: typeSlug }), [typeSlug]);
  const entry = useAsync(async () => (entryId ? api.cms.getEntry({ appId: app.id, id: entryId }) : undefined), [entryId]);
  const [data, setData] = useState<JsonObject>();
  const values: JsonObject = data ?? ((entry.data?.data as JsonObject | undefined) ?? {});
  const save = useAction(async (publish?: boolean) => {
    const clean = Object.fromEntries(Object.entries(values).filter(([, v]) => v !== "" && v !== undefined)) as JsonObject;
    let e: Entry;
    if (entryId) e = await api.cms.updateEntry({ appId: app.id, id: entryId, data: clean });
    else e = await api.cms.createEntry({ appId: app.id, contentType: typeSlug, data: clean, publish: !!publish });
    if (entryId && publish !== undefined) e = publish ? await api.cms.publishEntry({ appId: app.id, id: e.id }) : await api.cms.unpublishEntry({ appId: app.id, id: e.id });
    setData(undefined);
    if (!entryId) go(`/cms/${typeSlug}/${e.id}?app=${app.id}`);
    else entry.reload();
  });
  const remove = useAction(async () => {
    if (!window.confirm("Delete this entry?")) return;
    await api.cms.deleteEntry({ appId: app.id, id: entryId! });
    go(`/cms/${typeSlug}?app=${app.id}`);
  });
  if (type.error || entry.error) return <ErrorBox error={type.error ?? entry.error} />;
  if (!type.data || (entryId && !entry.data)) return <Async state={type}>{() => null}</Async>;
  const e = entry.data;
  return (
    <>
      <p>
        <AppLink to={`/cms/${typeSlug}`}>← {type.data.name}</AppLink>
      </p>
      <h1>
        {entryId ? "Edit entry" : `New ${type.data.name}`}{" "}
        {e && <span className={`badge ${e.published ? "ok" : "draft"}`}>{e.published ? "published" : "draft"}</span>}
      </h1>
      <form
        className="card entry-form"
        onSubmit={(ev) => {
          ev.preventDefault();
          void save.run();
        }}
      >
        {type.data.fields.map((f) => (
          <FieldInput key={f.name} app={app} field={f} value={values[f.name]} disabled={!canDev} onChange={(v) => setData({ ...values, [f.name]: v as JsonValue })} />
        ))}
        <ErrorBox error={save.error ?? remove.error} />
        {canDev && (
          <div className="actions">
            <button type="submit" className="primary" disabled={save.busy}>
              {entryId ? "Save" : "Save draft"}
            </button>
            {(!e || !e.published) && (
              <button type="button" onClick={() => void save.run(true)} disabled={save.busy}>
                {entryId ? "Save and publish" : "Create and publish"}
              </button>
            )}
            {e?.published && (
              <button type="button" onClick={() => void save.run(false)} disabled={save.busy}>
                Unpublish
              </button>
            )}
            {entryId && (
              <button type="button" className="danger" onClick={() => void remove.run()}>
                Delete
              </button>
            )}
          </div>
        )}
      </form>
    </>
  );
}

function FieldInput({ app, field: f, value, onChange, disabled }: { app: App; field: ContentField; value: JsonValue | undefined; onChange(v: JsonValue | undefined): void; disabled: boolean }) {
  const label = `${f.label || f.name}${f.required ? " *" : ""}`;
  const str = typeof value === "string" ? value : value === undefined || value === null ? "" : String(value);
  switch (f.type) {
    case "rich_text":
      return (
        <div className="field">
          <span className="field-label">{label}</span>
          <RichText label={label} value={str} onChange={onChange} />
        </div>
      );
    case "number":
      return (
        <Field label={label}>
          <input type="number" step="any" disabled={disabled} value={str} onChange={(e) => onChange(e.target.value === "" ? undefined : Number(e.target.value))} />
        </Field>
      );
    case "boolean":
      return (
        <Field label={label}>
          <input type="checkbox" disabled={disabled} checked={value === true || value === "true"} onChange={(e) => onChange(e.target.checked)} />
        </Field>
      );
    case "date":
      return (
        <Field label={label}>
          <input type="date" disabled={disabled} value={str} onChange={(e) => onChange(e.target.value)} />
        </Field>
      );
    case "date_time":
      return (
        <Field label={label} hint="Your local time; stored in UTC.">
          <input
            type="datetime-local"
            disabled={disabled}
            value={str ? new Date(new Date(str).getTime() - new Date().getTimezoneOffset() * 60000).toISOString().slice(0, 16) : ""}
            onChange={(e) => onChange(e.target.value ? new Date(e.target.value).toISOString() : undefined)}
          />
        </Field>
      );
    case "email":
    case "url":
      return (
        <Field label={label}>
          <input type={f.type} disabled={disabled} value={str} onChange={(e) => onChange(e.target.value)} />
        </Field>
      );
    case "select":
      return f.multi ? (
        <fieldset className="field">
          <legend className="field-label">{label}</legend>
          {f.options.map((o) => {
            const arr = Array.isArray(value) ? (value as string[]) : [];
            return (
              <label key={o} className="inline">
                <input type="checkbox" disabled={disabled} checked={arr.includes(o)} onChange={(e) => onChange(e.target.checked ? [...arr, o] : arr.filter((x) => x !== o))} /> {o}
              </label>
            );
          })}
        </fieldset>
      ) : (
        <Field label={label}>
          <select disabled={disabled} value={str} onChange={(e) => onChange(e.target.value || undefined)}>
            <option value="">—</option>
            {f.options.map((o) => (
              <option key={o}>{o}</option>
            ))}
          </select>
        </Field>
      );
    case "media":
      return <MediaPicker app={app} label={label} value={str} disabled={disabled} onChange={onChange} />;
    case "relation":
      return <RelationPicker app={app} field={f} label={label} value={value} disabled={disabled} onChange={onChange} />;
    case "json":
      return (
        <Field label={label}>
          <textarea
            className="mono"
            rows={4}
            disabled={disabled}
            defaultValue={value === undefined ? "" : JSON.stringify(value, null, 2)}
            onBlur={(e) => {
              try {
                onChange(e.target.value.trim() ? (JSON.parse(e.target.value) as JsonValue) : undefined);
              } catch {
                /* the server reports invalid JSON on save */
              }
            }}
          />
        </Field>
      );
    default:
      return (
        <Field label={label}>
          <input disabled={disabled} value={str} onChange={(e) => onChange(e.target.value)} />
        </Field>
      );
  }
}

function MediaPicker({ app, label, value, onChange, disabled }: { app: App; label: string; value: string; onChange(v: string | undefined): void; disabled: boolean }) {
  const [open, setOpen] = useState(false);
  const [uploaded, setUploaded] = useState<Record<string, string>>({});
  const media = useAsync(async () => (open ? api.cms.listMedia({ appId: app.id, pageSize: 100 }) : undefined), [open]);
  // The stored value is the file id: its uploaded name comes from the media record.
  const named = useAsync<Record<string, string>>(async () => (value && !uploaded[value] ? mediaNames(app.id, [value]) : {}), [value]);
  const name = value ? (uploaded[value] ?? named.data?.[value]) : undefined;
  const upload = useAction(async (file: File) => {
    const data = new Uint8Array(await file.arrayBuffer());
    const m = await api.cms.uploadMedia({ appId: app.id, filename: file.name, contentType: file.type || "application/octet-stream", data });
    setUploaded({ ...uploaded, [m.fileId]: m.filename });
    onChange(m.fileId);
    media.reload();
  });
  return (
    <div className="field">
      <span className="field-label">{label}</span>
      <div className="media-picker">
        {value ? <img src={mediaUrl(app, value)} alt={name ? `Preview of ${name}` : "Preview"} className="preview" /> : <span className="muted">No file</span>}
        {value && (
          <span>
            <span className="media-name" data-testid="media-name">
              {name ?? "…"}
            </span>
            <br />
            <code className="muted">{value}</code>
          </span>
        )}
        {!disabled && (
          <>
            <label className="button">
              Upload…
              <input type="file" className="visually-hidden" aria-label={`Upload ${label}`} onChange={(e) => e.target.files?.[0] && void upload.run(e.target.files[0])} />
            </label>
            <button type="button" onClick={() => setOpen(!open)}>
              {open ? "Close library" : "Choose from library"}
            </button>
            {value && (
              <button type="button" onClick={() => onChange(undefined)}>
                Clear
              </button>
            )}
          </>
        )}
      </div>
      {upload.busy && <span className="muted">Uploading…</span>}
      <ErrorBox error={upload.error} />
      {open && (
        <Async state={media} isEmpty={(d) => !d || d.media.length === 0} empty="No media uploaded yet.">
          {(d) => (
            <ul className="media-grid">
              {d!.media.map((m) => (
                <li key={m.fileId}>
                  <button type="button" onClick={() => (setUploaded({ ...uploaded, [m.fileId]: m.filename }), onChange(m.fileId), setOpen(false))} aria-label={`Choose ${m.filename}`}>
                    {m.contentType.startsWith("image/") ? <img src={mediaUrl(app, m.fileId)} alt="" /> : <span>{m.contentType}</span>}
                    <span>{m.filename}</span>
                  </button>
                </li>
              ))}
            </ul>
          )}
        </Async>
      )}
    </div>
  );
}

function RelationPicker({ app, field, label, value, onChange, disabled }: { app: App; field: ContentField; label: string; value: JsonValue | undefined; onChange(v: JsonValue | undefined): void; disabled: boolean }) {
  const entries = useAsync(() => api.cms.listEntries({ appId: app.id, contentType: field.target, pageSize: 200 }), [field.target]);
  const name = (e: Entry) => {
    const d = (e.data ?? {}) as JsonObject;
    const first = Object.values(d).find((v) => typeof v === "string" && v.length < 80);
    return `${typeof first === "string" ? first : e.id}${e.published ? "" : " (draft)"}`;
  };
  return (
    <Field label={`${label} → ${field.target}`}>
      <Async state={entries} isEmpty={(d) => d.entries.length === 0} empty={`No ${field.target} entries to link.`}>
        {(d) =>
          field.multi ? (
            <select
              multiple
              disabled={disabled}
              value={Array.isArray(value) ? (value as string[]) : []}
              onChange={(e) => onChange([...e.target.selectedOptions].map((o) => o.value))}
            >
              {d.entries.map((e) => (
                <option key={e.id} value={e.id}>
                  {name(e)}
                </option>
              ))}
            </select>
          ) : (
            <select disabled={disabled} value={typeof value === "string" ? value : ""} onChange={(e) => onChange(e.target.value || undefined)}>
              <option value="">—</option>
              {d.entries.map((e) => (
                <option key={e.id} value={e.id}>
                  {name(e)}
                </option>
              ))}
            </select>
          )
        }
      </Async>
    </Field>
  );
}
