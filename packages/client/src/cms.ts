// Read-only content (/api/v1): a typed, immutable query builder for filters,
// sort, sparse fields and pagination (awaited, it fetches its page; also an
// async iterator over every matching entry), search, single entries with
// populate, and the schemas.
// Authenticated by the app key alone; a PulsebaseClient can be passed as is.
import { CmsError } from "./errors.js";
import { backoff, send, type FetchLike } from "./http.js";

export interface CmsOptions {
  baseUrl: string;
  appKey: string;
  fetch?: FetchLike;
  timeoutMs?: number;
  /** Retries of a 429 or 503 (with backoff honouring Retry-After; default 3). */
  retries?: number;
}

export type FilterOperator = "eq" | "neq" | "gt" | "gte" | "lt" | "lte" | "contains" | "starts_with" | "in" | "nin";
type Scalar = string | number | boolean | Date;
type Timestamp = "created_at" | "updated_at" | "published_at";

/** The system fields every entry has. */
export interface EntryBase {
  id: string;
  created_at: string;
  updated_at: string;
  published_at: string;
}

export interface PageMeta {
  current_page: number;
  /** Items in this page (DECISIONS 23). */
  per_page: number;
  total: number;
  last_page: number;
  /** Search only: the query. */
  query?: string;
}

export interface Page<T> {
  data: T[];
  meta: PageMeta;
}

export interface ContentTypeSummary {
  slug: string;
  name: string;
  description: string;
  icon: string;
  entry_count: number;
  fields: string[];
  filterable_fields: string[];
  sortable_fields: string[];
  searchable_fields: string[];
}

export interface ContentTypeSchema extends Omit<ContentTypeSummary, "fields" | "entry_count"> {
  fields: { name: string; type: string; required: boolean; label: string; searchable: boolean }[];
}

/** `field` ascends (a timestamp descends: newest first), `-field` descends. */
export type SortSpec<T> = `${(keyof T & string) | Timestamp}` | `-${(keyof T & string) | Timestamp}`;

export class CmsQuery<T> implements AsyncIterable<T & EntryBase>, PromiseLike<Page<T & EntryBase>> {
  constructor(
    private readonly get: <R>(path: string, q: Record<string, string | undefined>) => Promise<R>,
    private readonly type: string,
    private readonly q: Record<string, string | undefined> = {},
  ) {}

  private with(k: string, v: string | undefined): CmsQuery<T> {
    return new CmsQuery<T>(this.get, this.type, { ...this.q, [k]: v });
  }

  /** `where("category", "news")` (eq) or `where("views", "gt", 100)`; `in`/`nin` take an array. */
  where<K extends keyof T & string>(field: K | Timestamp, value: Scalar): CmsQuery<T>;
  where<K extends keyof T & string, O extends FilterOperator>(field: K | Timestamp, op: O, value: O extends "in" | "nin" ? Scalar[] : Scalar): CmsQuery<T>;
  where(field: string, a: unknown, b?: unknown): CmsQuery<T> {
    const [op, v] = b === undefined ? ["eq", a] : [a as string, b];
    const s = (x: unknown) => (x instanceof Date ? x.toISOString() : String(x));
    // A lone eq filter is sent in its short form, which the server answers from its cache.
    return this.with(op === "eq" ? `filter[${field}]` : `filter[${field}][${op}]`, Array.isArray(v) ? v.map(s).join(",") : s(v));
  }

  sort(spec: SortSpec<T>): CmsQuery<T> {
    return this.with("sort", spec);
  }

  /** Sparse fields: only these (and `id`, and the `_url` of media fields). */
  fields(...names: (keyof T & string)[]): CmsQuery<T> {
    return this.with("fields", names.join(","));
  }

  page(n: number): CmsQuery<T> {
    return this.with("page", String(n));
  }

  /** 1 to 100; default the content type's setting, else 20. */
  perPage(n: number): CmsQuery<T> {
    return this.with("per_page", String(n));
  }

  /** Full-text search (2 to 200 characters) over the searchable fields, best matches first unless sorted. */
  search(text: string): CmsQuery<T> {
    return this.with("q", text);
  }

  /** One page. */
  fetch(): Promise<Page<T & EntryBase>> {
    const { q, ...rest } = this.q;
    return this.get(`/${encodeURIComponent(this.type)}${q === undefined ? "" : "/search"}`, q === undefined ? rest : this.q);
  }

  /**
   * `await query` is `await query.fetch()`: one page. Awaiting the builder
   * itself would otherwise hand back the builder, without an error.
   */
  then<A = Page<T & EntryBase>, B = never>(
    onfulfilled?: ((page: Page<T & EntryBase>) => A | PromiseLike<A>) | null,
    onrejected?: ((reason: unknown) => B | PromiseLike<B>) | null,
  ): Promise<A | B> {
    return this.fetch().then(onfulfilled, onrejected);
  }

  /** Every page from the current one on. */
  async *pages(): AsyncGenerator<Page<T & EntryBase>> {
    for (let n = Number(this.q.page ?? 1); ; n++) {
      const page = await this.page(n).fetch();
      yield page;
      if (n >= page.meta.last_page || !page.data.length) return;
    }
  }

  /** Every matching entry, page after page. */
  async *[Symbol.asyncIterator](): AsyncIterator<T & EntryBase> {
    for await (const page of this.pages()) yield* page.data;
  }
}

export interface Cms {
  /** Content types with at least one published entry. */
  schemas(): Promise<ContentTypeSummary[]>;
  schema(type: string): Promise<ContentTypeSchema>;
  /** A query on one content type; `T` names its fields. */
  from<T = Record<string, unknown>>(type: string): CmsQuery<T>;
  /** One published entry; `populate` replaces relation ids by the related entries. */
  entry<T = Record<string, unknown>>(type: string, id: string, o?: { populate?: (keyof T & string)[] }): Promise<T & EntryBase>;
}

export function createCms(o: CmsOptions): Cms {
  const cfg = { baseUrl: `${o.baseUrl.replace(/\/+$/, "")}/api/v1`, fetch: o.fetch, timeoutMs: o.timeoutMs };
  async function get<R>(path: string, query: Record<string, string | undefined>): Promise<R> {
    for (let attempt = 0; ; attempt++) {
      try {
        return (await send<R>(cfg, path, { query, headers: { "x-app-key": o.appKey } })).data;
      } catch (e) {
        const s = (e as CmsError).status;
        if ((s !== 429 && s !== 503) || attempt >= (o.retries ?? 3)) throw e;
        await new Promise((r) => setTimeout(r, backoff(attempt, 500, 10_000, (e as CmsError).retryAfter)));
      }
    }
  }
  const data = <R>(p: Promise<{ data: R }>) => p.then((r) => r.data);
  return {
    schemas: () => data(get("/_schemas", {})),
    schema: (type) => data(get(`/_schemas/${encodeURIComponent(type)}`, {})),
    from: (type) => new CmsQuery(get, type),
    entry: (type, id, e = {}) =>
      data(get(`/${encodeURIComponent(type)}/${encodeURIComponent(id)}`, { populate: e.populate?.join(",") })),
  };
}
