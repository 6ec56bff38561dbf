// Parses and validates the raw query-string parameters of the read API
// (docs/cms.md, "Read API behaviour where the spec is silent") into a typed query. Checks run
// in this order: pagination, parameter lengths, q, filters, sort.
import { appError } from "../../kernel/errors.js";
import type { ContentTypeDef } from "./content-type-def.js";
import { isTimestampColumn } from "./content-type-def.js";
import { isIsoDate, isIsoDateTime, UUID_RE, type FieldDef } from "./field-types.js";

export const MAX_FILTER_FIELDS = 10;
export const MAX_SORT_LENGTH = 100;
export const MAX_FIELDS_LENGTH = 500;
export const MAX_POPULATE_LENGTH = 500;
export const MIN_Q = 2;
export const MAX_Q = 200;
export const MAX_PER_PAGE = 100;
export const MAX_IN_VALUES = 100;

export const OPERATORS = ["eq", "neq", "gt", "gte", "lt", "lte", "contains", "starts_with", "in", "nin"] as const;
export type Operator = (typeof OPERATORS)[number];

export interface Filter {
  field: FieldDef;
  op: Operator;
  /** eq..lte, contains, starts_with: one value; in/nin: the list */
  values: string[];
}

export interface Sort {
  /** a field of the type, or a timestamp column */
  field: FieldDef | undefined;
  column: string;
  desc: boolean;
}

export interface ListQuery {
  filters: Filter[];
  sort: Sort | undefined;
  page: number;
  perPage: number;
  fields: Set<string> | undefined;
}

export interface SearchQuery extends ListQuery {
  q: string;
}

export const FILTER_KEY_RE = /^filter\[([^\][]*)\](?:\[([^\][]*)\])?$/;

function parsePositiveInt(raw: string | undefined, name: string, min: number, max: number): number | undefined {
  if (raw === undefined) return undefined;
  const t = raw.trim();
  if (!/^\d{1,9}$/.test(t)) throw appError("INVALID_PAGINATION", `${name} must be an integer between ${min} and ${max}.`);
  const n = Number(t);
  if (n < min || n > max) throw appError("INVALID_PAGINATION", `${name} must be an integer between ${min} and ${max}.`);
  return n;
}

const OPS_BY_TYPE: Record<string, readonly Operator[]> = {
  text: OPERATORS,
  email: OPERATORS,
  url: OPERATORS,
  number: ["eq", "neq", "gt", "gte", "lt", "lte", "in", "nin"],
  date: ["eq", "neq", "gt", "gte", "lt", "lte", "in", "nin"],
  date_time: ["eq", "neq", "gt", "gte", "lt", "lte", "in", "nin"],
  boolean: ["eq", "neq", "in", "nin"],
  select: ["eq", "neq", "in", "nin"],
  relation: ["eq", "neq", "in", "nin"],
};

function checkValue(f: FieldDef, value: string): string {
  const bad = (why: string) => appError("INVALID_FILTER", `Invalid filter value for ${f.name}: ${why}`);
  switch (f.type) {
    case "number":
      if (value.trim() === "" || !Number.isFinite(Number(value))) throw bad("expected a number.");
      return String(Number(value));
    case "date":
      if (!isIsoDate(value)) throw bad("expected a date YYYY-MM-DD.");
      return value;
    case "date_time":
      if (isIsoDate(value)) return `${value}T00:00:00Z`;
      if (!isIsoDateTime(value)) throw bad("expected an ISO 8601 date-time.");
      return value;
    case "boolean": {
      const b = value.toLowerCase();
      if (b !== "true" && b !== "false") throw bad('expected "true" or "false".');
      return b;
    }
    case "relation":
      if (!UUID_RE.test(value)) throw bad("expected an entry UUID.");
      return value.toLowerCase();
    case "select":
      if (!(f.options ?? []).includes(value)) throw bad(`expected one of ${(f.options ?? []).join(", ")}.`);
      return value;
    default:
      return value;
  }
}

/** Filters of a list or search request; `like` is dropped silently. */
export function parseFilters(def: ContentTypeDef, query: Readonly<Record<string, string>>): Filter[] {
  const parsed: { field: string; op: string; value: string }[] = [];
  const fieldNames = new Set<string>();
  for (const key of Object.keys(query)) {
    if (!key.startsWith("filter[")) continue;
    const m = FILTER_KEY_RE.exec(key);
    if (!m) throw appError("INVALID_FILTER", `Malformed filter parameter ${key}; use filter[field] or filter[field][op].`);
    const field = m[1]!;
    parsed.push({ field, op: (m[2] ?? "eq").toLowerCase(), value: query[key]! });
    fieldNames.add(field);
  }
  if (fieldNames.size > MAX_FILTER_FIELDS) {
    throw appError("TOO_MANY_FILTERS", `At most ${MAX_FILTER_FIELDS} filter fields are allowed; got ${fieldNames.size}.`);
  }
  const out: Filter[] = [];
  for (const p of parsed) {
    if (p.op === "like") continue;
    // Stored text never holds U+0000, and PostgreSQL refuses it as a parameter (a 500).
    if (p.value.includes("\u0000")) throw appError("INVALID_FILTER", `Invalid filter value for ${p.field}: NUL characters are not allowed.`);
    const f = def.filterable.includes(p.field) ? def.fields.find((x) => x.name === p.field) : undefined;
    if (!f) throw appError("INVALID_FILTER", `${p.field} is not a filterable field of ${def.slug}.`);
    if (!(OPERATORS as readonly string[]).includes(p.op)) {
      throw appError("INVALID_OPERATOR", `Unsupported operator ${p.op}; use one of ${OPERATORS.join(", ")}.`);
    }
    const op = p.op as Operator;
    const allowed = OPS_BY_TYPE[f.type] ?? [];
    if (!allowed.includes(op)) {
      throw appError("INVALID_OPERATOR", `Operator ${op} is not supported on ${f.type} field ${f.name}; use one of ${allowed.join(", ")}.`);
    }
    let values: string[];
    if (op === "in" || op === "nin") {
      values = p.value.split(",").map((s) => s.trim()).filter((s) => s !== "");
      if (values.length === 0) throw appError("INVALID_FILTER", `Filter ${f.name} ${op} needs a comma-separated list.`);
      if (values.length > MAX_IN_VALUES) throw appError("INVALID_FILTER", `Filter ${f.name} ${op} takes at most ${MAX_IN_VALUES} values.`);
    } else if (op === "contains" || op === "starts_with") {
      if (p.value === "") throw appError("INVALID_FILTER", `Filter ${f.name} ${op} needs a value.`);
      values = [p.value];
    } else {
      values = [p.value];
    }
    // contains/starts_with compare text; other operators compare typed values
    if (op !== "contains" && op !== "starts_with") values = values.map((v) => checkValue(f, v));
    out.push({ field: f, op, values });
  }
  return out;
}

export function parseSort(def: ContentTypeDef, raw: string): Sort {
  let s = raw;
  let dir: "asc" | "desc" | undefined;
  if (s.startsWith("-")) {
    dir = "desc";
    s = s.slice(1);
  } else if (s.startsWith("+") || s.startsWith(" ")) {
    // "+field" (a literal + or its form-decoded space) asks for ascending
    dir = "asc";
    s = s.slice(1);
  }
  s = s.trim();
  if (isTimestampColumn(s)) return { field: undefined, column: s, desc: dir ? dir === "desc" : true };
  const f = def.sortable.includes(s) ? def.fields.find((x) => x.name === s) : undefined;
  if (!f) throw appError("INVALID_SORT", `Cannot sort on ${s || raw}; sortable: ${[...def.sortable, "published_at", "created_at", "updated_at"].join(", ")}.`);
  return { field: f, column: f.name, desc: dir === "desc" };
}

function checkLength(raw: string | undefined, max: number, name: string): void {
  if (raw !== undefined && [...raw].length > max) throw appError("INVALID_PARAMETER", `${name} must be at most ${max} characters.`);
}

export function parseListQuery(def: ContentTypeDef, query: Readonly<Record<string, string>>): ListQuery {
  const page = parsePositiveInt(query.page, "page", 1, 1_000_000_000) ?? 1;
  const perPage = parsePositiveInt(query.per_page, "per_page", 1, MAX_PER_PAGE) ?? def.defaultPerPage ?? 20;
  checkLength(query.sort, MAX_SORT_LENGTH, "sort");
  checkLength(query.fields, MAX_FIELDS_LENGTH, "fields");
  const filters = parseFilters(def, query);
  const sortRaw = query.sort !== undefined && query.sort.trim() !== "" ? query.sort : undefined;
  const sort = sortRaw !== undefined ? parseSort(def, sortRaw) : def.defaultSort ? parseSort(def, def.defaultSort) : undefined;
  let fields: Set<string> | undefined;
  if (query.fields !== undefined && query.fields.trim() !== "") {
    fields = new Set(query.fields.split(",").map((s) => s.trim()).filter(Boolean));
  }
  return { filters, sort, page, perPage, fields };
}

export function parseSearchQuery(def: ContentTypeDef, query: Readonly<Record<string, string>>): SearchQuery {
  parsePositiveInt(query.page, "page", 1, 1_000_000_000);
  parsePositiveInt(query.per_page, "per_page", 1, MAX_PER_PAGE);
  checkLength(query.sort, MAX_SORT_LENGTH, "sort");
  checkLength(query.fields, MAX_FIELDS_LENGTH, "fields");
  const q = (query.q ?? "").trim();
  const len = [...q].length;
  if (len < MIN_Q) throw appError("QUERY_TOO_SHORT", `q must be at least ${MIN_Q} characters.`);
  if (len > MAX_Q) throw appError("QUERY_TOO_LONG", `q must be at most ${MAX_Q} characters.`);
  if (q.includes("\u0000")) throw appError("INVALID_PARAMETER", "q must not contain NUL characters.");
  const list = parseListQuery(def, query);
  // Without an explicit sort, search orders by relevance (not the type's default sort).
  const explicit = query.sort !== undefined && query.sort.trim() !== "";
  return { ...list, sort: explicit ? list.sort : undefined, q };
}

/** The relation fields named in populate ("*" names them all). */
export function parsePopulate(def: ContentTypeDef, raw: string | undefined): FieldDef[] {
  if (raw === undefined || raw.trim() === "") return [];
  checkLength(raw, MAX_POPULATE_LENGTH, "populate");
  const names = new Set(raw.split(",").map((s) => s.trim()));
  return def.fields.filter((f) => f.type === "relation" && (names.has("*") || names.has(f.name)));
}
