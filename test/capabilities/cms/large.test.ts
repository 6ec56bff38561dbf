// A content type with 100,000 published entries: the performance-sensitive
// paths stay fast and use the per-type indexes, totals are exact, and a
// query over the statement timeout answers 504 QUERY_TIMEOUT.
import { afterAll, beforeAll, expect, it } from "vitest";
import type { JsonObject } from "@bufbuild/protobuf";
import { createClient, createRouterTransport } from "@connectrpc/connect";
import { ContentService } from "../../../gen/pulsebase/cms/v1/content_pb.js";
import { createCmsModule } from "../../../src/capabilities/cms/cms-module.js";
import { errorDetail } from "../../../src/kernel/errors.js";
import { seedArticles, TOPICS } from "../../../bench/scenarios/cms-seed.js";
import { codeOf, createApp, createFixture, MEDIA_BASE, reader, type Fixture, type Reader, type TestApp } from "./cms-fixture.js";

const N = 100_000;
let fx: Fixture;
let app: TestApp;
let r: Reader;
let typeId = 0;

beforeAll(async () => {
  fx = await createFixture("postgres");
  app = await createApp(fx.sql);
  typeId = await seedArticles(fx.sql, fx.cms, app.id, N);
  r = reader(fx.content, app.key);
}, 120_000);
afterAll(() => fx.close());

async function timed<T>(fn: () => Promise<T>): Promise<{ ms: number; out: T }> {
  await fn(); // warm
  const t = performance.now();
  const out = await fn();
  return { ms: performance.now() - t, out };
}

async function sqlCount(where: string): Promise<number> {
  const { rows } = await fx.sql.query<{ c: number }>(`SELECT count(*)::int AS c FROM cms_entries WHERE content_type_id = ${typeId} AND published AND ${where}`);
  return rows[0]!.c;
}

it("lists page 1 and deep pages with the exact total", async () => {
  const { ms, out } = await timed(() => r.list("article"));
  expect(out.meta).toEqual({ current_page: 1, per_page: 25, total: N, last_page: N / 25 });
  expect((out.data as JsonObject[])[0]!.title).toMatch(/^Article 100000 about /);
  expect(ms).toBeLessThan(200);
  const deep = await timed(() => r.list("article", { page: "3000", per_page: "20" }));
  expect((deep.out.data as JsonObject[])[0]!.title).toMatch(/^Article 40020 about /);
  expect(deep.ms).toBeLessThan(500);
});

it("filters by eq, range with sort and contains quickly with exact totals", async () => {
  const eq = await timed(() => r.list("article", { "filter[category]": "tech" }));
  expect(eq.out.meta?.total).toBe(N / 5);
  expect(eq.ms).toBeLessThan(300);

  const range = await timed(() => r.list("article", { "filter[views][gt]": "99000", sort: "-views" }));
  expect(range.out.meta?.total).toBe(await sqlCount("(data->>'views')::numeric > 99000"));
  const views = (range.out.data as JsonObject[]).map((e) => e.views as number);
  expect(views).toEqual([...views].sort((a, b) => b - a));
  expect(views[0]).toBeGreaterThan(99_900);
  expect(range.ms).toBeLessThan(300);

  const contains = await timed(() => r.list("article", { "filter[title][contains]": "about glacier" }));
  expect(contains.out.meta?.total).toBe(N / 50);
  expect(contains.ms).toBeLessThan(500);

  const sorted = await timed(() => r.list("article", { sort: "-views" }));
  expect((sorted.out.data as JsonObject[])[0]!.views).toBe(99_999);
  expect(sorted.ms).toBeLessThan(200);
});

it("uses the per-type indexes for filters and sorts", async () => {
  const plan = async (sql: string) =>
    (await fx.sql.query<{ "QUERY PLAN": string }>(`EXPLAIN ${sql}`)).rows.map((x) => x["QUERY PLAN"]).join("\n");
  const base = `SELECT id FROM cms_entries WHERE content_type_id = ${typeId} AND published`;
  expect(await plan(`${base} AND (data->>'category') = 'tech' ORDER BY published_at DESC, id DESC LIMIT 25`)).toMatch(/Index|Bitmap/);
  expect(await plan(`${base} AND ((data->>'views')::numeric) > 99000 ORDER BY ((data->>'views')::numeric) DESC NULLS LAST, id DESC LIMIT 25`)).toMatch(/cms_ix_/);
  expect(await plan(`${base} AND search_text ILIKE '%glacier%'`)).toMatch(/cms_entries_search_trgm_idx/);
});

it("searches a word with whole-word matches first", async () => {
  const s = await timed(() => r.search("article", { q: "volcano" }));
  const total = await sqlCount("search_text ILIKE '%volcano%'");
  expect(s.out.meta).toMatchObject({ total, query: "volcano", per_page: 25 });
  for (const e of s.out.data as JsonObject[]) expect(`${e.title} ${e.body}`).toMatch(/volcano/);
  expect(s.ms).toBeLessThan(1000);
  const two = await timed(() => r.search("article", { q: "Article 4242" }));
  expect((two.out.data as JsonObject[])[0]!.title).toMatch(/^Article 4242 about/);
});

it("shows one entry by id", async () => {
  const title = `Article 77 about ${TOPICS[77 % 50]}`;
  const first = (await r.list("article", { "filter[title]": title })).data as JsonObject[];
  expect(first).toHaveLength(1);
  const s = await timed(() => r.show("article", first[0]!.id as string));
  expect((s.out.data as JsonObject).title).toBe(title);
  expect(s.ms).toBeLessThan(50);
});

it("answers QUERY_TIMEOUT when a computed query runs over the statement timeout", async () => {
  // the same data, served with a 1 ms statement timeout
  const cms = createCmsModule({ sql: fx.sql, config: { mediaBaseUrl: MEDIA_BASE, mediaDir: fx.mediaDir, queryTimeoutMs: 1 } });
  const client = createClient(ContentService, createRouterTransport((router) => router.service(ContentService, cms.contentService)));
  const slow = reader(client, app.key);
  try {
    await slow.search("article", { q: "ar" });
    throw new Error("expected a timeout");
  } catch (err) {
    const d = errorDetail(err as never);
    expect(d?.code).toBe("QUERY_TIMEOUT");
    expect(d?.httpStatus).toBe(504);
  }
  expect(await codeOf(slow.list("article", { "filter[title][contains]": "ar", "filter[views][gt]": "1" }))).toBe("QUERY_TIMEOUT");
  // the connection is healthy afterwards and the timeout is local to the transaction
  expect(await codeOf(r.search("article", { q: "volcano" }))).toBe("ok");
  await cms.stop();
});
