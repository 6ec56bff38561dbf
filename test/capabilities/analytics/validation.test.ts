import { describe, expect, it } from "vitest";
import { logHash } from "../../../src/capabilities/analytics/log-hash.js";
import { parseIsoTimestamp } from "../../../src/capabilities/analytics/validation.js";

describe("log hash", () => {
  it("is a stable documented digest of app_version, classFQN, message and type", () => {
    // sha256 of the JSON array ["1.0.0","com.example.Crash","boom","crash"]: must never change
    expect(logHash("1.0.0", "com.example.Crash", "boom", "crash")).toBe(
      "69258ddf9774809a190f1554344c212b25471f28353d3ccbe726be321a664710",
    );
    expect(logHash("a|b", "c", "m", "error")).not.toBe(logHash("a", "b|c", "m", "error"));
    expect(logHash("1", "A", "m", "error")).not.toBe(logHash("1", "A", "m", "crash"));
  });
});

describe("ISO 8601 timestamps", () => {
  it("accepts dates and date-times with or without offset (no offset = UTC)", () => {
    expect(parseIsoTimestamp("2026-03-01T10:20:30Z")?.toISOString()).toBe("2026-03-01T10:20:30.000Z");
    expect(parseIsoTimestamp("2026-03-01T10:20:30")?.toISOString()).toBe("2026-03-01T10:20:30.000Z");
    expect(parseIsoTimestamp("2026-03-01 10:20:30.123456+02:00")?.toISOString()).toBe("2026-03-01T08:20:30.123Z");
    expect(parseIsoTimestamp("2026-03-01T10:20+0130")?.toISOString()).toBe("2026-03-01T08:50:00.000Z");
    expect(parseIsoTimestamp("2026-03-01")?.toISOString()).toBe("2026-03-01T00:00:00.000Z");
  });

  it("refuses anything else", () => {
    for (const bad of ["", "yesterday", "2026-02-30T00:00:00Z", "2026-13-01", "1700000000", "2026-03-01T25:00:00Z", "2026-03-01T10:20:30ZZ"]) {
      expect(parseIsoTimestamp(bad), bad).toBeUndefined();
    }
  });
});
