// Cached CMS reads over REST are answered by the gateway's synchronous fast
// path (RestFastPath, src/kernel/module.ts) once the response is cached: the same bytes
// and headers as the generic path, 304 on If-None-Match, every request
// metered, the per-second limit applied, and a change visible at once.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { CmsService } from "../../gen/pulsebase/admin/v1/cms_pb.js";
import { ContentService } from "../../gen/pulsebase/cms/v1/content_pb.js";
import { createModules } from "../../src/server/modules.js";
import { startTestServer, type TestResponse, type TestServer } from "../helpers/server.js";

let s: TestServer;

beforeAll(async () => {
  s = await startTestServer({ modules: createModules });
});
afterAll(() => s.close());

async function setup(plan: Record<string, unknown> = {}) {
  const app = await s.createApp("fast path");
  if (Object.keys(plan).length) {
    await s.db.sql.query("UPDATE apps SET plan = $2::jsonb WHERE id = $1", [Number(app.appId), JSON.stringify({ name: "free", ...plan })]);
  }
  const cms = s.adminClient(CmsService);
  await cms.createContentType({
    appId: app.appId,
    contentType: {
      slug: "post", name: "Post",
      fields: [{ name: "title", type: "text", required: true }, { name: "category", type: "text" }, { name: "views", type: "number" }],
      filterableFields: ["category", "views"],
      sortableFields: ["views"],
    },
  });
  const ids: string[] = [];
  for (const [i, c] of ["news", "tech", "news"].entries()) {
    ids.push((await cms.createEntry({ appId: app.appId, contentType: "post", publish: true, data: { title: `T${i}`, category: c, views: i } })).id);
  }
  const get = (path: string, headers: Record<string, string> = {}, init: RequestInit = {}) =>
    s.fetch(path, { ...init, headers: { "x-app-key": app.appKey, ...headers } });
  return { ...app, cms, ids, get };
}

/** Headers that must be the same on two answers to the same request. */
function stable(res: TestResponse): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of res.headers) if (k !== "date" && k !== "x-request-id") out[k] = v;
  return out;
}

describe("CMS REST fast path", () => {
  it("answers cached shapes with the generic path's bytes and headers", async () => {
    const { get, ids } = await setup();
    const paths = [
      "/api/v1/_schemas",
      "/api/v1/_schemas/post",
      "/api/v1/post",
      "/api/v1/post?page=1",
      "/api/v1/post?filter[category]=news",
      "/api/v1/post?sort=-views&unknown=1",
      `/api/v1/post/${ids[0]}`,
      `/api/v1/post/${ids[1]!.toUpperCase()}`,
    ];
    for (const p of paths) {
      const first = await get(p); // computed (generic path), then cached
      const firstBody = await first.text();
      for (const origin of [undefined, "https://web.example"]) {
        const again = await get(p, origin ? { origin } : {});
        expect(again.status, p).toBe(200);
        expect(await again.text(), p).toBe(firstBody);
        if (!origin) expect(stable(again), p).toEqual(stable(first));
        else {
          // any origin (the default): "*" for all, so only the app key varies
          expect(again.headers.get("vary"), p).toBe("X-App-Key");
          expect(again.headers.get("access-control-allow-origin"), p).toBe("*");
        }
      }
      expect(first.headers.get("content-type")).toBe("application/json; charset=utf-8");
      expect(first.headers.get("cache-control")).toBe("public, max-age=3600");
      expect(first.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    }
    const head = await get("/api/v1/post", {}, { method: "HEAD" });
    expect(head.status).toBe(200);
    expect(head.headers.get("etag")).toBeTruthy();
    expect(await head.text()).toBe("");
  });

  it("answers 304 on a matching If-None-Match (strong, weak, list, *)", async () => {
    const { get } = await setup();
    const first = await get("/api/v1/post");
    const etag = first.headers.get("etag")!;
    await get("/api/v1/post");
    for (const inm of [etag, `W/${etag}`, `"nope", ${etag}`, "*"]) {
      const res = await get("/api/v1/post", { "if-none-match": inm });
      expect(res.status, inm).toBe(304);
      expect(res.headers.get("etag")).toBe(etag);
      expect(res.headers.get("cache-control")).toBe("public, max-age=3600");
      expect(res.headers.get("x-pulsebase-not-modified")).toBeNull();
      expect(await res.text()).toBe("");
    }
    expect((await get("/api/v1/post", { "if-none-match": '"other"' })).status).toBe(200);
  });

  it("answers Connect clients with the message on a matching If-None-Match, no private header", async () => {
    const { get, appKey } = await setup();
    const etag = (await get("/api/v1/post")).headers.get("etag")!;
    const content = createClient(ContentService, createConnectTransport({ baseUrl: s.httpsUrl, httpVersion: "2", nodeOptions: { rejectUnauthorized: false } }));
    let headers = new Headers();
    const res = await content.listEntries({ contentType: "post" }, { headers: { "x-app-key": appKey, "if-none-match": etag }, onHeader: (h) => (headers = h) });
    expect(res.data?.kind.case).toBe("listValue");
    expect(headers.get("etag")).toBe(etag);
    expect(headers.get("x-pulsebase-not-modified")).toBeNull();
  });

  it("meters every request, cached ones as included", async () => {
    const { get, cms, appId } = await setup();
    for (let i = 0; i < 10; i++) expect((await get("/api/v1/post")).status).toBe(200);
    expect((await get("/api/v1/post?per_page=2")).status).toBe(200);
    const days = (await cms.getCmsUsage({ appId })).days;
    expect(days.map((d) => [Number(d.included), Number(d.counted)])).toEqual([[10, 1]]);
  });

  it("applies the per-second limit to cached reads", async () => {
    const { get } = await setup({ cmsRequestsPerSecond: 5 });
    // The limit is per UTC second: the twelve must all be asked and answered
    // within one second window. On a loaded machine a burst may cross into
    // the next one; then it is asked again from the start of a fresh window
    // (a burst that did stay within one must show exactly the limit).
    let statuses: number[];
    for (let attempt = 0; ; attempt++) {
      const fresh = Math.floor(Date.now() / 1000) + 1;
      while (Date.now() < fresh * 1000) await new Promise((r) => setTimeout(r, Math.min(20, fresh * 1000 - Date.now() + 1)));
      statuses = await Promise.all(Array.from({ length: 12 }, () => get("/api/v1/post").then((r) => r.status)));
      if (Math.floor(Date.now() / 1000) === fresh) break;
      if (attempt === 10) throw new Error("no burst of twelve requests fitted in one second window");
    }
    expect(statuses.filter((x) => x === 200)).toHaveLength(5);
    expect(statuses.filter((x) => x === 429)).toHaveLength(7);
  });

  it("a change is visible at once; errors still come from the generic path", async () => {
    const { get, cms, appId, ids, appKey } = await setup();
    const titles = async (p: string) => ((await (await get(p)).json()).data as { title: string }[]).map((e) => e.title);
    expect(await titles("/api/v1/post")).toEqual(["T2", "T1", "T0"]);
    expect(await titles("/api/v1/post")).toEqual(["T2", "T1", "T0"]);
    await cms.updateEntry({ appId, id: ids[2]!, data: { title: "T2b" } });
    expect(await titles("/api/v1/post")).toEqual(["T2b", "T1", "T0"]);
    await cms.unpublishEntry({ appId, id: ids[1]! });
    expect(await titles("/api/v1/post")).toEqual(["T2b", "T0"]);
    expect((await get(`/api/v1/post/${ids[1]}`)).status).toBe(404);

    expect((await (await s.fetch("/api/v1/post")).json()).error.code).toBe("MISSING_APP_KEY");
    expect((await (await s.fetch("/api/v1/post", { headers: { "x-app-key": " " } })).json()).error.code).toBe("MISSING_APP_KEY");
    expect((await (await s.fetch("/api/v1/post", { headers: { "x-app-key": `${appKey}x` } })).json()).error.code).toBe("INVALID_APP_KEY");
    expect((await s.fetch("/api/v1/post", { headers: { "x-app-key": ` ${appKey} ` } })).status).toBe(200);
    expect((await (await get("/api/v1/nothing")).json()).error.code).toBe("CONTENT_TYPE_NOT_FOUND");
    expect((await (await get("/api/v1/post/not-a-uuid")).json()).error.code).toBe("ENTRY_NOT_FOUND");
    // a request with a content type (a GET body is possible) goes the generic way, with the same answer
    const plain = await get("/api/v1/post");
    const typed = await get("/api/v1/post", { "content-type": "application/json" });
    expect(typed.status).toBe(200);
    expect(await typed.text()).toBe(await plain.text());
  });
});
