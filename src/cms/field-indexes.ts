// Per content type expression indexes, created when a content type is saved:
// for a filterable scalar field a btree (expr, published_at DESC, id DESC)
// (eq, in, ranges, and an eq page in the default order straight from the
// index), for a sortable field btrees (expr, id) and (expr DESC NULLS LAST,
// id DESC), a trigram GIN for filterable text fields (contains, starts_with)
// and a jsonb GIN for multi-value fields (membership).
// All are partial on (content_type_id = N AND published), so each is as small
// as the type's published entries and the planner picks it for that type only.
import { createHash } from "node:crypto";
import type { Sql } from "../storage/sql.js";
import type { ContentTypeDef } from "./content-type-def.js";
import { arrayExpr, isMulti, scalarExpr } from "./sql-expr.js";

interface IndexSpec {
  name: string;
  ddl: string;
}

export function indexPrefix(typeId: number): string {
  return `cms_ix_${typeId}_`;
}

export function desiredIndexes(def: Pick<ContentTypeDef, "id" | "fields" | "filterable" | "sortable">): IndexSpec[] {
  const out: IndexSpec[] = [];
  const where = `WHERE content_type_id = ${def.id} AND published`;
  const add = (kind: string, body: string) => {
    const name = indexPrefix(def.id) + createHash("sha1").update(kind + body).digest("hex").slice(0, 16);
    out.push({ name, ddl: `CREATE INDEX ${name} ON cms_entries ${body} ${where}` });
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

/** Creates missing and drops stale indexes of one content type. */
export async function syncIndexes(
  tx: Sql,
  def: Pick<ContentTypeDef, "id" | "fields" | "filterable" | "sortable">,
): Promise<void> {
  const want = desiredIndexes(def);
  const { rows } = await tx.query<{ indexname: string }>(
    "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND indexname LIKE $1",
    [indexPrefix(def.id).replace(/_/g, "\\_") + "%"],
  );
  const have = new Set(rows.map((r) => r.indexname));
  const wanted = new Set(want.map((w) => w.name));
  for (const name of have) if (!wanted.has(name)) await tx.exec(`DROP INDEX IF EXISTS ${name}`);
  for (const w of want) if (!have.has(w.name)) await tx.exec(w.ddl);
}

export async function dropIndexes(tx: Sql, typeId: number): Promise<void> {
  await syncIndexes(tx, { id: typeId, fields: [], filterable: [], sortable: [] });
}
