// Renders stored entries into the public JSON shape: id, the fields in
// definition order (null when unset), a <field>_url companion after each
// media field, then the system timestamps (ISO 8601 with explicit offset).
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import type { ContentTypeDef } from "./content-type-def.js";
import type { FieldDef } from "./field-types.js";

export interface EntryRow {
  id: string;
  data: Record<string, JsonValue>;
  created_at: string;
  updated_at: string;
  published_at: string | null;
}

/** Timestamps as text straight from SQL (no Date round trip per row). */
export const TS_SELECT = `
  to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS created_at,
  to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS updated_at,
  to_char(published_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS published_at`;

/** A compiled renderer for one content type and one field selection. */
export type EntryRenderer = (row: EntryRow) => JsonObject;

/**
 * mediaBase is "{media_base_url}/<APP_KEY>/cms/media/"; `only` is the sparse
 * field selection (undefined: all fields).
 */
export function compileRenderer(def: ContentTypeDef, mediaBase: string, only?: ReadonlySet<string>): EntryRenderer {
  const fields: FieldDef[] = only ? def.fields.filter((f) => only.has(f.name)) : def.fields;
  const all = !only;
  return (row) => {
    const out: JsonObject = { id: row.id };
    const d = row.data;
    for (const f of fields) {
      const v = d[f.name];
      out[f.name] = v === undefined ? null : v;
      if (f.type === "media") out[`${f.name}_url`] = typeof v === "string" ? mediaBase + v : null;
    }
    if (all) {
      out.created_at = row.created_at;
      out.updated_at = row.updated_at;
      out.published_at = row.published_at;
    } else {
      if (only.has("created_at")) out.created_at = row.created_at;
      if (only.has("updated_at")) out.updated_at = row.updated_at;
      if (only.has("published_at")) out.published_at = row.published_at;
    }
    return out;
  };
}

export function mediaBaseFor(mediaBaseUrl: string, appKey: string): string {
  return `${mediaBaseUrl.replace(/\/+$/, "")}/${encodeURIComponent(appKey)}/cms/media/`;
}
