// The content API through the whole server: REST under /api/v1 with the CMS
// envelope, cache headers, ETag/304, media URLs and files, 405 before the app
// key, and authoring through the admin listener.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CmsService } from "../../gen/pulsebase/admin/v1/cms_pb.js";
import { createModules } from "../../src/server/modules.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

let s: TestServer;
let appKey: string;
let mediaId: string;
let entryId: string;
const get = (path: string, headers: Record<string, string> = {}) => s.fetch(path, { headers: { "x-app-key": appKey, ...headers } });

beforeAll(async () => {
  s = await startTestServer({ modules: createModules });
  const app = await s.createApp("cms e2e");
  appKey = app.appKey;
  const cms = s.adminClient(CmsService);
  await cms.createContentType({
    appId: app.appId,
    contentType: {
      slug: "article", name: "Article", description: "News", icon: "doc",
      fields: [
        { name: "title", type: "text", required: true, label: "Title", searchable: true },
        { name: "body", type: "rich_text", label: "Body", searchable: true },
        { name: "views", type: "number", label: "Views" },
        { name: "category", type: "text", label: "Category" },
        { name: "cover", type: "media", label: "Cover" },
      ],
      filterableFields: ["title", "views", "category"],
      sortableFields: ["title", "views"],
      searchableFields: ["title", "body"],
    },
  });
  const media = await cms.uploadMedia({ appId: app.appId, filename: "cover.png", contentType: "image/png", data: new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 1, 2, 3]) } as never);
  mediaId = media.fileId;
  for (const [i, cat] of ["news", "sport", "news"].entries()) {
    const e = await cms.createEntry({ appId: app.appId, contentType: "article", publish: true, data: { title: `Story ${i} about rockets`, body: `<p>Body ${i}</p>`, views: 100 * (i + 1), category: cat, cover: mediaId } });
    entryId ??= e.id;
  }
  await cms.createEntry({ appId: app.appId, contentType: "article", publish: false, data: { title: "Draft", views: 1, category: "news" } });
});
afterAll(() => s.close());

describe("content API over REST", () => {
  it("lists schemas with cache headers", async () => {
    const res = await get("/api/v1/_schemas");
    expect(res.status).toBe(200);
    expect(res.headers.get("cache-control")).toBe("public, max-age=3600");
    const cors = await get("/api/v1/_schemas", { origin: "https://web.example" });
    // any origin by default: the same "*" for every origin, so no Vary: Origin
    expect(cors.headers.get("access-control-allow-origin")).toBe("*");
    expect(cors.headers.get("vary")).toBe("X-App-Key");
    const body = await res.json();
    expect(body.data).toEqual([expect.objectContaining({ slug: "article", entry_count: 3, filterable_fields: ["title", "views", "category"] })]);
    // unknown query parameters (a cache buster) are ignored, as on the other CMS reads
    expect((await get("/api/v1/_schemas?v=2")).status).toBe(200);
    expect((await get("/api/v1/_schemas/article?_=1&constructor=1")).status).toBe(200);
  });

  it("lists published entries with meta, filters and media URLs", async () => {
    const res = await get("/api/v1/article?filter[category]=news&sort=-views");
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(body.meta).toEqual({ current_page: 1, per_page: 2, total: 2, last_page: 1 });
    expect(body.data.map((e: { views: number }) => e.views)).toEqual([300, 100]);
    expect(body.data[0].cover_url).toBe(`https://localhost:${s.config.httpsPort}/${appKey}/cms/media/${mediaId}`);
    const etag = res.headers.get("etag");
    expect(etag).toBeTruthy();
    const again = await get("/api/v1/article?filter[category]=news&sort=-views", { "if-none-match": etag! });
    expect(again.status).toBe(304);
    // a client library's default Content-Type on a GET without a body changes nothing
    const typed = await get("/api/v1/article?filter[category]=news&sort=-views", { "content-type": "multipart/form-data; boundary=x" });
    expect(typed.status).toBe(200);
    expect((await typed.json()).meta.total).toBe(2);
  });

  it("shows one entry and searches", async () => {
    const one = await get(`/api/v1/article/${entryId}`);
    expect(one.status).toBe(200);
    expect((await one.json()).data.id).toBe(entryId);
    const search = await get("/api/v1/article/search?q=rockets");
    expect(search.status).toBe(200);
    expect(search.headers.get("cache-control")).toBe("no-cache, no-store");
    const body = await search.json();
    expect(body.meta).toMatchObject({ total: 3, query: "rockets" });
  });

  it("answers errors in the CMS envelope", async () => {
    const noKey = await s.fetch("/api/v1/_schemas");
    expect(noKey.status).toBe(400);
    expect(await noKey.json()).toEqual({ error: { status: 400, code: "MISSING_APP_KEY", message: expect.any(String) } });
    expect((await (await s.fetch("/api/v1/_schemas", { headers: { "x-app-key": "nope" } })).json()).error.code).toBe("INVALID_APP_KEY");
    expect((await (await get("/api/v1/article?filter[body]=x")).json()).error.code).toBe("INVALID_FILTER");
    expect((await (await get("/api/v1/article?filter[views][between]=1")).json()).error.code).toBe("INVALID_OPERATOR");
    expect((await (await get("/api/v1/article?per_page=101")).json()).error.code).toBe("INVALID_PAGINATION");
    expect((await (await get("/api/v1/article/search?q=a")).json()).error.code).toBe("QUERY_TOO_SHORT");
    const missingType = await get("/api/v1/nothing");
    expect(missingType.status).toBe(404);
    expect((await missingType.json()).error.code).toBe("CONTENT_TYPE_NOT_FOUND");
    expect((await (await get("/api/v1/article/not-a-uuid")).json()).error.code).toBe("ENTRY_NOT_FOUND");
    const post = await s.fetch("/api/v1/article", { method: "POST" });
    expect(post.status).toBe(405);
    expect((await post.json()).error.code).toBe("METHOD_NOT_ALLOWED");
  });

  it("serves media files at the media URL", async () => {
    const res = await s.fetch(`/${appKey}/cms/media/${mediaId}`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("image/png");
    expect(new Uint8Array(await res.arrayBuffer())).toHaveLength(11);
    const missing = await s.fetch(`/${appKey}/cms/media/00000000-0000-4000-8000-000000000000.png`);
    expect(missing.status).toBe(404);
  });
});
