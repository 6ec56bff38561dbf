// The read API end to end through Connect: every endpoint, parameter,
// operator, limit and error code of docs/cms.md, against real PostgreSQL.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { create, type JsonObject } from "@bufbuild/protobuf";
import { createHandlerContext } from "@connectrpc/connect";
import { ContentService, ListEntriesRequestSchema } from "../../../gen/pulsebase/cms/v1/content_pb.js";
import { kNotModified } from "../../../src/kernel/module.js";
import { codeOf, createApp, createFixture, field, MEDIA_BASE, reader, rows, type Fixture, type Reader, type TestApp } from "./cms-fixture.js";

let fx: Fixture;
let app: TestApp;
let r: Reader;
const ids: Record<string, string> = {};
let imageId = "";

async function entry(type: string, data: JsonObject, publish = true): Promise<string> {
  const e = await fx.admin.createEntry({ appId: BigInt(app.id), contentType: type, data, publish });
  return e.id;
}

beforeAll(async () => {
  fx = await createFixture("postgres");
  app = await createApp(fx.sql);
  const appId = BigInt(app.id);
  const img = await fx.admin.uploadMedia({ appId, filename: "a.png", contentType: "image/png", data: new Uint8Array([137, 80, 78, 71, 1, 2, 3]) });
  imageId = img.fileId;
  await fx.admin.createContentType({
    appId,
    contentType: {
      slug: "author",
      name: "Author",
      fields: [field("name", "text", { required: true }), field("avatar", "media")],
      filterableFields: ["name"],
      sortableFields: ["name"],
      searchableFields: ["name"],
    },
  });
  await fx.admin.createContentType({
    appId,
    contentType: {
      slug: "article",
      name: "Article",
      description: "News articles",
      icon: "newspaper",
      fields: [
        field("title", "text", { required: true, label: "Title", searchable: true }),
        field("body", "rich_text", { searchable: true }),
        field("views", "number"),
        field("published", "date"),
        field("category", "text"),
        field("featured", "boolean"),
        field("tags", "select", { options: ["news", "tech", "sport"], multi: true }),
        field("kind", "select", { options: ["post", "page"] }),
        field("author", "relation", { target: "author" }),
        field("related", "relation", { target: "article", multi: true }),
        field("image", "media"),
        field("starts", "date_time"),
        field("extra", "json"),
        field("site", "url"),
      ],
      filterableFields: ["title", "views", "published", "category", "featured", "tags", "kind", "author", "related", "starts", "site"],
      sortableFields: ["title", "views", "published", "starts"],
      defaultPerPage: 25,
    },
  });
  await fx.admin.createContentType({
    appId,
    contentType: { slug: "draft_only", name: "Drafts", fields: [field("title", "text")] },
  });
  ids.ann = await entry("author", { name: "Ann", avatar: imageId });
  ids.bob = await entry("author", { name: "Bob" }, false);
  // published one after the other: default order is newest first
  ids.a1 = await entry("article", {
    title: "Alpha news", body: "<p>The <b>first</b> story</p>", views: 10, published: "2024-01-05", category: "news",
    featured: true, tags: ["news", "tech"], kind: "post", author: ids.ann, image: imageId, starts: "2024-01-05T10:00:00+02:00",
    extra: { a: 1 }, site: "https://a.example.com",
  });
  ids.a2 = await entry("article", {
    title: "Beta 100% sure", views: 200, published: "2024-02-10", category: "tech", featured: false, tags: ["tech"],
    kind: "page", author: ids.bob, starts: "2024-02-10T08:00:00Z",
  });
  ids.a3 = await entry("article", { title: "gamma a_b", views: 9, published: "2023-12-31", category: "news", tags: ["sport"] });
  ids.a4 = await entry("article", { title: "Delta", views: 1000, category: "sport", related: [] });
  ids.hidden = await entry("article", { title: "Hidden draft", views: 5, category: "news" }, false);
  ids.a5 = await entry("article", { title: "Epsilon", views: 50, category: "Tech", related: [ids.a1!, ids.hidden!, ids.a2!], author: ids.bob });
  await entry("draft_only", { title: "x" }, false);
  r = reader(fx.content, app.key);
});
afterAll(() => fx.close());

const titles = (res: { data: unknown }) => (res.data as JsonObject[]).map((e) => e.title);

describe("authentication", () => {
  it("requires X-App-Key", async () => {
    expect(await codeOf(reader(fx.content, undefined).list("article"))).toBe("MISSING_APP_KEY");
    expect(await codeOf(reader(fx.content, "").schemas())).toBe("MISSING_APP_KEY");
  });
  it("refuses an unknown key", async () => {
    expect(await codeOf(reader(fx.content, "nope").list("article"))).toBe("INVALID_APP_KEY");
  });
  it("answers 404 for a media path whose key holds NUL (not a 500)", async () => {
    const res = await fx.cms.serveMedia(`${app.key}\u0000`, imageId);
    expect(res.status).toBe(404);
  });
});

describe("schemas", () => {
  it("lists content types with published entries and their published count", async () => {
    const res = await r.schemas();
    expect(res.data).toEqual([
      {
        slug: "article", name: "Article", description: "News articles", icon: "newspaper", entry_count: 5,
        fields: ["title", "body", "views", "published", "category", "featured", "tags", "kind", "author", "related", "image", "starts", "extra", "site"],
        filterable_fields: ["title", "views", "published", "category", "featured", "tags", "kind", "author", "related", "starts", "site"],
        sortable_fields: ["title", "views", "published", "starts"],
        searchable_fields: ["title", "body"],
      },
      {
        slug: "author", name: "Author", description: "", icon: "", entry_count: 1, fields: ["name", "avatar"],
        filterable_fields: ["name"], sortable_fields: ["name"], searchable_fields: ["name"],
      },
    ]);
    expect(res.meta).toBeUndefined();
    expect(res.headers.get("cache-control")).toBe("public, max-age=3600");
  });
  it("describes one content type with field descriptors", async () => {
    const res = await r.schema("author");
    expect(res.data).toEqual({
      slug: "author", name: "Author", description: "", icon: "",
      fields: [
        { name: "name", type: "text", required: true, label: "name", searchable: true },
        { name: "avatar", type: "media", required: false, label: "avatar", searchable: false },
      ],
      filterable_fields: ["name"], sortable_fields: ["name"], searchable_fields: ["name"],
    });
  });
  it("answers CONTENT_TYPE_NOT_FOUND for unknown types and types without published entries", async () => {
    expect(await codeOf(r.schema("nope"))).toBe("CONTENT_TYPE_NOT_FOUND");
    expect(await codeOf(r.schema("draft_only"))).toBe("CONTENT_TYPE_NOT_FOUND");
    expect(await codeOf(r.list("draft_only"))).toBe("CONTENT_TYPE_NOT_FOUND");
    expect(await codeOf(r.search("nope", { q: "abc" }))).toBe("CONTENT_TYPE_NOT_FOUND");
    expect(await codeOf(r.show("nope", ids.a1!))).toBe("CONTENT_TYPE_NOT_FOUND");
  });
});

describe("list", () => {
  it("returns published entries newest first with the envelope", async () => {
    const res = await r.list("article");
    expect(titles(res)).toEqual(["Epsilon", "Delta", "gamma a_b", "Beta 100% sure", "Alpha news"]);
    expect(res.meta).toEqual({ current_page: 1, per_page: 5, total: 5, last_page: 1 });
    const first = rows(res).at(-1)!;
    expect(Object.keys(first)).toEqual([
      "id", "title", "body", "views", "published", "category", "featured", "tags", "kind", "author", "related",
      "image", "image_url", "starts", "extra", "site", "created_at", "updated_at", "published_at",
    ]);
    expect(first).toMatchObject({
      id: ids.a1, views: 10, featured: "true", tags: ["news", "tech"], author: ids.ann, extra: { a: 1 },
      starts: "2024-01-05T10:00:00+02:00", image: imageId, image_url: `${MEDIA_BASE}/${app.key}/cms/media/${imageId}`,
    });
    expect(first.published_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    expect(rows(res)[0]!.image).toBeNull();
    expect(rows(res)[0]!.image_url).toBeNull();
  });

  it("pages with page and per_page; meta.per_page is the item count", async () => {
    const p2 = await r.list("article", { page: "2", per_page: "2" });
    expect(titles(p2)).toEqual(["gamma a_b", "Beta 100% sure"]);
    expect(p2.meta).toEqual({ current_page: 2, per_page: 2, total: 5, last_page: 3 });
    const p3 = await r.list("article", { page: "3", per_page: "2" });
    expect(p3.meta).toEqual({ current_page: 3, per_page: 1, total: 5, last_page: 3 });
    const beyond = await r.list("article", { page: "9", per_page: "2", "filter[category]": "news" });
    expect(beyond.data).toEqual([]);
    expect(beyond.meta).toEqual({ current_page: 9, per_page: 0, total: 2, last_page: 1 });
  });

  it("refuses bad pagination with INVALID_PAGINATION", async () => {
    const bad: Record<string, string>[] = [{ per_page: "0" }, { per_page: "101" }, { per_page: "abc" }, { page: "0" }, { page: "-1" }, { page: "1.5" }];
    for (const q of bad) {
      expect(await codeOf(r.list("article", q))).toBe("INVALID_PAGINATION");
    }
    expect((await r.list("article", { per_page: "100" })).meta?.per_page).toBe(5);
  });

  it("returns only id, the named fields and media companions with fields", async () => {
    const res = await r.list("article", { fields: "title, image,nope", "filter[category]": "news" });
    expect(rows(res)).toEqual([
      { id: ids.a3, title: "gamma a_b", image: null, image_url: null },
      { id: ids.a1, title: "Alpha news", image: imageId, image_url: `${MEDIA_BASE}/${app.key}/cms/media/${imageId}` },
    ]);
    // the bracket-array form is ignored
    const all = await r.list("article", { "fields[]": "title" });
    expect(Object.keys(rows(all)[0]!).length).toBeGreaterThan(3);
  });

  it("enforces parameter lengths with INVALID_PARAMETER", async () => {
    expect(await codeOf(r.list("article", { sort: "a".repeat(101) }))).toBe("INVALID_PARAMETER");
    expect(await codeOf(r.list("article", { fields: "a".repeat(501) }))).toBe("INVALID_PARAMETER");
    expect(await codeOf(r.show("article", ids.a1!, { populate: "a".repeat(501) }))).toBe("INVALID_PARAMETER");
    // populate on list is ignored whatever its length
    expect(titles(await r.list("article", { populate: "a".repeat(600) }))).toHaveLength(5);
  });
});

describe("filters", () => {
  const f = async (q: Record<string, string>) => titles(await r.list("article", q));
  it("eq shorthand and operator form on text (case-sensitive eq)", async () => {
    expect(await f({ "filter[category]": "news" })).toEqual(["gamma a_b", "Alpha news"]);
    expect(await f({ "filter[category][eq]": "tech" })).toEqual(["Beta 100% sure"]);
    expect(await f({ "filter[category][neq]": "news" })).toEqual(["Epsilon", "Delta", "Beta 100% sure"]);
  });
  it("compares numbers numerically", async () => {
    expect(await f({ "filter[views][gt]": "50" })).toEqual(["Delta", "Beta 100% sure"]);
    expect(await f({ "filter[views][gte]": "50" })).toEqual(["Epsilon", "Delta", "Beta 100% sure"]);
    expect(await f({ "filter[views][lt]": "10" })).toEqual(["gamma a_b"]);
    expect(await f({ "filter[views][lte]": "10" })).toEqual(["gamma a_b", "Alpha news"]);
    expect(await f({ "filter[views][in]": "9,1000" })).toEqual(["Delta", "gamma a_b"]);
    expect(await f({ "filter[views][nin]": "9,1000" })).toEqual(["Epsilon", "Beta 100% sure", "Alpha news"]);
    expect(await f({ "filter[views]": "200.0" })).toEqual(["Beta 100% sure"]);
  });
  it("compares dates and date-times chronologically", async () => {
    expect(await f({ "filter[published][gt]": "2024-01-01" })).toEqual(["Beta 100% sure", "Alpha news"]);
    expect(await f({ "filter[published][lt]": "2024-01-01" })).toEqual(["gamma a_b"]);
    // 10:00+02:00 is 08:00Z: before 2024-01-05T09:00Z
    expect(await f({ "filter[starts][lt]": "2024-01-05T09:00:00Z" })).toEqual(["Alpha news"]);
    expect(await f({ "filter[starts][eq]": "2024-01-05T08:00:00Z" })).toEqual(["Alpha news"]);
    expect(await f({ "filter[starts][gte]": "2024-02-01" })).toEqual(["Beta 100% sure"]);
  });
  it("filters booleans as the strings true and false", async () => {
    expect(await f({ "filter[featured]": "true" })).toEqual(["Alpha news"]);
    expect(await f({ "filter[featured]": "false" })).toEqual(["Beta 100% sure"]);
    expect(await codeOf(r.list("article", { "filter[featured]": "yes" }))).toBe("INVALID_FILTER");
  });
  it("contains and starts_with are case-insensitive and escape % and _", async () => {
    expect(await f({ "filter[title][contains]": "ALPHA" })).toEqual(["Alpha news"]);
    expect(await f({ "filter[title][contains]": "100%" })).toEqual(["Beta 100% sure"]);
    expect(await f({ "filter[title][contains]": "%" })).toEqual(["Beta 100% sure"]);
    expect(await f({ "filter[title][contains]": "a_b" })).toEqual(["gamma a_b"]);
    expect(await f({ "filter[title][contains]": "_" })).toEqual(["gamma a_b"]);
    expect(await f({ "filter[title][starts_with]": "g" })).toEqual(["gamma a_b"]);
    expect(await f({ "filter[title][starts_with]": "%" })).toEqual([]);
    expect(await f({ "filter[category][contains]": "tech" })).toEqual(["Epsilon", "Beta 100% sure"]);
  });
  it("in and nin take comma-separated lists", async () => {
    expect(await f({ "filter[category][in]": "tech,sport" })).toEqual(["Delta", "Beta 100% sure"]);
    expect(await f({ "filter[category][nin]": "tech,sport" })).toEqual(["Epsilon", "gamma a_b", "Alpha news"]);
  });
  it("select and relation filters mean membership for single and multi values", async () => {
    expect(await f({ "filter[tags]": "tech" })).toEqual(["Beta 100% sure", "Alpha news"]);
    expect(await f({ "filter[tags][neq]": "tech" })).toEqual(["Epsilon", "Delta", "gamma a_b"]);
    expect(await f({ "filter[tags][in]": "sport,news" })).toEqual(["gamma a_b", "Alpha news"]);
    expect(await f({ "filter[tags][nin]": "sport,news" })).toEqual(["Epsilon", "Delta", "Beta 100% sure"]);
    expect(await f({ "filter[kind]": "page" })).toEqual(["Beta 100% sure"]);
    expect(await f({ "filter[kind][in]": "page,post" })).toEqual(["Beta 100% sure", "Alpha news"]);
    expect(await f({ "filter[author]": ids.ann! })).toEqual(["Alpha news"]);
    expect(await f({ "filter[author][in]": `${ids.ann},${ids.bob}` })).toEqual(["Epsilon", "Beta 100% sure", "Alpha news"]);
    expect(await f({ "filter[related]": ids.a2! })).toEqual(["Epsilon"]);
    expect(await f({ "filter[related][nin]": ids.a2! })).toEqual(["Delta", "gamma a_b", "Beta 100% sure", "Alpha news"]);
    expect(await codeOf(r.list("article", { "filter[kind]": "other" }))).toBe("INVALID_FILTER");
    expect(await codeOf(r.list("article", { "filter[author]": "not-a-uuid" }))).toBe("INVALID_FILTER");
    expect(await codeOf(r.list("article", { "filter[tags][gt]": "a" }))).toBe("INVALID_OPERATOR");
  });
  it("combines filters with AND", async () => {
    expect(await f({ "filter[category]": "news", "filter[views][gt]": "9" })).toEqual(["Alpha news"]);
  });
  it("ignores like silently", async () => {
    expect(await f({ "filter[title][like]": "%Alpha%" })).toHaveLength(5);
    expect(await f({ "filter[title][like]": "x", "filter[category]": "tech" })).toEqual(["Beta 100% sure"]);
  });
  it("refuses non-filterable fields, unknown operators, bad values and too many fields", async () => {
    expect(await codeOf(r.list("article", { "filter[body]": "x" }))).toBe("INVALID_FILTER");
    expect(await codeOf(r.list("article", { "filter[nope]": "x" }))).toBe("INVALID_FILTER");
    expect(await codeOf(r.list("article", { "filter[title][regex]": "x" }))).toBe("INVALID_OPERATOR");
    expect(await codeOf(r.list("article", { "filter[views][contains]": "1" }))).toBe("INVALID_OPERATOR");
    expect(await codeOf(r.list("article", { "filter[views][gt]": "ten" }))).toBe("INVALID_FILTER");
    expect(await codeOf(r.list("article", { "filter[published][gt]": "2024-13-45" }))).toBe("INVALID_FILTER");
    expect(await codeOf(r.list("article", { "filter[a][b][c]": "x" }))).toBe("INVALID_FILTER");
    // U+0000 cannot be in stored text and PostgreSQL refuses it as a parameter: 400, not 500
    expect(await codeOf(r.list("article", { "filter[title]": "a\u0000" }))).toBe("INVALID_FILTER");
    expect(await codeOf(r.list("article", { "filter[title][contains]": "\u0000" }))).toBe("INVALID_FILTER");
    const ten: Record<string, string> = {};
    for (const name of ["title", "views", "published", "category", "featured", "tags", "kind", "author", "related", "starts"]) {
      ten[`filter[${name}][neq]`] = name === "views" ? "1" : name === "featured" ? "true" : name === "published" ? "2020-01-01" : name === "starts" ? "2020-01-01" : name === "author" || name === "related" ? ids.bob! : name === "tags" ? "news" : name === "kind" ? "page" : "zz";
    }
    expect(await codeOf(r.list("article", ten))).toBe("ok");
    expect(await codeOf(r.list("article", { ...ten, "filter[site]": "x" }))).toBe("TOO_MANY_FILTERS");
  });
});

describe("sort", () => {
  const s = async (sort: string) => titles(await r.list("article", { sort }));
  it("sorts by a sortable field, - for descending", async () => {
    expect(await s("-views")).toEqual(["Delta", "Beta 100% sure", "Epsilon", "Alpha news", "gamma a_b"]);
    expect(await s("views")).toEqual(["gamma a_b", "Alpha news", "Epsilon", "Beta 100% sure", "Delta"]);
    // entries without a value come last either way
    expect((await s("published"))[0]).toBe("gamma a_b");
    expect((await s("-published")).slice(0, 3)).toEqual(["Beta 100% sure", "Alpha news", "gamma a_b"]);
  });
  it("sorts timestamps newest first without a prefix", async () => {
    expect(await s("published_at")).toEqual(["Epsilon", "Delta", "gamma a_b", "Beta 100% sure", "Alpha news"]);
    expect(await s("-created_at")).toEqual(["Epsilon", "Delta", "gamma a_b", "Beta 100% sure", "Alpha news"]);
    expect(await s("+created_at")).toEqual(["Alpha news", "Beta 100% sure", "gamma a_b", "Delta", "Epsilon"]);
  });
  it("refuses a non-sortable field with INVALID_SORT", async () => {
    expect(await codeOf(r.list("article", { sort: "category" }))).toBe("INVALID_SORT");
    expect(await codeOf(r.list("article", { sort: "title,-views" }))).toBe("INVALID_SORT");
  });
});

describe("show", () => {
  it("returns one published entry", async () => {
    const res = await r.show("article", ids.a1!);
    expect((res.data as JsonObject).title).toBe("Alpha news");
    expect((res.data as JsonObject).image_url).toBe(`${MEDIA_BASE}/${app.key}/cms/media/${imageId}`);
    expect(res.meta).toBeUndefined();
    expect(res.headers.get("cache-control")).toBe("public, max-age=3600");
    expect(res.headers.get("etag")).toMatch(/^".+"$/);
  });
  it("answers ENTRY_NOT_FOUND for unpublished, malformed and other-type ids", async () => {
    expect(await codeOf(r.show("article", ids.hidden!))).toBe("ENTRY_NOT_FOUND");
    expect(await codeOf(r.show("article", "not-a-uuid"))).toBe("ENTRY_NOT_FOUND");
    expect(await codeOf(r.show("article", ids.ann!))).toBe("ENTRY_NOT_FOUND");
    expect(await codeOf(r.show("article", "00000000-0000-4000-8000-000000000000"))).toBe("ENTRY_NOT_FOUND");
  });
  it("populates relations one level deep, leaving out unpublished targets", async () => {
    const res = await r.show("article", ids.a1!, { populate: "author" });
    const author = (res.data as JsonObject).author as JsonObject;
    expect(author).toMatchObject({ id: ids.ann, name: "Ann", avatar: imageId, avatar_url: `${MEDIA_BASE}/${app.key}/cms/media/${imageId}` });
    const e5 = (await r.show("article", ids.a5!, { populate: "related,author" })).data as JsonObject;
    expect(e5.author).toBeNull(); // Bob is unpublished
    const related = e5.related as JsonObject[];
    expect(related.map((x) => x.title)).toEqual(["Alpha news", "Beta 100% sure"]);
    // one level only: the populated entry keeps its own relations as UUIDs (of published targets only)
    expect(related[0]!.author).toBe(ids.ann);
    expect(related[1]!.author).toBeNull(); // Beta's author is Bob
    // without populate the UUIDs stay, but never those of unpublished targets
    const plain = (await r.show("article", ids.a5!)).data as JsonObject;
    expect(plain.related).toEqual([ids.a1, ids.a2]);
    expect(plain.author).toBeNull();
    // * populates every relation field
    const all = (await r.show("article", ids.a1!, { populate: "*" })).data as JsonObject;
    expect((all.author as JsonObject).name).toBe("Ann");
    expect(all.related).toBeNull(); // unset stays null
    // unknown and non-relation names are dropped silently
    expect(((await r.show("article", ids.a1!, { populate: "title,nope" })).data as JsonObject).author).toBe(ids.ann);
    // populate on list is ignored
    expect(rows(await r.list("article", { populate: "author", "filter[title]": "Alpha news" }))[0]!.author).toBe(ids.ann);
  });
});

describe("relations of unpublished entries", () => {
  it("are left out of list and search answers as populate leaves them out: null for a single relation, dropped from a multi one", async () => {
    for (const res of [await r.list("article"), await r.search("article", { q: "Epsilon" }), await r.list("article", { fields: "title,author,related" })]) {
      const e5 = rows(res).find((e) => e.title === "Epsilon")!;
      expect(e5.related).toEqual([ids.a1, ids.a2]);
      expect(e5.author).toBeNull();
    }
    const beta = rows(await r.list("article", { "filter[kind]": "page" }))[0]!;
    expect(beta.author).toBeNull();
    // no UUID of an unpublished entry anywhere in the answers
    for (const res of [await r.list("article"), await r.list("article", { per_page: "2", page: "1" }), await r.search("article", { q: "news" })]) {
      const text = JSON.stringify(res.data);
      expect(text).not.toContain(ids.bob!);
      expect(text).not.toContain(ids.hidden!);
    }
  });
});

describe("search", () => {
  it("searches searchable fields with HTML stripped and echoes q", async () => {
    const res = await r.search("article", { q: "first story" });
    expect(titles(res)).toEqual(["Alpha news"]);
    expect(res.meta).toEqual({ current_page: 1, per_page: 1, total: 1, last_page: 1, query: "first story" });
    expect(res.headers.get("cache-control")).toBe("no-cache, no-store");
    expect(res.headers.get("etag")).toBeNull();
    expect(rows(res)[0]!.image_url).toBe(`${MEDIA_BASE}/${app.key}/cms/media/${imageId}`);
    // tags are not searchable text
    expect(titles(await r.search("article", { q: "<b>" }))).toEqual([]);
    expect(titles(await r.search("article", { q: "bold" }))).toEqual([]);
  });
  it("validates q", async () => {
    expect(await codeOf(r.search("article", {}))).toBe("QUERY_TOO_SHORT");
    expect(await codeOf(r.search("article", { q: "a" }))).toBe("QUERY_TOO_SHORT");
    expect(await codeOf(r.search("article", { q: "ab" }))).toBe("ok");
    expect(await codeOf(r.search("article", { q: "a".repeat(200) }))).toBe("ok");
    expect(await codeOf(r.search("article", { q: "a".repeat(201) }))).toBe("QUERY_TOO_LONG");
    expect(await codeOf(r.search("article", { q: "ab\u0000" }))).toBe("INVALID_PARAMETER");
  });
  it("applies filters, sort and pagination on top", async () => {
    expect(titles(await r.search("article", { q: "news", "filter[category]": "news" }))).toEqual(["Alpha news"]);
    expect(titles(await r.search("article", { q: "news", "filter[category]": "tech" }))).toEqual([]);
    // equal relevance: newest first
    expect(titles(await r.search("article", { q: "ta", "filter[views][gt]": "100" }))).toEqual(["Delta", "Beta 100% sure"]);
    const sorted = await r.search("article", { q: "ta", sort: "-views", per_page: "1" });
    expect(titles(sorted)).toEqual(["Delta"]);
    expect(sorted.meta).toEqual({ current_page: 1, per_page: 1, total: 2, last_page: 2, query: "ta" });
    expect(await codeOf(r.search("article", { q: "ta", sort: "body" }))).toBe("INVALID_SORT");
    expect(await codeOf(r.search("article", { q: "ta", "filter[body]": "x" }))).toBe("INVALID_FILTER");
  });
});

describe("response headers", () => {
  it("flags a matching If-None-Match for a 304 as a context value, never a header", async () => {
    const list = async (headers: Record<string, string> = {}) => {
      const ctx = createHandlerContext({
        service: ContentService, method: ContentService.method.listEntries, protocolName: "connect", requestMethod: "POST", url: "http://cms.test/",
        requestHeader: { "x-app-key": app.key, ...headers },
      });
      await fx.cms.contentService.listEntries(create(ListEntriesRequestSchema, { contentType: "article" }), ctx);
      return { headers: ctx.responseHeader, notModified: ctx.values.get(kNotModified) };
    };
    const first = await list();
    const etag = first.headers.get("etag")!;
    expect(first.notModified).toBe(false);
    expect(first.headers.get("vary")).toBe("X-App-Key");
    const again = await list({ "if-none-match": etag });
    expect(again.notModified).toBe(true);
    expect([...again.headers.keys()].sort()).toEqual(["cache-control", "etag", "vary"]);
    expect((await list({ "if-none-match": `W/${etag}` })).notModified).toBe(true);
    expect((await list({ "if-none-match": '"x"' })).notModified).toBe(false);
    // computed (metered) responses carry an ETag too
    const computed = await r.list("article", { per_page: "2" });
    expect(computed.headers.get("etag")).toMatch(/^".+"$/);
  });
});
