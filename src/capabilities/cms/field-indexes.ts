// Per content type expression indexes, kept in step with the definition: for
// a filterable scalar field a btree (expr, published_at DESC, id DESC) (eq,
// in, ranges, and an eq page in the default order straight from the index),
// for a sortable field btrees (expr, id) and (expr DESC NULLS LAST, id DESC),
// a trigram GIN for filterable text fields (contains, starts_with) and a
// jsonb GIN for multi-value fields (membership).
// All are partial on (content_type_id = N AND published), so each is as small
// as the type's published entries and the planner picks it for that type only.
// They are built outside any transaction (see index-builder.ts): on
// PostgreSQL with CREATE/DROP INDEX CONCURRENTLY, on PGlite plainly.
import { createHash } from "node:crypto";
import type { Sql } from "../../infra/storage/sql.js";
import type { ContentTypeDef } from "./content-type-def.js";
import { arrayExpr, isMulti, scalarExpr } from "./sql-expr.js";

export interface IndexSpec {
  name: string;
  /** everything after the index name: `ON cms_entries ... WHERE ...` */
  body: string;
}

export type IndexedDef = Pick<ContentTypeDef, "id" | "fields" | "filterable" | "sortable">;

export function indexPrefix(typeId: number): string {
  return `cms_ix_${typeId}_`;
}

/** LIKE pattern matching exactly the indexes of one content type. */
function prefixPattern(typeId: number): string {
  return indexPrefix(typeId).replace(/_/g, "\\_") + "%";
}

export function createIndexDdl(spec: IndexSpec, concurrently: boolean): string {
  return `CREATE INDEX${concurrently ? " CONCURRENTLY" : ""} ${spec.name} ${spec.body}`;
}

export function dropIndexDdl(name: string, concurrently: boolean): string {
  return `DROP INDEX${concurrently ? " CONCURRENTLY" : ""} IF EXISTS ${name}`;
}

export function desiredIndexes(def: IndexedDef): IndexSpec[] {
  const out: IndexSpec[] = [];
  const where = `WHERE content_type_id = ${def.id} AND published`;
  const add = (kind: string, body: string) => {
    const name = indexPrefix(def.id) + createHash("sha1").update(kind + body).digest("hex").slice(0, 16);
    out.push({ name, body: `ON cms_entries ${body} ${where}` });
  };
  const names = [...new Set([...def.filterable, ...def.sortable])];
  for (const name of names) {
    const f = def.fields.find((x) => x.name === name);
    if (!f) continue;
    if (isMulti(f)) {
      add("gin", `USING gin (${arrayExpr(f)} jsonb_path_ops)`);
      continue;
    }
    // filter: eq/in/ranges on the leading column, already in the default
    // order (newest first) for the page
    if (def.filterable.includes(name)) add("btree_filter", `(${scalarExpr(f)}, published_at DESC, id DESC)`);
    // sort both ways with a stable tie-break; descending keeps entries
    // without a value last (NULLS LAST)
    if (def.sortable.includes(name)) {
      add("btree", `(${scalarExpr(f)}, id)`);
      add("btree_desc", `(${scalarExpr(f)} DESC NULLS LAST, id DESC)`);
    }
    if (def.filterable.includes(name) && (f.type === "text" || f.type === "email" || f.type === "url")) {
      add("trgm", `USING gin (${scalarExpr(f)} gin_trgm_ops)`);
    }
  }
  return out;
}

/**
 * The per-field indexes that exist for these content types, by name, with
 * pg_index.indisvalid (false: a concurrent build in progress or one that
 * failed and left an INVALID index behind).
 */
export async function existingIndexes(sql: Sql, typeIds: readonly number[]): Promise<Map<string, boolean>> {
  if (typeIds.length === 0) return new Map();
  const { rows } = await sql.query<{ name: string; valid: boolean }>(
    `SELECT c.relname AS name, i.indisvalid AS valid
       FROM pg_index i
       JOIN pg_class c ON c.oid = i.indexrelid
       JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = current_schema() AND c.relname LIKE ANY($1::text[])`,
    [typeIds.map(prefixPattern)],
  );
  return new Map(rows.map((r) => [r.name, r.valid]));
}

/** Per content type: whether every index its definition needs exists and is valid. */
export async function indexesReady(sql: Sql, defs: readonly IndexedDef[]): Promise<Map<number, boolean>> {
  const have = await existingIndexes(sql, defs.map((d) => d.id));
  return new Map(defs.map((d) => [d.id, desiredIndexes(d).every((w) => have.get(w.name) === true)]));
}
