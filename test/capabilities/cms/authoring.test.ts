// Authoring through the operator API: content type rules, definition changes
// and their effect on stored entries, value validation, relations, media.
// Runs on PostgreSQL and PGlite (the same SQL).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { JsonObject } from "@bufbuild/protobuf";
import { ConnectError } from "@connectrpc/connect";
import { readFile } from "node:fs/promises";
import { errorDetail } from "../../../src/kernel/errors.js";
import { codeOf, createApp, createFixture, field, reader, type Fixture } from "./cms-fixture.js";

async function violations(p: Promise<unknown>): Promise<Record<string, string[]>> {
  try {
    await p;
  } catch (err) {
    const d = errorDetail(err as ConnectError);
    return Object.fromEntries((d?.fieldViolations ?? []).map((v) => [v.field, v.messages]));
  }
  throw new Error("expected a validation error");
}

for (const kind of ["postgres", "pglite"] as const) {
  describe(`authoring on ${kind}`, () => {
    let fx: Fixture;
    beforeAll(async () => {
      fx = await createFixture(kind, { mediaMaxBytes: 1024 });
    });
    afterAll(() => fx.close());

    it("validates content types against the type table", async () => {
      const app = await createApp(fx.sql);
      const appId = BigInt(app.id);
      const v = await violations(fx.admin.createContentType({
        appId,
        contentType: {
          slug: "Bad Slug",
          name: "",
          fields: [field("title", "text"), field("body", "rich_text"), field("id", "text"), field("x", "color"), field("pick", "select"), field("rel", "relation", { target: "nope" })],
          filterableFields: ["body", "missing"],
          sortableFields: ["pick"],
          searchableFields: ["pick"],
          defaultSort: "body",
          defaultPerPage: 500,
        },
      }));
      expect(Object.keys(v).sort()).toEqual([
        "content_type.default_per_page", "content_type.default_sort", "content_type.fields.2.name", "content_type.fields.3.type",
        "content_type.fields.4.options", "content_type.fields.5.target", "content_type.filterable_fields.0",
        "content_type.filterable_fields.1", "content_type.name", "content_type.searchable_fields.0", "content_type.slug",
        "content_type.sortable_fields.0",
      ]);
      expect(v["content_type.filterable_fields.0"]![0]).toMatch(/rich_text field cannot be filterable/);
      const ok = await fx.admin.createContentType({
        appId, contentType: { slug: "page", name: "Page", fields: [field("title", "text", { searchable: true })], defaultSort: "-published_at" },
      });
      expect(ok.searchableFields).toEqual(["title"]);
      expect(ok.defaultPerPage).toBe(20);
      expect(await codeOf(fx.admin.createContentType({ appId, contentType: { slug: "page", name: "P", fields: [field("a", "text")] } }))).toBe("conflict");
    });

    it("validates entry values and names the field", async () => {
      const app = await createApp(fx.sql);
      const appId = BigInt(app.id);
      await fx.admin.createContentType({
        appId,
        contentType: {
          slug: "thing", name: "Thing",
          fields: [
            field("title", "text", { required: true }), field("n", "number"), field("b", "boolean"), field("d", "date"),
            field("dt", "date_time"), field("mail", "email"), field("link", "url"), field("s", "select", { options: ["a", "b"] }),
            field("ms", "select", { options: ["a", "b"], multi: true }), field("m", "media"), field("j", "json"),
          ],
        },
      });
      const v = await violations(fx.admin.createEntry({
        appId, contentType: "thing",
        data: { n: "x", b: "maybe", d: "2024-02-30", dt: "yesterday", mail: "nope", link: "ftp://x", s: "c", ms: ["a", "z"], m: "x.png", extra: 1 },
      }));
      expect(Object.keys(v).sort()).toEqual(["data.b", "data.d", "data.dt", "data.extra", "data.link", "data.m", "data.mail", "data.ms", "data.n", "data.s", "data.title"]);
      expect(v["data.title"]).toEqual(["title is required."]);
      const e = await fx.admin.createEntry({
        appId, contentType: "thing",
        data: { title: "t", n: "12.5", b: true, d: "2024-02-29", dt: "2024-02-29T10:00:00+01:00", mail: "a@b.co", link: "https://x.io", s: "a", ms: ["b", "a", "b"], j: { k: [1] } },
      });
      expect(e.data).toMatchObject({ n: 12.5, b: "true", ms: ["b", "a"], j: { k: [1] } });
      expect(e.published).toBe(false);
      expect(e.id).toMatch(/^[0-9a-f-]{36}$/);
      // a patch keeps other values; null clears
      const u = await fx.admin.updateEntry({ appId, id: e.id, data: { n: null, s: "b" } });
      expect(u.data).toMatchObject({ title: "t", s: "b" });
      expect(u.data).not.toHaveProperty("n");
      expect(await codeOf(fx.admin.updateEntry({ appId, id: e.id, data: { title: null } }))).toBe("validation_failed");
      expect(await codeOf(fx.admin.getEntry({ appId, id: "00000000-0000-4000-8000-000000000000" }))).toBe("not_found");
      // another application cannot see it
      const other = await createApp(fx.sql);
      expect(await codeOf(fx.admin.getEntry({ appId: BigInt(other.id), id: e.id }))).toBe("not_found");
    });

    it("checks that relations point at entries of the target type", async () => {
      const app = await createApp(fx.sql);
      const appId = BigInt(app.id);
      await fx.admin.createContentType({ appId, contentType: { slug: "tag", name: "Tag", fields: [field("name", "text")] } });
      await fx.admin.createContentType({ appId, contentType: { slug: "other", name: "Other", fields: [field("name", "text")] } });
      await fx.admin.createContentType({
        appId,
        contentType: { slug: "post", name: "Post", fields: [field("tag", "relation", { target: "tag" }), field("tags", "relation", { target: "tag", multi: true })] },
      });
      const tag = await fx.admin.createEntry({ appId, contentType: "tag", data: { name: "t" } });
      const oth = await fx.admin.createEntry({ appId, contentType: "other", data: { name: "o" } });
      const v = await violations(fx.admin.createEntry({ appId, contentType: "post", data: { tag: oth.id, tags: [tag.id, "00000000-0000-4000-8000-000000000000"] } }));
      expect(Object.keys(v).sort()).toEqual(["data.tag", "data.tags"]);
      const ok = await fx.admin.createEntry({ appId, contentType: "post", data: { tag: tag.id.toUpperCase(), tags: [tag.id] } });
      expect(ok.data).toMatchObject({ tag: tag.id, tags: [tag.id] });
      // a relation target cannot be deleted while referenced by a definition
      expect(await codeOf(fx.admin.deleteContentType({ appId, slug: "tag" }))).toBe("failed_precondition");
    });

    it("renames, removes and adds fields with their effect on stored entries", async () => {
      const app = await createApp(fx.sql);
      const appId = BigInt(app.id);
      await fx.admin.createContentType({
        appId,
        contentType: { slug: "note", name: "Note", fields: [field("title", "text"), field("old", "text"), field("gone", "number")], filterableFields: ["old"], searchableFields: ["title"] },
      });
      const e = await fx.admin.createEntry({ appId, contentType: "note", data: { title: "Hello", old: "keep me", gone: 1 }, publish: true });
      const r = reader(fx.content, app.key);
      expect((await r.list("note", { "filter[old]": "keep me" })).data).toHaveLength(1);
      await fx.admin.updateContentType({
        appId, slug: "note",
        contentType: {
          slug: "memo", name: "Memo",
          fields: [field("title", "text"), field("renamed", "text", { previousName: "old" }), field("added", "boolean")],
          filterableFields: ["renamed"],
          searchableFields: ["title", "renamed"],
        },
      });
      const got = await fx.admin.getEntry({ appId, id: e.id });
      expect(got.contentType).toBe("memo");
      expect(got.data).toEqual({ title: "Hello", renamed: "keep me" });
      expect(await codeOf(r.list("note"))).toBe("CONTENT_TYPE_NOT_FOUND");
      const list = await r.list("memo", { "filter[renamed]": "keep me" });
      expect(list.data).toEqual([expect.objectContaining({ id: e.id, title: "Hello", renamed: "keep me", added: null })]);
      expect(Object.keys((list.data as JsonObject[])[0]!)).not.toContain("gone");
      // the search text follows the new searchable fields
      expect((await r.search("memo", { q: "keep" })).data).toHaveLength(1);
      // a field's type cannot change in place
      expect(await codeOf(fx.admin.updateContentType({
        appId, slug: "memo", contentType: { slug: "memo", name: "Memo", fields: [field("title", "number")] },
      }))).toBe("validation_failed");
      const typeId = (await fx.admin.getContentType({ appId, slug: "memo" })).id;
      await fx.admin.deleteContentType({ appId, slug: "memo" });
      expect(await codeOf(fx.admin.getEntry({ appId, id: e.id }))).toBe("not_found");
      const { rows } = await fx.sql.query(
        `SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND indexname LIKE 'cms\\_ix\\_${typeId}\\_%'`,
      );
      expect(rows).toEqual([]);
    });

    it("creates and drops per-field indexes with the definition", async () => {
      const app = await createApp(fx.sql);
      const appId = BigInt(app.id);
      const t = await fx.admin.createContentType({
        appId,
        contentType: { slug: "idx", name: "Idx", fields: [field("title", "text"), field("n", "number"), field("tags", "select", { options: ["a"], multi: true })], filterableFields: ["title", "tags"], sortableFields: ["n"] },
      });
      const count = async () => (await fx.sql.query(`SELECT count(*)::int AS c FROM pg_indexes WHERE schemaname = current_schema() AND indexname LIKE 'cms\\_ix\\_${t.id}\\_%'`)).rows[0]!.c;
      // title: btree + trigram, tags: jsonb gin, n: btree asc + desc
      expect(await count()).toBe(5);
      // indexed text values must fit a btree entry
      expect(await codeOf(fx.admin.createEntry({ appId, contentType: "idx", data: { title: "x".repeat(601) } }))).toBe("validation_failed");
      await fx.admin.updateContentType({ appId, slug: "idx", contentType: { slug: "idx", name: "Idx", fields: [field("title", "text")] } });
      expect(await count()).toBe(0);
      await fx.admin.createEntry({ appId, contentType: "idx", data: { title: "x".repeat(601) } });
      const v = await violations(fx.admin.updateContentType({
        appId, slug: "idx", contentType: { slug: "idx", name: "Idx", fields: [field("title", "text")], sortableFields: ["title"] },
      }));
      expect(v["content_type.fields.0"]![0]).toMatch(/over 600 characters/);
    });

    it("stores media files and serves them with caching headers", async () => {
      const app = await createApp(fx.sql);
      const appId = BigInt(app.id);
      const bytes = new Uint8Array([1, 2, 3, 4]);
      const m = await fx.admin.uploadMedia({ appId, filename: "pic.png", contentType: "image/png", data: bytes });
      expect(m.fileId).toMatch(/^[0-9a-f-]{36}\.png$/);
      expect(Number(m.size)).toBe(4);
      expect(await codeOf(fx.admin.uploadMedia({ appId, filename: "x.exe", contentType: "application/x-msdownload", data: bytes }))).toBe("unsupported_media_type");
      expect(await codeOf(fx.admin.uploadMedia({ appId, filename: "big.png", contentType: "image/png", data: new Uint8Array(1025) }))).toBe("payload_too_large");
      const res = await fx.cms.serveMedia(app.key, m.fileId);
      expect(res.status).toBe(200);
      expect(res.headers["content-type"]).toBe("image/png");
      expect(res.headers["cache-control"]).toBe("public, max-age=31536000, immutable");
      const chunks: Buffer[] = [];
      for await (const c of res.body!) chunks.push(c as Buffer);
      expect(new Uint8Array(Buffer.concat(chunks))).toEqual(bytes);
      expect((await fx.cms.serveMedia(app.key, m.fileId, res.headers.etag)).status).toBe(304);
      expect((await fx.cms.serveMedia("wrong", m.fileId)).status).toBe(404);
      const other = await createApp(fx.sql);
      expect((await fx.cms.serveMedia(other.key, m.fileId)).status).toBe(404);
      expect((await fx.cms.serveMedia(app.key, "../../etc/passwd")).status).toBe(404);
      expect(await readFile(`${fx.mediaDir}/${app.id}/${m.fileId}`)).toEqual(Buffer.from(bytes));
      // media fields only take files of the application
      await fx.admin.createContentType({ appId: BigInt(other.id), contentType: { slug: "p", name: "P", fields: [field("img", "media")] } });
      expect(await codeOf(fx.admin.createEntry({ appId: BigInt(other.id), contentType: "p", data: { img: m.fileId } }))).toBe("validation_failed");
    });

    it("serves the read API (list, filter, sort, search, show)", async () => {
      const app = await createApp(fx.sql);
      const appId = BigInt(app.id);
      await fx.admin.createContentType({
        appId,
        contentType: { slug: "a", name: "A", fields: [field("title", "text"), field("n", "number"), field("body", "rich_text")], filterableFields: ["title", "n"], sortableFields: ["n"], searchableFields: ["title", "body"] },
      });
      for (const [i, t] of ["Red apple", "Green pear", "Red cherry"].entries()) {
        await fx.admin.createEntry({ appId, contentType: "a", data: { title: t, n: i * 10, body: `<p>fruit ${i}</p>` }, publish: true });
      }
      const r = reader(fx.content, app.key);
      const titles = (x: { data: unknown }) => (x.data as JsonObject[]).map((e) => e.title);
      expect(titles(await r.list("a"))).toEqual(["Red cherry", "Green pear", "Red apple"]);
      expect(titles(await r.list("a", { "filter[n][gte]": "10", sort: "n" }))).toEqual(["Green pear", "Red cherry"]);
      expect(titles(await r.list("a", { "filter[title][contains]": "RED", sort: "-n" }))).toEqual(["Red cherry", "Red apple"]);
      expect(titles(await r.search("a", { q: "red" }))).toEqual(["Red cherry", "Red apple"]);
      expect(titles(await r.search("a", { q: "fruit" }))).toHaveLength(3);
      const first = (await r.list("a")).data as JsonObject[];
      expect(((await r.show("a", first[0]!.id as string)).data as JsonObject).title).toBe("Red cherry");
    });
  });
}
