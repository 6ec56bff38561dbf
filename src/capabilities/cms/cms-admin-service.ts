// pulsebase.admin.v1.CmsService: authoring of content types, entries and
// media, and the CMS usage meter. Every change invalidates the application's
// cached reads (this process, plus `broadcast` for the others) and entry
// changes call the onChange hook (functions' cms triggers) after commit.
// Content type changes build their per-field indexes after commit (see
// index-builder.ts) and wait for the build up to indexWaitMs.
import type { JsonObject, MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import type {
  CmsService,
  ContentField,
  ContentTypeInput,
  ContentTypeSchema,
  Entry as EntryMsg,
} from "../../../gen/pulsebase/admin/v1/cms_pb.js";
import { appError, validationError } from "../../kernel/errors.js";
import type { Sql } from "../../infra/storage/sql.js";
import type { ContentTypeDef, ContentTypeInputData } from "./content-type-def.js";
import type { ContentTypeStore } from "./content-type-store.js";
import type { EntryRecord, EntryStore } from "./entry-store.js";
import { indexesReady } from "./field-indexes.js";
import type { FieldType } from "./field-types.js";
import type { IndexBuilder } from "./index-builder.js";
import type { MediaFileRecord, MediaStore } from "./media.js";
import type { UsageMeter } from "./usage-meter.js";
import { pageByOffset } from "../../kernel/paging.js";
import { sleep } from "../../kernel/retry.js";

export type ChangeOperation = "created" | "updated" | "deleted" | "published" | "unpublished";

export interface CmsChange {
  /** content type slug */
  collection: string;
  operation: ChangeOperation;
  /** the entry before the change (null on created) */
  before: JsonObject | null;
  /** the entry after the change (null on deleted) */
  after: JsonObject | null;
}

export type CmsChangeHook = (appId: number, change: CmsChange) => void | Promise<void>;

export interface CmsAdminDeps {
  sql: Sql;
  types: ContentTypeStore;
  entries: EntryStore;
  media: MediaStore;
  meter: UsageMeter;
  indexes: IndexBuilder;
  /** how long Create/Update/DeleteContentType wait for their index build or drop (default 30 s) */
  indexWaitMs?: number;
  /** drops the application's cached reads in every process (resolves once the other processes are sure to follow) */
  invalidate: (appId: number) => void | Promise<void>;
  onChange?: CmsChangeHook;
  /** errors thrown by onChange (the change itself is committed) */
  onHookError?: (err: unknown) => void;
}

function inputOf(m: ContentTypeInput | undefined): ContentTypeInputData {
  if (!m) throw validationError({ content_type: ["content_type is required."] });
  return {
    slug: m.slug.trim(),
    name: m.name,
    description: m.description,
    icon: m.icon,
    fields: m.fields.map((f: ContentField) => ({
      name: f.name.trim(),
      type: f.type.trim() as FieldType,
      required: f.required,
      label: f.label,
      searchable: f.searchable,
      options: f.options,
      multi: f.multi,
      target: f.target,
      previousName: f.previousName,
    })),
    filterable: m.filterableFields,
    sortable: m.sortableFields,
    searchable: m.searchableFields,
    defaultSort: m.defaultSort,
    defaultPerPage: m.defaultPerPage,
  };
}

function typeMsg(d: ContentTypeDef, ready: boolean): MessageInitShape<typeof ContentTypeSchema> {
  return {
    id: BigInt(d.id),
    appId: BigInt(d.appId),
    slug: d.slug,
    name: d.name,
    description: d.description,
    icon: d.icon,
    fields: d.fields.map((f) => ({
      name: f.name,
      type: f.type,
      required: f.required,
      label: f.label,
      searchable: d.searchable.includes(f.name),
      options: f.options ?? [],
      multi: !!f.multi,
      target: f.target ?? "",
      previousName: "",
    })),
    filterableFields: d.filterable,
    sortableFields: d.sortable,
    searchableFields: d.searchable,
    defaultSort: d.defaultSort,
    defaultPerPage: d.defaultPerPage,
    createdAt: timestampFromDate(d.createdAt),
    updatedAt: timestampFromDate(d.updatedAt),
    indexesReady: ready,
  };
}

function mediaMsg(m: MediaFileRecord) {
  return { fileId: m.fileId, contentType: m.contentType, size: BigInt(m.size), filename: m.filename, createdAt: timestampFromDate(m.createdAt) };
}

function entryMsg(slug: string, e: EntryRecord) {
  return {
    id: e.id,
    contentType: slug,
    data: e.data as JsonObject,
    published: e.published,
    createdAt: timestampFromDate(e.createdAt),
    updatedAt: timestampFromDate(e.updatedAt),
    publishedAt: e.publishedAt ? timestampFromDate(e.publishedAt) : undefined,
  } satisfies Partial<EntryMsg>;
}

/** The entry as hooks see it: id, field values, state and timestamps. */
export function entryJson(def: ContentTypeDef, e: EntryRecord): JsonObject {
  const out: JsonObject = { id: e.id };
  for (const f of def.fields) out[f.name] = (e.data[f.name] as JsonObject[string]) ?? null;
  out.published = e.published;
  out.created_at = e.createdAt.toISOString();
  out.updated_at = e.updatedAt.toISOString();
  out.published_at = e.publishedAt ? e.publishedAt.toISOString() : null;
  return out;
}

const DAY_RE = /^\d{4}-\d{2}-\d{2}$/;
/** ListMedia's file_ids filter (the console labels an entry's media fields with it). */
const MAX_MEDIA_IDS = 100;

export function createCmsAdminServiceImpl(deps: CmsAdminDeps): ServiceImpl<typeof CmsService> {
  const { sql, types, entries } = deps;
  const indexWaitMs = deps.indexWaitMs ?? 30_000;

  async function typeMsgs(defs: ContentTypeDef[]) {
    const ready = await indexesReady(sql, defs);
    return defs.map((d) => typeMsg(d, ready.get(d.id) ?? false));
  }

  /** Waits for the type's index build or drop (at most indexWaitMs; it goes on in the background). */
  async function awaitIndexes(typeId: number): Promise<void> {
    const done = new AbortController();
    await Promise.race([deps.indexes.schedule(typeId), sleep(indexWaitMs, done.signal)]);
    done.abort();
  }

  async function notify(appId: number, change: CmsChange): Promise<void> {
    await deps.invalidate(appId);
    if (!deps.onChange) return;
    try {
      await deps.onChange(appId, change);
    } catch (err) {
      deps.onHookError?.(err);
    }
  }

  async function entryWithType(tx: Sql, appId: number, id: string, lock: boolean) {
    const e = await entries.get(appId, id, tx, lock);
    const def = await types.getById(e.contentTypeId, tx);
    if (!def) throw appError("not_found", "Entry not found.");
    return { e, def };
  }

  async function setPublished(appId: number, id: string, published: boolean) {
    const r = await sql.transaction(async (tx) => {
      const { e, def } = await entryWithType(tx, appId, id, true);
      const after = await entries.setPublished(tx, e.id, published);
      return { def, before: e, after };
    });
    if (r.before.published !== published) {
      await notify(appId, {
        collection: r.def.slug,
        operation: published ? "published" : "unpublished",
        before: entryJson(r.def, r.before),
        after: entryJson(r.def, r.after),
      });
    }
    return entryMsg(r.def.slug, r.after);
  }

  return {
    async createContentType(req) {
      const def = await types.create(Number(req.appId), inputOf(req.contentType));
      await deps.invalidate(Number(req.appId));
      await awaitIndexes(def.id);
      return (await typeMsgs([def]))[0]!;
    },
    async updateContentType(req) {
      const { after } = await types.update(Number(req.appId), req.slug, inputOf(req.contentType));
      await deps.invalidate(Number(req.appId));
      await awaitIndexes(after.id);
      return (await typeMsgs([after]))[0]!;
    },
    async deleteContentType(req) {
      const def = await types.delete(Number(req.appId), req.slug);
      await deps.invalidate(Number(req.appId));
      // its indexes are dropped after commit (DROP INDEX CONCURRENTLY)
      await awaitIndexes(def.id);
      return {};
    },
    async getContentType(req) {
      return (await typeMsgs([await types.get(Number(req.appId), req.slug)]))[0]!;
    },
    async listContentTypes(req) {
      return { contentTypes: await typeMsgs(await types.list(Number(req.appId))) };
    },

    async createEntry(req) {
      const r = await sql.transaction(async (tx) => {
        const all = await types.list(Number(req.appId), tx);
        const def = all.find((t) => t.slug === req.contentType);
        if (!def) throw appError("not_found", `Content type ${req.contentType} does not exist.`);
        const data = await entries.validateData(tx, def, all, req.data ?? {});
        return { def, e: await entries.insert(tx, def, data, req.publish) };
      });
      await notify(Number(req.appId), { collection: r.def.slug, operation: "created", before: null, after: entryJson(r.def, r.e) });
      if (req.publish) {
        await notify(Number(req.appId), { collection: r.def.slug, operation: "published", before: null, after: entryJson(r.def, r.e) });
      }
      return entryMsg(r.def.slug, r.e);
    },
    async updateEntry(req) {
      const r = await sql.transaction(async (tx) => {
        const { e, def } = await entryWithType(tx, Number(req.appId), req.id, true);
        const all = await types.list(Number(req.appId), tx);
        const data = await entries.validateData(tx, def, all, req.data ?? {}, e.data);
        return { def, before: e, after: await entries.updateData(tx, def, e.id, data) };
      });
      await notify(Number(req.appId), {
        collection: r.def.slug,
        operation: "updated",
        before: entryJson(r.def, r.before),
        after: entryJson(r.def, r.after),
      });
      return entryMsg(r.def.slug, r.after);
    },
    async deleteEntry(req) {
      const r = await sql.transaction(async (tx) => {
        const { e, def } = await entryWithType(tx, Number(req.appId), req.id, true);
        await entries.delete(tx, e.id);
        return { def, e };
      });
      await notify(Number(req.appId), { collection: r.def.slug, operation: "deleted", before: entryJson(r.def, r.e), after: null });
      return {};
    },
    publishEntry: (req) => setPublished(Number(req.appId), req.id, true),
    unpublishEntry: (req) => setPublished(Number(req.appId), req.id, false),
    async getEntry(req) {
      const { e, def } = await entryWithType(sql, Number(req.appId), req.id, false);
      return entryMsg(def.slug, e);
    },
    async listEntries(req) {
      const def = await types.get(Number(req.appId), req.contentType);
      const { rows, next } = await pageByOffset(req, (limit, offset) => entries.list(Number(req.appId), def.id, limit, offset));
      return { entries: rows.map((e) => entryMsg(def.slug, e)), nextPageToken: next };
    },

    async uploadMedia(req) {
      return mediaMsg(await deps.media.upload(Number(req.appId), req.filename, req.contentType, req.data));
    },
    async listMedia(req) {
      if (req.fileIds.length > MAX_MEDIA_IDS) throw validationError({ file_ids: [`At most ${MAX_MEDIA_IDS} file ids.`] });
      const { rows, next } = await pageByOffset(req, (limit, offset) => deps.media.list(Number(req.appId), limit, offset, req.fileIds));
      return { media: rows.map(mediaMsg), nextPageToken: next };
    },
    async deleteMedia(req) {
      await deps.media.delete(Number(req.appId), req.fileId);
      // like every content change: cached reads of the application are dropped
      await deps.invalidate(Number(req.appId));
      return {};
    },

    async getCmsUsage(req) {
      const today = new Date();
      const to = req.toDay || today.toISOString().slice(0, 10);
      const from = req.fromDay || new Date(today.getTime() - 29 * 86_400_000).toISOString().slice(0, 10);
      if (!DAY_RE.test(from)) throw validationError({ from_day: ["from_day must be YYYY-MM-DD."] });
      if (!DAY_RE.test(to)) throw validationError({ to_day: ["to_day must be YYYY-MM-DD."] });
      const days = await deps.meter.read(Number(req.appId), from, to);
      return { days: days.map((d) => ({ day: d.day, counted: BigInt(d.counted), included: BigInt(d.included) })) };
    },
  };
}
