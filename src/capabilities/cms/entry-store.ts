// Entries in PostgreSQL for authoring: validated writes, publish state and
// the search text kept in step with the content type's searchable fields.
import { randomUUID } from "node:crypto";
import { appError, Violations } from "../../kernel/errors.js";
import type { Sql } from "../../infra/storage/sql.js";
import type { ContentTypeDef } from "./content-type-def.js";
import { normaliseValue, UUID_RE } from "./field-types.js";
import { searchTextExpr } from "./sql-expr.js";

export interface EntryRecord {
  id: string;
  contentTypeId: number;
  data: Record<string, unknown>;
  published: boolean;
  createdAt: Date;
  updatedAt: Date;
  publishedAt: Date | null;
}

interface Row {
  id: string;
  content_type_id: number;
  data: Record<string, unknown>;
  published: boolean;
  created_at: Date;
  updated_at: Date;
  published_at: Date | null;
}

const COLS = "id, content_type_id, data, published, created_at, updated_at, published_at";

function toRecord(r: Row): EntryRecord {
  return {
    id: r.id,
    contentTypeId: Number(r.content_type_id),
    data: r.data,
    published: r.published,
    createdAt: new Date(r.created_at),
    updatedAt: new Date(r.updated_at),
    publishedAt: r.published_at ? new Date(r.published_at) : null,
  };
}

export class EntryStore {
  constructor(private readonly sql: Sql) {}

  async get(appId: number, id: string, tx: Sql = this.sql, lock = false): Promise<EntryRecord> {
    if (!UUID_RE.test(id)) throw appError("not_found", "Entry not found.");
    const { rows } = await tx.query<Row>(
      `SELECT ${COLS} FROM cms_entries WHERE id = $1 AND app_id = $2${lock ? " FOR UPDATE" : ""}`,
      [id.toLowerCase(), appId],
    );
    if (!rows[0]) throw appError("not_found", "Entry not found.");
    return toRecord(rows[0]);
  }

  async list(appId: number, typeId: number, limit: number, offset: number): Promise<EntryRecord[]> {
    const { rows } = await this.sql.query<Row>(
      `SELECT ${COLS} FROM cms_entries WHERE content_type_id = $1 AND app_id = $2
        ORDER BY created_at DESC, id DESC LIMIT $3 OFFSET $4`,
      [typeId, appId, limit, offset],
    );
    return rows.map(toRecord);
  }

  /**
   * Validates values against the field types; `base` is the stored data for
   * a patch. Unknown keys are refused; relations must point at entries of the
   * target type, media at files of the application.
   */
  async validateData(
    tx: Sql,
    def: ContentTypeDef,
    allTypes: ContentTypeDef[],
    input: Record<string, unknown>,
    base: Record<string, unknown> = {},
  ): Promise<Record<string, unknown>> {
    const v = new Violations();
    const out: Record<string, unknown> = { ...base };
    const byName = new Map(def.fields.map((f) => [f.name, f]));
    for (const key of Object.keys(input)) {
      if (!byName.has(key)) v.add(`data.${key}`, `${key} is not a field of ${def.slug}.`);
    }
    const relationChecks: { field: string; target: number; ids: string[] }[] = [];
    const mediaChecks: { field: string; id: string }[] = [];
    for (const f of def.fields) {
      if (!(f.name in input)) continue;
      const raw = input[f.name];
      if (raw === null || raw === undefined) {
        delete out[f.name];
        continue;
      }
      const r = normaliseValue(f, raw, def.filterable.includes(f.name) || def.sortable.includes(f.name));
      if (!r.ok) {
        v.add(`data.${f.name}`, r.error);
        continue;
      }
      out[f.name] = r.value;
      if (f.type === "relation") {
        const target = allTypes.find((t) => t.slug === f.target);
        const ids = Array.isArray(r.value) ? (r.value as string[]) : [r.value as string];
        if (!target) v.add(`data.${f.name}`, `${f.name}: the target content type ${f.target ?? ""} no longer exists.`);
        else if (ids.length) relationChecks.push({ field: f.name, target: target.id, ids });
      } else if (f.type === "media") {
        mediaChecks.push({ field: f.name, id: r.value as string });
      }
    }
    for (const f of def.fields) {
      const val = out[f.name];
      if (f.required && (val === undefined || val === "" || (Array.isArray(val) && val.length === 0))) {
        v.add(`data.${f.name}`, `${f.name} is required.`);
      }
    }
    v.throwIfAny();
    if (relationChecks.length) {
      const all = relationChecks.flatMap((c) => c.ids);
      const { rows } = await tx.query<{ id: string; content_type_id: number }>(
        "SELECT id, content_type_id FROM cms_entries WHERE id = ANY($1::uuid[]) AND app_id = $2",
        [all, def.appId],
      );
      const typeOf = new Map(rows.map((r) => [r.id, Number(r.content_type_id)]));
      for (const c of relationChecks) {
        const wrong = c.ids.find((id) => typeOf.get(id) !== c.target);
        if (wrong) v.add(`data.${c.field}`, `${c.field}: ${wrong} is not an entry of the relation's target type.`);
      }
    }
    if (mediaChecks.length) {
      // FOR KEY SHARE: a concurrent DeleteMedia waits for this transaction,
      // then sees the reference and refuses (or this one waits for it and
      // finds no file).
      const { rows } = await tx.query<{ file_id: string }>(
        "SELECT file_id FROM cms_media WHERE file_id = ANY($1::text[]) AND app_id = $2 FOR KEY SHARE",
        [mediaChecks.map((m) => m.id), def.appId],
      );
      const have = new Set(rows.map((r) => r.file_id));
      for (const m of mediaChecks) if (!have.has(m.id)) v.add(`data.${m.field}`, `${m.field}: no uploaded media file ${m.id}.`);
    }
    v.throwIfAny();
    return out;
  }

  async insert(tx: Sql, def: ContentTypeDef, data: Record<string, unknown>, publish: boolean): Promise<EntryRecord> {
    const { rows } = await tx.query<Row>(
      `INSERT INTO cms_entries (id, app_id, content_type_id, data, search_text, published, published_at)
       SELECT $1, $2, $3, d, ${searchTextExpr(def, "d")}, $5, CASE WHEN $5 THEN now() END
         FROM (SELECT $4::jsonb AS d) x
       RETURNING ${COLS}`,
      [randomUUID(), def.appId, def.id, JSON.stringify(data), publish],
    );
    return toRecord(rows[0]!);
  }

  async updateData(tx: Sql, def: ContentTypeDef, id: string, data: Record<string, unknown>): Promise<EntryRecord> {
    const { rows } = await tx.query<Row>(
      `UPDATE cms_entries SET data = x.d, search_text = ${searchTextExpr(def, "x.d")}, updated_at = now()
         FROM (SELECT $2::jsonb AS d) x WHERE id = $1 RETURNING ${COLS.split(", ").map((c) => "cms_entries." + c).join(", ")}`,
      [id, JSON.stringify(data)],
    );
    return toRecord(rows[0]!);
  }

  async setPublished(tx: Sql, id: string, published: boolean): Promise<EntryRecord> {
    // Publishing a published entry keeps its published_at; unpublishing clears it.
    const { rows } = await tx.query<Row>(
      `UPDATE cms_entries SET published = $2,
         published_at = CASE WHEN $2 THEN coalesce(CASE WHEN published THEN published_at END, now()) END,
         updated_at = now()
        WHERE id = $1 RETURNING ${COLS}`,
      [id, published],
    );
    return toRecord(rows[0]!);
  }

  async delete(tx: Sql, id: string): Promise<void> {
    await tx.query("DELETE FROM cms_entries WHERE id = $1", [id]);
  }
}
