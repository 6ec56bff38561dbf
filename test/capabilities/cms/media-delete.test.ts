// Listing and deleting media through the operator API: the file stops being
// served, deletion is refused while entries reference the file (naming them),
// and cached reads are invalidated in every process. PostgreSQL and PGlite.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { JsonObject } from "@bufbuild/protobuf";
import { ConnectError, createClient, createRouterTransport } from "@connectrpc/connect";
import { access } from "node:fs/promises";
import { CmsService } from "../../../gen/pulsebase/admin/v1/cms_pb.js";
import { ContentService } from "../../../gen/pulsebase/cms/v1/content_pb.js";
import { createCmsModule } from "../../../src/capabilities/cms/cms-module.js";
import { codeOf, createApp, createFixture, field, MEDIA_BASE, reader, rows, type Fixture } from "./cms-fixture.js";

const PNG = new Uint8Array([137, 80, 78, 71, 13, 10, 26, 10]);

async function messageOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    return (err as ConnectError).rawMessage;
  }
  throw new Error("expected an error");
}

const exists = (path: string) => access(path).then(() => true, () => false);

for (const kind of ["postgres", "pglite"] as const) {
  describe(`media deletion on ${kind}`, () => {
    let fx: Fixture;
    beforeAll(async () => {
      fx = await createFixture(kind);
    });
    afterAll(() => fx.close());

    it("lists the application's files newest first, page by page", async () => {
      const app = await createApp(fx.sql);
      const appId = BigInt(app.id);
      const a = await fx.admin.uploadMedia({ appId, filename: "a.png", contentType: "image/png", data: PNG });
      const b = await fx.admin.uploadMedia({ appId, filename: "b.pdf", contentType: "application/pdf", data: new Uint8Array([1, 2]) });
      const other = await createApp(fx.sql);
      await fx.admin.uploadMedia({ appId: BigInt(other.id), filename: "c.png", contentType: "image/png", data: PNG });

      const all = await fx.admin.listMedia({ appId });
      expect(all.media.map((m) => [m.fileId, m.filename, m.contentType, Number(m.size)])).toEqual([
        [b.fileId, "b.pdf", "application/pdf", 2],
        [a.fileId, "a.png", "image/png", 8],
      ]);
      expect(all.nextPageToken).toBe("");
      const p1 = await fx.admin.listMedia({ appId, pageSize: 1 });
      expect(p1.media.map((m) => m.fileId)).toEqual([b.fileId]);
      const p2 = await fx.admin.listMedia({ appId, pageSize: 1, pageToken: p1.nextPageToken });
      expect(p2.media.map((m) => m.fileId)).toEqual([a.fileId]);
      expect(p2.nextPageToken).toBe("");
      expect(await codeOf(fx.admin.listMedia({ appId, pageToken: "x" }))).toBe("validation_failed");
    });

    it("deletes the blob and the record; the URL answers 404 from then on", async () => {
      const app = await createApp(fx.sql);
      const appId = BigInt(app.id);
      const m = await fx.admin.uploadMedia({ appId, filename: "pic.png", contentType: "image/png", data: PNG });
      const keep = await fx.admin.uploadMedia({ appId, filename: "keep.png", contentType: "image/png", data: PNG });
      const path = `${fx.mediaDir}/${app.id}/${m.fileId}`;
      expect((await fx.cms.serveMedia(app.key, m.fileId)).status).toBe(200);

      // another application cannot delete it
      const other = await createApp(fx.sql);
      expect(await codeOf(fx.admin.deleteMedia({ appId: BigInt(other.id), fileId: m.fileId }))).toBe("not_found");
      expect((await fx.cms.serveMedia(app.key, m.fileId)).status).toBe(200);

      expect(await fx.admin.deleteMedia({ appId, fileId: m.fileId })).toBeDefined();
      expect((await fx.cms.serveMedia(app.key, m.fileId)).status).toBe(404);
      expect(await exists(path)).toBe(false);
      expect((await fx.admin.listMedia({ appId })).media.map((x) => x.fileId)).toEqual([keep.fileId]);
      expect((await fx.cms.serveMedia(app.key, keep.fileId)).status).toBe(200);
      // gone: deleting again, or a malformed id, is not_found
      expect(await codeOf(fx.admin.deleteMedia({ appId, fileId: m.fileId }))).toBe("not_found");
      expect(await codeOf(fx.admin.deleteMedia({ appId, fileId: "../../etc/passwd" }))).toBe("not_found");
      // and a media field no longer accepts it
      await fx.admin.createContentType({ appId, contentType: { slug: "p", name: "P", fields: [field("img", "media")] } });
      expect(await codeOf(fx.admin.createEntry({ appId, contentType: "p", data: { img: m.fileId } }))).toBe("validation_failed");
    });

    it("refuses while entries reference the file, naming them, and deletes once they no longer do", async () => {
      const app = await createApp(fx.sql);
      const appId = BigInt(app.id);
      const m = await fx.admin.uploadMedia({ appId, filename: "hero.png", contentType: "image/png", data: PNG });
      await fx.admin.createContentType({ appId, contentType: { slug: "page", name: "Page", fields: [field("title", "text"), field("hero", "media")] } });
      await fx.admin.createContentType({ appId, contentType: { slug: "person", name: "Person", fields: [field("avatar", "media"), field("banner", "media")] } });
      const page = await fx.admin.createEntry({ appId, contentType: "page", data: { title: "Home", hero: m.fileId }, publish: true });
      const draft = await fx.admin.createEntry({ appId, contentType: "person", data: { banner: m.fileId } }); // unpublished
      const unrelated = await fx.admin.createEntry({ appId, contentType: "page", data: { title: "About" }, publish: true });

      const del = fx.admin.deleteMedia({ appId, fileId: m.fileId });
      expect(await codeOf(del)).toBe("failed_precondition");
      const msg = await messageOf(fx.admin.deleteMedia({ appId, fileId: m.fileId }));
      expect(msg).toContain(`page ${page.id} (hero)`);
      expect(msg).toContain(`person ${draft.id} (banner)`);
      expect(msg).not.toContain(unrelated.id);
      // nothing changed: still served, still listed, entries intact
      expect((await fx.cms.serveMedia(app.key, m.fileId)).status).toBe(200);
      expect((await fx.admin.listMedia({ appId })).media).toHaveLength(1);
      const r = reader(fx.content, app.key);
      expect((await r.show("page", page.id)).data).toMatchObject({ hero: m.fileId, hero_url: `${MEDIA_BASE}/${app.key}/cms/media/${m.fileId}` });

      // clear one reference, delete the other entry: then it goes
      await fx.admin.updateEntry({ appId, id: page.id, data: { hero: null } });
      expect(await messageOf(fx.admin.deleteMedia({ appId, fileId: m.fileId }))).not.toContain(page.id);
      await fx.admin.deleteEntry({ appId, id: draft.id });
      await fx.admin.deleteMedia({ appId, fileId: m.fileId });
      expect((await fx.cms.serveMedia(app.key, m.fileId)).status).toBe(404);
      expect((await r.show("page", page.id)).data).toMatchObject({ hero: null, hero_url: null });
    });

    it("never lets an entry reference a file whose deletion succeeded (concurrent writes)", async () => {
      const app = await createApp(fx.sql);
      const appId = BigInt(app.id);
      await fx.admin.createContentType({ appId, contentType: { slug: "post", name: "Post", fields: [field("img", "media")] } });
      for (let i = 0; i < 8; i++) {
        const m = await fx.admin.uploadMedia({ appId, filename: `${i}.png`, contentType: "image/png", data: PNG });
        const [created, deleted] = await Promise.all([
          codeOf(fx.admin.createEntry({ appId, contentType: "post", data: { img: m.fileId }, publish: true })),
          codeOf(fx.admin.deleteMedia({ appId, fileId: m.fileId })),
        ]);
        // exactly one wins: the entry (deletion refused) or the deletion (the entry's file is gone)
        expect([created, deleted].sort()).toEqual(created === "ok" ? ["failed_precondition", "ok"] : ["ok", "validation_failed"]);
        const served = (await fx.cms.serveMedia(app.key, m.fileId)).status;
        expect(served).toBe(created === "ok" ? 200 : 404);
      }
    });
  });
}

describe("media deletion and cached reads", () => {
  let fx: Fixture;
  beforeAll(async () => {
    fx = await createFixture("postgres");
  });
  afterAll(() => fx.close());

  it("drops cached reads of the application in every process", async () => {
    const app = await createApp(fx.sql);
    const appId = BigInt(app.id);
    const reading = createCmsModule({ sql: fx.sql, config: { mediaBaseUrl: MEDIA_BASE, mediaDir: fx.mediaDir } });
    const broadcasts: number[] = [];
    const writer = createCmsModule({
      sql: fx.sql,
      config: { mediaBaseUrl: MEDIA_BASE, mediaDir: fx.mediaDir },
      broadcastInvalidation: (id) => {
        broadcasts.push(id);
        reading.invalidate(id); // NATS in production
      },
    });
    try {
      const transport = createRouterTransport((router) => {
        router.service(ContentService, reading.contentService);
        router.service(CmsService, writer.adminService);
      });
      const admin = createClient(CmsService, transport);
      const r = reader(createClient(ContentService, transport), app.key);
      const m = await admin.uploadMedia({ appId, filename: "a.png", contentType: "image/png", data: PNG });
      await admin.createContentType({ appId, contentType: { slug: "post", name: "Post", fields: [field("title", "text"), field("img", "media")] } });
      const e = await admin.createEntry({ appId, contentType: "post", data: { title: "t", img: m.fileId }, publish: true });
      const url = `${MEDIA_BASE}/${app.key}/cms/media/${m.fileId}`;
      expect(rows(await r.list("post"))[0]).toMatchObject({ img_url: url }); // cached (list page 1)
      // the reference goes away behind the cache's back (e.g. a process without NATS) ...
      await fx.sql.query("UPDATE cms_entries SET data = data - 'img' WHERE id = $1", [e.id]);
      expect(rows(await r.list("post"))[0]).toMatchObject({ img_url: url }); // still the cached response
      broadcasts.length = 0;
      // ... then the deletion drops every process's cached responses that embed the URL
      await admin.deleteMedia({ appId, fileId: m.fileId });
      expect(broadcasts).toEqual([app.id]);
      expect(rows(await r.list("post"))[0]).toMatchObject({ img: null, img_url: null } as JsonObject);
    } finally {
      await reading.stop();
      await writer.stop();
    }
  });
});
