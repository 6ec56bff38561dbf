import { describe, expect, it } from "vitest";
import { decodePageToken, encodePageToken, pageLimit, pageOf } from "../../src/kernel/paging.js";
import { errorDetail } from "../../src/kernel/errors.js";

const refused = (f: () => unknown) => {
  try {
    f();
  } catch (err) {
    const d = errorDetail(err);
    return { code: d?.code, fields: Object.fromEntries((d?.fieldViolations ?? []).map((f) => [f.field, f.messages])) };
  }
  return undefined;
};

describe("paging", () => {
  it("round-trips a cursor through one opaque token format", () => {
    expect(decodePageToken(encodePageToken(42))).toBe(42);
    expect(decodePageToken("")).toBeUndefined();
    // the token the id lists wrote before the helpers were one reads the same
    expect(decodePageToken(Buffer.from("42").toString("base64url"))).toBe(42);
  });

  it("refuses a token that is not a cursor of the list with one 400", () => {
    for (const bad of ["nope", "x", encodePageToken(-1), encodePageToken("7"), encodePageToken({ t: "x", id: 1 })]) {
      const e = refused(() => decodePageToken(bad));
      expect(e?.code, bad).toBe("validation_failed");
      expect(e?.fields).toEqual({ page_token: ["Invalid page token."] });
    }
  });

  it("pages rows read one beyond the page", () => {
    expect(pageOf([{ id: 1 }, { id: 2 }], 2, (r) => r.id)).toEqual({ rows: [{ id: 1 }, { id: 2 }], next: "" });
    const { rows, next } = pageOf([{ id: 1 }, { id: 2 }, { id: 3 }], 2, (r) => r.id);
    expect(rows).toEqual([{ id: 1 }, { id: 2 }]);
    expect(decodePageToken(next)).toBe(2);
  });

  it("reads page_size: 0 is the default, the maximum caps, negative is a 400", () => {
    expect(pageLimit(0)).toBe(50);
    expect(pageLimit(1000)).toBe(500);
    expect(pageLimit(1000, 200)).toBe(200);
    expect(refused(() => pageLimit(-1))?.fields).toEqual({ page_size: ["Must not be negative."] });
  });
});
