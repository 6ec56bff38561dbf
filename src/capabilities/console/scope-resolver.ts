// Finds the team that owns a resource a request names (the `scope` field
// option), one indexed lookup per kind, so the role check is made in that
// team. Undefined: no such resource.
import { Scope } from "../../../gen/pulsebase/common/v1/options_pb.js";
import type { Sql } from "../../infra/storage/sql.js";

const byId: Partial<Record<Scope, string>> = {
  [Scope.TEAM]: "SELECT id AS team_id FROM teams WHERE id = $1",
  [Scope.APP]: "SELECT team_id FROM apps WHERE id = $1",
  [Scope.FUNCTION]: "SELECT a.team_id FROM functions f JOIN apps a ON a.id = f.app_id WHERE f.id = $1",
  [Scope.DATABASE]: "SELECT team_id FROM databases WHERE id = $1",
  [Scope.CONSUMER]: "SELECT a.team_id FROM consumers c JOIN apps a ON a.id = c.app_id WHERE c.id = $1",
  [Scope.EVENT]: "SELECT a.team_id FROM analytics_events e JOIN apps a ON a.id = e.app_id WHERE e.id = $1",
  [Scope.LOG]: "SELECT a.team_id FROM analytics_logs l JOIN apps a ON a.id = l.app_id WHERE l.id = $1",
  [Scope.LOG_OCCURRENCE]:
    "SELECT a.team_id FROM analytics_log_occurrences o JOIN analytics_logs l ON l.id = o.log_id JOIN apps a ON a.id = l.app_id WHERE o.id = $1",
  [Scope.BREADCRUMB]: "SELECT a.team_id FROM analytics_breadcrumbs b JOIN apps a ON a.id = b.app_id WHERE b.id = $1",
  [Scope.TRIGGER]: "SELECT a.team_id FROM function_triggers t JOIN apps a ON a.id = t.app_id WHERE t.id = $1",
};

export class ScopeResolver {
  constructor(private readonly sql: Sql) {}

  async teamOf(kind: Scope, value: bigint | number | string): Promise<number | undefined> {
    if (kind === Scope.APP && typeof value === "string") {
      if (value.includes("\u0000")) return undefined;
      const { rows } = await this.sql.query<{ team_id: number }>("SELECT team_id FROM apps WHERE app_key = $1", [value]);
      return rows[0] ? Number(rows[0].team_id) : undefined;
    }
    const q = byId[kind];
    const id = typeof value === "string" ? Number(value) : value;
    // Ids are positive bigints; anything else names nothing (and never reaches PostgreSQL as an out-of-range 500).
    if (!q || !(BigInt(id) > 0n && BigInt(id) <= 9_223_372_036_854_775_807n)) return undefined;
    const { rows } = await this.sql.query<{ team_id: number }>(q, [String(id)]);
    return rows[0] ? Number(rows[0].team_id) : undefined;
  }
}
