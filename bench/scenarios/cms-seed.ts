// Bulk-loads a content type of published articles for the large tests and the
// bench: one INSERT ... SELECT generate_series, with the search text computed
// by the same SQL expression the service uses.
import { create } from "@bufbuild/protobuf";
import { createHandlerContext } from "@connectrpc/connect";
import { CmsService, CreateContentTypeRequestSchema } from "../../gen/pulsebase/admin/v1/cms_pb.js";
import type { Cms } from "../../src/capabilities/cms/cms-module.js";
import { searchTextExpr } from "../../src/capabilities/cms/sql-expr.js";
import type { Sql } from "../../src/infra/storage/sql.js";

export const TOPICS = [
  "galaxy", "ocean", "forest", "market", "engine", "garden", "planet", "river", "mountain", "city",
  "music", "science", "history", "energy", "climate", "robot", "coffee", "travel", "health", "football",
  "design", "winter", "summer", "desert", "island", "bridge", "camera", "letter", "dragon", "castle",
  "pepper", "silver", "violet", "thunder", "harbor", "meadow", "canyon", "glacier", "volcano", "prairie",
  "lantern", "compass", "orchard", "quartz", "saffron", "tundra", "zephyr", "nebula", "comet", "aurora",
];
function ctxOf(method: keyof typeof CmsService.method) {
  return createHandlerContext({ service: CmsService, method: CmsService.method[method], protocolName: "seed", requestMethod: "POST", url: "/seed" });
}

const FIELDS: { name: string; type: string; required?: boolean; target?: string }[] = [
  { name: "title", type: "text", required: true },
  { name: "body", type: "rich_text" },
  { name: "views", type: "number" },
  { name: "published", type: "date" },
  { name: "category", type: "text" },
];

export const CATEGORIES = ["news", "tech", "sport", "life", "science"];

/**
 * Creates content type `slug` (title text, body rich_text, views number,
 * published date, category text) in the app and loads n published entries.
 * Entry i: views = (i * 7919) % 100000, category = CATEGORIES[i % 5],
 * title "Article <i> about <TOPICS[i % 50]>", body mentions TOPICS[(i*7) % 50]
 * and TOPICS[(i*13) % 50].
 */
export async function seedArticles(
  sql: Sql,
  cms: Cms,
  appId: number,
  n: number,
  opts: { slug?: string; authors?: number } = {},
): Promise<number> {
  const slug = opts.slug ?? "article";
  const fields = [...FIELDS];
  let authorIds: string[] = [];
  if (opts.authors) {
    // an author content type (name text) with `authors` published entries;
    // entry i of the articles points at author i % authors
    await cms.adminService.createContentType!(
      create(CreateContentTypeRequestSchema, {
        appId: BigInt(appId),
        contentType: { slug: `${slug}_author`, name: "Author", fields: [{ name: "name", type: "text" }], searchableFields: ["name"] },
      }),
      ctxOf("createContentType"),
    );
    const { rows } = await sql.query<{ id: string }>(
      `INSERT INTO cms_entries (id, app_id, content_type_id, data, search_text, published, published_at)
       SELECT gen_random_uuid(), $1, (SELECT id FROM cms_content_types WHERE app_id = $1 AND slug = $2),
              jsonb_build_object('name', 'Author ' || i), 'Author ' || i, true, now()
         FROM generate_series(1, $3::int) AS i
       RETURNING id`,
      [appId, `${slug}_author`, opts.authors],
    );
    authorIds = rows.map((r) => r.id);
    fields.push({ name: "author", type: "relation", target: `${slug}_author` } as (typeof FIELDS)[number]);
  }
  const t = await cms.adminService.createContentType!(
    create(CreateContentTypeRequestSchema, {
      appId: BigInt(appId),
      contentType: {
        slug,
        name: "Article",
        fields,
        filterableFields: ["title", "views", "published", "category"],
        sortableFields: ["title", "views", "published"],
        searchableFields: ["title", "body"],
        defaultPerPage: 25,
      },
    }),
    ctxOf("createContentType"),
  );
  const typeId = Number(t.id);
  const def = { fields: [{ name: "title", type: "text" as const, required: true, label: "" }, { name: "body", type: "rich_text" as const, required: false, label: "" }], searchable: ["title", "body"] };
  await sql.query(
    `INSERT INTO cms_entries (id, app_id, content_type_id, data, search_text, published, created_at, updated_at, published_at)
     SELECT gen_random_uuid(), $1, $2, d, ${searchTextExpr(def, "d")}, true, ts, ts, ts
       FROM (
         SELECT jsonb_build_object(
                  'title', 'Article ' || i || ' about ' || ($4::text[])[1 + i % 50],
                  'body', '<p>Some <b>rich</b> text on ' || ($4::text[])[1 + (i * 7) % 50] || ' and '
                          || ($4::text[])[1 + (i * 13) % 50] || '.</p>',
                  'views', (i::bigint * 7919) % 100000,
                  'published', to_char(date '2020-01-01' + (i % 1500), 'YYYY-MM-DD'),
                  'category', ($5::text[])[1 + i % 5])
                || CASE WHEN cardinality($6::text[]) > 0
                        THEN jsonb_build_object('author', ($6::text[])[1 + i % cardinality($6::text[])]) ELSE '{}' END AS d,
                timestamptz '2024-01-01 00:00:00+00' + i * interval '1 second' AS ts
           FROM generate_series(1, $3::int) AS i
       ) s`,
    [appId, typeId, n, TOPICS, CATEGORIES, authorIds],
  );
  await sql.exec("ANALYZE cms_entries");
  cms.invalidate(appId);
  return typeId;
}
