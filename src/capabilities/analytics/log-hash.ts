// The log hash: SHA-256 (hex) of the JSON array [app_version, classFQN,
// message, type]. JSON framing keeps ("a|b", "c") and ("a", "b|c") apart; the
// same four values always give the same hash, across processes and versions.
import { createHash } from "node:crypto";

export function logHash(appVersion: string, classFqn: string, message: string, type: string): string {
  return createHash("sha256").update(JSON.stringify([appVersion, classFqn, message, type])).digest("hex");
}
