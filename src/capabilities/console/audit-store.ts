// The audit log: one row per admin mutation attempt (who, what, which
// resource, which team, the outcome, from where). Append-only from the
// service; read newest first. Every field is cut here, whatever the caller
// hands in (an anonymous sign-in must not be able to write megabytes), and
// rows older than the retention are deleted by sweep().
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

/** The longest value of a resource entry (the SQL of RunSql is the long one). */
export const AUDIT_VALUE_CHARS = 500;
const AUDIT_KEY_CHARS = 64;
const AUDIT_KEYS = 32;
/** Rows deleted per statement of a sweep (a long-neglected table goes in bounded steps). */
const SWEEP_BATCH = 5000;

/** `s` cut to `n` characters, with an ellipsis when cut. */
export function cut(s: string, n: number): string {
  return s.length > n ? s.slice(0, n) + "…" : s;
}

export class AuditStore {
  constructor(readonly sql: Sql) {}

  async append(r: AuditRecord): Promise<void> {
    const resource: Record<string, string> = {};
    for (const [k, v] of Object.entries(r.resource).slice(0, AUDIT_KEYS)) resource[cut(k, AUDIT_KEY_CHARS)] = cut(String(v), AUDIT_VALUE_CHARS);
    await this.sql.query(
      `INSERT INTO audit_log (actor_kind, actor_user_id, actor_email, method, resource, team_id, outcome, address, user_agent)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
      [cut(r.actorKind, 20), r.actorUserId ?? null, cut(r.actorEmail, 254), cut(r.method, 200), JSON.stringify(resource), r.teamId ?? null, cut(r.outcome, 64), cut(r.address, 64), cut(r.userAgent, 300)],
    );
  }

  /** Deletes the rows older than `days` days; returns how many went. */
  async sweep(days: number): Promise<number> {
    let total = 0;
    for (;;) {
      const { rowCount } = await this.sql.query(
        `DELETE FROM audit_log WHERE id IN (SELECT id FROM audit_log WHERE at < now() - make_interval(days => $1) ORDER BY at LIMIT $2)`,
        [days, SWEEP_BATCH],
      );
      total += rowCount;
      if (rowCount < SWEEP_BATCH) return total;
    }
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
