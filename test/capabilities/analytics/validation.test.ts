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
