// Builds the SQL of list and search requests: published entries of one
// content type, typed filters, sort with a stable id tie-break, one page, and
// the exact total in the same statement (an InitPlan) when it is needed.
// The content type id is inlined so the per-type partial indexes match.
import type { ContentTypeDef } from "./content-type-def.js";
import type { FieldDef } from "./field-types.js";
import type { Filter, ListQuery, SearchQuery, Sort } from "./query-params.js";
import { TS_SELECT } from "./render.js";
import { arrayExpr, isMulti, scalarExpr } from "./sql-expr.js";

export interface BuiltQuery {
  text: string;
  /** search: planner settings for the transaction (prefer the trigram index) */
  search: boolean;
  params: unknown[];
  /** false when the total is known without counting (no filters, no q) */
  counts: boolean;
  /** the statement that counts when the page came back empty */
  countText: string;
  countParams: unknown[];
}

class Params {
  readonly values: unknown[] = [];
  add(v: unknown): string {
    this.values.push(v);
    return `$${this.values.length}`;
  }
}

/** Escapes LIKE wildcards so user input matches literally. */
export function escapeLike(s: string): string {
  return s.replace(/[\\%_]/g, (c) => `\\${c}`);
}

function typedParam(f: FieldDef, p: string): string {
  if (f.type === "number") return `${p}::numeric`;
  if (f.type === "date_time") return `cms_ts(${p}::text)`;
  return `${p}::text`;
}

function filterSql(flt: Filter, ps: Params): string {
  const f = flt.field;
  if (isMulti(f)) {
    // membership in the stored array; GIN (jsonb_path_ops) serves @>
    const a = arrayExpr(f);
    const any = flt.values.map((v) => `${a} @> ${ps.add(JSON.stringify([v]))}::jsonb`).join(" OR ");
    return flt.op === "eq" || flt.op === "in" ? `(${any})` : `NOT coalesce((${any}), false)`;
  }
  const e = scalarExpr(f);
  const one = () => typedParam(f, ps.add(flt.values[0]));
  switch (flt.op) {
    case "eq":
      return `${e} = ${one()}`;
    case "neq":
      return `${e} IS DISTINCT FROM ${one()}`;
    case "gt":
      return `${e} > ${one()}`;
    case "gte":
      return `${e} >= ${one()}`;
    case "lt":
      return `${e} < ${one()}`;
    case "lte":
      return `${e} <= ${one()}`;
    case "contains":
      return `(data->>'${f.name}') ILIKE ${ps.add(`%${escapeLike(flt.values[0]!)}%`)}`;
    case "starts_with":
      return `(data->>'${f.name}') ILIKE ${ps.add(`${escapeLike(flt.values[0]!)}%`)}`;
    case "in":
      return `${e} IN (${flt.values.map((v) => typedParam(f, ps.add(v))).join(", ")})`;
    case "nin":
      return `(${e} IS NULL OR ${e} NOT IN (${flt.values.map((v) => typedParam(f, ps.add(v))).join(", ")}))`;
  }
}

// Columns are qualified: the select list has text aliases of the same names
// (formatted timestamps), and a bare name in ORDER BY means the alias.
function orderSql(sort: Sort | undefined): string {
  if (!sort) return "cms_entries.published_at DESC, cms_entries.id DESC";
  const dir = sort.desc ? "DESC" : "ASC";
  if (!sort.field) return `cms_entries.${sort.column} ${dir}, cms_entries.id ${dir}`;
  const e = scalarExpr(sort.field);
  return sort.desc ? `${e} DESC NULLS LAST, cms_entries.id DESC` : `${e} ASC, cms_entries.id ASC`;
}

/** Words of a search query, as typed (whitespace separated). */
export function searchWords(q: string): string[] {
  return q.split(/\s+/).filter(Boolean);
}

/** A prefix tsquery ('word':* & ...) from the letters and digits of q. */
export function prefixTsQuery(q: string): string {
  const toks = q.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
  return toks.map((t) => `'${t}':*`).join(" & ");
}

export function buildListQuery(def: ContentTypeDef, lq: ListQuery | SearchQuery): BuiltQuery {
  const ps = new Params();
  const where = [`content_type_id = ${def.id}`, "published"];
  for (const f of lq.filters) where.push(filterSql(f, ps));
  let order = orderSql(lq.sort);
  const select = `cms_entries.id, data, ${TS_SELECT}`;
  const search = "q" in lq;
  if (search) for (const w of searchWords(lq.q)) where.push(`search_text ILIKE ${ps.add(`%${escapeLike(w)}%`)}`);
  const w = where.join(" AND ");
  const counts = lq.filters.length > 0 || search;
  const countText = `SELECT count(*)::int AS total FROM cms_entries WHERE ${w}`;
  const countParams = [...ps.values];
  if (search) {
    // Search reads every match anyway (relevance order), so it counts in the
    // same pass. The matches are ranked and counted on narrow rows (id and
    // sort keys); only the page's rows are then read whole and formatted: a
    // third less execution time than carrying every match's row through
    // the window and the sort.
    let rank = "0";
    let inner = order;
    if (!lq.sort) {
      // full-word matches first, then whole-word prefixes, then substrings
      const full = `search_tsv @@ plainto_tsquery('simple', ${ps.add(lq.q)})`;
      const pq = prefixTsQuery(lq.q);
      const prefix = pq ? `search_tsv @@ to_tsquery('simple', ${ps.add(pq)})` : "false";
      rank = `CASE WHEN ${full} THEN 0 WHEN ${prefix} THEN 1 ELSE 2 END`;
      inner = `prank, cms_entries.published_at DESC, cms_entries.id DESC`;
      order = `p.prank, cms_entries.published_at DESC, cms_entries.id DESC`;
    }
    const limit = ps.add(lq.perPage);
    const offset = ps.add((lq.page - 1) * lq.perPage);
    const page = `SELECT cms_entries.id AS pid, ${rank} AS prank, count(*) OVER () AS ptotal FROM cms_entries WHERE ${w} ORDER BY ${inner} LIMIT ${limit} OFFSET ${offset}`;
    const text = `SELECT ${select}, p.ptotal AS total FROM (${page}) p JOIN cms_entries ON cms_entries.id = p.pid ORDER BY ${order}`;
    return { text, search, params: ps.values, counts, countText, countParams };
  }
  const limit = ps.add(lq.perPage);
  const offset = ps.add((lq.page - 1) * lq.perPage);
  // Lists count in an InitPlan and read only the page in order.
  const total = counts ? `, (${countText}) AS total` : "";
  const text = `SELECT ${select}${total} FROM cms_entries WHERE ${w} ORDER BY ${order} LIMIT ${limit} OFFSET ${offset}`;
  return { text, search, params: ps.values, counts, countText, countParams };
}
