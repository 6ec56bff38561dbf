import { describe, expect, it } from "vitest";
import { parseIsoTime } from "../../src/kernel/iso-time.js";

describe("ISO 8601 timestamps", () => {
  it.each([
    ["2026-01-02T03:04:05Z", "2026-01-02T03:04:05.000Z"],
    ["2026-01-02T03:04:05.123456+02:00", "2026-01-02T01:04:05.123Z"],
    ["2026-01-02 03:04:05", "2026-01-02T03:04:05.000Z"],
    ["2026-01-02", "2026-01-02T00:00:00.000Z"],
    ["2026-01-02T03:04-0130", "2026-01-02T04:34:00.000Z"],
    // the union of what analytics and the other callers accepted before one parser served them all
    ["2026-01-02T03:04:05,5+02", "2026-01-02T01:04:05.500Z"],
  ])("parses %s", (input, iso) => {
    expect(parseIsoTime(input)?.toISOString()).toBe(iso);
  });

  it.each([
    "", "yesterday", "2026-13-01", "2026-02-31", "2026-01-01T25:00:00Z", "1700000000",
    // impossible days with an offset; year 0, which PostgreSQL cannot store
    "2026-02-31T00:00:00+02:00", "0000-01-01T00:00:00Z", "0001-01-01T00:00:00+14:00",
  ])("refuses %s", (input) => {
    expect(parseIsoTime(input)).toBeUndefined();
  });
});

describe("ISO 8601 timestamps (the analytics created_at cases)", () => {
  it("accepts dates and date-times with or without offset (no offset = UTC)", () => {
    expect(parseIsoTime("2026-03-01T10:20:30Z")?.toISOString()).toBe("2026-03-01T10:20:30.000Z");
    expect(parseIsoTime("2026-03-01T10:20:30")?.toISOString()).toBe("2026-03-01T10:20:30.000Z");
    expect(parseIsoTime("2026-03-01 10:20:30.123456+02:00")?.toISOString()).toBe("2026-03-01T08:20:30.123Z");
    expect(parseIsoTime("2026-03-01T10:20+0130")?.toISOString()).toBe("2026-03-01T08:50:00.000Z");
    expect(parseIsoTime("2026-03-01")?.toISOString()).toBe("2026-03-01T00:00:00.000Z");
  });

  it("refuses anything else", () => {
    for (const bad of ["", "yesterday", "2026-02-30T00:00:00Z", "2026-13-01", "1700000000", "2026-03-01T25:00:00Z", "2026-03-01T10:20:30ZZ"]) {
      expect(parseIsoTime(bad), bad).toBeUndefined();
    }
  });
});
