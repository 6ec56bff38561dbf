// Who calls the admin listener: a console user (session cookie) or the
// operator token (a service credential with a configured role).
import { createContextKey, type HandlerContext } from "@connectrpc/connect";
import { Role } from "../../../gen/pulsebase/common/v1/options_pb.js";
import { appError } from "../../kernel/errors.js";

export interface OperatorPrincipal {
  kind: "user" | "service";
  /** 0 for the operator token. */
  userId: number;
  name: string;
  email: string;
  /** Instance administrator: every role in every team, and cross-tenant methods. */
  admin: boolean;
  /** The service credential's role, held in every team. */
  everyTeam?: Role;
  teams: Map<number, { name: string; role: Role }>;
  session?: { idHash: string; csrf: string; expiresAt: Date };
}

export const kOperator = createContextKey<OperatorPrincipal | undefined>(undefined, { description: "operator principal" });
export const kUserAgent = createContextKey<string>("", { description: "user agent" });

/** What a handler adds to its audit row (sign-in: the account it was for). */
export interface AuditNote {
  actor?: { userId: number; email: string };
  resource: Record<string, string>;
}
export const kAuditNote = createContextKey<AuditNote | undefined>(undefined, { description: "audit note" });

export function operatorOf(ctx: HandlerContext): OperatorPrincipal {
  const p = ctx.values.get(kOperator);
  if (!p) throw appError("unauthenticated", "Sign in first.");
  return p;
}

/** The caller's role in a team (admins and service credentials hold one everywhere). */
export function roleIn(p: OperatorPrincipal, teamId: number): Role | undefined {
  if (p.admin) return Role.ADMIN;
  if (p.everyTeam !== undefined) return p.everyTeam;
  return p.teams.get(teamId)?.role;
}
