// Per-field index builds run after the definition change commits: on
// PostgreSQL with CREATE INDEX CONCURRENTLY, so entry writes of a content type
// with 100,000 entries go on while its indexes build; reads stay correct
// meanwhile; the indexes end up valid; INVALID leftovers of an interrupted
// build are rebuilt; builds of two processes do not deadlock. PGlite builds
// plainly after commit.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { JsonObject } from "@bufbuild/protobuf";
import { createClient, createRouterTransport } from "@connectrpc/connect";
import { CmsService } from "../../../gen/pulsebase/admin/v1/cms_pb.js";
import { createCmsModule } from "../../../src/capabilities/cms/cms-module.js";
import { desiredIndexes } from "../../../src/capabilities/cms/field-indexes.js";
import type { Sql } from "../../../src/infra/storage/sql.js";
import { until } from "../../helpers/until.js";
import { createApp, createFixture, field, MEDIA_BASE, reader, type Fixture, type TestApp } from "./cms-fixture.js";

const N = 100_000;
const FIELDS = [field("title", "text"), field("views", "number"), field("category", "text")];

async function indexes(sql: Sql, typeId: bigint): Promise<{ name: string; valid: boolean }[]> {
  const { rows } = await sql.query<{ name: string; valid: boolean }>(
    `SELECT c.relname AS name, i.indisvalid AS valid FROM pg_index i
       JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = current_schema() AND c.relname LIKE 'cms\\_ix\\_${typeId}\\_%' ORDER BY 1`,
  );
  return rows;
}

/** n published entries: title "Item <i> about <word>", views i, category c<i % 10>. */
async function seed(sql: Sql, appId: number, typeId: bigint, n: number): Promise<void> {
  await sql.query(
    `INSERT INTO cms_entries (id, app_id, content_type_id, data, search_text, published, created_at, updated_at, published_at)
     SELECT gen_random_uuid(), $1, $2, jsonb_build_object('title', 'Item ' || i || ' about ' || md5(i::text), 'views', i, 'category', 'c' || (i % 10)),
            '', true, ts, ts, ts
       FROM (SELECT i, timestamptz '2024-01-01 00:00:00+00' + i * interval '1 second' AS ts FROM generate_series(1, $3::int) AS i) s`,
    [appId, typeId, n],
  );
  await sql.exec("ANALYZE cms_entries");
}

/** Resolves once a CREATE INDEX on this schema's cms_entries is in progress. */
async function buildStarted(sql: Sql): Promise<void> {
  await until(async () => {
    const { rows } = await sql.query(
      "SELECT 1 FROM pg_stat_progress_create_index WHERE relid = 'cms_entries'::regclass AND command = 'CREATE INDEX CONCURRENTLY'",
    );
    return rows.length ? true : undefined;
  }, 10_000, 10);
}

/**
 * Holds a snapshot open on its own connection until released: a CREATE
 * INDEX CONCURRENTLY that starts meanwhile cannot finish before it is
 * released (it waits for older snapshots), so "while the build runs" is a
 * state the test holds, not a race with the build.
 */
async function holdSnapshot(sql: Sql): Promise<{ release(): Promise<void> }> {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let ready!: () => void;
  const held = new Promise<void>((r) => (ready = r));
  const done = sql.transaction(async (tx) => {
    await tx.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ");
    await tx.query("SELECT 1");
    ready();
    await gate;
  });
  done.catch(() => ready());
  await held;
  return {
    async release() {
      release();
      await done;
    },
  };
}

describe("index builds on PostgreSQL", () => {
  let fx: Fixture;
  let app: TestApp;
  let typeId: bigint;
  const errors: unknown[] = [];

  beforeAll(async () => {
    fx = await createFixture("postgres");
    app = await createApp(fx.sql);
    const t = await fx.admin.createContentType({ appId: BigInt(app.id), contentType: { slug: "big", name: "Big", fields: FIELDS } });
    typeId = t.id;
    await seed(fx.sql, app.id, typeId, N);
  }, 120_000);
  afterAll(() => fx.close());

  it("lets entry writes through while the indexes of a large content type build, and ends with valid indexes", async () => {
    const appId = BigInt(app.id);
    const r = reader(fx.content, app.key);
    let settled = false;
    const hold = await holdSnapshot(fx.sql);
    const update = fx.admin
      .updateContentType({
        appId,
        slug: "big",
        contentType: { slug: "big", name: "Big", fields: FIELDS, filterableFields: ["title", "category"], sortableFields: ["title", "views"] },
      })
      .finally(() => (settled = true));
    await buildStarted(fx.sql);

    // an insert on the same application and content type is not blocked by
    // the build: it completes while the build cannot finish (held above)
    const e = await fx.admin.createEntry({ appId, contentType: "big", data: { title: "Fresh", views: 7, category: "c3" }, publish: true });
    expect(settled).toBe(false); // the build is still running

    // reads use the new definition at once and are correct while the indexes build
    const during = await r.list("big", { "filter[category]": "c3" });
    expect(during.meta?.total).toBe(N / 10 + 1);
    expect((during.data as JsonObject[])[0]!.id).toBe(e.id); // newest first
    expect((await fx.admin.getContentType({ appId, slug: "big" })).indexesReady).toBe(false);
    // the build is held by the snapshot (not merely slow): it waits for it
    await until(async () => {
      const { rows } = await fx.sql.query("SELECT 1 FROM pg_stat_progress_create_index WHERE relid = 'cms_entries'::regclass AND phase = 'waiting for old snapshots'");
      return rows.length ? true : undefined;
    }, 30_000, 20);
    expect(settled).toBe(false);

    await hold.release();
    const t = await update;
    expect(t.indexesReady).toBe(true);
    // title: filter btree, trigram, two sort btrees; category: filter btree, trigram; views: two sort btrees
    const built = await indexes(fx.sql, typeId);
    expect(built).toHaveLength(8);
    expect(built.every((i) => i.valid)).toBe(true);
    const plan = (await fx.sql.query<{ "QUERY PLAN": string }>(
      `EXPLAIN SELECT id FROM cms_entries WHERE content_type_id = ${typeId} AND published AND (data->>'category') = 'c3' ORDER BY published_at DESC, id DESC LIMIT 20`,
    )).rows.map((x) => x["QUERY PLAN"]).join("\n");
    expect(plan).toMatch(/cms_ix_/);
    const after = await r.list("big", { "filter[category]": "c3" });
    expect(after.meta?.total).toBe(N / 10 + 1);
  }, 120_000);

  it("drops the indexes of a field that is no longer filterable", async () => {
    const appId = BigInt(app.id);
    const before = await indexes(fx.sql, typeId);
    const t = await fx.admin.updateContentType({
      appId,
      slug: "big",
      contentType: { slug: "big", name: "Big", fields: FIELDS, filterableFields: ["title"], sortableFields: ["title", "views"] },
    });
    expect(t.indexesReady).toBe(true);
    const now = await indexes(fx.sql, typeId);
    expect(now).toHaveLength(6);
    expect(now.every((i) => i.valid)).toBe(true);
    expect(before.map((i) => i.name)).toEqual(expect.arrayContaining(now.map((i) => i.name)));
    // filtering on category is refused now; filtering on title still works
    const r = reader(fx.content, app.key);
    expect((await r.list("big", { "filter[title]": "Fresh" })).meta?.total).toBe(1);
  }, 60_000);

  it("rebuilds an INVALID index left by a failed concurrent build on the next start", async () => {
    const appId = BigInt(app.id);
    const def = await fx.admin.getContentType({ appId, slug: "big" });
    const spec = desiredIndexes({
      id: Number(def.id),
      fields: def.fields.map((f) => ({ name: f.name, type: f.type as "text", required: f.required, label: f.label })),
      filterable: def.filterableFields,
      sortable: def.sortableFields,
    })[0]!;
    // replace one index by a failed concurrent build under the same name:
    // a UNIQUE index over duplicate values fails and stays INVALID
    await fx.sql.exec(`DROP INDEX ${spec.name}`);
    await expect(fx.sql.exec(`CREATE UNIQUE INDEX CONCURRENTLY ${spec.name} ON cms_entries ((data->>'category')) WHERE content_type_id = ${def.id}`)).rejects.toThrow();
    expect((await indexes(fx.sql, typeId)).find((i) => i.name === spec.name)?.valid).toBe(false);
    expect((await fx.admin.getContentType({ appId, slug: "big" })).indexesReady).toBe(false);

    // a restarted process repairs it
    const restarted = createCmsModule({ sql: fx.sql, config: { mediaBaseUrl: MEDIA_BASE, mediaDir: fx.mediaDir }, onIndexError: (e) => errors.push(e) });
    restarted.start();
    await restarted.indexes.idle();
    await restarted.stop();
    expect(errors).toEqual([]);
    const repaired = await indexes(fx.sql, typeId);
    expect(repaired).toHaveLength(6);
    expect(repaired.every((i) => i.valid)).toBe(true);
    const { rows } = await fx.sql.query<{ def: string }>("SELECT pg_get_indexdef($1::regclass) AS def", [spec.name]);
    expect(rows[0]!.def).not.toMatch(/UNIQUE/);
    expect((await fx.admin.getContentType({ appId, slug: "big" })).indexesReady).toBe(true);
  }, 60_000);

  it("serializes the builds of two processes on two content types without deadlock", async () => {
    const other = await createApp(fx.sql);
    const otherId = BigInt(other.id);
    const t2 = await fx.admin.createContentType({ appId: otherId, contentType: { slug: "big", name: "Big", fields: FIELDS } });
    await seed(fx.sql, other.id, t2.id, N / 4);
    const mk = () => {
      const cms = createCmsModule({ sql: fx.sql, config: { mediaBaseUrl: MEDIA_BASE, mediaDir: fx.mediaDir }, onIndexError: (e) => errors.push(e) });
      return { cms, admin: createClient(CmsService, createRouterTransport((router) => router.service(CmsService, cms.adminService))) };
    };
    const p1 = mk();
    const p2 = mk();
    try {
      const [a, b] = await Promise.all([
        p1.admin.updateContentType({ appId: BigInt(app.id), slug: "big", contentType: { slug: "big", name: "Big", fields: FIELDS, filterableFields: ["category", "views"], sortableFields: ["views"] } }),
        p2.admin.updateContentType({ appId: otherId, slug: "big", contentType: { slug: "big", name: "Big", fields: FIELDS, filterableFields: ["category", "title"], sortableFields: ["title"] } }),
      ]);
      expect([a.indexesReady, b.indexesReady]).toEqual([true, true]);
      expect(errors).toEqual([]);
      expect((await indexes(fx.sql, typeId)).every((i) => i.valid)).toBe(true);
      expect(await indexes(fx.sql, t2.id)).toHaveLength(6);
      expect((await indexes(fx.sql, t2.id)).every((i) => i.valid)).toBe(true);
    } finally {
      await p1.cms.stop();
      await p2.cms.stop();
    }
  }, 120_000);

  it("drops the indexes of a deleted content type", async () => {
    const other = await createApp(fx.sql);
    const appId = BigInt(other.id);
    const t = await fx.admin.createContentType({ appId, contentType: { slug: "tmp", name: "Tmp", fields: FIELDS, filterableFields: ["category"] } });
    expect(t.indexesReady).toBe(true);
    expect(await indexes(fx.sql, t.id)).toHaveLength(2);
    await fx.admin.deleteContentType({ appId, slug: "tmp" });
    expect(await indexes(fx.sql, t.id)).toEqual([]);
  });
});

describe("index builds on PGlite", () => {
  let fx: Fixture;
  beforeAll(async () => {
    fx = await createFixture("pglite");
  });
  afterAll(() => fx.close());

  it("builds after commit and reports the indexes ready", async () => {
    const app = await createApp(fx.sql);
    const appId = BigInt(app.id);
    const t = await fx.admin.createContentType({ appId, contentType: { slug: "big", name: "Big", fields: FIELDS, filterableFields: ["category"], sortableFields: ["views"] } });
    expect(t.indexesReady).toBe(true);
    await seed(fx.sql, app.id, t.id, 2000);
    expect((await indexes(fx.sql, t.id)).map((i) => i.valid)).toEqual([true, true, true, true]);
    const u = await fx.admin.updateContentType({ appId, slug: "big", contentType: { slug: "big", name: "Big", fields: FIELDS, sortableFields: ["views"] } });
    expect(u.indexesReady).toBe(true);
    expect(await indexes(fx.sql, t.id)).toHaveLength(2);
    expect((await reader(fx.content, app.key).list("big", { sort: "-views" })).data).toEqual(
      expect.arrayContaining([expect.objectContaining({ views: 2000 })]),
    );
  });
});
