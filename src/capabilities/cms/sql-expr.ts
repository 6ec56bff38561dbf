// SQL expressions over an entry's jsonb data, one per field type. Field names
// are validated identifiers ([a-z][a-z0-9_]*), so inlining them is safe. The
// same expressions are used by the per-field indexes and by the queries, so
// the planner can match them.
import type { FieldDef } from "./field-types.js";
import type { ContentTypeDef } from "./content-type-def.js";

/** The expression filters and sorts compare (scalar fields). */
export function scalarExpr(f: FieldDef): string {
  switch (f.type) {
    case "number":
      return `((data->>'${f.name}')::numeric)`;
    case "date_time":
      return `cms_ts(data->>'${f.name}')`;
    default:
      return `(data->>'${f.name}')`;
  }
}

/** The jsonb array of a multi-value select or relation. */
export function arrayExpr(f: FieldDef): string {
  return `(data->'${f.name}')`;
}

export function isMulti(f: FieldDef): boolean {
  return (f.type === "select" || f.type === "relation") && !!f.multi;
}

/** The search text of an entry: its searchable fields, HTML stripped. */
export function searchTextExpr(def: Pick<ContentTypeDef, "fields" | "searchable">, dataRef = "data"): string {
  const parts = def.searchable.map((name) => {
    const f = def.fields.find((x) => x.name === name);
    const raw = `coalesce(${dataRef}->>'${name}', '')`;
    if (f?.type === "rich_text") {
      return `regexp_replace(regexp_replace(${raw}, '<[^>]*>', ' ', 'g'), '&[a-zA-Z0-9#]+;', ' ', 'g')`;
    }
    return raw;
  });
  return parts.length ? `concat_ws(' ', ${parts.join(", ")})` : `''`;
}
