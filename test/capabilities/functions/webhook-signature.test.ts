// The signature check of signed HTTP triggers on its own: what verifies and
// what does not (the end-to-end refusals are in test/e2e/functions-third-party).
import { describe, expect, it } from "vitest";
import { newSigningSecret, sign, signatureHeader, verifySignature } from "../../../src/capabilities/functions/webhook-signature.js";

const body = Buffer.from('{"id":"evt_1"}');
const secret = "whsec_test_secret_0123456789";
const now = 1_764_028_800;

describe("verifySignature", () => {
  it("accepts the header a sender makes, also with several v1 values and spaces", () => {
    expect(verifySignature(signatureHeader(secret, body, now), body, secret, 300, now)).toEqual({ ok: true, timestamp: now });
    const v1 = sign(secret, now, body);
    expect(verifySignature(`t=${now}, v1=${"0".repeat(64)}, v1=${v1}`, body, secret, 300, now).ok).toBe(true);
    expect(verifySignature(`v0=abc,v1=${v1},t=${now}`, body, secret, 300, now + 300).ok).toBe(true);
  });

  it("refuses a missing, malformed, oversized, stale or non-matching header, saying why", () => {
    const v1 = sign(secret, now, body);
    const cases: Array<[string | undefined, RegExp]> = [
      [undefined, /missing/],
      ["", /missing/],
      [`t=${now}`, /malformed/],
      [`v1=${v1}`, /malformed/],
      [`t=abc,v1=${v1}`, /malformed/],
      [`t=${now},v1=${v1.slice(2)}`, /malformed/],
      [`t=${now},v1=${v1},` + "x".repeat(5000), /malformed/],
      [`t=${now - 301},v1=${sign(secret, now - 301, body)}`, /tolerance/],
      [`t=${now},v1=${sign("another_secret_of_length", now, body)}`, /does not match/],
      [`t=${now},v1=${sign(secret, now, Buffer.from('{"id":"evt_2"}'))}`, /does not match/],
    ];
    for (const [header, reason] of cases) {
      const r = verifySignature(header, body, secret, 300, now);
      expect(r.ok, String(header).slice(0, 80)).toBe(false);
      expect(!r.ok && r.reason, String(header).slice(0, 80)).toMatch(reason);
    }
  });

  it("generates distinct secrets of 32 random bytes", () => {
    const a = newSigningSecret();
    expect(a).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/);
    expect(newSigningSecret()).not.toBe(a);
  });
});
