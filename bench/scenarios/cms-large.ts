// The CMS at 1,000,000 published articles (opt-in suite: --only cms-large):
// each computed request shape timed sequentially through the server, to show
// how far below the 5 s query timeout it stays.
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createCmsModule } from "../../src/capabilities/cms/cms-module.js";
import { createPgSql } from "../../src/infra/storage/pg-sql.js";
import { seqLoad, type Row } from "../lib.js";
import type { BenchContext } from "../run.js";
import { seedArticles } from "./cms-seed.js";

export async function cmsLargeScenarios(ctx: BenchContext): Promise<Row[]> {
  const { appId, appKey } = await ctx.newConsumer("cms-large");
  const sql = createPgSql({ connectionString: ctx.databaseUrl, schema: ctx.schema, max: 2 });
  const cms = createCmsModule({ sql, config: { mediaBaseUrl: ctx.https, mediaDir: await mkdtemp(join(tmpdir(), "bench-media-")) } });
  const t0 = performance.now();
  await seedArticles(sql, cms, Number(appId), 1_000_000);
  await sql.query("ANALYZE cms_entries");
  const seedSec = (performance.now() - t0) / 1000;
  await sql.close();
  const cases = [
    { name: "list page 2, per_page=25", path: "/api/v1/article?page=2&per_page=25" },
    { name: "eq filter + per_page", path: "/api/v1/article?filter[category]=news&per_page=25" },
    { name: "views gt + sort -views", path: "/api/v1/article?filter[views][gt]=50000&sort=-views" },
    { name: "search for a word", path: "/api/v1/article/search?q=volcano" },
  ];
  const rows: Row[] = [];
  for (const c of cases) {
    rows.push({
      scenario: `CMS 1M ${c.name}`,
      transport: "REST h1, 1 in flight",
      result: await seqLoad({ url: ctx.https + c.path, headers: { "x-app-key": appKey }, durationSec: ctx.durationSec }),
      note: rows.length === 0 ? `seeded 1,000,000 entries in ${seedSec.toFixed(0)} s` : "",
    });
  }
  return rows;
}
