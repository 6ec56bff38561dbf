// Team roles as stored (text) and as the proto names them; their order.
import { Role } from "../../../gen/pulsebase/common/v1/options_pb.js";

export type RoleName = "viewer" | "developer" | "owner";

const byName: Record<string, Role> = { viewer: Role.VIEWER, developer: Role.DEVELOPER, owner: Role.OWNER, admin: Role.ADMIN };

export function roleOf(name: string): Role {
  return byName[name] ?? Role.UNSPECIFIED;
}

export function roleName(r: Role): RoleName | undefined {
  return r === Role.VIEWER ? "viewer" : r === Role.DEVELOPER ? "developer" : r === Role.OWNER ? "owner" : undefined;
}
