// SQL for functions, versions, secrets and triggers. Each method is one
// statement (set-based), so it runs the same on PostgreSQL and PGlite.
import { createHash } from "node:crypto";
import type { Sql } from "../../infra/storage/sql.js";
import { normalisePlan, type PlanLimits } from "../identity/index.js";

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
  code_sha256: string;
  code?: string;
}

export type TriggerAuth = "consumer" | "public" | "signed";

export interface TriggerRow {
  id: number;
  app_id: number;
  function_id: number;
  kind: "http" | "event" | "schedule";
  slug: string | null;
  source: "db" | "cms" | null;
  target: string | null;
  operations: string[];
  enabled: boolean;
  created_at: Date;
  auth: TriggerAuth;
  signing_secret: string | null;
  signature_header: string | null;
  signature_tolerance_s: number | null;
  cron: string | null;
  timezone: string | null;
  missed_ticks: "skip" | "run_once" | null;
  next_run_at: Date | null;
}

/** What the signature check of a signed HTTP trigger needs. */
export interface SignedTrigger {
  secret: string;
  header: string;
  toleranceS: number;
}

/** Everything one invocation needs, read in one statement. */
export interface ResolvedRow {
  app_id: number;
  plan: PlanLimits;
  trigger_id: number | null;
  /** HTTP resolutions: the trigger's authentication mode ("consumer" otherwise). */
  trigger_auth: TriggerAuth;
  /** Signed HTTP triggers. */
  signed: SignedTrigger | null;
  function_id: number | null;
  /** The function's name (its module's name in stack frames); "" when no function matched. */
  function_name: string;
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

const TRIGGER_COLS = `id, app_id, function_id, kind, slug, source, target, operations, enabled, created_at,
  auth, signing_secret, signature_header, signature_tolerance_s, cron, timezone, missed_ticks, next_run_at`;
const VERSION_COLS = "id, function_id, version, octet_length(code) AS code_size, created_at, code_sha256";

export function sha256Hex(code: string): string {
  return createHash("sha256").update(code, "utf8").digest("hex");
}

export interface Settings {
  timeoutMs: number;
  memoryMb: number;
  invocationsPerMinute: number;
}

export function createFunctionStore(sql: Sql) {
  // Columns of a resolved invocation target; `f` and `v` are joined by the caller.
  const RESOLVED_COLS = `a.id AS app_id, a.plan, f.id AS function_id, f.name AS function_name, f.timeout_ms, f.memory_mb, f.invocations_per_minute, f.active_version,
    v.id AS version_id, v.version,
    (SELECT COALESCE(jsonb_object_agg(s.name, s.value), '{}'::jsonb) FROM function_secrets s WHERE s.function_id = f.id) AS env`;


  const toResolved = (r: Record<string, unknown> | undefined): ResolvedRow | undefined => {
    if (!r) return undefined;
    return {
      app_id: r.app_id as number,
      plan: normalisePlan((typeof r.plan === "string" ? JSON.parse(r.plan) : r.plan) as Partial<PlanLimits>),
      trigger_id: (r.trigger_id as number | null) ?? null,
      trigger_auth: ((r.trigger_auth as TriggerAuth | null) ?? "consumer"),
      signed: r.trigger_auth === "signed"
        ? { secret: r.signing_secret as string, header: r.signature_header as string, toleranceS: r.signature_tolerance_s as number }
        : null,
      function_id: (r.function_id as number | null) ?? null,
      function_name: (r.function_name as string | null) ?? "",
      timeout_ms: r.timeout_ms as number,
      memory_mb: r.memory_mb as number,
      invocations_per_minute: (r.invocations_per_minute as number) ?? 0,
      active_version: (r.active_version as number | null) ?? null,
      version_id: (r.version_id as number | null) ?? null,
      version: (r.version as number | null) ?? null,
      env: (typeof r.env === "string" ? JSON.parse(r.env) : (r.env ?? {})) as Record<string, string>,
    };
  };

  /** The app (named by `appWhere` on $1), the enabled HTTP trigger of `slug` and its function's active version. */
  const resolveHttpWhere = async (appWhere: string, app: number | string, slug: string): Promise<ResolvedRow | undefined> => {
    const r = await sql.query(
      `SELECT t.id AS trigger_id, t.auth AS trigger_auth, t.signing_secret, t.signature_header, t.signature_tolerance_s, ${RESOLVED_COLS}
       FROM apps a
       LEFT JOIN function_triggers t ON t.app_id = a.id AND t.kind = 'http' AND t.slug = $2 AND t.enabled
       LEFT JOIN functions f ON f.id = t.function_id
       LEFT JOIN function_versions v ON v.function_id = f.id AND v.version = f.active_version
       WHERE ${appWhere}`,
      [app, slug],
    );
    return toResolved(r.rows[0]);
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

    /**
     * Stores the code as the next version (activated when asked), unless a
     * version with the very same code exists: then that one is returned
     * (activated when asked), with `existing` true. Deploys of one function
     * are serialised by the function's row lock, so two identical deploys at
     * once make one version.
     */
    async insertVersion(functionId: number, code: string, activate: boolean): Promise<(VersionRow & { existing: boolean; previous_active_id: number | null }) | undefined> {
      return sql.transaction(async (tx) => {
        const f = await tx.query<{ active_version: number | null; prev_id: number | null }>(
          `SELECT f.active_version, (SELECT v.id FROM function_versions v WHERE v.function_id = f.id AND v.version = f.active_version) AS prev_id
           FROM functions f WHERE f.id = $1 FOR UPDATE`,
          [functionId],
        );
        if (!f.rows[0]) return undefined;
        const prev = f.rows[0].prev_id ?? null;
        const hash = sha256Hex(code);
        const same = await tx.query<VersionRow>(
          `SELECT ${VERSION_COLS} FROM function_versions WHERE function_id = $1 AND code_sha256 = $2 AND code = $3 ORDER BY version DESC LIMIT 1`,
          [functionId, hash, code],
        );
        const hit = same.rows[0];
        if (hit) {
          if (activate) await tx.query("UPDATE functions SET active_version = $2, updated_at = now() WHERE id = $1", [functionId, hit.version]);
          const active = activate || f.rows[0].active_version === hit.version;
          return { ...hit, active, existing: true, previous_active_id: activate && prev !== hit.id ? prev : null };
        }
        const r = await tx.query<VersionRow>(
          `WITH n AS (
             UPDATE functions SET next_version = next_version + 1, updated_at = now(),
               active_version = CASE WHEN $3 THEN next_version ELSE active_version END
             WHERE id = $1 RETURNING id, next_version - 1 AS v)
           INSERT INTO function_versions (function_id, version, code, code_sha256)
           SELECT id, v, $2, $4 FROM n
           RETURNING ${VERSION_COLS}, $3::boolean AS active`,
          [functionId, code, activate, hash],
        );
        return { ...r.rows[0]!, existing: false, previous_active_id: activate ? prev : null };
      });
    },

    /** A new function with its first version, active, in one transaction (nothing is left when either fails). */
    async createWithVersion(appId: number, name: string, s: Settings, code: string): Promise<FunctionRow> {
      return sql.transaction(async (tx) => {
        const f = await tx.query<{ id: number }>(
          `INSERT INTO functions (app_id, name, timeout_ms, memory_mb, invocations_per_minute, active_version, next_version)
           VALUES ($1, $2, $3, $4, $5, 1, 2) RETURNING id`,
          [appId, name, s.timeoutMs, s.memoryMb, s.invocationsPerMinute],
        );
        const id = f.rows[0]!.id;
        await tx.query("INSERT INTO function_versions (function_id, version, code, code_sha256) VALUES ($1, 1, $2, $3)", [id, code, sha256Hex(code)]);
        const r = await tx.query<FunctionRow>(`SELECT ${FN_COLS} FROM functions f WHERE f.id = $1`, [id]);
        return r.rows[0]!;
      });
    },

    /** One version with its code. */
    async getVersion(functionId: number, version: number): Promise<VersionRow | undefined> {
      const r = await sql.query<VersionRow>(
        `SELECT v.id, v.function_id, v.version, octet_length(v.code) AS code_size, v.created_at, v.code_sha256, v.code,
                (f.active_version IS NOT DISTINCT FROM v.version) AS active
         FROM function_versions v JOIN functions f ON f.id = v.function_id
         WHERE v.function_id = $1 AND v.version = $2`,
        [functionId, version],
      );
      return r.rows[0];
    },

    async listVersions(functionId: number): Promise<VersionRow[]> {
      const r = await sql.query<VersionRow>(
        `SELECT v.id, v.function_id, v.version, octet_length(v.code) AS code_size, v.created_at, v.code_sha256,
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

    async createHttpTrigger(
      functionId: number,
      slug: string,
      enabled: boolean,
      auth: TriggerAuth = "consumer",
      signed: SignedTrigger | null = null,
    ): Promise<TriggerRow | undefined> {
      const r = await sql.query<TriggerRow>(
        `INSERT INTO function_triggers (app_id, function_id, kind, slug, enabled, auth, signing_secret, signature_header, signature_tolerance_s)
         SELECT app_id, id, 'http', $2, $3, $4, $5, $6, $7 FROM functions WHERE id = $1 RETURNING ${TRIGGER_COLS}`,
        [functionId, slug, enabled, auth, signed?.secret ?? null, signed?.header ?? null, signed?.toleranceS ?? null],
      );
      return r.rows[0];
    },

    async createScheduleTrigger(
      functionId: number,
      s: { cron: string; timezone: string; missedTicks: "skip" | "run_once"; enabled: boolean; nextRunAt: Date },
      maxPerApp: number,
    ): Promise<TriggerRow | undefined | "limit"> {
      // The application's row lock serialises creations, so the limit holds.
      return sql.transaction(async (tx) => {
        const f = await tx.query<{ app_id: number; n: number }>(
          `SELECT f.app_id, (SELECT count(*)::int FROM function_triggers t WHERE t.app_id = f.app_id AND t.kind = 'schedule') AS n
           FROM functions f JOIN apps a ON a.id = f.app_id WHERE f.id = $1 FOR UPDATE OF a`,
          [functionId],
        );
        if (!f.rows[0]) return undefined;
        if (f.rows[0].n >= maxPerApp) return "limit" as const;
        const r = await tx.query<TriggerRow>(
          `INSERT INTO function_triggers (app_id, function_id, kind, cron, timezone, missed_ticks, enabled, next_run_at)
           VALUES ($1, $2, 'schedule', $3, $4, $5, $6, $7) RETURNING ${TRIGGER_COLS}`,
          [f.rows[0].app_id, functionId, s.cron, s.timezone, s.missedTicks, s.enabled, s.nextRunAt],
        );
        return r.rows[0];
      });
    },

    /** A schedule's new expression, zone and policy, going on from `nextRunAt`; undefined when it is not a schedule. */
    async updateScheduleTrigger(
      triggerId: number,
      s: { cron: string; timezone: string; missedTicks: "skip" | "run_once"; nextRunAt: Date },
    ): Promise<TriggerRow | undefined> {
      const r = await sql.query<TriggerRow>(
        `UPDATE function_triggers SET cron = $2, timezone = $3, missed_ticks = $4, next_run_at = $5
         WHERE id = $1 AND kind = 'schedule' RETURNING ${TRIGGER_COLS}`,
        [triggerId, s.cron, s.timezone, s.missedTicks, s.nextRunAt],
      );
      return r.rows[0];
    },

    /** Sets a signed trigger's secret; undefined when it is not a signed HTTP trigger. */
    async setSigningSecret(triggerId: number, secret: string): Promise<TriggerRow | undefined> {
      const r = await sql.query<TriggerRow>(
        `UPDATE function_triggers SET signing_secret = $2 WHERE id = $1 AND kind = 'http' AND auth = 'signed' RETURNING ${TRIGGER_COLS}`,
        [triggerId, secret],
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

    /** A schedule that is (re)enabled starts from its next tick after now (`nextRunAt`): disabled time is not caught up. */
    async setTriggerEnabled(triggerId: number, enabled: boolean, nextRunAt?: Date): Promise<TriggerRow | undefined> {
      const r = await sql.query<TriggerRow>(
        `UPDATE function_triggers SET enabled = $2,
           next_run_at = CASE WHEN kind = 'schedule' AND $2 AND NOT enabled THEN $3::timestamptz ELSE next_run_at END
         WHERE id = $1 RETURNING ${TRIGGER_COLS}`,
        [triggerId, enabled, nextRunAt ?? null],
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
    resolveHttp: (appId: number, slug: string) => resolveHttpWhere("a.id = $1", appId, slug),
    /** As resolveHttp, the application named by its key (token-less calls of public and signed triggers). */
    resolveHttpByKey: (appKey: string, slug: string) => resolveHttpWhere("a.app_key = $1", appKey, slug),

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
  error_name: string | null;
  error_message: string | null;
  error_stack: string | null;
  logs: Array<{ level: string; message: string }>;
  logs_truncated: boolean;
  request_id: string;
  created_at: Date;
}

const INVOCATION_COLS = `id, function_id, version, trigger_kind, trigger_id, status, outcome, duration_ms, memory_bytes, error,
  error_name, error_message, error_stack, logs, logs_truncated, request_id, created_at`;

const parseLogs = (row: InvocationRow): InvocationRow => ({ ...row, logs: typeof row.logs === "string" ? JSON.parse(row.logs) : row.logs });

/** Newest first, keyset-paged by id. */
export async function listInvocations(sql: Sql, functionId: number, beforeId: number, limit: number): Promise<InvocationRow[]> {
  const r = await sql.query<InvocationRow>(
    `SELECT ${INVOCATION_COLS}
     FROM function_invocations WHERE function_id = $1 AND ($2::bigint = 0 OR id < $2) ORDER BY id DESC LIMIT $3`,
    [functionId, beforeId, limit],
  );
  return r.rows.map(parseLogs);
}

/** Oldest first after `afterId` (following a function's log). */
export async function invocationsAfter(sql: Sql, functionId: number, afterId: number, limit: number): Promise<InvocationRow[]> {
  const r = await sql.query<InvocationRow>(
    `SELECT ${INVOCATION_COLS} FROM function_invocations WHERE function_id = $1 AND id > $2 ORDER BY id LIMIT $3`,
    [functionId, afterId, limit],
  );
  return r.rows.map(parseLogs);
}

/** The id of the newest invocation of a function (0 when none). */
export async function lastInvocationId(sql: Sql, functionId: number): Promise<number> {
  const r = await sql.query<{ id: number | null }>("SELECT max(id) AS id FROM function_invocations WHERE function_id = $1", [functionId]);
  return Number(r.rows[0]?.id ?? 0);
}
