// Which read requests count against the plan (docs/cms.md, "Caching, metering and limits"), as a
// pure function of the request shape. Requests that are not counted are the
// ones served from the response cache.
//
// Counted: search always; any operator filter other than a single eq; two or
// more filters; a filter on a non-filterable field; an eq filter combined with
// sort; populate on show; any per_page value sent; any fields value sent.
// Included: schema endpoints, list with only page, show without populate, a
// single eq filter alone on a filterable field, a single sortable-field sort
// alone (page may accompany any of them). Parameters an endpoint ignores
// (populate on list/search, fields/per_page on show, the bracket-array forms
// fields[] and populate[], unknown parameters) change nothing.
import { FILTER_KEY_RE } from "./query-params.js";

export type Endpoint = "schemas" | "schema" | "list" | "show" | "search";

export interface MeterTypeInfo {
  filterable: readonly string[];
  sortable: readonly string[];
}

const TIMESTAMPS = new Set(["published_at", "created_at", "updated_at"]);

function present(query: Readonly<Record<string, string>>, key: string): boolean {
  return Object.hasOwn(query, key);
}

/** true when the request is metered (dynamically computed). */
export function isCounted(
  endpoint: Endpoint,
  query: Readonly<Record<string, string>>,
  type: MeterTypeInfo | undefined,
): boolean {
  switch (endpoint) {
    case "schemas":
    case "schema":
      return false;
    case "search":
      return true;
    case "show":
      return present(query, "populate");
    case "list":
      break;
  }
  if (present(query, "per_page") || present(query, "fields")) return true;
  const filters: { field: string; op: string }[] = [];
  for (const key of Object.keys(query)) {
    if (!key.startsWith("filter[")) continue;
    const m = FILTER_KEY_RE.exec(key);
    // a malformed filter key is not a single eq filter
    if (!m) return true;
    filters.push({ field: m[1]!, op: (m[2] ?? "eq").toLowerCase() });
  }
  if (filters.length >= 2) return true;
  const sortSent = present(query, "sort") && (query.sort ?? "").trim() !== "";
  const f = filters[0];
  if (f) {
    if (f.op !== "eq") return true;
    if (!type || !type.filterable.includes(f.field)) return true;
    if (sortSent) return true;
    return false;
  }
  if (sortSent) {
    const name = (query.sort ?? "").replace(/^[-+ ]/, "").trim();
    if (TIMESTAMPS.has(name)) return false;
    return !type || !type.sortable.includes(name);
  }
  return false;
}
