// PostgreSQL access for operator accounts: passwords, sessions, team roles,
// invitations, the first-owner setup token. Secrets (session ids, invitation
// and setup tokens) are stored as sha256 hashes only.
import { createHash, randomBytes } from "node:crypto";
import { appError } from "../../kernel/errors.js";
import type { Sql } from "../../infra/storage/sql.js";
import type { RoleName } from "./roles.js";

export interface AccountRow { id: number; name: string; email: string; password_hash: string | null; is_admin: boolean }
export interface MembershipRow { team_id: number; team_name: string; role: string }
export interface SessionInfo {
  user: AccountRow;
  csrf_token: string;
  expires_at: Date;
  id_hash: string;
  teams: MembershipRow[];
}
export interface MemberRow { user_id: number; name: string; email: string; role: string }
export interface InvitationRow {
  id: number;
  team_id: number;
  team_name: string;
  email: string;
  role: string;
  created_at: Date;
  expires_at: Date;
  accepted_at: Date | null;
}

export function sha256(s: string): string {
  return createHash("sha256").update(s).digest("base64url");
}

export function newSecret(): string {
  return randomBytes(32).toString("base64url");
}

const USER_COLS = "id, name, email, password_hash, is_admin";
const INVITE_DAYS = 7;
/** A setup link works this long after the server start that printed it. */
export const SETUP_LINK_HOURS = 24;
/** A set-password link works this long after it was made. */
export const PASSWORD_LINK_HOURS = 24;
const SETUP_REFUSED = "The setup link is invalid, expired (it works 24 hours after the server start that printed it) or was already used; restart the server for a new one.";
/** Live sessions a user may hold; signing in again ends the oldest beyond it. */
export const MAX_SESSIONS_PER_USER = 20;
/** Pending invitations a team may have at once. */
export const MAX_PENDING_INVITATIONS = 100;

export class AccountStore {
  constructor(readonly sql: Sql) {}

  async userByEmail(email: string): Promise<AccountRow | undefined> {
    const { rows } = await this.sql.query<AccountRow>(`SELECT ${USER_COLS} FROM users WHERE email = $1`, [email.toLowerCase()]);
    return rows[0];
  }

  async memberships(userId: number): Promise<MembershipRow[]> {
    const { rows } = await this.sql.query<MembershipRow>(
      `SELECT m.team_id, t.name AS team_name, m.role FROM team_members m JOIN teams t ON t.id = m.team_id
       WHERE m.user_id = $1 ORDER BY m.team_id`,
      [userId],
    );
    return rows.map((r) => ({ ...r, team_id: Number(r.team_id) }));
  }

  async allTeams(): Promise<MembershipRow[]> {
    const { rows } = await this.sql.query<MembershipRow>("SELECT id AS team_id, name AS team_name, 'owner' AS role FROM teams ORDER BY id");
    return rows.map((r) => ({ ...r, team_id: Number(r.team_id) }));
  }

  async hasAdmin(): Promise<boolean> {
    const { rows } = await this.sql.query("SELECT 1 FROM users WHERE is_admin AND password_hash IS NOT NULL LIMIT 1");
    return rows.length > 0;
  }

  /** A new one-time setup token (replacing any earlier one); returns the secret. */
  async newSetupToken(): Promise<string> {
    const token = newSecret();
    await this.sql.query(
      `INSERT INTO console_setup (id, token_hash) VALUES (1, $1)
       ON CONFLICT (id) DO UPDATE SET token_hash = EXCLUDED.token_hash, created_at = now()`,
      [sha256(token)],
    );
    return token;
  }

  /**
   * Creates the first owner and a first team (or adopts the teams that exist
   * without members), consuming the setup token, in
   * one transaction: of two concurrent attempts only one succeeds. Refused
   * (permission_denied) when the token is wrong or older than
   * SETUP_LINK_HOURS, (failed_precondition) once an administrator exists,
   * and (conflict) for an email that has an account: setup never changes an
   * existing account. A refusal leaves the token as it was.
   */
  async completeSetup(token: string, u: { name: string; email: string; passwordHash: string; teamName: string }): Promise<AccountRow> {
    return this.sql.transaction(async (tx) => {
      const del = await tx.query(
        "DELETE FROM console_setup WHERE id = 1 AND token_hash = $1 AND created_at > now() - make_interval(hours => $2)",
        [sha256(token), SETUP_LINK_HOURS],
      );
      if (del.rowCount === 0) throw appError("permission_denied", SETUP_REFUSED);
      if ((await tx.query("SELECT 1 FROM users WHERE is_admin AND password_hash IS NOT NULL LIMIT 1")).rows.length > 0) {
        throw appError("failed_precondition", "This instance already has an administrator: setup links no longer work. Sign in instead.");
      }
      const { rows } = await tx.query<AccountRow>(
        `INSERT INTO users (name, email, password_hash, is_admin) VALUES ($1, $2, $3, true)
         ON CONFLICT (email) DO NOTHING RETURNING ${USER_COLS}`,
        [u.name, u.email.toLowerCase(), u.passwordHash],
      );
      const user = rows[0];
      if (!user) throw appError("conflict", "This email already has an account; setup makes a new one and never changes an existing account. Use another email.", { fields: { email: ["already has an account"] } });
      // Teams made before setup (`pulsebase apps create` makes one per
      // application) have no member: the owner adopts them rather than
      // starting a second, empty team. A team name given at setup renames
      // the oldest of them.
      const orphans = await tx.query<{ id: number }>(
        `SELECT t.id FROM teams t WHERE NOT EXISTS (SELECT 1 FROM team_members m WHERE m.team_id = t.id) ORDER BY t.id LIMIT 1000`,
      );
      if (orphans.rows.length === 0) {
        const team = await tx.query<{ id: number }>("INSERT INTO teams (name) VALUES ($1) RETURNING id", [u.teamName || "Default"]);
        orphans.rows.push(team.rows[0]!);
      } else if (u.teamName) {
        await tx.query("UPDATE teams SET name = $2 WHERE id = $1", [orphans.rows[0]!.id, u.teamName]);
      }
      await tx.query(
        "INSERT INTO team_members (team_id, user_id, role) SELECT unnest($1::bigint[]), $2, 'owner'",
        [orphans.rows.map((r) => String(r.id)), user.id],
      );
      return { ...user, id: Number(user.id) };
    });
  }

  async createSession(userId: number, ttlMs: number, address: string, userAgent: string): Promise<{ secret: string; csrf: string; expiresAt: Date }> {
    const secret = newSecret();
    const csrf = newSecret();
    const expiresAt = new Date(Date.now() + ttlMs);
    await this.sql.query(
      "INSERT INTO operator_sessions (id_hash, user_id, csrf_token, expires_at, address, user_agent) VALUES ($1, $2, $3, $4, $5, $6)",
      [sha256(secret), userId, csrf, expiresAt, address, userAgent.slice(0, 300)],
    );
    // The user's expired sessions go, and the oldest beyond the cap: the table stays bounded.
    await this.sql.query(
      `DELETE FROM operator_sessions WHERE user_id = $1 AND (expires_at <= now() OR id_hash IN (
         SELECT id_hash FROM operator_sessions WHERE user_id = $1 ORDER BY created_at DESC, id_hash OFFSET $2))`,
      [userId, MAX_SESSIONS_PER_USER],
    );
    return { secret, csrf, expiresAt };
  }

  /** The live session for a cookie's secret, with its user and teams (one round trip). */
  async session(secret: string): Promise<SessionInfo | undefined> {
    const idHash = sha256(secret);
    const { rows } = await this.sql.query<AccountRow & { csrf_token: string; expires_at: Date; teams: MembershipRow[] | string | null }>(
      `SELECT u.id, u.name, u.email, u.password_hash, u.is_admin, s.csrf_token, s.expires_at,
              (SELECT json_agg(json_build_object('team_id', m.team_id, 'team_name', t.name, 'role', m.role) ORDER BY m.team_id)
               FROM team_members m JOIN teams t ON t.id = m.team_id WHERE m.user_id = u.id) AS teams
       FROM operator_sessions s JOIN users u ON u.id = s.user_id
       WHERE s.id_hash = $1 AND s.expires_at > now()`,
      [idHash],
    );
    const r = rows[0];
    if (!r) return undefined;
    const teams = (typeof r.teams === "string" ? JSON.parse(r.teams) : r.teams ?? []) as MembershipRow[];
    return {
      user: { id: Number(r.id), name: r.name, email: r.email, password_hash: null, is_admin: r.is_admin },
      csrf_token: r.csrf_token,
      expires_at: r.expires_at,
      id_hash: idHash,
      teams: teams.map((t) => ({ ...t, team_id: Number(t.team_id) })),
    };
  }

  async endSession(idHash: string): Promise<number> {
    return (await this.sql.query("DELETE FROM operator_sessions WHERE id_hash = $1", [idHash])).rowCount;
  }

  async endAllSessions(userId: number): Promise<number> {
    return (await this.sql.query("DELETE FROM operator_sessions WHERE user_id = $1 OR expires_at < now()", [userId])).rowCount;
  }

  async members(teamId: number): Promise<MemberRow[]> {
    const { rows } = await this.sql.query<MemberRow>(
      `SELECT m.user_id, u.name, u.email, m.role FROM team_members m JOIN users u ON u.id = m.user_id
       WHERE m.team_id = $1 ORDER BY m.user_id`,
      [teamId],
    );
    return rows.map((r) => ({ ...r, user_id: Number(r.user_id) }));
  }

  async owners(teamId: number): Promise<number> {
    const { rows } = await this.sql.query<{ n: number }>("SELECT count(*)::int AS n FROM team_members WHERE team_id = $1 AND role = 'owner'", [teamId]);
    return rows[0]!.n;
  }

  async setRole(teamId: number, userId: number, role: RoleName): Promise<MemberRow | undefined> {
    await this.sql.query("UPDATE team_members SET role = $3 WHERE team_id = $1 AND user_id = $2", [teamId, userId, role]);
    return (await this.members(teamId)).find((m) => m.user_id === userId);
  }

  async removeMember(teamId: number, userId: number): Promise<boolean> {
    return (await this.sql.query("DELETE FROM team_members WHERE team_id = $1 AND user_id = $2", [teamId, userId])).rowCount > 0;
  }

  async pendingInvitations(teamId: number): Promise<number> {
    const { rows } = await this.sql.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM team_invitations WHERE team_id = $1 AND accepted_at IS NULL AND expires_at > now()",
      [teamId],
    );
    return rows[0]!.n;
  }

  async createInvitation(teamId: number, email: string, role: RoleName, createdBy: number | null): Promise<{ row: InvitationRow; token: string }> {
    const token = newSecret();
    const { rows } = await this.sql.query<InvitationRow>(
      `WITH i AS (INSERT INTO team_invitations (team_id, email, role, token_hash, created_by, expires_at)
                  VALUES ($1, $2, $3, $4, $5, now() + make_interval(days => $6)) RETURNING *)
       SELECT i.id, i.team_id, t.name AS team_name, i.email, i.role, i.created_at, i.expires_at, i.accepted_at
       FROM i JOIN teams t ON t.id = i.team_id`,
      [teamId, email.toLowerCase(), role, sha256(token), createdBy, INVITE_DAYS],
    );
    return { row: { ...rows[0]!, id: Number(rows[0]!.id) }, token };
  }

  async invitations(teamId: number): Promise<InvitationRow[]> {
    const { rows } = await this.sql.query<InvitationRow>(
      `SELECT i.id, i.team_id, t.name AS team_name, i.email, i.role, i.created_at, i.expires_at, i.accepted_at
       FROM team_invitations i JOIN teams t ON t.id = i.team_id WHERE i.team_id = $1 ORDER BY i.id DESC LIMIT 200`,
      [teamId],
    );
    return rows;
  }

  async revokeInvitation(teamId: number, id: number): Promise<boolean> {
    return (await this.sql.query("DELETE FROM team_invitations WHERE team_id = $1 AND id = $2 AND accepted_at IS NULL", [teamId, id])).rowCount > 0;
  }

  /** A pending, unexpired invitation for the link's token. */
  async invitationByToken(token: string): Promise<InvitationRow | undefined> {
    const { rows } = await this.sql.query<InvitationRow>(
      `SELECT i.id, i.team_id, t.name AS team_name, i.email, i.role, i.created_at, i.expires_at, i.accepted_at
       FROM team_invitations i JOIN teams t ON t.id = i.team_id
       WHERE i.token_hash = $1 AND i.accepted_at IS NULL AND i.expires_at > now()`,
      [sha256(token)],
    );
    return rows[0];
  }

  /**
   * Accepts the invitation and adds the membership, in one transaction: as
   * the existing account `userId` (whose password the caller checked), or
   * by creating a new account (`create`). Never writes onto an existing
   * account: an account that appeared meanwhile refuses the creation
   * (conflict). Undefined when the invitation was used or revoked meanwhile.
   */
  async acceptInvitation(token: string, as: { userId: number } | { create: { name: string; passwordHash: string } }): Promise<AccountRow | undefined> {
    return this.sql.transaction(async (tx) => {
      const { rows } = await tx.query<{ id: number; team_id: number; email: string; role: string }>(
        `UPDATE team_invitations SET accepted_at = now()
         WHERE token_hash = $1 AND accepted_at IS NULL AND expires_at > now() RETURNING id, team_id, email, role`,
        [sha256(token)],
      );
      const inv = rows[0];
      if (!inv) return undefined;
      let user: AccountRow | undefined;
      if ("userId" in as) {
        user = (await tx.query<AccountRow>(`SELECT ${USER_COLS} FROM users WHERE id = $1 AND email = $2 AND password_hash IS NOT NULL`, [as.userId, inv.email])).rows[0];
        if (!user) return undefined;
      } else {
        user = (
          await tx.query<AccountRow>(
            `INSERT INTO users (name, email, password_hash) VALUES ($1, $2, $3) ON CONFLICT (email) DO NOTHING RETURNING ${USER_COLS}`,
            [as.create.name, inv.email, as.create.passwordHash],
          )
        ).rows[0];
        if (!user) throw appError("conflict", "This email has an account now: sign in with its password to accept.");
      }
      await tx.query(
        `INSERT INTO team_members (team_id, user_id, role) VALUES ($1, $2, $3)
         ON CONFLICT (team_id, user_id) DO UPDATE SET role = EXCLUDED.role`,
        [inv.team_id, user.id, inv.role],
      );
      return { ...user, id: Number(user.id) };
    });
  }

  /** A password-less account's teams (with roles), for deciding who may give it a password. */
  async accountForPasswordLink(userId: number): Promise<(AccountRow & { teams: MembershipRow[] }) | undefined> {
    const { rows } = await this.sql.query<AccountRow>(`SELECT ${USER_COLS} FROM users WHERE id = $1`, [userId]);
    const user = rows[0];
    if (!user) return undefined;
    return { ...user, id: Number(user.id), teams: await this.memberships(Number(user.id)) };
  }

  /** A new one-time set-password link for the account (replacing its earlier ones); returns the secret. */
  async createPasswordLink(userId: number, createdBy: number | null): Promise<{ token: string; expiresAt: Date }> {
    const token = newSecret();
    return this.sql.transaction(async (tx) => {
      // Expired links of everyone go too: the table stays bounded.
      await tx.query("DELETE FROM password_links WHERE user_id = $1 OR expires_at <= now()", [userId]);
      const { rows } = await tx.query<{ expires_at: Date }>(
        `INSERT INTO password_links (token_hash, user_id, created_by, expires_at)
         VALUES ($1, $2, $3, now() + make_interval(hours => $4)) RETURNING expires_at`,
        [sha256(token), userId, createdBy, PASSWORD_LINK_HOURS],
      );
      return { token, expiresAt: new Date(rows[0]!.expires_at) };
    });
  }

  /**
   * Consumes a live set-password link and sets the first password of its
   * account, in one transaction; undefined when the link is unknown, used or
   * expired, or the account has a password by now. What its maker may do is
   * checked again here, as when it was made (createPasswordLink): an account
   * that joined a team its maker does not own since (or became an
   * administrator), or a maker no longer owner, leaves the link dead.
   */
  async setPasswordByLink(token: string, passwordHash: string): Promise<AccountRow | undefined> {
    return this.sql.transaction(async (tx) => {
      const link = await tx.query<{ user_id: number; created_by: number | null }>(
        "DELETE FROM password_links WHERE token_hash = $1 AND expires_at > now() RETURNING user_id, created_by",
        [sha256(token)],
      );
      if (!link.rows[0]) return undefined;
      // A link made with the operator token has no maker (created_by NULL): it had every team.
      if (link.rows[0].created_by !== null) {
        const { rows: ok } = await tx.query<{ ok: boolean }>(
          `SELECT coalesce((SELECT is_admin FROM users WHERE id = $2), false)
                  OR (NOT coalesce((SELECT is_admin FROM users WHERE id = $1), false)
                      AND NOT EXISTS (SELECT 1 FROM team_members m WHERE m.user_id = $1 AND NOT EXISTS (
                        SELECT 1 FROM team_members o WHERE o.team_id = m.team_id AND o.user_id = $2 AND o.role = 'owner'))) AS ok`,
          [link.rows[0].user_id, link.rows[0].created_by],
        );
        if (!ok[0]?.ok) return undefined;
      }
      const { rows } = await tx.query<AccountRow>(
        `UPDATE users SET password_hash = $2 WHERE id = $1 AND password_hash IS NULL RETURNING ${USER_COLS}`,
        [link.rows[0].user_id, passwordHash],
      );
      return rows[0] && { ...rows[0], id: Number(rows[0].id) };
    });
  }
}
