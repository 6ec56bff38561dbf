// Cached reads see every change at once (publish, unpublish, update, delete,
// content type changes); requests are metered per the plan rules and
// flushed to PostgreSQL; the plan's per-second limit answers 429.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { JsonObject } from "@bufbuild/protobuf";
import { ConnectError, createClient, createRouterTransport } from "@connectrpc/connect";
import { CmsService } from "../../../gen/pulsebase/admin/v1/cms_pb.js";
import { ContentService } from "../../../gen/pulsebase/cms/v1/content_pb.js";
import { createCmsModule } from "../../../src/capabilities/cms/cms-module.js";
import { errorDetail } from "../../../src/kernel/errors.js";
import { codeOf, createApp, createFixture, field, MEDIA_BASE, reader, type Fixture } from "./cms-fixture.js";

let fx: Fixture;
beforeAll(async () => {
  fx = await createFixture("postgres", { meterFlushMs: 60_000 });
});
afterAll(() => fx.close());

async function setup(plan: Record<string, unknown> = {}) {
  const app = await createApp(fx.sql, plan);
  const appId = BigInt(app.id);
  await fx.admin.createContentType({
    appId,
    contentType: {
      slug: "post",
      name: "Post",
      fields: [field("title", "text"), field("category", "text"), field("views", "number")],
      filterableFields: ["category", "views"],
      sortableFields: ["views"],
      searchableFields: ["title"],
    },
  });
  return { app, appId, r: reader(fx.content, app.key) };
}
const titles = (res: { data: unknown }) => (res.data as JsonObject[]).map((e) => e.title);

describe("cache invalidation", () => {
  it("a read right after publish, update, unpublish and delete sees the change", async () => {
    const { appId, r } = await setup();
    const a = await fx.admin.createEntry({ appId, contentType: "post", data: { title: "A", category: "x" }, publish: true });
    expect(titles(await r.list("post"))).toEqual(["A"]);
    const etag1 = (await r.list("post")).headers.get("etag");
    expect(titles(await r.list("post", { "filter[category]": "x" }))).toEqual(["A"]);
    expect(((await r.show("post", a.id)).data as JsonObject).title).toBe("A");
    expect((await r.schemas()).data).toMatchObject([{ slug: "post", entry_count: 1 }]);

    const b = await fx.admin.createEntry({ appId, contentType: "post", data: { title: "B", category: "x" } });
    expect(titles(await r.list("post"))).toEqual(["A"]); // draft: not visible
    await fx.admin.publishEntry({ appId, id: b.id });
    expect(titles(await r.list("post"))).toEqual(["B", "A"]);
    expect(titles(await r.list("post", { "filter[category]": "x" }))).toEqual(["B", "A"]);
    expect((await r.schemas()).data).toMatchObject([{ entry_count: 2 }]);
    expect((await r.list("post")).headers.get("etag")).not.toBe(etag1);

    await fx.admin.updateEntry({ appId, id: a.id, data: { title: "A2" } });
    expect(titles(await r.list("post"))).toEqual(["B", "A2"]);
    expect(((await r.show("post", a.id)).data as JsonObject).title).toBe("A2");

    await fx.admin.unpublishEntry({ appId, id: a.id });
    expect(titles(await r.list("post"))).toEqual(["B"]);
    expect(await codeOf(r.show("post", a.id))).toBe("ENTRY_NOT_FOUND");

    await fx.admin.deleteEntry({ appId, id: b.id });
    expect(await codeOf(r.list("post"))).toBe("CONTENT_TYPE_NOT_FOUND");
    expect((await r.schemas()).data).toEqual([]);
  });

  it("content type changes are visible at once", async () => {
    const { appId, r } = await setup();
    await fx.admin.createEntry({ appId, contentType: "post", data: { title: "A", category: "x" }, publish: true });
    expect(await codeOf(r.list("post", { "filter[title]": "A" }))).toBe("INVALID_FILTER");
    await fx.admin.updateContentType({
      appId, slug: "post",
      contentType: { slug: "post", name: "Post", fields: [field("title", "text"), field("category", "text")], filterableFields: ["title"] },
    });
    expect(titles(await r.list("post", { "filter[title]": "A" }))).toEqual(["A"]);
    expect(((await r.schema("post")).data as JsonObject).filterable_fields).toEqual(["title"]);
  });

  it("invalidate(appId) is what other processes call; the cache is per application", async () => {
    const one = await setup();
    const two = await setup();
    await fx.admin.createEntry({ appId: one.appId, contentType: "post", data: { title: "one" }, publish: true });
    await fx.admin.createEntry({ appId: two.appId, contentType: "post", data: { title: "two" }, publish: true });
    expect(titles(await one.r.list("post"))).toEqual(["one"]);
    expect(titles(await two.r.list("post"))).toEqual(["two"]);
    // a change written by another process (straight SQL here) is seen after invalidate
    await fx.sql.query("UPDATE cms_entries SET data = data || '{\"title\":\"one*\"}' WHERE app_id = $1", [one.app.id]);
    expect(titles(await one.r.list("post"))).toEqual(["one"]);
    fx.cms.invalidate(one.app.id);
    expect(titles(await one.r.list("post"))).toEqual(["one*"]);
  });
});

describe("two processes", () => {
  it("a change in one process reaches the other's cache through broadcastInvalidation", async () => {
    const { app, appId } = await setup();
    const other = createCmsModule({ sql: fx.sql, config: { mediaBaseUrl: MEDIA_BASE, mediaDir: fx.mediaDir } });
    const writer = createCmsModule({
      sql: fx.sql,
      config: { mediaBaseUrl: MEDIA_BASE, mediaDir: fx.mediaDir },
      broadcastInvalidation: (id) => other.invalidate(id), // NATS in production
    });
    const transport = createRouterTransport((router) => {
      router.service(ContentService, other.contentService);
      router.service(CmsService, writer.adminService);
    });
    const admin = createClient(CmsService, transport);
    const r = reader(createClient(ContentService, transport), app.key);
    const e = await admin.createEntry({ appId, contentType: "post", data: { title: "v1" }, publish: true });
    expect(titles(await r.list("post"))).toEqual(["v1"]);
    await admin.updateEntry({ appId, id: e.id, data: { title: "v2" } });
    expect(titles(await r.list("post"))).toEqual(["v2"]);
    await other.stop();
    await writer.stop();
  });
});

describe("change hook", () => {
  it("reports created, updated, published, unpublished and deleted with before and after", async () => {
    const { app, appId } = await setup();
    const start = fx.changes.length;
    const e = await fx.admin.createEntry({ appId, contentType: "post", data: { title: "A" } });
    await fx.admin.updateEntry({ appId, id: e.id, data: { title: "B" } });
    await fx.admin.publishEntry({ appId, id: e.id });
    await fx.admin.publishEntry({ appId, id: e.id }); // no change, no event
    await fx.admin.unpublishEntry({ appId, id: e.id });
    await fx.admin.deleteEntry({ appId, id: e.id });
    const got = fx.changes.slice(start);
    expect(got.map((c) => [c.appId, c.change.collection, c.change.operation])).toEqual([
      [app.id, "post", "created"],
      [app.id, "post", "updated"],
      [app.id, "post", "published"],
      [app.id, "post", "unpublished"],
      [app.id, "post", "deleted"],
    ]);
    expect(got[0]!.change.before).toBeNull();
    expect(got[0]!.change.after).toMatchObject({ id: e.id, title: "A", published: false });
    expect(got[1]!.change.before).toMatchObject({ title: "A" });
    expect(got[1]!.change.after).toMatchObject({ title: "B" });
    expect(got[2]!.change.after).toMatchObject({ published: true });
    expect(got[4]!.change.after).toBeNull();
  });
});

describe("metering", () => {
  it("counts computed requests and included ones per application per day", async () => {
    const { app, appId, r } = await setup();
    const e = await fx.admin.createEntry({ appId, contentType: "post", data: { title: "A", category: "x", views: 3 }, publish: true });
    // included: 5
    await r.schemas();
    await r.schema("post");
    await r.list("post", { page: "1" });
    await r.list("post", { "filter[category]": "x" });
    await r.show("post", e.id);
    // counted: 5 (an error response is counted too)
    await r.search("post", { q: "A1" });
    await r.list("post", { "filter[views][gt]": "1" });
    await r.list("post", { per_page: "5" });
    await r.list("post", { fields: "title" });
    await codeOf(r.list("post", { "filter[title]": "A" }));
    // not counted at all: authentication failures
    await codeOf(reader(fx.content, "bad").list("post"));
    const usage = await fx.admin.getCmsUsage({ appId });
    const today = new Date().toISOString().slice(0, 10);
    expect(usage.days.map((d) => ({ day: d.day, counted: Number(d.counted), included: Number(d.included) }))).toEqual([
      { day: today, counted: 5, included: 5 },
    ]);
    const { rows } = await fx.sql.query<{ counted: number }>("SELECT counted FROM cms_usage_daily WHERE app_id = $1", [app.id]);
    expect(Number(rows[0]!.counted)).toBe(5);
    // a second flush adds to the day's row
    await r.search("post", { q: "A1" });
    expect(Number((await fx.admin.getCmsUsage({ appId, fromDay: today, toDay: today })).days[0]!.counted)).toBe(6);
  });
});

describe("rate limit", () => {
  it("refuses computed requests over the plan's daily allowance and keeps serving cached ones", async () => {
    const { app, appId, r } = await setup({ cmsRequestsPerDay: 2 });
    await fx.admin.createEntry({ appId, contentType: "post", data: { title: "A", category: "x" }, publish: true });
    expect(await codeOf(r.search("post", { q: "A1" }))).toBe("ok");
    await fx.cms.meter.flush(); // one stored, one pending: both count
    expect(await codeOf(r.list("post", { per_page: "1" }))).toBe("ok");
    try {
      await r.list("post", { per_page: "1" });
      throw new Error("expected 429");
    } catch (err) {
      expect(errorDetail(err as ConnectError)?.code).toBe("RATE_LIMITED");
      expect(errorDetail(err as ConnectError)?.retryAfterSeconds).toBeGreaterThan(0);
    }
    expect(await codeOf(r.list("post"))).toBe("ok");
    expect(await codeOf(r.list("post", { "filter[category]": "x" }))).toBe("ok");
    expect(Number((await fx.admin.getCmsUsage({ appId })).days[0]!.counted)).toBe(2);
    void app;
  });

  it("answers 429 RATE_LIMITED with retry_after_seconds above the plan's per-second limit", async () => {
    const { appId, r } = await setup({ cmsRequestsPerSecond: 3 });
    await fx.admin.createEntry({ appId, contentType: "post", data: { title: "A" }, publish: true });
    // start at the beginning of a second so the burst stays in one window
    await new Promise((res) => setTimeout(res, 1000 - (Date.now() % 1000) + 5));
    const results = await Promise.all(
      Array.from({ length: 6 }, () => r.list("post").then(() => "ok", (err: unknown) => err)),
    );
    const ok = results.filter((x) => x === "ok").length;
    expect(ok).toBe(3);
    const err = results.find((x) => x !== "ok") as ConnectError;
    expect(errorDetail(err)?.code).toBe("RATE_LIMITED");
    expect(errorDetail(err)?.httpStatus).toBe(429);
    expect(errorDetail(err)?.retryAfterSeconds).toBe(1);
    // the next window allows requests again
    await new Promise((res) => setTimeout(res, 1000 - (Date.now() % 1000) + 5));
    expect(await codeOf(r.list("post"))).toBe("ok");
  });

  it("is shared across processes through the window row", async () => {
    const { app, r } = await setup({ cmsRequestsPerSecond: 2 });
    await fx.admin.createEntry({ appId: BigInt(app.id), contentType: "post", data: { title: "A" }, publish: true });
    await new Promise((res) => setTimeout(res, 1000 - (Date.now() % 1000) + 5));
    // another process already used this second's tokens
    await fx.sql.query(
      "INSERT INTO rate_limit_windows (name, key, window_start, used, last_grant) VALUES ('cms-second', $1, $2, 2, 2)",
      [String(app.id), Math.floor(Date.now() / 1000) * 1000],
    );
    expect(await codeOf(r.list("post"))).toBe("RATE_LIMITED");
  });
});
