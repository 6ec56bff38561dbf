// Every limit of the analytics endpoints, in one place (documented in
// docs/analytics.md). Lengths count characters (Unicode code points).
export const limits = {
  nameMax: 255,
  batchMin: 1,
  batchMax: 100,
  metadataKeysMax: 100,
  metadataKeyMax: 255,
  metadataValueMax: 4096,
  appVersionMax: 255,
  classFqnMax: 1024,
  logMessageMax: 16_384,
  fileNameMax: 1024,
  stackTraceMax: 262_144,
  /** Serialised JSON size of a log context. */
  contextBytesMax: 65_536,
  /** 4 MiB (docs/devices.md, "Limits"). */
  fileBytesMax: 4 * 1024 * 1024,
  idempotencyKeyMax: 255,
} as const;

/** How far in the future a created_at may be (device clocks drift). */
export const DEFAULT_CLOCK_SKEW_MS = 5 * 60_000;
