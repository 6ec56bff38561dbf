// pulsebase.cms.v1.ContentService: the device-facing, read-only content API.
// Order of work per request: X-App-Key (MISSING_APP_KEY / INVALID_APP_KEY),
// the plan's rate limit (429 RATE_LIMITED), metering, content type lookup
// (CONTENT_TYPE_NOT_FOUND), the response cache for the shapes included in the
// plan, else a computed response under a statement timeout (QUERY_TIMEOUT).
import { createHash } from "node:crypto";
import { create, fromJson, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import {
  ContentResponseSchema,
  type ContentResponse,
  type ContentService,
  type Meta,
} from "../../../gen/pulsebase/cms/v1/content_pb.js";
import { kNotModified, type FastAnswer, type FastRequest, type RestFastPath } from "../../kernel/module.js";
import { appError } from "../../kernel/errors.js";
import { storageFailure, type Sql } from "../../infra/storage/sql.js";
import type { AppResolver, CmsApp } from "./app-resolver.js";
import type { ContentTypeDef } from "./content-type-def.js";
import { buildListQuery } from "./entry-query.js";
import { UUID_RE } from "./field-types.js";
import { isCounted, type Endpoint } from "./metering.js";
import { parseListQuery, parsePopulate, parseSearchQuery, type SearchQuery } from "./query-params.js";
import { enforce, type RateLimiter } from "../../infra/rate-limit/leased-limiter.js";
import type { AppSlot, CachedResponse, ReadCache, ReadState } from "./read-cache.js";
import { compileRenderer, mediaBaseFor, TS_SELECT, type EntryRow } from "./render.js";
import type { UsageMeter } from "./usage-meter.js";

export const CACHE_CONTROL_PUBLIC = "public, max-age=3600";
export const CACHE_CONTROL_SEARCH = "no-cache, no-store";

export interface ContentServiceDeps {
  sql: Sql;
  /** {media_base_url}, e.g. https://media.example.com */
  mediaBaseUrl: string;
  apps: AppResolver;
  cache: ReadCache;
  meter: UsageMeter;
  limiter: RateLimiter;
  /** the plan's daily allowance of counted requests, across processes */
  quota: RateLimiter;
  /** statement timeout of computed list/search queries; default 5000 */
  queryTimeoutMs?: number;
}

interface Begun {
  app: CmsApp;
  slot: AppSlot;
  state: ReadState;
  def: ContentTypeDef | undefined;
  counted: boolean;
}

type Query = Readonly<Record<string, string>>;

function etagOf(json: unknown): string {
  return `"${createHash("sha1").update(JSON.stringify(json)).digest("base64url")}"`;
}

function toMessage(data: JsonValue, meta?: Meta | Omit<Meta, "$typeName">): ContentResponse {
  return create(ContentResponseSchema, { data: fromJson(ValueSchema, data), meta });
}

/**
 * Relation UUIDs of entries a reader may not see (unpublished, deleted, of
 * another type) left out, as populate leaves them out: null
 * for a single relation, dropped from a multi one. Mutates and returns `out`.
 */
function hideUnpublished(out: JsonObject, fields: ContentTypeDef["fields"], visible: ReadonlySet<string>): JsonObject {
  for (const f of fields) {
    const v = out[f.name];
    if (typeof v === "string") out[f.name] = visible.has(`${f.target}/${v}`) ? v : null;
    else if (Array.isArray(v)) out[f.name] = v.filter((id) => typeof id === "string" && visible.has(`${f.target}/${id}`));
  }
  return out;
}

function matchesIfNoneMatch(header: string | null | undefined, etag: string): boolean {
  if (!header) return false;
  return header.split(",").some((t) => {
    const v = t.trim();
    return v === "*" || v.replace(/^W\//, "") === etag;
  });
}

/**
 * The relation targets among these rows' values that a reader may see:
 * published entries of the field's target type, as `<slug>/<uuid>`.
 */
async function publishedTargets(q: Sql, state: ReadState, def: ContentTypeDef, rows: EntryRow[], fields: ContentTypeDef["fields"]): Promise<Set<string>> {
  const ids = new Set<string>();
  for (const row of rows) {
    for (const f of fields) {
      const v = row.data[f.name];
      if (typeof v === "string") ids.add(v);
      else if (Array.isArray(v)) for (const x of v) if (typeof x === "string") ids.add(x);
    }
  }
  const valid = [...ids].filter((id) => UUID_RE.test(id));
  const visible = new Set<string>();
  if (valid.length === 0) return visible;
  const { rows: found } = await q.query<{ id: string; content_type_id: number }>(
    "SELECT id, content_type_id FROM cms_entries WHERE id = ANY($1::uuid[]) AND app_id = $2 AND published",
    [valid, def.appId],
  );
  for (const r of found) {
    const t = state.byId.get(Number(r.content_type_id));
    if (t) visible.add(`${t.slug}/${r.id}`);
  }
  return visible;
}

/**
 * A published entry as GET /api/v1/<type>/<uuid> answers it without
 * populate: its fields, media URLs, timestamps, and relations to published
 * entries only. `populate`: relation fields the caller replaces itself.
 */
export async function renderShownEntry(q: Sql, state: ReadState, def: ContentTypeDef, row: EntryRow, base: string, populate: ContentTypeDef["fields"] = []): Promise<JsonObject> {
  const out = compileRenderer(def, base)(row);
  const plain = def.fields.filter((f) => f.type === "relation" && !populate.includes(f));
  if (plain.length) hideUnpublished(out, plain, await publishedTargets(q, state, def, [row], plain));
  return out;
}

/**
 * The entry rendered as the read API renders it (realtime CMS changes),
 * read now: undefined when it is not published (or gone), or the app has no key.
 */
export async function renderPublishedEntry(sql: Sql, mediaBaseUrl: string, appKey: string, appId: number, id: string): Promise<{ contentType: string; entry: JsonObject } | undefined> {
  if (!UUID_RE.test(id)) return undefined;
  const { rows } = await sql.query<EntryRow & { content_type_id: number }>(
    `SELECT id, content_type_id, data, ${TS_SELECT} FROM cms_entries WHERE id = $1 AND app_id = $2 AND published`,
    [id, appId],
  );
  const row = rows[0];
  if (!row) return undefined;
  const state = await loadReadState(sql, appId);
  const def = state.byId.get(Number(row.content_type_id));
  if (!def) return undefined;
  return { contentType: def.slug, entry: await renderShownEntry(sql, state, def, row, mediaBaseFor(mediaBaseUrl, appKey)) };
}

export async function loadReadState(sql: Sql, appId: number): Promise<ReadState> {
  const { rows } = await sql.query<{
    id: number; app_id: number; slug: string; name: string; description: string; icon: string;
    fields: ContentTypeDef["fields"]; filterable_fields: string[]; sortable_fields: string[];
    searchable_fields: string[]; default_sort: string; default_per_page: number;
    created_at: Date; updated_at: Date; published: number;
  }>(
    `SELECT t.*, (SELECT count(*)::int FROM cms_entries e WHERE e.content_type_id = t.id AND e.published) AS published
       FROM cms_content_types t WHERE t.app_id = $1`,
    [appId],
  );
  const state: ReadState = { bySlug: new Map(), byId: new Map(), published: new Map() };
  for (const r of rows) {
    const def: ContentTypeDef = {
      id: Number(r.id), appId: Number(r.app_id), slug: r.slug, name: r.name, description: r.description,
      icon: r.icon, fields: r.fields, filterable: r.filterable_fields, sortable: r.sortable_fields,
      searchable: r.searchable_fields, defaultSort: r.default_sort, defaultPerPage: r.default_per_page,
      createdAt: new Date(r.created_at), updatedAt: new Date(r.updated_at),
    };
    state.bySlug.set(def.slug, def);
    state.byId.set(def.id, def);
    state.published.set(def.id, Number(r.published));
  }
  return state;
}

function schemaJson(def: ContentTypeDef): JsonObject {
  return {
    slug: def.slug,
    name: def.name,
    description: def.description,
    icon: def.icon,
    fields: def.fields.map((f) => ({
      name: f.name,
      type: f.type,
      required: f.required,
      label: f.label,
      searchable: def.searchable.includes(f.name),
    })),
    filterable_fields: def.filterable,
    sortable_fields: def.sortable,
    searchable_fields: def.searchable,
  };
}

function catalogJson(def: ContentTypeDef, count: number): JsonObject {
  return {
    slug: def.slug,
    name: def.name,
    description: def.description,
    icon: def.icon,
    entry_count: count,
    fields: def.fields.map((f) => f.name),
    filterable_fields: def.filterable,
    sortable_fields: def.sortable,
    searchable_fields: def.searchable,
  };
}

// Only the parameters a cached shape can hold make up the key, so ignored or
// unknown parameters cannot multiply cache entries.
function cacheKey(endpoint: Endpoint, slug: string, extra: string, query: Query): string {
  let k = `${endpoint}\u0000${slug}\u0000${extra}`;
  const all = Object.keys(query);
  if (all.length === 0) return k;
  const keys = all
    .filter((k) => k === "page" || k === "sort" || k.startsWith("filter["))
    .sort();
  for (const key of keys) k += `\u0000${key}\u0001${query[key]}`;
  return k;
}

/** The response cache key of a request (the one rule for the generic and the fast path). */
function responseKey(endpoint: Endpoint, slug: string, extra: string, query: Query): string {
  if (endpoint === "schemas") return "schemas";
  if (endpoint === "schema") return `schema\u0000${slug}`;
  return cacheKey(endpoint, slug, extra, endpoint === "show" ? {} : query);
}

function cachedResponse(data: JsonValue, meta: Omit<Meta, "$typeName"> | undefined, etag: string): CachedResponse {
  return {
    message: toMessage(data, meta),
    etag,
    // Cache-Control, ETag, and Vary (responses differ per application: shared
    // caches must key on the app key); sorted by name, the order in which the
    // gateway copies ctx.responseHeader
    headers: [["cache-control", CACHE_CONTROL_PUBLIC], ["etag", etag], ["vary", "X-App-Key"]],
  };
}

export function createContentServiceImpl(
  deps: ContentServiceDeps,
): ServiceImpl<typeof ContentService> {
  const { sql, apps, cache, meter, limiter, quota } = deps;
  const timeoutMs = deps.queryTimeoutMs ?? 5000;

  async function stateOf(slot: AppSlot, appId: number): Promise<ReadState> {
    if (!slot.state) {
      const p = loadReadState(sql, appId);
      slot.state = p;
      p.then(
        (state) => {
          if (slot.state === p) slot.ready = state;
        },
        () => {
          if (slot.state === p) slot.state = undefined;
        },
      );
    }
    return slot.state;
  }

  async function begin(ctx: HandlerContext, endpoint: Endpoint, slug: string | undefined, query: Query): Promise<Begun> {
    const key = ctx.requestHeader.get("x-app-key")?.trim();
    if (!key) throw appError("MISSING_APP_KEY");
    const app = await apps.byKey(key);
    if (!app) throw appError("INVALID_APP_KEY");
    enforce(await limiter.take({ key: String(app.id), limit: app.requestsPerSecond }), "RATE_LIMITED");
    const slot = cache.slot(app.id);
    const state = await stateOf(slot, app.id);
    const def = slug !== undefined ? state.bySlug.get(slug) : undefined;
    const counted = isCounted(endpoint, query, def);
    // The plan's daily allowance of counted requests; cached shapes stay served.
    if (counted) enforce(await quota.take({ key: String(app.id), limit: app.requestsPerDay }), "RATE_LIMITED", "The plan's daily allowance of computed CMS requests is used up.");
    meter.record(app.id, counted);
    if (slug !== undefined && (!def || !state.published.get(def.id))) {
      throw appError("CONTENT_TYPE_NOT_FOUND", `Content type ${slug} not found.`);
    }
    return { app, slot, state, def, counted };
  }

  function respond(ctx: HandlerContext, r: CachedResponse): ContentResponse {
    for (const [k, v] of r.headers) ctx.responseHeader.set(k, v);
    if (matchesIfNoneMatch(ctx.requestHeader.get("if-none-match"), r.etag)) ctx.values.set(kNotModified, true);
    return r.message;
  }

  /** Serves from the slot's cache when the shape is included in the plan. */
  async function cached(
    ctx: HandlerContext,
    b: Begun,
    key: string,
    compute: () => Promise<{ data: JsonValue; meta?: Omit<Meta, "$typeName"> }>,
  ): Promise<ContentResponse> {
    if (!b.counted) {
      const hit = b.slot.responses.get(key);
      if (hit) return respond(ctx, hit);
    }
    const out = await compute();
    const r = cachedResponse(out.data, out.meta, etagOf(out));
    if (!b.counted) cache.put(b.slot, key, r);
    return respond(ctx, r);
  }

  // Computed queries run under a real statement timeout.
  // Search also turns sequential scans off: the planner underestimates the
  // per-row cost of ILIKE and would scan small types instead of using the
  // trigram index.
  async function timed<T>(search: boolean, fn: (tx: Sql) => Promise<T>): Promise<T> {
    try {
      return await sql.transaction(async (tx) => {
        await tx.exec(
          `SET LOCAL statement_timeout = ${Math.max(1, Math.floor(timeoutMs))}${search ? "; SET LOCAL enable_seqscan = off" : ""}`,
        );
        return fn(tx);
      });
    } catch (err) {
      if (storageFailure(err)?.kind === "timeout") throw appError("QUERY_TIMEOUT", undefined, { cause: err });
      throw err;
    }
  }

  async function runList(b: Begun, def: ContentTypeDef, query: Query, search: boolean) {
    const lq = search ? parseSearchQuery(def, query) : parseListQuery(def, query);
    const built = buildListQuery(def, lq);
    const relations = def.fields.filter((f) => f.type === "relation" && (!lq.fields || lq.fields.has(f.name)));
    const { rows, total, visible } = await timed(built.search, async (tx) => {
      const r = await tx.query<EntryRow & { total?: number }>(built.text, built.params);
      let total: number;
      if (!built.counts) total = b.state.published.get(def.id) ?? 0;
      else if (r.rows[0]) total = Number(r.rows[0].total);
      else total = Number((await tx.query<{ total: number }>(built.countText, built.countParams)).rows[0]?.total ?? 0);
      return { rows: r.rows, total, visible: await publishedTargets(tx, b.state, def, r.rows, relations) };
    });
    const shown = compileRenderer(def, mediaBaseFor(deps.mediaBaseUrl, b.app.appKey), lq.fields);
    const render = (row: EntryRow) => hideUnpublished(shown(row), relations, visible);
    const meta: Omit<Meta, "$typeName"> = {
      currentPage: lq.page,
      perPage: rows.length,
      total,
      lastPage: Math.max(1, Math.ceil(total / lq.perPage)),
    };
    if (search) meta.query = (lq as SearchQuery).q;
    return { data: rows.map(render), meta };
  }

  return {
    async listSchemas(_req, ctx) {
      const b = await begin(ctx, "schemas", undefined, {});
      return cached(ctx, b, responseKey("schemas", "", "", {}), async () => {
        const defs = [...b.state.bySlug.values()]
          .filter((d) => (b.state.published.get(d.id) ?? 0) > 0)
          .sort((x, y) => x.slug.localeCompare(y.slug));
        return { data: defs.map((d) => catalogJson(d, b.state.published.get(d.id) ?? 0)) };
      });
    },

    async getSchema(req, ctx) {
      const b = await begin(ctx, "schema", req.contentType, {});
      const def = b.def!;
      return cached(ctx, b, responseKey("schema", def.slug, "", {}), async () => ({ data: schemaJson(def) }));
    },

    async listEntries(req, ctx) {
      const b = await begin(ctx, "list", req.contentType, req.query);
      const def = b.def!;
      return cached(ctx, b, responseKey("list", def.slug, "", req.query), () => runList(b, def, req.query, false));
    },

    async searchEntries(req, ctx) {
      const b = await begin(ctx, "search", req.contentType, req.query);
      const out = await runList(b, b.def!, req.query, true);
      ctx.responseHeader.set("cache-control", CACHE_CONTROL_SEARCH);
      return toMessage(out.data, out.meta);
    },

    async getEntry(req, ctx) {
      const b = await begin(ctx, "show", req.contentType, req.query);
      const def = b.def!;
      const populate = parsePopulate(def, req.query["populate"]);
      const uuid = req.uuid.toLowerCase();
      if (!UUID_RE.test(uuid)) throw appError("ENTRY_NOT_FOUND", `Entry ${req.uuid} not found.`);
      const key = responseKey("show", def.slug, uuid, {});
      return cached(ctx, b, key, async () => {
        const base = mediaBaseFor(deps.mediaBaseUrl, b.app.appKey);
        const { rows } = await sql.query<EntryRow>(
          `SELECT id, data, ${TS_SELECT} FROM cms_entries WHERE id = $1 AND content_type_id = ${def.id} AND published`,
          [uuid],
        );
        const row = rows[0];
        if (!row) throw appError("ENTRY_NOT_FOUND", `Entry ${req.uuid} not found.`);
        // Relations not populated keep their UUIDs, of published targets only (as populate does).
        const out = await renderShownEntry(sql, b.state, def, row, base, populate);
        if (populate.length) await populateRelations(b, def, row, out, populate, base);
        return { data: out };
      });
    },
  };

  // One level: relation UUIDs are replaced by the published related entries
  // (unpublished or missing: null for single relations, left out of arrays).
  async function populateRelations(
    b: Begun,
    def: ContentTypeDef,
    row: EntryRow,
    out: JsonObject,
    fields: ContentTypeDef["fields"],
    base: string,
  ): Promise<void> {
    const ids = new Set<string>();
    for (const f of fields) {
      const v = row.data[f.name];
      if (typeof v === "string") ids.add(v);
      else if (Array.isArray(v)) for (const x of v) if (typeof x === "string") ids.add(x);
    }
    const found = new Map<string, JsonObject>();
    if (ids.size) {
      const { rows } = await sql.query<EntryRow & { content_type_id: number }>(
        `SELECT id, content_type_id, data, ${TS_SELECT} FROM cms_entries
          WHERE id = ANY($1::uuid[]) AND app_id = $2 AND published`,
        [[...ids], def.appId],
      );
      // The related entries' own relations stay UUIDs, of published targets only.
      const nested = rows.flatMap((r) => b.state.byId.get(Number(r.content_type_id))?.fields.filter((f) => f.type === "relation") ?? []);
      const visible = nested.length ? await publishedTargets(sql, b.state, def, rows, nested) : new Set<string>();
      for (const r of rows) {
        const t = b.state.byId.get(Number(r.content_type_id));
        if (t) found.set(`${t.slug}/${r.id}`, hideUnpublished(compileRenderer(t, base)(r), t.fields.filter((f) => f.type === "relation"), visible));
      }
    }
    for (const f of fields) {
      const v = row.data[f.name];
      const get = (id: string) => found.get(`${f.target}/${id}`);
      if (Array.isArray(v)) out[f.name] = v.flatMap((id) => (typeof id === "string" && get(id)) || []);
      else if (typeof v === "string") out[f.name] = get(v) ?? null;
    }
  }
}

/** The REST fast paths of the content API, by method. */
export function createContentFastPaths(deps: Pick<ContentServiceDeps, "apps" | "cache" | "meter" | "limiter">): Record<"listSchemas" | "getSchema" | "listEntries" | "getEntry", RestFastPath> {
  const { apps, cache, meter, limiter } = deps;
  // The REST fast path (RestFastPath, src/kernel/module.ts): a request whose answer is
  // already in the response cache is served synchronously, without the
  // request message, the handler context or a promise. It answers only when
  // every check of begin() would pass without waiting (app key cached, a rate
  // limit token at hand, read state loaded, content type published, a shape
  // included in the plan, the response cached); anything else (errors,
  // misses, lookups) goes through the generic path, which does all checks in
  // their documented order. It spends its token and meters the request only
  // when it answers, so nothing is counted twice.
  function fastHit(req: FastRequest, endpoint: Endpoint, slug: string | undefined, extra: string): FastAnswer | undefined {
    const raw = req.headers["x-app-key"];
    if (typeof raw !== "string") return undefined;
    const app = apps.peek(raw.trim());
    if (!app) return undefined;
    const slot = cache.slot(app.id);
    const state = slot.ready;
    if (!state) return undefined;
    if (slug !== undefined) {
      const def = state.bySlug.get(slug);
      if (!def || !state.published.get(def.id) || isCounted(endpoint, req.query, def)) return undefined;
      slug = def.slug;
    }
    const hit = slot.responses.get(responseKey(endpoint, slug ?? "", extra, req.query));
    if (!hit || !limiter.tryTake(String(app.id), app.requestsPerSecond)) return undefined;
    meter.record(app.id, false);
    const inm = req.headers["if-none-match"];
    return { message: hit.message, headers: hit.headers, notModified: matchesIfNoneMatch(Array.isArray(inm) ? inm.join(", ") : inm, hit.etag) };
  }

  return {
    listSchemas: (req) => fastHit(req, "schemas", undefined, ""),
    getSchema: (req) => fastHit(req, "schema", req.params["content_type"] ?? "", ""),
    listEntries: (req) => fastHit(req, "list", req.params["content_type"] ?? "", ""),
    getEntry: (req) => {
      const uuid = (req.params["uuid"] ?? "").toLowerCase();
      return UUID_RE.test(uuid) ? fastHit(req, "show", req.params["content_type"] ?? "", uuid) : undefined;
    },
  };
}
