// Search relevance: whole-word matches before word prefixes before
// substrings, HTML stripped from rich text, sort overrides
// relevance, filters apply on top.
import { afterAll, beforeAll, expect, it } from "vitest";
import type { JsonObject } from "@bufbuild/protobuf";
import { createApp, createFixture, field, reader, type Fixture, type Reader } from "./cms-fixture.js";

let fx: Fixture;
let r: Reader;
beforeAll(async () => {
  fx = await createFixture("postgres");
  const app = await createApp(fx.sql);
  const appId = BigInt(app.id);
  await fx.admin.createContentType({
    appId,
    contentType: {
      slug: "doc", name: "Doc",
      fields: [field("title", "text"), field("body", "rich_text"), field("views", "number"), field("lang", "text"), field("code", "text")],
      filterableFields: ["lang"], sortableFields: ["views"], searchableFields: ["title", "body"],
    },
  });
  // oldest first: the newest of equally relevant matches comes first
  const docs: [string, string, number, string][] = [
    ["The cat sat", "", 1, "en"],              // whole word
    ["Category theory", "", 50, "en"],         // word prefix
    ["Concatenate strings", "", 99, "en"],     // substring
    ["Dogs", "<p>A <em>cat</em> &amp; a dog</p>", 5, "de"], // whole word in rich text
    ["Unrelated", "<span class=\"cat\">x</span>", 7, "en"], // only inside markup
    ["CAT in capitals", "", 3, "de"],           // whole word, case-insensitive
  ];
  for (const [title, body, views, lang] of docs) {
    await fx.admin.createEntry({ appId, contentType: "doc", data: { title, body, views, lang, code: "cat" }, publish: true });
  }
  r = reader(fx.content, app.key);
});
afterAll(() => fx.close());

const titles = (x: { data: unknown }) => (x.data as JsonObject[]).map((e) => e.title);

it("ranks whole words, then prefixes, then substrings; newest first within a rank", async () => {
  const res = await r.search("doc", { q: "cat" });
  expect(titles(res)).toEqual(["CAT in capitals", "Dogs", "The cat sat", "Category theory", "Concatenate strings"]);
  expect(res.meta).toEqual({ current_page: 1, per_page: 5, total: 5, last_page: 1, query: "cat" });
});

it("needs every word of the query; whole-word rank needs all of them as words", async () => {
  expect(titles(await r.search("doc", { q: "cat sat" }))).toEqual(["The cat sat"]);
  // both are word-prefix matches of every word: newest first
  expect(titles(await r.search("doc", { q: "the  ca" }))).toEqual(["Category theory", "The cat sat"]);
  expect(titles(await r.search("doc", { q: "dog cat" }))).toEqual(["Dogs"]);
  expect(titles(await r.search("doc", { q: "zebra" }))).toEqual([]);
});

it("does not match HTML markup or entities", async () => {
  expect(titles(await r.search("doc", { q: "span" }))).toEqual([]);
  expect(titles(await r.search("doc", { q: "amp" }))).toEqual([]);
  expect(titles(await r.search("doc", { q: "em" }))).toEqual([]);
});

it("lets sort override relevance and filters narrow the matches", async () => {
  expect(titles(await r.search("doc", { q: "cat", sort: "-views" }))).toEqual([
    "Concatenate strings", "Category theory", "Dogs", "CAT in capitals", "The cat sat",
  ]);
  expect(titles(await r.search("doc", { q: "cat", "filter[lang]": "de" }))).toEqual(["CAT in capitals", "Dogs"]);
  const p2 = await r.search("doc", { q: "cat", per_page: "2", page: "2" });
  expect(titles(p2)).toEqual(["The cat sat", "Category theory"]);
  expect(p2.meta).toEqual({ current_page: 2, per_page: 2, total: 5, last_page: 3, query: "cat" });
  const sortedP3 = await r.search("doc", { q: "cat", sort: "-views", per_page: "2", page: "3" });
  expect(titles(sortedP3)).toEqual(["The cat sat"]);
  // past the last page: no rows, the total still counted
  const past = await r.search("doc", { q: "cat", per_page: "2", page: "9" });
  expect(past.data).toEqual([]);
  expect(past.meta).toEqual({ current_page: 9, per_page: 0, total: 5, last_page: 3, query: "cat" });
});

it("treats % and _ in q literally", async () => {
  expect(titles(await r.search("doc", { q: "c%t" }))).toEqual([]);
  expect(titles(await r.search("doc", { q: "c_t" }))).toEqual([]);
});
