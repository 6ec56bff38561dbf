// pulsebase.admin.v1.AccountService: first-owner setup, sign-in and
// sign-out, members and roles, invitations, the audit log.
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { AccountService, InvitationSchema, MeSchema, type Invitation, type Me } from "../../../gen/pulsebase/admin/v1/account_pb.js";
import { Role } from "../../../gen/pulsebase/common/v1/options_pb.js";
import { appError, Violations } from "../../kernel/errors.js";
import { pageById } from "../../kernel/paging.js";
import { kClientAddress } from "../../kernel/principal.js";
import { MAX_PENDING_INVITATIONS, type AccountRow, type AccountStore, type InvitationRow } from "./account-store.js";
import type { AuditStore } from "./audit-store.js";
import { clearedSessionCookie, sessionCookie } from "./cookies.js";
import type { LoginLimiter } from "./login-limiter.js";
import { hashPassword, MAX_PASSWORD_LENGTH, MIN_PASSWORD_LENGTH, verifyPassword } from "./password.js";
import { kAuditNote, kOperator, kUserAgent, operatorOf, type OperatorPrincipal } from "./principal.js";
import { roleName, roleOf } from "./roles.js";

const EMAIL_RE = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

export interface AccountServiceDeps {
  accounts: AccountStore;
  audit: AuditStore;
  limiter: LoginLimiter;
  sessionTtlHours: number;
  /** For media previews in the console. */
  mediaBaseUrl: string;
}

function checkPassword(v: Violations, field: string, password: string): void {
  if (password.length < MIN_PASSWORD_LENGTH) v.add(field, `The password must be at least ${MIN_PASSWORD_LENGTH} characters.`);
  else if (password.length > MAX_PASSWORD_LENGTH) v.add(field, `The password must not be longer than ${MAX_PASSWORD_LENGTH} characters.`);
}

function checkName(v: Violations, field: string, value: string): void {
  if (!value.trim()) v.add(field, `The ${field} field is required.`);
  else if (value.length > 200) v.add(field, `The ${field} field must not be longer than 200 characters.`);
}

function invitationMessage(r: InvitationRow, extra: { token?: string; accountExists?: boolean } = {}): Invitation {
  return create(InvitationSchema, {
    id: BigInt(r.id),
    teamId: BigInt(r.team_id),
    teamName: r.team_name,
    email: r.email,
    role: roleOf(r.role),
    createdAt: timestampFromDate(new Date(r.created_at)),
    expiresAt: timestampFromDate(new Date(r.expires_at)),
    acceptedAt: r.accepted_at ? timestampFromDate(new Date(r.accepted_at)) : undefined,
    ...extra,
  });
}

export function meOf(p: OperatorPrincipal, teams: { team_id: number; team_name: string; role: Role }[], mediaBaseUrl = ""): Me {
  return create(MeSchema, {
    mediaBaseUrl,
    userId: BigInt(p.userId),
    name: p.name,
    email: p.email,
    admin: p.admin,
    teams: teams.map((t) => ({ teamId: BigInt(t.team_id), teamName: t.team_name, role: t.role })),
    csrfToken: p.session?.csrf ?? "",
    sessionExpiresAt: p.session ? timestampFromDate(p.session.expiresAt) : undefined,
  });
}

export function createAccountServiceImpl(deps: AccountServiceDeps): ServiceImpl<typeof AccountService> {
  const { accounts, audit, limiter } = deps;
  const ttlMs = deps.sessionTtlHours * 3600_000;

  /** Starts a session for the user, sets the cookie and answers Me. */
  async function signIn(ctx: HandlerContext, user: AccountRow): Promise<Me> {
    const s = await accounts.createSession(user.id, ttlMs, ctx.values.get(kClientAddress), ctx.values.get(kUserAgent));
    ctx.responseHeader.append("set-cookie", sessionCookie(s.secret, Math.floor(ttlMs / 1000)));
    const note = ctx.values.get(kAuditNote);
    if (note) note.actor = { userId: user.id, email: user.email };
    const teams = await teamsOf(user);
    const p: OperatorPrincipal = {
      kind: "user", userId: user.id, name: user.name, email: user.email, admin: user.is_admin, teams: new Map(),
      session: { idHash: "", csrf: s.csrf, expiresAt: s.expiresAt },
    };
    return meOf(p, teams, deps.mediaBaseUrl);
  }

  async function teamsOf(user: { id: number; is_admin: boolean }) {
    const own = await accounts.memberships(user.id);
    const list = user.is_admin ? await accounts.allTeams() : own;
    const mine = new Map(own.map((t) => [t.team_id, t.role]));
    return list.map((t) => ({ team_id: t.team_id, team_name: t.team_name, role: user.is_admin ? Role.OWNER : roleOf(mine.get(t.team_id) ?? t.role) }));
  }

  function teamRole(role: Role): "viewer" | "developer" | "owner" {
    const n = roleName(role);
    if (!n) throw appError("validation_failed", "The role must be viewer, developer or owner.", { fields: { role: ["must be ROLE_VIEWER, ROLE_DEVELOPER or ROLE_OWNER"] } });
    return n;
  }

  return {
    async getSetupStatus() {
      return { needsSetup: !(await accounts.hasAdmin()) };
    },
    async completeSetup(req, ctx) {
      const v = new Violations();
      checkName(v, "name", req.name);
      if (!EMAIL_RE.test(req.email)) v.add("email", "The email field must be a valid email address.");
      checkPassword(v, "password", req.password);
      if (!req.setupToken) v.add("setup_token", "The setup_token field is required (from the link printed at start).");
      v.throwIfAny();
      await limiter.attempt(ctx.values.get(kClientAddress), "setup");
      const user = await accounts.completeSetup(req.setupToken, {
        name: req.name.trim(),
        email: req.email,
        passwordHash: await hashPassword(req.password),
        teamName: req.teamName.trim() || "Default",
      });
      if (!user) {
        await limiter.failed("setup");
        throw appError("permission_denied", "The setup link is invalid or was already used.");
      }
      return signIn(ctx, user);
    },
    async login(req, ctx) {
      const email = req.email.trim().toLowerCase();
      if (!email || !req.password) {
        throw appError("validation_failed", "Email and password are required.", { fields: { ...(email ? {} : { email: ["required"] }), ...(req.password ? {} : { password: ["required"] }) } });
      }
      await limiter.attempt(ctx.values.get(kClientAddress), email);
      const user = await accounts.userByEmail(email);
      const ok = await verifyPassword(req.password.slice(0, MAX_PASSWORD_LENGTH), user?.password_hash);
      if (!user || !ok) {
        await limiter.failed(email);
        const note = ctx.values.get(kAuditNote);
        if (note) note.resource.email = email;
        throw appError("unauthenticated", "Wrong email or password.");
      }
      await limiter.succeeded(email);
      return signIn(ctx, { ...user, id: Number(user.id) });
    },
    async logout(_req, ctx) {
      const p = operatorOf(ctx);
      ctx.responseHeader.append("set-cookie", clearedSessionCookie());
      return { ended: p.session ? await accounts.endSession(p.session.idHash) : 0 };
    },
    async logoutEverywhere(_req, ctx) {
      const p = operatorOf(ctx);
      if (p.kind !== "user") throw appError("failed_precondition", "The operator token has no sessions.");
      ctx.responseHeader.append("set-cookie", clearedSessionCookie());
      return { ended: await accounts.endAllSessions(p.userId) };
    },
    async getMe(_req, ctx) {
      const p = operatorOf(ctx);
      if (p.kind === "service") {
        const all = await accounts.allTeams();
        return meOf(p, all.map((t) => ({ ...t, role: p.admin ? Role.OWNER : p.everyTeam! })), deps.mediaBaseUrl);
      }
      return meOf(p, await teamsOf({ id: p.userId, is_admin: p.admin }), deps.mediaBaseUrl);
    },
    async listMembers(req) {
      const rows = await accounts.members(Number(req.teamId));
      return { members: rows.map((m) => ({ userId: BigInt(m.user_id), name: m.name, email: m.email, role: roleOf(m.role) })) };
    },
    async setMemberRole(req) {
      const role = teamRole(req.role);
      const teamId = Number(req.teamId);
      const current = (await accounts.members(teamId)).find((m) => m.user_id === Number(req.userId));
      if (!current) throw appError("not_found", "No such member.");
      if (current.role === "owner" && role !== "owner" && (await accounts.owners(teamId)) <= 1) {
        throw appError("failed_precondition", "A team keeps at least one owner.");
      }
      const m = (await accounts.setRole(teamId, Number(req.userId), role))!;
      return { userId: BigInt(m.user_id), name: m.name, email: m.email, role: roleOf(m.role) };
    },
    async removeMember(req) {
      const teamId = Number(req.teamId);
      const current = (await accounts.members(teamId)).find((m) => m.user_id === Number(req.userId));
      if (!current) throw appError("not_found", "No such member.");
      if (current.role === "owner" && (await accounts.owners(teamId)) <= 1) throw appError("failed_precondition", "A team keeps at least one owner.");
      await accounts.removeMember(teamId, Number(req.userId));
      // Their open sessions keep working for other teams only: roles are read per request.
      return {};
    },
    async createInvitation(req, ctx) {
      const v = new Violations();
      if (!EMAIL_RE.test(req.email)) v.add("email", "The email field must be a valid email address.");
      v.throwIfAny();
      const role = teamRole(req.role);
      const p = operatorOf(ctx);
      if ((await accounts.pendingInvitations(Number(req.teamId))) >= MAX_PENDING_INVITATIONS) {
        throw appError("failed_precondition", `A team has at most ${MAX_PENDING_INVITATIONS} pending invitations; revoke some first.`);
      }
      const { row, token } = await accounts.createInvitation(Number(req.teamId), req.email.trim(), role, p.userId || null);
      return invitationMessage(row, { token });
    },
    async listInvitations(req) {
      return { invitations: (await accounts.invitations(Number(req.teamId))).map((r) => invitationMessage(r)) };
    },
    async revokeInvitation(req) {
      if (!(await accounts.revokeInvitation(Number(req.teamId), Number(req.invitationId)))) throw appError("not_found", "No such pending invitation.");
      return {};
    },
    async getInvitation(req) {
      const inv = req.token ? await accounts.invitationByToken(req.token) : undefined;
      if (!inv) throw appError("not_found", "The invitation link is invalid, expired or was already used.");
      const user = await accounts.userByEmail(inv.email);
      return invitationMessage(inv, { accountExists: !!user?.password_hash });
    },
    async acceptInvitation(req, ctx) {
      const inv = req.token ? await accounts.invitationByToken(req.token) : undefined;
      if (!inv) throw appError("not_found", "The invitation link is invalid, expired or was already used.");
      await limiter.attempt(ctx.values.get(kClientAddress), inv.email);
      const existing = await accounts.userByEmail(inv.email);
      let passwordHash: string | undefined;
      if (existing?.password_hash) {
        if (!(await verifyPassword(req.password.slice(0, MAX_PASSWORD_LENGTH), existing.password_hash))) {
          await limiter.failed(inv.email);
          throw appError("unauthenticated", "Wrong password for this account.");
        }
      } else {
        const v = new Violations();
        checkName(v, "name", req.name);
        checkPassword(v, "password", req.password);
        v.throwIfAny();
        passwordHash = await hashPassword(req.password);
      }
      const user = await accounts.acceptInvitation(req.token, { name: req.name.trim(), passwordHash });
      if (!user) throw appError("not_found", "The invitation link is invalid, expired or was already used.");
      return signIn(ctx, user);
    },
    async listAuditLog(req, ctx) {
      const p = ctx.values.get(kOperator)!;
      if (req.teamId === 0n && !p.admin) throw appError("permission_denied", "Name a team you belong to.");
      const { rows, next } = await pageById(req, (before, limit) => audit.list(req.teamId > 0n ? Number(req.teamId) : undefined, before, limit));
      return {
        entries: rows.map((r) => ({
          id: BigInt(r.id),
          at: timestampFromDate(new Date(r.at)),
          actorKind: r.actor_kind,
          actorUserId: BigInt(r.actor_user_id ?? 0),
          actorEmail: r.actor_email,
          method: r.method,
          resource: typeof r.resource === "string" ? JSON.parse(r.resource) : r.resource,
          teamId: BigInt(r.team_id ?? 0),
          outcome: r.outcome,
          address: r.address,
          userAgent: r.user_agent,
        })),
        nextPageToken: next,
      };
    },
  };
}
