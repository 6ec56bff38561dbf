// Content types in PostgreSQL: definitions and the effect of definition
// changes on stored entries (renames move values, removed fields drop them,
// searchable changes recompute the search text). The per-field indexes are
// built after the change commits, outside its transaction (index-builder.ts).
import { appError, validationError } from "../../kernel/errors.js";
import type { Sql } from "../../infra/storage/sql.js";
import type { ContentTypeDef, ContentTypeInputData } from "./content-type-def.js";
import { validateContentTypeInput } from "./content-type-def.js";
import { MAX_INDEXED_TEXT_LENGTH, type FieldDef } from "./field-types.js";
import { searchTextExpr } from "./sql-expr.js";

interface Row {
  id: number;
  app_id: number;
  slug: string;
  name: string;
  description: string;
  icon: string;
  fields: FieldDef[];
  filterable_fields: string[];
  sortable_fields: string[];
  searchable_fields: string[];
  default_sort: string;
  default_per_page: number;
  created_at: Date;
  updated_at: Date;
}

const DEFINITION_LOCK = 7_020_400; // arbitrary, stable

const COLS = `id, app_id, slug, name, description, icon, fields, filterable_fields, sortable_fields,
  searchable_fields, default_sort, default_per_page, created_at, updated_at`;

function toDef(r: Row): ContentTypeDef {
  return {
    id: Number(r.id),
    appId: Number(r.app_id),
    slug: r.slug,
    name: r.name,
    description: r.description,
    icon: r.icon,
    fields: r.fields,
    filterable: r.filterable_fields,
    sortable: r.sortable_fields,
    searchable: r.searchable_fields,
    defaultSort: r.default_sort,
    defaultPerPage: r.default_per_page,
    createdAt: new Date(r.created_at),
    updatedAt: new Date(r.updated_at),
  };
}

const stripInput = (fields: ContentTypeInputData["fields"]): FieldDef[] =>
  fields.map((f) => {
    const out: FieldDef = { name: f.name, type: f.type, required: f.required, label: f.label };
    if (f.options) out.options = f.options;
    if (f.multi !== undefined) out.multi = f.multi;
    if (f.target !== undefined) out.target = f.target;
    return out;
  });

export class ContentTypeStore {
  constructor(private readonly sql: Sql) {}

  async list(appId: number, tx: Sql = this.sql): Promise<ContentTypeDef[]> {
    const { rows } = await tx.query<Row>(`SELECT ${COLS} FROM cms_content_types WHERE app_id = $1 ORDER BY slug`, [appId]);
    return rows.map(toDef);
  }

  async get(appId: number, slug: string, tx: Sql = this.sql, lock = false): Promise<ContentTypeDef> {
    const { rows } = await tx.query<Row>(
      `SELECT ${COLS} FROM cms_content_types WHERE app_id = $1 AND slug = $2${lock ? " FOR UPDATE" : ""}`,
      [appId, slug],
    );
    if (!rows[0]) throw appError("not_found", `Content type ${slug} does not exist.`);
    return toDef(rows[0]);
  }

  async getById(id: number, tx: Sql = this.sql): Promise<ContentTypeDef | undefined> {
    const { rows } = await tx.query<Row>(`SELECT ${COLS} FROM cms_content_types WHERE id = $1`, [id]);
    return rows[0] ? toDef(rows[0]) : undefined;
  }

  async create(appId: number, input: ContentTypeInputData): Promise<ContentTypeDef> {
    return this.sql.transaction(async (tx) => {
      await this.lockApp(tx, appId);
      const others = await this.list(appId, tx);
      const clean = validateContentTypeInput(input, new Set(others.map((o) => o.slug)));
      if (others.some((o) => o.slug === clean.slug)) throw appError("conflict", `Content type ${clean.slug} already exists.`);
      const { rows } = await tx.query<Row>(
        `INSERT INTO cms_content_types (app_id, slug, name, description, icon, fields, filterable_fields,
           sortable_fields, searchable_fields, default_sort, default_per_page)
         VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8, $9, $10, $11) RETURNING ${COLS}`,
        [appId, clean.slug, clean.name, clean.description, clean.icon, JSON.stringify(stripInput(clean.fields)),
          clean.filterable, clean.sortable, clean.searchable, clean.defaultSort, clean.defaultPerPage],
      );
      return toDef(rows[0]!);
    });
  }

  /** Replaces a definition; returns the old and the new one. */
  async update(appId: number, slug: string, input: ContentTypeInputData): Promise<{ before: ContentTypeDef; after: ContentTypeDef }> {
    return this.sql.transaction(async (tx) => {
      await this.lockApp(tx, appId);
      const before = await this.get(appId, slug, tx, true);
      const others = (await this.list(appId, tx)).filter((o) => o.id !== before.id);
      const clean = validateContentTypeInput(input, new Set(others.map((o) => o.slug)));
      if (clean.slug !== slug && others.some((o) => o.slug === clean.slug)) {
        throw appError("conflict", `Content type ${clean.slug} already exists.`);
      }
      // Match new fields to old ones: by previous_name (rename), else by name.
      const oldByName = new Map(before.fields.map((f) => [f.name, f]));
      const renames: [string, string][] = [];
      const kept = new Set<string>();
      clean.fields.forEach((f, i) => {
        const from = f.previousName && f.previousName !== f.name ? f.previousName : f.name;
        const old = oldByName.get(from);
        if (f.previousName && f.previousName !== f.name && !old) {
          throw appError("validation_failed", `content_type.fields.${i}.previous_name: no field ${f.previousName} to rename.`, {
            fields: { [`content_type.fields.${i}.previous_name`]: [`no field ${f.previousName} to rename.`] },
          });
        }
        if (old) {
          if (old.type !== f.type) {
            throw appError("validation_failed", `content_type.fields.${i}.type: a field's type cannot change; remove it and add a new field.`, {
              fields: { [`content_type.fields.${i}.type`]: ["a field's type cannot change; remove it and add a new field."] },
            });
          }
          kept.add(from);
          if (from !== f.name) renames.push([from, f.name]);
        }
      });
      const removed = before.fields.map((f) => f.name).filter((n) => !kept.has(n));
      const { rows } = await tx.query<Row>(
        `UPDATE cms_content_types SET slug = $2, name = $3, description = $4, icon = $5, fields = $6::jsonb,
           filterable_fields = $7, sortable_fields = $8, searchable_fields = $9, default_sort = $10,
           default_per_page = $11, updated_at = now()
         WHERE id = $1 RETURNING ${COLS}`,
        [before.id, clean.slug, clean.name, clean.description, clean.icon, JSON.stringify(stripInput(clean.fields)),
          clean.filterable, clean.sortable, clean.searchable, clean.defaultSort, clean.defaultPerPage],
      );
      const after = toDef(rows[0]!);
      // Stored values follow the definition, in one set-based statement.
      let dataExpr = "data";
      for (const name of removed) dataExpr = `(${dataExpr} - '${name}')`;
      for (const [from, to] of renames) {
        dataExpr = `(CASE WHEN data ? '${from}' THEN (${dataExpr} - '${from}') || jsonb_build_object('${to}', data->'${from}') ELSE ${dataExpr} END)`;
      }
      const searchChanged =
        JSON.stringify(before.searchable) !== JSON.stringify(after.searchable) || renames.length > 0 || removed.length > 0;
      if (dataExpr !== "data" || searchChanged) {
        await tx.query(
          `UPDATE cms_entries SET data = d.nd, search_text = ${searchTextExpr(after, "d.nd")}
             FROM (SELECT id, ${dataExpr} AS nd FROM cms_entries WHERE content_type_id = $1) d
            WHERE cms_entries.id = d.id`,
          [after.id],
        );
      }
      // Values of text fields that become indexed must fit a btree entry.
      const newlyIndexed = after.fields.filter(
        (f) =>
          (f.type === "text" || f.type === "email" || f.type === "url") &&
          (after.filterable.includes(f.name) || after.sortable.includes(f.name)),
      );
      for (const f of newlyIndexed) {
        const { rows: long } = await tx.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM cms_entries WHERE content_type_id = $1 AND length(data->>'${f.name}') > $2`,
          [after.id, MAX_INDEXED_TEXT_LENGTH],
        );
        if (long[0] && long[0].n > 0) {
          const i = clean.fields.findIndex((x) => x.name === f.name);
          throw validationError({
            [`content_type.fields.${i}`]: [
              `${long[0].n} entries hold ${f.name} values over ${MAX_INDEXED_TEXT_LENGTH} characters; a filterable or sortable ${f.type} field allows at most ${MAX_INDEXED_TEXT_LENGTH}.`,
            ],
          });
        }
      }
      // Relations of other types follow a slug rename.
      if (clean.slug !== slug) {
        for (const o of others) {
          if (!o.fields.some((f) => f.type === "relation" && f.target === slug)) continue;
          const fields = o.fields.map((f) => (f.type === "relation" && f.target === slug ? { ...f, target: clean.slug } : f));
          await tx.query("UPDATE cms_content_types SET fields = $2::jsonb WHERE id = $1", [o.id, JSON.stringify(fields)]);
        }
      }
      return { before, after };
    });
  }

  async delete(appId: number, slug: string): Promise<ContentTypeDef> {
    return this.sql.transaction(async (tx) => {
      await this.lockApp(tx, appId);
      const def = await this.get(appId, slug, tx, true);
      const refs = (await this.list(appId, tx)).filter(
        (o) => o.id !== def.id && o.fields.some((f) => f.type === "relation" && f.target === slug),
      );
      if (refs.length) {
        throw appError("failed_precondition", `Content type ${slug} is the target of relations in: ${refs.map((r) => r.slug).join(", ")}.`);
      }
      await tx.query("DELETE FROM cms_content_types WHERE id = $1", [def.id]);
      return def;
    });
  }

  // Serialises all definition changes (slug uniqueness, relation targets);
  // readers and entry writes are not blocked. Index builds are serialised
  // separately, after commit (index-builder.ts). Definition changes are rare.
  private async lockApp(tx: Sql, appId: number): Promise<void> {
    await tx.query("SELECT pg_advisory_xact_lock($1)", [DEFINITION_LOCK]);
    const { rows } = await tx.query("SELECT id FROM apps WHERE id = $1", [appId]);
    if (!rows[0]) throw appError("not_found", `Application ${appId} does not exist.`);
  }
}
