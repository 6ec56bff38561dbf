import { describe, expect, it } from "vitest";
import { logHash } from "../../../src/capabilities/analytics/log-hash.js";

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

describe("event metadata keys", () => {
  it("keeps a key named __proto__ as a key like any other (not dropped, no prototype set)", async () => {
    const { validateEvent } = await import("../../../src/capabilities/analytics/validation.js");
    const { Violations } = await import("../../../src/kernel/errors.js");
    const v = new Violations();
    const now = new Date();
    const row = validateEvent(v, "", { name: "opened", metadata: JSON.parse('{"__proto__":"x","plan":"pro"}'), createdAt: now.toISOString() }, { now, clockSkewMs: 60_000 }, false);
    expect(v.fields).toEqual({});
    expect(Object.getPrototypeOf(row!.metadata)).toBe(Object.prototype);
    expect(Object.entries(row!.metadata)).toEqual([["__proto__", "x"], ["plan", "pro"]]);
  });
});
