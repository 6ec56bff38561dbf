// CMS read API benchmark scenarios (perf anchors: Strapi 5 on PostgreSQL,
// 10,000 published articles; target 5x Strapi on computed lists and search).
//
//   setupCmsBench(env, opts)   the fixture the HTTP transports reuse: a
//                              migrated database with one application whose
//                              content type `article` holds `entries`
//                              published entries (title text, body rich_text,
//                              views number, published date, category text,
//                              author relation), the ContentService impl,
//                              the app key, `requests` (one named request per
//                              scenario, each with its REST path and query and
//                              a function calling the service impl), close().
//   benchCms(env, opts)        runs every request through the service
//                              implementation (no transport) with `concurrency`
//                              in flight; prints and returns req/s and mean
//                              microseconds per request, and the Strapi anchor.
//
// Standalone: node --import tsx bench/scenarios/cms.ts
//   env DATABASE_URL (PostgreSQL; PGlite when unset).
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { create } from "@bufbuild/protobuf";
import { createHandlerContext, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import {
  ContentService,
  GetEntryRequestSchema,
  ListEntriesRequestSchema,
  SearchEntriesRequestSchema,
} from "../../gen/pulsebase/cms/v1/content_pb.js";
import { createCmsModule, type Cms } from "../../src/capabilities/cms/cms-module.js";
import { migrate } from "../../src/infra/storage/migrate.js";
import { createPgSql } from "../../src/infra/storage/pg-sql.js";
import { createScratchSchema, dropScratchSchema } from "../../src/infra/storage/scratch-schema.js";
import { createPgliteSql } from "../../src/infra/storage/pglite-sql.js";
import type { Sql } from "../../src/infra/storage/sql.js";
import { seedArticles } from "./cms-seed.js";

export interface CmsBenchEnv {
  /** PostgreSQL (a private schema, dropped after); PGlite when unset. */
  databaseUrl?: string;
}

export interface CmsBenchOptions {
  /** published articles (default 10,000) */
  entries?: number;
  /** requests per scenario (default 2,000) */
  requests?: number;
  /** requests in flight (default 16) */
  concurrency?: number;
  log?: (line: string) => void;
}

export interface CmsBenchRequest {
  name: string;
  /** GET path relative to the server root, with its query string */
  path: string;
  /** req/s of Strapi on the same request (perf-anchors.md), when measured */
  strapiRps?: number;
  /** whether the request is served from the response cache (not metered) */
  cached: boolean;
  /** calls the service implementation once */
  call(i: number): unknown;
}

export interface CmsBenchFixture {
  service: ServiceImpl<typeof ContentService>;
  cms: Cms;
  sql: Sql;
  appKey: string;
  /** ids of the published articles */
  ids: string[];
  requests: CmsBenchRequest[];
  /** A HandlerContext with X-App-Key set. */
  context(method: keyof typeof ContentService.method): HandlerContext;
  close(): Promise<void>;
}

export async function setupCmsBench(env: CmsBenchEnv = {}, opts: CmsBenchOptions = {}): Promise<CmsBenchFixture> {
  const entries = opts.entries ?? 10_000;
  let sql: Sql;
  let dropSchema = async () => {};
  if (env.databaseUrl) {
    const url = env.databaseUrl;
    const schema = await createScratchSchema(url, "bench_cms");
    sql = createPgSql({ connectionString: url, schema, max: 8 });
    dropSchema = () => dropScratchSchema(url, schema);
  } else {
    sql = await createPgliteSql();
  }
  await migrate(sql);
  const mediaDir = await mkdtemp(join(tmpdir(), "pb-bench-cms-"));
  const cms = createCmsModule({ sql, config: { mediaBaseUrl: "https://media.bench", mediaDir } });
  const team = Number((await sql.query<{ id: number }>("INSERT INTO teams (name) VALUES ('bench') RETURNING id")).rows[0]!.id);
  const appKey = `ak_${randomBytes(12).toString("hex")}`;
  const appId = Number(
    (await sql.query<{ id: number }>("INSERT INTO apps (team_id, name, app_key, plan) VALUES ($1, 'bench', $2, '{}') RETURNING id", [team, appKey]))
      .rows[0]!.id,
  );
  const typeId = await seedArticles(sql, cms, appId, entries, { authors: 100 });
  const ids = (await sql.query<{ id: string }>(`SELECT id FROM cms_entries WHERE content_type_id = ${typeId} ORDER BY id`)).rows.map((r) => r.id);
  const service = cms.contentService;
  const context = (method: keyof typeof ContentService.method) =>
    createHandlerContext({
      service: ContentService,
      method: ContentService.method[method],
      protocolName: "bench",
      requestMethod: "GET",
      url: "/api/v1",
      requestHeader: { "x-app-key": appKey },
    });
  const list = (query: Record<string, string>) => () =>
    service.listEntries!(create(ListEntriesRequestSchema, { contentType: "article", query }), context("listEntries"));
  const qs = (q: Record<string, string>) => {
    const s = new URLSearchParams(q).toString().replace(/%5B/g, "[").replace(/%5D/g, "]");
    return s ? `?${s}` : "";
  };
  const listReq = (name: string, query: Record<string, string>, cached: boolean, strapiRps?: number): CmsBenchRequest => ({
    name, path: `/api/v1/article${qs(query)}`, cached, strapiRps, call: list(query),
  });
  const requests: CmsBenchRequest[] = [
    listReq("list page 1 (cached)", {}, true, 60),
    listReq("list page 1 (computed: per_page sent)", { per_page: "25" }, false, 60),
    listReq("eq filter on category (cached)", { "filter[category]": "tech" }, true, 68),
    listReq("eq filter on category (computed: per_page sent)", { "filter[category]": "tech", per_page: "25" }, false, 68),
    listReq("views gt 50000, sort -views", { "filter[views][gt]": "50000", sort: "-views" }, false, 45),
    {
      name: "show by id (cached)",
      path: `/api/v1/article/${ids[0]}`,
      cached: true,
      strapiRps: 170,
      call: (i) => service.getEntry!(create(GetEntryRequestSchema, { contentType: "article", uuid: ids[i % ids.length]!, query: {} }), context("getEntry")),
    },
    {
      name: "show with populate",
      path: `/api/v1/article/${ids[0]}?populate=author`,
      cached: false,
      call: (i) =>
        service.getEntry!(create(GetEntryRequestSchema, { contentType: "article", uuid: ids[i % ids.length]!, query: { populate: "author" } }), context("getEntry")),
    },
    {
      name: "search for a word",
      path: `/api/v1/article/search?q=volcano`,
      cached: false,
      strapiRps: 36,
      call: () => service.searchEntries!(create(SearchEntriesRequestSchema, { contentType: "article", query: { q: "volcano" } }), context("searchEntries")),
    },
  ];
  return {
    service, cms, sql, appKey, ids, requests, context,
    async close() {
      await cms.stop();
      await sql.close();
      await dropSchema();
      await rm(mediaDir, { recursive: true, force: true });
    },
  };
}

export interface CmsBenchResult {
  name: string;
  rps: number;
  meanUs: number;
  strapiRps?: number;
}

async function run(n: number, inFlight: number, fn: (i: number) => unknown): Promise<number> {
  const t = process.hrtime.bigint();
  let next = 0;
  await Promise.all(Array.from({ length: inFlight }, async () => {
    while (next < n) await fn(next++);
  }));
  return Number(process.hrtime.bigint() - t) / 1e9;
}

export async function benchCms(env: CmsBenchEnv = {}, opts: CmsBenchOptions = {}): Promise<CmsBenchResult[]> {
  const n = opts.requests ?? 2000;
  const concurrency = opts.concurrency ?? 16;
  const log = opts.log ?? ((l: string) => console.log(l));
  const fx = await setupCmsBench(env, opts);
  try {
    const out: CmsBenchResult[] = [];
    log(`cms: ${fx.ids.length} published articles, ${concurrency} in flight, through the service implementation`);
    log("  request                                              req/s   mean us   Strapi   x Strapi");
    for (const r of fx.requests) {
      await run(Math.min(200, n), concurrency, r.call); // warm (connections, plans, cache)
      const sec = Math.min(await run(n, concurrency, r.call), await run(n, concurrency, r.call));
      const rps = n / sec;
      out.push({ name: r.name, rps, meanUs: (sec / n) * 1e6 * concurrency, strapiRps: r.strapiRps });
      const ratio = r.strapiRps ? (rps / r.strapiRps).toFixed(1).padStart(8) : "       -";
      log(`  ${r.name.padEnd(50)} ${rps.toFixed(0).padStart(7)} ${((sec / n) * 1e6 * concurrency).toFixed(0).padStart(9)} ${String(r.strapiRps ?? "-").padStart(8)} ${ratio}`);
    }
    return out;
  } finally {
    await fx.close();
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  await benchCms({ databaseUrl: process.env.DATABASE_URL });
}
