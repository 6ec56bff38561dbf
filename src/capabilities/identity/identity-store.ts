// PostgreSQL access for users, teams, apps, consumers and sessions. Each
// method is one statement (or one transaction); the services above decide.
import { randomBytes } from "node:crypto";
import type { Sql } from "../../infra/storage/sql.js";
import { normalisePlan, type PlanLimits } from "./plan.js";

export interface UserRow { id: number; name: string; email: string; created_at: Date }
export interface TeamRow { id: number; name: string; created_at: Date; member_user_ids: number[] }
export interface AppRow {
  id: number;
  team_id: number;
  name: string;
  app_key: string;
  plan: PlanLimits;
  strict_token_mode: boolean;
  created_at: Date;
}
export interface ConsumerRow {
  id: number;
  app_id: number;
  user_id: string;
  user_email: string | null;
  device_id: string;
  device_model: string;
  os: string;
  country: string;
  language: string;
  created_at: Date;
  updated_at: Date;
}
export interface SessionRow { id: number; consumer_id: number; app_id: number; started_at: Date; ended_at: Date | null }
export interface ConsumerAuthRow { consumer_id: number; app_id: number; app_key: string; user_id: string; device_id: string }

export interface Page { limit: number; afterId: number }

export function newAppKey(): string {
  return "pk_" + randomBytes(24).toString("base64url");
}

const APP_COLS = "id, team_id, name, app_key, plan, strict_token_mode, created_at";
const CONSUMER_COLS = "id, app_id, user_id, user_email, device_id, device_model, os, country, language, created_at, updated_at";

function appRow(r: AppRow): AppRow {
  return { ...r, plan: normalisePlan(typeof r.plan === "string" ? JSON.parse(r.plan) : r.plan) };
}

export class IdentityStore {
  constructor(readonly sql: Sql) {}

  async createUser(name: string, email: string): Promise<UserRow> {
    const { rows } = await this.sql.query<UserRow>(
      "INSERT INTO users (name, email) VALUES ($1, $2) RETURNING id, name, email, created_at",
      [name, email],
    );
    return rows[0]!;
  }

  async createTeam(name: string, memberIds: number[]): Promise<TeamRow> {
    return this.sql.transaction(async (tx) => {
      const { rows } = await tx.query<TeamRow>("INSERT INTO teams (name) VALUES ($1) RETURNING id, name, created_at", [name]);
      const team = rows[0]!;
      if (memberIds.length) {
        await tx.query(
          `INSERT INTO team_members (team_id, user_id, role)
           SELECT $1, u, CASE WHEN o = 1 THEN 'owner' ELSE 'member' END
           FROM unnest($2::bigint[]) WITH ORDINALITY AS m(u, o)`,
          [team.id, memberIds],
        );
      }
      return { ...team, member_user_ids: memberIds };
    });
  }

  async teamExists(id: number): Promise<boolean> {
    const { rows } = await this.sql.query("SELECT 1 FROM teams WHERE id = $1", [id]);
    return rows.length > 0;
  }

  async createApp(teamId: number, name: string, plan: PlanLimits): Promise<AppRow> {
    const { rows } = await this.sql.query<AppRow>(
      `INSERT INTO apps (team_id, name, app_key, plan) VALUES ($1, $2, $3, $4) RETURNING ${APP_COLS}`,
      [teamId, name, newAppKey(), JSON.stringify(plan)],
    );
    return appRow(rows[0]!);
  }

  async getApp(id: number): Promise<AppRow | undefined> {
    const { rows } = await this.sql.query<AppRow>(`SELECT ${APP_COLS} FROM apps WHERE id = $1`, [id]);
    return rows[0] && appRow(rows[0]);
  }

  async getAppByKey(key: string): Promise<AppRow | undefined> {
    // No key holds U+0000, and PostgreSQL would refuse the parameter (a 500).
    if (key.includes("\u0000")) return undefined;
    const { rows } = await this.sql.query<AppRow>(`SELECT ${APP_COLS} FROM apps WHERE app_key = $1`, [key]);
    return rows[0] && appRow(rows[0]);
  }

  async listApps(teamId: number | undefined, page: Page): Promise<AppRow[]> {
    const { rows } = await this.sql.query<AppRow>(
      `SELECT ${APP_COLS} FROM apps WHERE ($1::bigint IS NULL OR team_id = $1) AND id > $2 ORDER BY id LIMIT $3`,
      [teamId ?? null, page.afterId, page.limit],
    );
    return rows.map(appRow);
  }

  async rotateAppKey(id: number): Promise<AppRow | undefined> {
    const { rows } = await this.sql.query<AppRow>(
      `UPDATE apps SET app_key = $2 WHERE id = $1 RETURNING ${APP_COLS}`,
      [id, newAppKey()],
    );
    return rows[0] && appRow(rows[0]);
  }

  async updateApp(id: number, patch: { plan?: PlanLimits; strictTokenMode?: boolean; name?: string }): Promise<AppRow | undefined> {
    const { rows } = await this.sql.query<AppRow>(
      `UPDATE apps SET plan = COALESCE($2::jsonb, plan),
                       strict_token_mode = COALESCE($3::boolean, strict_token_mode),
                       name = COALESCE($4::text, name)
       WHERE id = $1 RETURNING ${APP_COLS}`,
      [id, patch.plan ? JSON.stringify(patch.plan) : null, patch.strictTokenMode ?? null, patch.name ?? null],
    );
    return rows[0] && appRow(rows[0]);
  }

  /** Registration: insert, or update the consumer with the same (app, device, user). */
  async upsertConsumer(appId: number, c: Omit<ConsumerRow, "id" | "app_id" | "created_at" | "updated_at">): Promise<ConsumerRow> {
    const { rows } = await this.sql.query<ConsumerRow>(
      `INSERT INTO consumers (app_id, user_id, user_email, device_id, device_model, os, country, language)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
       ON CONFLICT (app_id, device_id, user_id) DO UPDATE SET
         user_email = COALESCE(EXCLUDED.user_email, consumers.user_email),
         device_model = EXCLUDED.device_model, os = EXCLUDED.os,
         country = EXCLUDED.country, language = EXCLUDED.language, updated_at = now()
       RETURNING ${CONSUMER_COLS}`,
      [appId, c.user_id, c.user_email, c.device_id, c.device_model, c.os, c.country, c.language],
    );
    return rows[0]!;
  }

  async updateConsumer(
    id: number,
    appId: number,
    patch: { user_id?: string; user_email?: string; country?: string; language?: string },
  ): Promise<ConsumerRow | undefined> {
    const { rows } = await this.sql.query<ConsumerRow>(
      `UPDATE consumers SET user_id = COALESCE($3, user_id), user_email = COALESCE($4, user_email),
         country = COALESCE($5, country), language = COALESCE($6, language), updated_at = now()
       WHERE id = $1 AND app_id = $2 RETURNING ${CONSUMER_COLS}`,
      [id, appId, patch.user_id ?? null, patch.user_email ?? null, patch.country ?? null, patch.language ?? null],
    );
    return rows[0];
  }

  async getConsumer(id: number): Promise<ConsumerRow | undefined> {
    const { rows } = await this.sql.query<ConsumerRow>(`SELECT ${CONSUMER_COLS} FROM consumers WHERE id = $1`, [id]);
    return rows[0];
  }

  /** What token verification needs: the consumer and its app's current key. */
  async consumerAuth(id: number): Promise<ConsumerAuthRow | undefined> {
    const { rows } = await this.sql.query<ConsumerAuthRow>(
      `SELECT c.id AS consumer_id, c.app_id, a.app_key, c.user_id, c.device_id
       FROM consumers c JOIN apps a ON a.id = c.app_id WHERE c.id = $1`,
      [id],
    );
    return rows[0];
  }

  /** The deleted consumer's application id; undefined when there was no such consumer. */
  async deleteConsumer(id: number): Promise<number | undefined> {
    const { rows } = await this.sql.query<{ app_id: string | number }>("DELETE FROM consumers WHERE id = $1 RETURNING app_id", [id]);
    return rows[0] ? Number(rows[0].app_id) : undefined;
  }

  async listConsumers(appId: number, page: Page): Promise<ConsumerRow[]> {
    const { rows } = await this.sql.query<ConsumerRow>(
      `SELECT ${CONSUMER_COLS} FROM consumers WHERE app_id = $1 AND id > $2 ORDER BY id LIMIT $3`,
      [appId, page.afterId, page.limit],
    );
    return rows;
  }

  async startSession(consumerId: number, appId: number): Promise<SessionRow> {
    const { rows } = await this.sql.query<SessionRow>(
      "INSERT INTO sessions (consumer_id, app_id, started_at) VALUES ($1, $2, now()) RETURNING id, consumer_id, app_id, started_at, ended_at",
      [consumerId, appId],
    );
    return rows[0]!;
  }

  /**
   * Ends an active session of the consumer. Returns the updated row, or the
   * current row (unchanged) when it could not be ended, or undefined when the
   * consumer has no such session.
   */
  async endSession(id: number, consumerId: number, at: Date | null): Promise<{ row?: SessionRow; ended: boolean }> {
    const { rows } = await this.sql.query<SessionRow & { ended: boolean }>(
      `WITH upd AS (
         UPDATE sessions SET ended_at = COALESCE($3::timestamptz, now())
         WHERE id = $1 AND consumer_id = $2 AND ended_at IS NULL AND COALESCE($3::timestamptz, now()) >= started_at
         RETURNING id, consumer_id, app_id, started_at, ended_at)
       SELECT *, true AS ended FROM upd
       UNION ALL
       SELECT id, consumer_id, app_id, started_at, ended_at, false FROM sessions
       WHERE id = $1 AND consumer_id = $2 AND NOT EXISTS (SELECT 1 FROM upd)`,
      [id, consumerId, at],
    );
    const r = rows[0];
    if (!r) return { ended: false };
    const { ended, ...row } = r;
    return { row, ended };
  }

  /** One statement for the whole batch; rows come back in input order. */
  async insertSessions(consumerId: number, appId: number, items: { startedAt: Date; endedAt: Date }[]): Promise<SessionRow[]> {
    const { rows } = await this.sql.query<SessionRow>(
      `INSERT INTO sessions (consumer_id, app_id, started_at, ended_at)
       SELECT $1, $2, s, e FROM unnest($3::timestamptz[], $4::timestamptz[]) WITH ORDINALITY AS t(s, e, o) ORDER BY o
       RETURNING id, consumer_id, app_id, started_at, ended_at`,
      [consumerId, appId, items.map((i) => i.startedAt.toISOString()), items.map((i) => i.endedAt.toISOString())],
    );
    return rows.sort((a, b) => a.id - b.id);
  }

  async listSessions(consumerId: number, page: Page): Promise<SessionRow[]> {
    const { rows } = await this.sql.query<SessionRow>(
      `SELECT id, consumer_id, app_id, started_at, ended_at FROM sessions
       WHERE consumer_id = $1 AND id > $2 ORDER BY id LIMIT $3`,
      [consumerId, page.afterId, page.limit],
    );
    return rows;
  }
}
