// What a function's answer may carry (docs/functions.md, "Response shaping"): answers to a token
// are never cacheable by a shared cache, headers acting on the origin every
// application shares are dropped, and statuses without a body go without one.
import { describe, expect, it } from "vitest";
import { privateCacheControl, shapeResponse } from "../../../src/capabilities/functions/response-shaping.js";

const shape = (status: number, headers: [string, string][], body = "x", text = true) =>
  shapeResponse({ status, headers, body, text }, 1024 * 1024);

describe("Cache-Control", () => {
  it.each([
    ["public, max-age=600", "private, max-age=600"],
    ["max-age=60, s-maxage=3600", "private, max-age=60"],
    ["must-revalidate, max-age=60", "private, must-revalidate, max-age=60"],
    ['private="x-debug", max-age=60', 'private, private="x-debug", max-age=60'],
    ["private, max-age=60", "private, max-age=60"],
    ["no-store", "no-store"],
    ["PUBLIC", "private"],
  ])("turns %j into %j", (given, sent) => {
    expect(privateCacheControl(given)).toBe(sent);
    const r = shape(200, [["Cache-Control", given]]);
    expect(r.ok && r.response.headers["cache-control"]).toBe(sent);
  });

  it("leaves an answer without Cache-Control without one, and says what it changed", () => {
    const r = shape(200, []);
    expect(r.ok && r.response.headers["cache-control"]).toBeUndefined();
    expect(shape(200, [["cache-control", "public"]]).warnings).toEqual(['header "cache-control" sent as "private": answers to a token are private']);
  });
});

it("drops the headers that act on the whole origin", () => {
  const r = shape(200, [["Clear-Site-Data", '"*"'], ["Service-Worker-Allowed", "/"], ["NEL", '{"report_to":"x","max_age":86400}'], ["Report-To", "{}"], ["x-kept", "1"]]);
  expect(r.ok && r.response.headers).toEqual({ "x-kept": "1", "content-type": "text/plain; charset=utf-8" });
  expect(r.warnings).toHaveLength(4);
});

it.each([204, 205, 304])("sends a %i without the body the function gave it", (status) => {
  const r = shape(status, [["etag", '"v1"']], "not for this status");
  expect(r.ok).toBe(true);
  if (!r.ok) return;
  expect(r.response.body.length).toBe(0);
  expect(r.response.headers).toEqual({ etag: '"v1"' });
  expect(r.warnings).toEqual([`body dropped: a ${status} answer has none`]);
});
