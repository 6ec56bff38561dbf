// The metering rules of docs/cms.md, rule by rule.
import { describe, expect, it } from "vitest";
import { isCounted, type Endpoint } from "../../../src/capabilities/cms/metering.js";

const type = { filterable: ["category", "views"], sortable: ["views", "title"] };
const cases: [string, Endpoint, Record<string, string>, boolean][] = [
  // included in the plan (served from cache)
  ["catalog", "schemas", {}, false],
  ["single schema", "schema", {}, false],
  ["list with nothing", "list", {}, false],
  ["list with only page", "list", { page: "3" }, false],
  ["show without populate", "show", {}, false],
  ["single eq filter (shorthand) on a filterable field", "list", { "filter[category]": "news" }, false],
  ["single eq filter (explicit) on a filterable field", "list", { "filter[category][eq]": "news" }, false],
  ["single eq filter with page", "list", { "filter[category]": "news", page: "2" }, false],
  ["single sortable-field sort", "list", { sort: "-views" }, false],
  ["single sortable-field sort ascending", "list", { sort: "title" }, false],
  ["timestamp sort", "list", { sort: "published_at" }, false],
  ["sort with page", "list", { sort: "views", page: "4" }, false],
  ["populate on list is ignored", "list", { populate: "author" }, false],
  ["bracket-array fields[] is ignored", "list", { "fields[]": "title" }, false],
  ["unknown parameter", "list", { foo: "bar" }, false],
  ["per_page on show is ignored", "show", { per_page: "5" }, false],
  // counted against the plan
  ["search always", "search", { q: "hello" }, true],
  ["search even without q", "search", {}, true],
  ["operator filter other than eq", "list", { "filter[views][gt]": "5" }, true],
  ["like filter", "list", { "filter[category][like]": "x" }, true],
  ["two filters", "list", { "filter[category]": "news", "filter[views]": "5" }, true],
  ["two operators on one field", "list", { "filter[views][gt]": "1", "filter[views][lt]": "9" }, true],
  ["filter on a non-filterable field", "list", { "filter[body]": "x" }, true],
  ["eq filter combined with sort", "list", { "filter[category]": "news", sort: "-views" }, true],
  ["populate on show", "show", { populate: "author" }, true],
  ["per_page sent", "list", { per_page: "20" }, true],
  ["fields sent", "list", { fields: "title" }, true],
  ["sort on a non-sortable field", "list", { sort: "category" }, true],
  ["malformed filter key", "list", { "filter[a][b][c]": "x" }, true],
];

describe("metering", () => {
  for (const [name, endpoint, query, counted] of cases) {
    it(`${counted ? "counts" : "does not count"}: ${name}`, () => {
      expect(isCounted(endpoint, query, type)).toBe(counted);
    });
  }
  it("counts any filter when the content type is unknown", () => {
    expect(isCounted("list", { "filter[category]": "news" }, undefined)).toBe(true);
    expect(isCounted("list", { page: "2" }, undefined)).toBe(false);
  });
});
