// Signed HTTP triggers: the Stripe-style signature header
// "t=<unix seconds>,v1=<hex HMAC-SHA256(secret, t + "." + raw body)>",
// checked on the host before the function runs. Several v1 values may be
// sent (a sender rotating its secret); one matching is enough.
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";

export const DEFAULT_SIGNATURE_HEADER = "pulsebase-signature";
export const DEFAULT_SIGNATURE_TOLERANCE_S = 300;
export const MAX_SIGNATURE_TOLERANCE_S = 86_400;
export const MIN_SECRET_BYTES = 16;
export const MAX_SECRET_BYTES = 256;
/** A header longer than this is refused unread (no work proportional to an attacker's header). */
const MAX_HEADER_CHARS = 4096;
const HEX64 = /^[0-9a-f]{64}$/i;

/** A new secret: "whsec_" and 32 random bytes, base64url. */
export function newSigningSecret(): string {
  return "whsec_" + randomBytes(32).toString("base64url");
}

/** The signature of `body` at unix time `t` (what a sender computes). */
export function sign(secret: string, t: number, body: Uint8Array | string): string {
  return createHmac("sha256", secret).update(`${t}.`).update(body).digest("hex");
}

/** The header value a sender sends. */
export function signatureHeader(secret: string, body: Uint8Array | string, t = Math.floor(Date.now() / 1000)): string {
  return `t=${t},v1=${sign(secret, t, body)}`;
}

export type SignatureCheck = { ok: true; timestamp: number } | { ok: false; reason: string };

/**
 * Checks a signature header against the raw body: the timestamp within
 * `toleranceS` of `nowS` either way, and one v1 value equal (constant-time)
 * to the HMAC of "t.body" under `secret`.
 */
export function verifySignature(header: string | undefined, body: Uint8Array, secret: string, toleranceS: number, nowS = Date.now() / 1000): SignatureCheck {
  if (!header) return { ok: false, reason: "The signature header is missing." };
  if (header.length > MAX_HEADER_CHARS) return { ok: false, reason: "The signature header is malformed." };
  let t: number | undefined;
  const given: Buffer[] = [];
  for (const part of header.split(",")) {
    const eq = part.indexOf("=");
    if (eq < 0) continue;
    const k = part.slice(0, eq).trim();
    const v = part.slice(eq + 1).trim();
    if (k === "t" && /^\d{1,12}$/.test(v)) t = Number(v);
    else if (k === "v1" && HEX64.test(v)) given.push(Buffer.from(v, "hex"));
  }
  if (t === undefined || given.length === 0) return { ok: false, reason: "The signature header is malformed (t=<unix seconds>,v1=<hex>)." };
  if (Math.abs(nowS - t) > toleranceS) return { ok: false, reason: "The signature's timestamp is outside the tolerance." };
  const expected = Buffer.from(sign(secret, t, body), "hex");
  let match = false;
  // Every candidate is compared (no early exit on the first match).
  for (const g of given) if (timingSafeEqual(g, expected)) match = true;
  return match ? { ok: true, timestamp: t } : { ok: false, reason: "The signature does not match." };
}
