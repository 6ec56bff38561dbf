// The admin listener's access control, driven by the proto: every admin
// method declares the least role it needs (`role`) and whether it changes
// state (`mutates`); request fields naming a resource carry `scope`. This
// policy (src/kernel/call-policy.ts; the admin listener's dispatcher and
// connect-node's router both run it) finds the caller (session cookie + CSRF header, or the
// operator token), resolves each named resource to its team, checks the
// caller's role there, and writes every mutation attempt to the audit log.
// A resource of a team the caller is not in answers not_found, like one
// that does not exist; a role too low in the caller's own team answers
// permission_denied.
import { getOption, type DescField, type DescMessage, type DescMethod, type Message } from "@bufbuild/protobuf";
import { reflect } from "@bufbuild/protobuf/reflect";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Logger } from "pino";
import { mutates as mutatesOption, Role, role as roleOption, Scope, scope as scopeOption } from "../../../gen/pulsebase/common/v1/options_pb.js";
import type { CallPolicy } from "../../kernel/call-policy.js";
import { appError, errorDetail } from "../../kernel/errors.js";
import { bearerToken, kClientAddress, sameToken } from "../../kernel/principal.js";
import type { AccountStore, MembershipRow } from "./account-store.js";
import { AUDIT_VALUE_CHARS, cut, type AuditStore } from "./audit-store.js";
import { SESSION_CONFLICT_MESSAGE, sessionCookies } from "./cookies.js";
import { kAuditNote, kOperator, kUserAgent, roleIn, type AuditNote, type OperatorPrincipal } from "./principal.js";
import { roleOf } from "./roles.js";
import type { ScopeResolver } from "./scope-resolver.js";

export const CSRF_HEADER = "x-csrf-token";

interface ScopePath {
  path: DescField[];
  kind: Scope;
}

interface MethodAccess {
  role: Role;
  mutates: boolean;
  scopes: ScopePath[];
  /** Calls made with the session cookie need no CSRF header (read-only bootstrap: GetMe). */
  csrfExempt: boolean;
}

/** Scoped fields of a request, nested messages included (AnalyticsFilter.app_id). */
function scopePaths(desc: DescMessage, prefix: DescField[] = [], depth = 0): ScopePath[] {
  const out: ScopePath[] = [];
  for (const f of desc.fields) {
    const kind = getOption(f, scopeOption);
    if (kind !== Scope.UNSPECIFIED) out.push({ path: [...prefix, f], kind });
    else if (f.fieldKind === "message" && depth < 2 && !f.message.typeName.startsWith("google.")) {
      out.push(...scopePaths(f.message, [...prefix, f], depth + 1));
    }
  }
  return out;
}

const accessCache = new WeakMap<DescMethod, MethodAccess>();

export function methodAccess(method: DescMethod): MethodAccess {
  let a = accessCache.get(method);
  if (!a) {
    a = {
      role: getOption(method, roleOption),
      mutates: getOption(method, mutatesOption),
      scopes: scopePaths(method.input),
      csrfExempt: method.parent.typeName === "pulsebase.admin.v1.AccountService" && method.name === "GetMe",
    };
    accessCache.set(method, a);
  }
  return a;
}

/** The set values of the scoped fields (0 and "" are unset). */
function scopeValues(desc: DescMessage, msg: Message, scopes: ScopePath[]): { field: string; kind: Scope; value: bigint | string }[] {
  const out: { field: string; kind: Scope; value: bigint | string }[] = [];
  for (const s of scopes) {
    let r = reflect(desc, msg);
    let ok = true;
    for (const f of s.path.slice(0, -1)) {
      if (f.fieldKind !== "message" || !r.isSet(f)) {
        ok = false;
        break;
      }
      r = r.get(f);
    }
    const leaf = s.path[s.path.length - 1]!;
    if (!ok || !r.isSet(leaf)) continue;
    const v = r.get(leaf) as unknown;
    if (typeof v === "bigint" || typeof v === "number") {
      if (BigInt(v) !== 0n) out.push({ field: leaf.name, kind: s.kind, value: BigInt(v) });
    } else if (typeof v === "string" && v) out.push({ field: leaf.name, kind: s.kind, value: v });
  }
  return out;
}

/** Request fields worth recording (ids, names, slugs, the SQL), never secrets or payloads. */
const AUDIT_FIELDS = new Set(["id", "name", "slug", "email", "content_type", "version", "table", "role", "enabled", "sql", "source", "target", "user_id", "invitation_id", "filename", "activate"]);

function auditResource(desc: DescMessage, msg: Message): Record<string, string> {
  const out: Record<string, string> = {};
  const r = reflect(desc, msg);
  for (const f of desc.fields) {
    if (f.fieldKind !== "scalar" && f.fieldKind !== "enum") continue;
    if (!(AUDIT_FIELDS.has(f.name) || f.name.endsWith("_id")) || !r.isSet(f)) continue;
    const v = r.get(f) as unknown;
    const s = typeof v === "string" ? v : String(v);
    // Cut here already (the store cuts every field again): a huge request value is not copied around.
    out[f.name] = cut(s, AUDIT_VALUE_CHARS);
  }
  return out;
}

function principalFromMemberships(u: { id: number; name: string; email: string; is_admin: boolean }, teams: MembershipRow[]): OperatorPrincipal {
  return {
    kind: "user",
    userId: u.id,
    name: u.name,
    email: u.email,
    admin: u.is_admin,
    teams: new Map(teams.map((t) => [t.team_id, { name: t.team_name, role: roleOf(t.role) }])),
  };
}

export interface AccessDeps {
  operatorToken: string;
  operatorTokenRole: Role;
  accounts: AccountStore;
  audit: AuditStore;
  scopes: ScopeResolver;
  logger: Logger;
}

/** The admin listener's policy (src/kernel/call-policy.ts), for both of its pipelines. */
export function accessPolicy(deps: AccessDeps): CallPolicy {
  async function authenticate(header: { get(n: string): string | null }): Promise<OperatorPrincipal | undefined> {
    const bearer = bearerToken(header.get("authorization"));
    if (bearer) {
      if (!sameToken(bearer, deps.operatorToken)) throw appError("unauthenticated", "A valid operator token is required.");
      const admin = deps.operatorTokenRole === Role.ADMIN;
      return { kind: "service", userId: 0, name: "operator token", email: "", admin, everyTeam: admin ? undefined : deps.operatorTokenRole, teams: new Map() };
    }
    const cookies = sessionCookies(header.get("cookie"));
    // Two session cookies: one may be planted (cookie tossing); never pick one (static-console.ts clears them).
    if (cookies.kind === "conflict") throw appError("unauthenticated", SESSION_CONFLICT_MESSAGE);
    if (cookies.kind === "none" || !cookies.secret) return undefined;
    const secret = cookies.secret;
    const s = await deps.accounts.session(secret);
    if (!s) return undefined;
    const p = principalFromMemberships(s.user, s.teams);
    p.session = { idHash: s.id_hash, csrf: s.csrf_token, expiresAt: s.expires_at };
    return p;
  }

  return async ({ method, header, message, values }) => {
    const access = methodAccess(method);
    // A server-streaming call's one request message is read by the caller; a client stream has none to check.
    if (method.methodKind === "client_streaming" || method.methodKind === "bidi_streaming") throw appError("permission_denied", "Client streams are not served on the admin API.");
    const note: AuditNote = { resource: {} };
    values.set(kAuditNote, note);
    let principal: OperatorPrincipal | undefined;
    let teamId: number | undefined;
    const audit = async (outcome: string, response?: unknown) => {
      if (!access.mutates) return;
      const resource = { ...(message ? auditResource(method.input, message) : {}), ...note.resource };
      const id = response && (response as { id?: unknown }).id;
      if ((typeof id === "bigint" || typeof id === "number") && id !== 0 && resource.id === undefined) resource.id = String(id);
      const actor = principal ?? undefined;
      try {
        await deps.audit.append({
          actorKind: actor ? actor.kind : note.actor ? "user" : "anonymous",
          actorUserId: actor?.userId || note.actor?.userId,
          actorEmail: actor?.email || note.actor?.email || "",
          method: `${method.parent.typeName}/${method.name}`,
          resource,
          teamId,
          outcome,
          address: values.get(kClientAddress),
          userAgent: values.get(kUserAgent),
        });
      } catch (err) {
        deps.logger.error({ err }, "audit log write failed");
      }
    };
    try {
      if (access.role === Role.UNSPECIFIED) throw appError("permission_denied", "This method declares no role.");
      principal = await authenticate(header);
      values.set(kOperator, principal);
      if (access.role !== Role.ANONYMOUS) {
        if (!principal) throw appError("unauthenticated", "Sign in first (session cookie) or send the operator token.");
        if (principal.session && !access.csrfExempt) {
          const sent = header.get(CSRF_HEADER) ?? "";
          if (!sent || !sameToken(sent, principal.session.csrf)) throw appError("permission_denied", "The X-CSRF-Token header is missing or wrong.");
        }
        if (!message) throw appError("validation_failed", "The request message is missing.");
        await authorize(principal, access, method.input, message, (t) => (teamId ??= t));
      }
    } catch (e) {
      await audit(errorCodeOf(e));
      throw e;
    }
    return (error, response) => audit(error === undefined ? "ok" : errorCodeOf(error), error === undefined ? response : undefined);
  };

  /** Checks the role; tells the team the call acts in (for the audit log, refusals included). */
  async function authorize(p: OperatorPrincipal, access: MethodAccess, desc: DescMessage, msg: Message, inTeam: (t: number) => void): Promise<void> {
    // The administrator may do anything: its reads skip the lookups (its changes still find their team, for the audit log).
    if (p.admin && !access.mutates) return;
    const named = scopeValues(desc, msg, access.scopes);
    const teams: number[] = [];
    for (const n of named) {
      const team = await deps.scopes.teamOf(n.kind, n.value);
      if (team === undefined) {
        // Nothing to check: the service answers not_found itself (admins see its wording).
        if (p.admin) continue;
        throw appError("not_found", `No such resource (${n.field}).`);
      }
      teams.push(team);
      inTeam(team);
    }
    if (access.role === Role.ADMIN) {
      if (!p.admin) throw appError("permission_denied", "Only the instance administrator may do this.");
      return;
    }
    if (p.admin) return;
    if (named.length === 0) {
      if (access.scopes.length > 0) throw appError("permission_denied", "Name a team or application you belong to.");
      // No resource named (GetMe, Logout, GetQueueStats): signed in is enough for viewer methods.
      const best = p.everyTeam ?? Math.max(Role.VIEWER, ...[...p.teams.values()].map((t) => t.role));
      if (best < access.role) throw appError("permission_denied", "Your role does not allow this.");
      return;
    }
    for (const t of teams) {
      const have = roleIn(p, t);
      if (have === undefined) throw appError("not_found", "No such resource.");
      if (have < access.role) throw appError("permission_denied", `This needs the ${Role[access.role]!.toLowerCase()} role in the team; you are ${Role[have]!.toLowerCase()}.`);
    }
  }
}

function errorCodeOf(e: unknown): string {
  if (e instanceof ConnectError) return errorDetail(e)?.code ?? Code[e.code]!.toLowerCase();
  return "internal_error";
}
