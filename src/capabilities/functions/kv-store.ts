// The per-application key-value store behind ctx.kv, in PostgreSQL: string
// values under string keys, an optional time to live, listing by prefix in
// key order with a cursor. Every application has a quota of bytes (key and
// value, UTF-8) and of keys, kept in function_kv_usage; a write takes the
// application's usage row lock first, so the totals stay exact under
// concurrent writes of any process (and one application's writes never wait
// for another's). Put and delete are one call each to a PL/pgSQL function
// (the lock is held for no network round trip). Expired keys are invisible at once and removed by sweep().
import { appError, Violations } from "../../kernel/errors.js";
import type { HostCapability } from "../../kernel/host-capability.js";
import { pageOf, readPageToken } from "../../kernel/paging.js";
import type { Sql } from "../../infra/storage/sql.js";

export interface KvLimits {
  /** A key, UTF-8. */
  maxKeyBytes: number;
  /** A value, UTF-8. */
  maxValueBytes: number;
  /** Keys and values of one application together. */
  maxBytesPerApp: number;
  maxKeysPerApp: number;
  /** Longest time to live. */
  maxTtlSeconds: number;
  /** Largest list page. */
  maxListLimit: number;
  /** Expired keys removed per application and sweep statement. */
  sweepBatch: number;
}

export const DEFAULT_KV_LIMITS: KvLimits = {
  maxKeyBytes: 512,
  maxValueBytes: 128 * 1024,
  maxBytesPerApp: 64 * 1024 * 1024,
  maxKeysPerApp: 100_000,
  maxTtlSeconds: 365 * 86_400,
  maxListLimit: 1000,
  sweepBatch: 1000,
};

export interface KvEntryRow {
  key: string;
  size: number;
  expires_at: Date | null;
  updated_at: Date;
  value?: string;
}

export interface KvListPage {
  entries: KvEntryRow[];
  /** Pass back as `cursor` for the next page; null after the last. */
  cursor: string | null;
}

export interface KvUsage {
  bytes: number;
  keys: number;
}

export interface KvStore {
  readonly limits: KvLimits;
  /** The value, or null when the key does not exist or has expired. */
  get(appId: number, key: string): Promise<string | null>;
  /** The entry with its value and metadata, or null. */
  getEntry(appId: number, key: string): Promise<KvEntryRow | null>;
  /** Stores the value; `ttlSeconds` makes it expire (a put without one keeps it forever). */
  put(appId: number, key: string, value: string, opts?: { ttlSeconds?: number }): Promise<void>;
  /** True when a live key was deleted. */
  delete(appId: number, key: string): Promise<boolean>;
  /** Live keys starting with `prefix`, in key (byte) order, `limit` at a time. */
  list(appId: number, opts?: { prefix?: string; limit?: number; cursor?: string }): Promise<KvListPage>;
  usage(appId: number): Promise<KvUsage>;
  /** Removes expired keys (all applications); returns how many. */
  sweep(): Promise<number>;
}

const utf8 = (s: string) => Buffer.byteLength(s, "utf8");

function checkKey(v: Violations, key: unknown, limits: KvLimits, field = "key"): void {
  if (typeof key !== "string" || key === "") v.add(field, "A key is a non-empty string.");
  else if (utf8(key) > limits.maxKeyBytes) v.add(field, `A key is at most ${limits.maxKeyBytes} bytes (UTF-8).`);
  // PostgreSQL text cannot hold U+0000.
  else if (key.includes("\u0000")) v.add(field, "A key cannot contain U+0000.");
}

// LIKE's wildcards in a prefix are literal characters.
const likePrefix = (p: string) => p.replace(/[\\%_]/g, (c) => "\\" + c) + "%";

const LIVE = "(expires_at IS NULL OR expires_at > now())";

export function createKvStore(sql: Sql, limits: Partial<KvLimits> = {}): KvStore {
  const L: KvLimits = { ...DEFAULT_KV_LIMITS, ...limits };

  /** Takes the application's usage row lock (creating the row) inside a transaction. */
  const lockUsage = (tx: Sql, appId: number) =>
    tx.query<{ bytes: string | number; keys: string | number }>(
      `INSERT INTO function_kv_usage (app_id) VALUES ($1)
       ON CONFLICT (app_id) DO UPDATE SET app_id = EXCLUDED.app_id RETURNING bytes, keys`,
      [appId],
    );

  async function getEntry(appId: number, key: string): Promise<KvEntryRow | null> {
    const v = new Violations();
    checkKey(v, key, L);
    v.throwIfAny();
    const r = await sql.query<KvEntryRow>(
      `SELECT key, value, size, expires_at, updated_at FROM function_kv WHERE app_id = $1 AND key = $2 AND ${LIVE}`,
      [appId, key],
    );
    return r.rows[0] ?? null;
  }

  return {
    limits: L,
    get: async (appId, key) => (await getEntry(appId, key))?.value ?? null,
    getEntry,

    async put(appId, key, value, opts = {}) {
      const v = new Violations();
      checkKey(v, key, L);
      if (typeof value !== "string") v.add("value", "A value is a string (JSON.stringify objects).");
      else if (utf8(value) > L.maxValueBytes) v.add("value", `A value is at most ${L.maxValueBytes} bytes (UTF-8).`);
      else if (value.includes("\u0000")) v.add("value", "A value cannot contain U+0000.");
      const ttl = opts.ttlSeconds;
      if (ttl !== undefined && (!Number.isInteger(ttl) || ttl < 1 || ttl > L.maxTtlSeconds)) {
        v.add("ttl_seconds", `A time to live is a whole number of seconds from 1 to ${L.maxTtlSeconds}.`);
      }
      v.throwIfAny();
      const size = utf8(key) + utf8(value);
      // One call: lock the usage row, check the quota, write, count (303_function_real_work.sql).
      const r = await sql.query<{ stored: boolean }>(
        "SELECT function_kv_put($1, $2, $3, $4, $5, $6, $7) AS stored",
        [appId, key, value, size, ttl ?? null, L.maxBytesPerApp, L.maxKeysPerApp],
      );
      const stored = r.rows[0]?.stored ?? false;
      if (!stored) {
        throw appError("quota_exceeded", `The application's key-value store is full (at most ${L.maxBytesPerApp} bytes in ${L.maxKeysPerApp} keys); delete keys or let them expire.`);
      }
    },

    async delete(appId, key) {
      const v = new Violations();
      checkKey(v, key, L);
      v.throwIfAny();
      const r = await sql.query<{ deleted: boolean }>("SELECT function_kv_delete($1, $2) AS deleted", [appId, key]);
      return r.rows[0]?.deleted ?? false;
    },

    async list(appId, opts = {}) {
      const prefix = opts.prefix ?? "";
      const v = new Violations();
      if (typeof prefix !== "string" || utf8(prefix) > L.maxKeyBytes || prefix.includes("\u0000")) v.add("prefix", `A prefix is a string of at most ${L.maxKeyBytes} bytes.`);
      const limit = opts.limit ?? 100;
      if (!Number.isInteger(limit) || limit < 1 || limit > L.maxListLimit) v.add("limit", `A page holds 1 to ${L.maxListLimit} keys.`);
      const after = opts.cursor ? (typeof opts.cursor === "string" ? readPageToken(opts.cursor) : undefined) : "";
      if (opts.cursor && (typeof after !== "string" || after === "" || utf8(after) > L.maxKeyBytes || after.includes("\u0000"))) v.add("cursor", "Invalid cursor.");
      v.throwIfAny();
      const r = await sql.query<KvEntryRow>(
        `SELECT key, size, expires_at, updated_at FROM function_kv
         WHERE app_id = $1 AND key LIKE $2 AND key > $3 AND ${LIVE}
         ORDER BY key LIMIT $4`,
        [appId, likePrefix(prefix), after, limit + 1],
      );
      const { rows: entries, next } = pageOf(r.rows, limit, (e) => e.key);
      return { entries, cursor: next || null };
    },

    async usage(appId) {
      const r = await sql.query<{ bytes: string | number; keys: string | number }>("SELECT bytes, keys FROM function_kv_usage WHERE app_id = $1", [appId]);
      return { bytes: Number(r.rows[0]?.bytes ?? 0), keys: Number(r.rows[0]?.keys ?? 0) };
    },

    async sweep() {
      // Per application, under its usage lock (the lock order of put and
      // delete: usage row, then key rows), a batch at a time.
      const apps = await sql.query<{ app_id: number }>(
        "SELECT DISTINCT app_id FROM function_kv WHERE expires_at IS NOT NULL AND expires_at <= now() LIMIT 1000",
      );
      let removed = 0;
      for (const { app_id } of apps.rows) {
        removed += await sql.transaction(async (tx) => {
          await lockUsage(tx, app_id);
          const r = await tx.query<{ n: number }>(
            `WITH gone AS (
               DELETE FROM function_kv WHERE app_id = $1 AND key IN (
                 SELECT key FROM function_kv WHERE app_id = $1 AND expires_at IS NOT NULL AND expires_at <= now() LIMIT $2)
               RETURNING size),
             u AS (UPDATE function_kv_usage SET bytes = bytes - (SELECT COALESCE(sum(size), 0) FROM gone),
                     keys = keys - (SELECT count(*) FROM gone) WHERE app_id = $1 RETURNING 1)
             SELECT count(*)::int AS n FROM gone`,
            [app_id, L.sweepBatch],
          );
          return r.rows[0]?.n ?? 0;
        });
      }
      return removed;
    },
  };
}

/** A function's options object: a plain object or nothing. */
function optionsOf(v: unknown): Record<string, unknown> {
  if (v !== undefined && v !== null && (typeof v !== "object" || Array.isArray(v))) throw appError("validation_failed", "options must be an object");
  return (v ?? {}) as Record<string, unknown>;
}

/**
 * ctx.kv (docs/functions.md, "Key-value store"): get(key), put(key, value,
 * { ttlSeconds }), delete(key), list({ prefix, limit, cursor }), on the
 * calling application's store only; the store checks every argument.
 */
export function kvCapability(kv: KvStore): HostCapability {
  return {
    name: "kv",
    busyCode: "unavailable",
    failureCode: "unavailable",
    methods: {
      get: ({ appId }, key) => kv.get(appId, key as string),
      put: ({ appId }, key, value, opts) => kv.put(appId, key as string, value as string, { ttlSeconds: optionsOf(opts).ttlSeconds as number | undefined }),
      delete: ({ appId }, key) => kv.delete(appId, key as string),
      // { entries: [{ key, size, expires_at, updated_at }], cursor }, the times as ISO strings (JSON)
      list: ({ appId }, opts) => kv.list(appId, optionsOf(opts) as { prefix?: string; limit?: number; cursor?: string }),
    },
  };
}
