// Content API through the whole server on 10,000 published articles (title
// text, body rich_text, views number, published date, category text, plus an
// author relation for populate), each request for the run's duration, with
// the Strapi 5 figures of ../shared/perf-anchors.md in the note.
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createCmsModule } from "../../src/capabilities/cms/cms-module.js";
import { createPgSql } from "../../src/infra/storage/pg-sql.js";
import { h1Load, type Row } from "../lib.js";
import type { BenchContext } from "../run.js";
import { seedArticles } from "./cms-seed.js";

export async function cmsScenarios(ctx: BenchContext): Promise<Row[]> {
  const { appId, appKey } = await ctx.newConsumer("cms");
  // Seed straight into the server's schema (one INSERT ... SELECT).
  const sql = createPgSql({ connectionString: ctx.databaseUrl, schema: ctx.schema, max: 2 });
  const cms = createCmsModule({ sql, config: { mediaBaseUrl: ctx.https, mediaDir: await mkdtemp(join(tmpdir(), "bench-media-")) } });
  await seedArticles(sql, cms, Number(appId), 10_000, { authors: 50 });
  const { rows: ids } = await sql.query<{ id: string }>(
    `SELECT e.id FROM cms_entries e JOIN cms_content_types t ON t.id = e.content_type_id WHERE t.app_id = $1 AND t.slug = 'article' ORDER BY e.id LIMIT 1`,
    [Number(appId)],
  );
  await sql.close();
  const id = ids[0]!.id;
  const base = ctx.baseline("bare Fastify GET REST h1");
  const cases: { name: string; path: string; strapi?: number }[] = [
    { name: "(a) list page 1 (cached)", path: "/api/v1/article", strapi: 60 },
    { name: "(a') list page 2, per_page=25 (computed)", path: "/api/v1/article?page=2&per_page=25", strapi: 60 },
    { name: "(b) eq filter on category (cached)", path: "/api/v1/article?filter[category]=news", strapi: 68 },
    { name: "(b') eq filter + per_page (computed)", path: "/api/v1/article?filter[category]=news&per_page=25", strapi: 68 },
    { name: "(c) views gt + sort -views (computed)", path: "/api/v1/article?filter[views][gt]=50000&sort=-views", strapi: 45 },
    { name: "(d) show by id (cached)", path: `/api/v1/article/${id}`, strapi: 170 },
    { name: "show with populate (computed)", path: `/api/v1/article/${id}?populate=author` },
    { name: "(e) search for a word (computed)", path: "/api/v1/article/search?q=volcano", strapi: 36 },
  ];
  const out: Row[] = [];
  for (const c of cases) {
    const r = await h1Load({ url: ctx.https + c.path, headers: { "x-app-key": appKey }, durationSec: ctx.durationSec });
    out.push({
      scenario: `CMS ${c.name}`,
      transport: "REST h1",
      baseline: "bare Fastify GET REST h1",
      result: r,
      note: c.strapi ? `${(r.rps / c.strapi).toFixed(0)}x Strapi (${c.strapi}/s)` : "",
    });
  }
  void base;
  return out;
}
