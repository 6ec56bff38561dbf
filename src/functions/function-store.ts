// SQL for functions, versions, secrets and triggers. Each method is one
// statement (set-based), so it runs the same on PostgreSQL and PGlite.
import type { Sql } from "../storage/sql.js";
import { normalisePlan, type PlanLimits } from "../identity/plan.js";

export interface FunctionRow {
  id: number;
  app_id: number;
  name: string;
  timeout_ms: number;
  memory_mb: number;
  invocations_per_minute: number;
  active_version: number | null;
  latest_version: number;
  secret_names: string[];
  created_at: Date;
  updated_at: Date;
}

export interface VersionRow {
  id: number;
  function_id: number;
  version: number;
  code_size: number;
  created_at: Date;
  active: boolean;
  code?: string;
}

export interface TriggerRow {
  id: number;
  app_id: number;
  function_id: number;
  kind: "http" | "event";
  slug: string | null;
  source: "db" | "cms" | null;
  target: string | null;
  operations: string[];
  enabled: boolean;
  created_at: Date;
}

/** Everything one invocation needs, read in one statement. */
export interface ResolvedRow {
  app_id: number;
  plan: PlanLimits;
  trigger_id: number | null;
  function_id: number | null;
  timeout_ms: number;
  memory_mb: number;
  invocations_per_minute: number;
  active_version: number | null;
  version_id: number | null;
  version: number | null;
  env: Record<string, string>;
}

const FN_COLS = `f.id, f.app_id, f.name, f.timeout_ms, f.memory_mb, f.invocations_per_minute, f.active_version,
  f.next_version - 1 AS latest_version, f.created_at, f.updated_at,
  COALESCE((SELECT array_agg(s.name ORDER BY s.name) FROM function_secrets s WHERE s.function_id = f.id), '{}') AS secret_names`;

const TRIGGER_COLS = "id, app_id, function_id, kind, slug, source, target, operations, enabled, created_at";

export interface Settings {
  timeoutMs: number;
  memoryMb: number;
  invocationsPerMinute: number;
}

export function createFunctionStore(sql: Sql) {
  // Columns of a resolved invocation target; `f` and `v` are joined by the caller.
  const RESOLVED_COLS = `a.id AS app_id, a.plan, f.id AS function_id, f.timeout_ms, f.memory_mb, f.invocations_per_minute, f.active_version,
    v.id AS version_id, v.version,
    (SELECT COALESCE(jsonb_object_agg(s.name, s.value), '{}'::jsonb) FROM function_secrets s WHERE s.function_id = f.id) AS env`;

  const toResolved = (r: Record<string, unknown> | undefined): ResolvedRow | undefined => {
    if (!r) return undefined;
    return {
      app_id: r.app_id as number,
      plan: normalisePlan((typeof r.plan === "string" ? JSON.parse(r.plan) : r.plan) as Partial<PlanLimits>),
      trigger_id: (r.trigger_id as number | null) ?? null,
      function_id: (r.function_id as number | null) ?? null,
      timeout_ms: r.timeout_ms as number,
      memory_mb: r.memory_mb as number,
      invocations_per_minute: (r.invocations_per_minute as number) ?? 0,
      active_version: (r.active_version as number | null) ?? null,
      version_id: (r.version_id as number | null) ?? null,
      version: (r.version as number | null) ?? null,
      env: (typeof r.env === "string" ? JSON.parse(r.env) : (r.env ?? {})) as Record<string, string>,
    };
  };

  return {
    async appPlan(appId: number): Promise<PlanLimits | undefined> {
      const r = await sql.query<{ plan: unknown }>("SELECT plan FROM apps WHERE id = $1", [appId]);
      const p = r.rows[0]?.plan;
      if (!r.rows[0]) return undefined;
      return normalisePlan((typeof p === "string" ? JSON.parse(p) : p) as Partial<PlanLimits>);
    },

    async create(appId: number, name: string, s: Settings): Promise<FunctionRow> {
      const r = await sql.query<FunctionRow>(
        `WITH f AS (INSERT INTO functions (app_id, name, timeout_ms, memory_mb, invocations_per_minute)
           VALUES ($1, $2, $3, $4, $5) RETURNING *)
         SELECT f.id, f.app_id, f.name, f.timeout_ms, f.memory_mb, f.invocations_per_minute, f.active_version,
           0 AS latest_version, f.created_at, f.updated_at, '{}'::text[] AS secret_names FROM f`,
        [appId, name, s.timeoutMs, s.memoryMb, s.invocationsPerMinute],
      );
      return r.rows[0]!;
    },

    async get(id: number): Promise<FunctionRow | undefined> {
      const r = await sql.query<FunctionRow>(`SELECT ${FN_COLS} FROM functions f WHERE f.id = $1`, [id]);
      return r.rows[0];
    },

    async list(appId: number, afterId: number, limit: number): Promise<FunctionRow[]> {
      const r = await sql.query<FunctionRow>(
        `SELECT ${FN_COLS} FROM functions f WHERE f.app_id = $1 AND f.id > $2 ORDER BY f.id LIMIT $3`,
        [appId, afterId, limit],
      );
      return r.rows;
    },

    async updateSettings(id: number, s: Settings): Promise<boolean> {
      const r = await sql.query(
        "UPDATE functions SET timeout_ms = $2, memory_mb = $3, invocations_per_minute = $4, updated_at = now() WHERE id = $1",
        [id, s.timeoutMs, s.memoryMb, s.invocationsPerMinute],
      );
      return r.rowCount > 0;
    },

    async delete(id: number): Promise<number[]> {
      // Returns the version ids so their isolates can be released.
      const r = await sql.query<{ ids: number[] | null }>(
        `WITH v AS (SELECT array_agg(id) AS ids FROM function_versions WHERE function_id = $1),
              d AS (DELETE FROM functions WHERE id = $1 RETURNING id)
         SELECT (SELECT ids FROM v) AS ids FROM d`,
        [id],
      );
      if (!r.rows[0]) throw new NotFound();
      return (r.rows[0].ids ?? []).map(Number);
    },

    async setSecret(functionId: number, name: string, value: string): Promise<void> {
      await sql.query(
        `INSERT INTO function_secrets (function_id, name, value) VALUES ($1, $2, $3)
         ON CONFLICT (function_id, name) DO UPDATE SET value = EXCLUDED.value, updated_at = now()`,
        [functionId, name, value],
      );
    },

    async deleteSecret(functionId: number, name: string): Promise<boolean> {
      const r = await sql.query("DELETE FROM function_secrets WHERE function_id = $1 AND name = $2", [functionId, name]);
      return r.rowCount > 0;
    },

    /** Stores the next version number atomically (and activates it when asked). */
    async insertVersion(functionId: number, code: string, activate: boolean): Promise<VersionRow | undefined> {
      const r = await sql.query<VersionRow>(
        `WITH n AS (
           UPDATE functions SET next_version = next_version + 1, updated_at = now(),
             active_version = CASE WHEN $3 THEN next_version ELSE active_version END
           WHERE id = $1 RETURNING id, next_version - 1 AS v, active_version)
         INSERT INTO function_versions (function_id, version, code)
         SELECT id, v, $2 FROM n
         RETURNING id, function_id, version, octet_length(code) AS code_size, created_at, $3::boolean AS active`,
        [functionId, code, activate],
      );
      return r.rows[0];
    },

    async listVersions(functionId: number): Promise<VersionRow[]> {
      const r = await sql.query<VersionRow>(
        `SELECT v.id, v.function_id, v.version, octet_length(v.code) AS code_size, v.created_at,
                (f.active_version IS NOT DISTINCT FROM v.version) AS active
         FROM function_versions v JOIN functions f ON f.id = v.function_id
         WHERE v.function_id = $1 ORDER BY v.version DESC`,
        [functionId],
      );
      return r.rows;
    },

    /** Activates an existing version; returns the previously active version's id. */
    async activate(functionId: number, version: number): Promise<{ ok: boolean; previousVersionId: number | null }> {
      const r = await sql.query<{ prev: number | null }>(
        `WITH prev AS (SELECT v.id FROM functions f JOIN function_versions v ON v.function_id = f.id AND v.version = f.active_version WHERE f.id = $1)
         UPDATE functions f SET active_version = $2, updated_at = now()
         WHERE f.id = $1 AND EXISTS (SELECT 1 FROM function_versions v WHERE v.function_id = $1 AND v.version = $2)
         RETURNING (SELECT id FROM prev) AS prev`,
        [functionId, version],
      );
      return { ok: r.rows.length > 0, previousVersionId: r.rows[0]?.prev ?? null };
    },

    async versionCode(versionId: number): Promise<string | undefined> {
      const r = await sql.query<{ code: string }>("SELECT code FROM function_versions WHERE id = $1", [versionId]);
      return r.rows[0]?.code;
    },

    async createHttpTrigger(functionId: number, slug: string, enabled: boolean): Promise<TriggerRow | undefined> {
      const r = await sql.query<TriggerRow>(
        `INSERT INTO function_triggers (app_id, function_id, kind, slug, enabled)
         SELECT app_id, id, 'http', $2, $3 FROM functions WHERE id = $1 RETURNING ${TRIGGER_COLS}`,
        [functionId, slug, enabled],
      );
      return r.rows[0];
    },

    async createEventTrigger(functionId: number, source: string, target: string, operations: string[], enabled: boolean): Promise<TriggerRow | undefined> {
      const r = await sql.query<TriggerRow>(
        `INSERT INTO function_triggers (app_id, function_id, kind, source, target, operations, enabled)
         SELECT app_id, id, 'event', $2, $3, $4::text[], $5 FROM functions WHERE id = $1 RETURNING ${TRIGGER_COLS}`,
        [functionId, source, target, operations, enabled],
      );
      return r.rows[0];
    },

    async getTrigger(triggerId: number): Promise<TriggerRow | undefined> {
      const r = await sql.query<TriggerRow>(`SELECT ${TRIGGER_COLS} FROM function_triggers WHERE id = $1`, [triggerId]);
      return r.rows[0];
    },

    async setTriggerEnabled(triggerId: number, enabled: boolean): Promise<TriggerRow | undefined> {
      const r = await sql.query<TriggerRow>(
        `UPDATE function_triggers SET enabled = $2 WHERE id = $1 RETURNING ${TRIGGER_COLS}`,
        [triggerId, enabled],
      );
      return r.rows[0];
    },

    async deleteTrigger(triggerId: number): Promise<boolean> {
      const r = await sql.query("DELETE FROM function_triggers WHERE id = $1", [triggerId]);
      return r.rowCount > 0;
    },

    async listTriggers(functionId: number): Promise<TriggerRow[]> {
      const r = await sql.query<TriggerRow>(
        `SELECT ${TRIGGER_COLS} FROM function_triggers WHERE function_id = $1 ORDER BY id`,
        [functionId],
      );
      return r.rows;
    },

    /** Enabled event triggers of an app watching `source`/`target` for `operation`. */
    async eventTriggers(appId: number, source: string, target: string, operation: string): Promise<TriggerRow[]> {
      const r = await sql.query<TriggerRow>(
        `SELECT ${TRIGGER_COLS} FROM function_triggers
         WHERE app_id = $1 AND kind = 'event' AND source = $2 AND target = $3 AND enabled AND $4 = ANY (operations)
         ORDER BY id`,
        [appId, source, target, operation],
      );
      return r.rows;
    },

    /** The app's plan, the enabled HTTP trigger of `slug` and its function's active version. */
    async resolveHttp(appId: number, slug: string): Promise<ResolvedRow | undefined> {
      const r = await sql.query(
        `SELECT t.id AS trigger_id, ${RESOLVED_COLS}
         FROM apps a
         LEFT JOIN function_triggers t ON t.app_id = a.id AND t.kind = 'http' AND t.slug = $2 AND t.enabled
         LEFT JOIN functions f ON f.id = t.function_id
         LEFT JOIN function_versions v ON v.function_id = f.id AND v.version = f.active_version
         WHERE a.id = $1`,
        [appId, slug],
      );
      return toResolved(r.rows[0]);
    },

    /** A function with the given version (0 = the active one), for manual and event runs. */
    async resolveFunction(functionId: number, version: number): Promise<ResolvedRow | undefined> {
      const r = await sql.query(
        `SELECT NULL::bigint AS trigger_id, ${RESOLVED_COLS}
         FROM functions f
         JOIN apps a ON a.id = f.app_id
         LEFT JOIN function_versions v ON v.function_id = f.id
           AND v.version = CASE WHEN $2::int > 0 THEN $2::int ELSE f.active_version END
         WHERE f.id = $1`,
        [functionId, version],
      );
      return toResolved(r.rows[0]);
    },
  };
}

export class NotFound extends Error {}

export type FunctionStore = ReturnType<typeof createFunctionStore>;

export interface InvocationRow {
  id: number;
  function_id: number;
  version: number | null;
  trigger_kind: string;
  trigger_id: number | null;
  status: number;
  outcome: string;
  duration_ms: number;
  memory_bytes: number;
  error: string | null;
  logs: Array<{ level: string; message: string }>;
  logs_truncated: boolean;
  request_id: string;
  created_at: Date;
}

/** Newest first, keyset-paged by id. */
export async function listInvocations(sql: Sql, functionId: number, beforeId: number, limit: number): Promise<InvocationRow[]> {
  const r = await sql.query<InvocationRow>(
    `SELECT id, function_id, version, trigger_kind, trigger_id, status, outcome, duration_ms, memory_bytes, error,
            logs, logs_truncated, request_id, created_at
     FROM function_invocations WHERE function_id = $1 AND ($2::bigint = 0 OR id < $2) ORDER BY id DESC LIMIT $3`,
    [functionId, beforeId, limit],
  );
  return r.rows.map((row) => ({ ...row, logs: typeof row.logs === "string" ? JSON.parse(row.logs) : row.logs }));
}
