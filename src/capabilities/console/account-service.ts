// pulsebase.admin.v1.AccountService: first-owner setup, sign-in and
// sign-out, members and roles, invitations, set-password links, the audit log.
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import { AccountService, InvitationSchema, MeSchema, type Invitation, type Me } from "../../../gen/pulsebase/admin/v1/account_pb.js";
import { Role } from "../../../gen/pulsebase/common/v1/options_pb.js";
import { appError, Violations } from "../../kernel/errors.js";
import { pageById } from "../../kernel/paging.js";
import { kClientAddress } from "../../kernel/principal.js";
import { MAX_PENDING_INVITATIONS, type AccountRow, type AccountStore, type InvitationRow } from "./account-store.js";
import type { AuditStore } from "./audit-store.js";
import { clearedSessionCookie, sessionCookie } from "./cookies.js";
import { addressGroup, type LoginLimiter } from "./login-limiter.js";
import { hashPassword, MAX_PASSWORD_LENGTH, MIN_PASSWORD_LENGTH, verifyPassword } from "./password.js";
import { kAuditNote, kOperator, kUserAgent, operatorOf, roleIn, type OperatorPrincipal } from "./principal.js";
import { roleName, roleOf } from "./roles.js";

const EMAIL_RE = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;
/** The longest address SMTP carries (RFC 5321 path, less the brackets). */
export const MAX_EMAIL_LENGTH = 254;
const TOO_LONG_EMAIL = `The email must not be longer than ${MAX_EMAIL_LENGTH} characters.`;

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

function checkEmail(v: Violations, field: string, email: string): void {
  if (email.length > MAX_EMAIL_LENGTH) v.add(field, TOO_LONG_EMAIL);
  else if (!EMAIL_RE.test(email)) v.add(field, "The email field must be a valid email address.");
}

function checkName(v: Violations, field: string, value: string): void {
  if (!value.trim()) v.add(field, `The ${field} field is required.`);
  else if (value.length > 200) v.add(field, `The ${field} field must not be longer than 200 characters.`);
}

function invitationMessage(r: InvitationRow, extra: { token?: string } = {}): Invitation {
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
      checkEmail(v, "email", req.email);
      checkPassword(v, "password", req.password);
      if (!req.setupToken) v.add("setup_token", "The setup_token field is required (from the link printed at start).");
      v.throwIfAny();
      const address = ctx.values.get(kClientAddress);
      // Wrong tokens are counted per address: a guesser locks itself out, not the operator.
      const key = `setup ${addressGroup(address)}`;
      await limiter.attempt(address, key);
      try {
        const user = await accounts.completeSetup(req.setupToken, {
          name: req.name.trim(),
          email: req.email,
          passwordHash: await hashPassword(req.password),
          // Empty: keep the adopted team's name, or "Default" for a new team.
          teamName: req.teamName.trim().slice(0, 200),
        });
        return await signIn(ctx, user);
      } catch (e) {
        if (e instanceof ConnectError && e.code === Code.PermissionDenied) await limiter.failed(key);
        throw e;
      }
    },
    async login(req, ctx) {
      // Before anything else: a huge email would reach the limiter's keys and the audit note.
      if (req.email.length > MAX_EMAIL_LENGTH) throw appError("validation_failed", TOO_LONG_EMAIL, { fields: { email: [TOO_LONG_EMAIL] } });
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
      checkEmail(v, "email", req.email.trim());
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
      // Whether the email has an account is not told: an owner could invite any address to find out.
      return invitationMessage(inv);
    },
    async acceptInvitation(req, ctx) {
      const inv = req.token ? await accounts.invitationByToken(req.token) : undefined;
      if (!inv) throw appError("not_found", "The invitation link is invalid, expired or was already used.");
      await limiter.attempt(ctx.values.get(kClientAddress), inv.email);
      const existing = await accounts.userByEmail(inv.email);
      let user: AccountRow | undefined;
      if (existing) {
        // Accepting as an existing account is signing in as it, with the password it has. An account
        // without one (CreateUser) cannot: whoever holds the link must not choose its password and
        // inherit its other teams. It gets one through a set-password link (CreatePasswordLink).
        if (!(await verifyPassword(req.password.slice(0, MAX_PASSWORD_LENGTH), existing.password_hash))) {
          await limiter.failed(inv.email);
          throw appError(
            "unauthenticated",
            "This email already has an account: enter its password to accept. An account without a password gets one through a set-password link from the instance administrator or an owner of its team.",
          );
        }
        user = await accounts.acceptInvitation(req.token, { userId: Number(existing.id) });
      } else {
        const v = new Violations();
        checkName(v, "name", req.name);
        checkPassword(v, "password", req.password);
        v.throwIfAny();
        user = await accounts.acceptInvitation(req.token, { create: { name: req.name.trim(), passwordHash: await hashPassword(req.password) } });
      }
      if (!user) throw appError("not_found", "The invitation link is invalid, expired or was already used.");
      return signIn(ctx, user);
    },
    async createPasswordLink(req, ctx) {
      const p = operatorOf(ctx);
      const teamId = Number(req.teamId);
      const account = req.userId > 0n ? await accounts.accountForPasswordLink(Number(req.userId)) : undefined;
      // An account outside the named team is answered like one that does not exist.
      if (!account || (teamId > 0 && !account.teams.some((t) => t.team_id === teamId))) throw appError("not_found", "No such member of this team.");
      if (!p.admin) {
        // The link opens every team of the account: its maker must own them all, and administrators' accounts are the administrator's.
        if (account.is_admin) throw appError("permission_denied", "Only the instance administrator may make a set-password link for an administrator's account.");
        if (account.teams.some((t) => roleIn(p, t.team_id) !== Role.OWNER)) {
          throw appError("permission_denied", "This account also belongs to teams you do not own: only the instance administrator may make its set-password link.");
        }
      }
      if (account.password_hash) throw appError("failed_precondition", "This account already has a password; set-password links are for accounts without one.");
      const link = await accounts.createPasswordLink(account.id, p.userId || null);
      return { userId: BigInt(account.id), email: account.email, token: link.token, expiresAt: timestampFromDate(link.expiresAt) };
    },
    async setPassword(req, ctx) {
      const v = new Violations();
      checkPassword(v, "password", req.password);
      v.throwIfAny();
      const address = ctx.values.get(kClientAddress);
      // Bounds the password hashing one address can cause (the token itself is 256 random bits).
      await limiter.attempt(address, `password-link ${addressGroup(address)}`);
      const user = req.token ? await accounts.setPasswordByLink(req.token, await hashPassword(req.password)) : undefined;
      if (!user) throw appError("not_found", "The set-password link is invalid, expired or was already used.");
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
