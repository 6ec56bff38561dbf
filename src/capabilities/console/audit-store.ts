// The audit log: one row per admin mutation attempt (who, what, which
// resource, which team, the outcome, from where). Append-only from the
// service; read newest first.
import type { Sql } from "../../infra/storage/sql.js";

export interface AuditRecord {
  actorKind: "user" | "service" | "anonymous";
  actorUserId?: number;
  actorEmail: string;
  method: string;
  resource: Record<string, string>;
  teamId?: number;
  outcome: string;
  address: string;
  userAgent: string;
}

export interface AuditRow {
  id: number;
  at: Date;
  actor_kind: string;
  actor_user_id: number | null;
  actor_email: string;
  method: string;
  resource: Record<string, string> | string;
  team_id: number | null;
  outcome: string;
  address: string;
  user_agent: string;
}

export class AuditStore {
  constructor(readonly sql: Sql) {}

  async append(r: AuditRecord): Promise<void> {
    await this.sql.query(
      `INSERT INTO audit_log (actor_kind, actor_user_id, actor_email, method, resource, team_id, outcome, address, user_agent)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
      [r.actorKind, r.actorUserId ?? null, r.actorEmail, r.method, JSON.stringify(r.resource), r.teamId ?? null, r.outcome, r.address, r.userAgent.slice(0, 300)],
    );
  }

  /** Newest first, before the id `beforeId` (0: from the newest); team undefined lists all. */
  async list(teamId: number | undefined, beforeId: number, limit: number): Promise<AuditRow[]> {
    const { rows } = await this.sql.query<AuditRow>(
      `SELECT id, at, actor_kind, actor_user_id, actor_email, method, resource, team_id, outcome, address, user_agent
       FROM audit_log WHERE ($1::bigint IS NULL OR team_id = $1) AND ($2::bigint = 0 OR id < $2)
       ORDER BY id DESC LIMIT $3`,
      [teamId ?? null, beforeId, limit],
    );
    return rows.map((r) => ({ ...r, id: Number(r.id) }));
  }
}
