// A content type with 100,000 published entries: the performance-sensitive
// paths stay fast and use the per-type indexes, totals are exact, and a
// query over the statement timeout answers 504 QUERY_TIMEOUT. "Fast" is
// asserted as the plan PostgreSQL makes for the statements the service ran
// (recorded through its Sql): an index, never a sequential scan of
// cms_entries; timings belong to the bench.
import { afterAll, beforeAll, expect, it } from "vitest";
import type { JsonObject } from "@bufbuild/protobuf";
import { createClient, createRouterTransport } from "@connectrpc/connect";
import { ContentService } from "../../../gen/pulsebase/cms/v1/content_pb.js";
import { createCmsModule } from "../../../src/capabilities/cms/cms-module.js";
import { errorDetail } from "../../../src/kernel/errors.js";
import { seedArticles, TOPICS } from "../../../bench/scenarios/cms-seed.js";
import type { Sql } from "../../../src/infra/storage/sql.js";
import { codeOf, createApp, createFixture, MEDIA_BASE, reader, type Fixture, type Reader, type TestApp } from "./cms-fixture.js";

const N = 100_000;
let fx: Fixture;
let app: TestApp;
let r: Reader;
let typeId = 0;

/** Statements on cms_entries the recording module ran, with the settings of their transaction. */
interface Ran {
  text: string;
  params: readonly unknown[];
  seqscanOff: boolean;
}
let ran: Ran[] = [];
/** The Sql the recording module uses: the fixture's, noting each statement on cms_entries. */
function recording(inner: Sql, seqscanOff = false): Sql {
  let off = seqscanOff;
  return {
    kind: inner.kind,
    maxConnections: inner.maxConnections,
    poolStats: inner.poolStats?.bind(inner),
    query(text: string, params?: readonly unknown[]) {
      // the statements of the request (the app's state, loaded once and cached, aside)
      if (/\bcms_entries\b/.test(text) && !/\bFROM cms_content_types\b/.test(text)) ran.push({ text, params: params ?? [], seqscanOff: off });
      return inner.query(text, params);
    },
    exec(text: string) {
      if (/enable_seqscan = off/.test(text)) off = true;
      return inner.exec(text);
    },
    transaction: (fn) => inner.transaction((tx) => fn(recording(tx, off))),
    close: () => inner.close(),
  } as Sql;
}
let recCms: ReturnType<typeof createCmsModule>;
let rec: Reader;

beforeAll(async () => {
  fx = await createFixture("postgres");
  app = await createApp(fx.sql);
  typeId = await seedArticles(fx.sql, fx.cms, app.id, N);
  r = reader(fx.content, app.key);
  recCms = createCmsModule({ sql: recording(fx.sql), config: { mediaBaseUrl: MEDIA_BASE, mediaDir: fx.mediaDir } });
  rec = reader(createClient(ContentService, createRouterTransport((router) => router.service(ContentService, recCms.contentService))), app.key);
}, 120_000);
afterAll(async () => {
  await recCms?.stop();
  await fx.close();
});

/** The plan PostgreSQL makes for a statement the service ran (same parameters, same settings). */
async function planOf(s: Ran): Promise<string> {
  return fx.sql.transaction(async (tx) => {
    if (s.seqscanOff) await tx.exec("SET LOCAL enable_seqscan = off");
    const { rows } = await tx.query<{ "QUERY PLAN": string }>(`EXPLAIN ${s.text}`, s.params);
    return rows.map((x) => x["QUERY PLAN"]).join("\n");
  });
}

/**
 * Runs the call through the recording module (its first run: computed, not
 * from the response cache) and returns its answer and the plans of the
 * statements it ran on cms_entries: each reads cms_entries through an index,
 * none scans the table.
 */
async function planned<T>(fn: (x: Reader) => Promise<T>): Promise<{ out: T; plans: string[] }> {
  ran = [];
  const out = await fn(rec);
  const statements = ran;
  expect(statements.length).toBeGreaterThan(0);
  const plans: string[] = [];
  for (const st of statements) {
    const plan = await planOf(st);
    expect(plan, st.text).not.toMatch(/Seq Scan on cms_entries/);
    expect(plan, st.text).toMatch(/Index (Only )?Scan using \w+ on cms_entries|Bitmap Index Scan on (cms_ix_|cms_entries_)/);
    plans.push(plan);
  }
  // the module under the plans answers as the fixture's does
  expect(out).toEqual(await fn(r));
  return { out, plans };
}

/** No Sort node: the rows come in the requested order from an index. */
const SORT_NODE = /(^|\s)Sort\s+\(/m;

async function sqlCount(where: string): Promise<number> {
  const { rows } = await fx.sql.query<{ c: number }>(`SELECT count(*)::int AS c FROM cms_entries WHERE content_type_id = ${typeId} AND published AND ${where}`);
  return rows[0]!.c;
}

it("lists page 1 and deep pages with the exact total", async () => {
  const { out, plans } = await planned((x) => x.list("article"));
  expect(out.meta).toEqual({ current_page: 1, per_page: 25, total: N, last_page: N / 25 });
  expect((out.data as JsonObject[])[0]!.title).toMatch(/^Article 100000 about /);
  // newest first straight from the (type, published) index, no sort
  expect(plans.join("\n")).toMatch(/Index Scan using cms_entries_published_idx on cms_entries/);
  expect(plans.join("\n")).not.toMatch(SORT_NODE);
  const deep = await planned((x) => x.list("article", { page: "3000", per_page: "20" }));
  expect((deep.out.data as JsonObject[])[0]!.title).toMatch(/^Article 40020 about /);
  expect(deep.plans.join("\n")).toMatch(/Index Scan using cms_entries_published_idx on cms_entries/);
  expect(deep.plans.join("\n")).not.toMatch(SORT_NODE);
});

it("filters by eq, range with sort and contains quickly with exact totals", async () => {
  const eq = await planned((x) => x.list("article", { "filter[category]": "tech" }));
  expect(eq.out.meta?.total).toBe(N / 5);
  // the per-type filter index, for the rows and the total
  expect(eq.plans.join("\n")).toMatch(/Index Scan using cms_ix_\w+ on cms_entries/);
  expect(eq.plans.join("\n")).toMatch(/Bitmap Index Scan on cms_ix_/);
  expect(eq.plans.join("\n")).not.toMatch(SORT_NODE);

  const range = await planned((x) => x.list("article", { "filter[views][gt]": "99000", sort: "-views" }));
  expect(range.out.meta?.total).toBe(await sqlCount("(data->>'views')::numeric > 99000"));
  const views = (range.out.data as JsonObject[]).map((e) => e.views as number);
  expect(views).toEqual([...views].sort((a, b) => b - a));
  expect(views[0]).toBeGreaterThan(99_900);
  // the per-type sort index gives the range in order
  expect(range.plans.join("\n")).toMatch(/Index Scan using cms_ix_\w+ on cms_entries/);
  expect(range.plans.join("\n")).not.toMatch(SORT_NODE);

  const contains = await planned((x) => x.list("article", { "filter[title][contains]": "about glacier" }));
  expect(contains.out.meta?.total).toBe(N / 50);
  // the per-type trigram index finds the matches (only they are sorted)
  expect(contains.plans.join("\n")).toMatch(/Bitmap Index Scan on cms_ix_/);

  const sorted = await planned((x) => x.list("article", { sort: "-views" }));
  expect((sorted.out.data as JsonObject[])[0]!.views).toBe(99_999);
  expect(sorted.plans.join("\n")).toMatch(/Index Scan using cms_ix_\w+ on cms_entries/);
  expect(sorted.plans.join("\n")).not.toMatch(SORT_NODE);
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
  const s = await planned((x) => x.search("article", { q: "volcano" }));
  const total = await sqlCount("search_text ILIKE '%volcano%'");
  expect(s.out.meta).toMatchObject({ total, query: "volcano", per_page: 25 });
  for (const e of s.out.data as JsonObject[]) expect(`${e.title} ${e.body}`).toMatch(/volcano/);
  // the search text's trigram index finds the matches
  expect(s.plans.join("\n")).toMatch(/Bitmap Index Scan on cms_entries_search_trgm_idx/);
  const two = await planned((x) => x.search("article", { q: "Article 4242" }));
  expect((two.out.data as JsonObject[])[0]!.title).toMatch(/^Article 4242 about/);
});

it("shows one entry by id", async () => {
  const title = `Article 77 about ${TOPICS[77 % 50]}`;
  const first = (await r.list("article", { "filter[title]": title })).data as JsonObject[];
  expect(first).toHaveLength(1);
  const s = await planned((x) => x.show("article", first[0]!.id as string));
  expect((s.out.data as JsonObject).title).toBe(title);
  // by primary key
  expect(s.plans.join("\n")).toMatch(/Index Scan using cms_entries_pkey on cms_entries/);
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
