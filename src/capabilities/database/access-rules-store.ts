// An application's access rules in the service's own PostgreSQL (or
// PGlite): every save is a new version, the newest is in force
// (migration 202_access_rules.sql).
import { appError } from "../../kernel/errors.js";
import type { Sql } from "../../infra/storage/sql.js";
import type { TableRules } from "../../infra/libsql/access-rules.js";

export type AccessMode = "open" | "rules";

export interface AccessRulesRecord {
  appId: number;
  mode: AccessMode;
  /** 0 when none were ever saved. */
  version: number;
  tables: Record<string, TableRules>;
  savedAt: Date | undefined;
  savedBy: number;
}

export interface AccessRulesStore {
  current(appId: number): Promise<AccessRulesRecord>;
  versions(appId: number, limit: number): Promise<AccessRulesRecord[]>;
  /** Saves a new version; `expectedVersion` (unless 0) must be the one in force. */
  save(appId: number, mode: AccessMode, tables: Record<string, TableRules>, savedBy: number, expectedVersion: number): Promise<AccessRulesRecord>;
  /** The user_id of a consumer of the application, if it is one. */
  consumerUser(appId: number, consumerId: number): Promise<string | undefined>;
  appExists(appId: number): Promise<boolean>;
}

interface Row {
  app_id: string | number;
  version: number;
  mode: AccessMode;
  tables: Record<string, TableRules>;
  saved_by: string | number | null;
  created_at: Date | string;
}

const toRecord = (r: Row): AccessRulesRecord => ({
  appId: Number(r.app_id),
  mode: r.mode,
  version: Number(r.version),
  tables: r.tables ?? {},
  savedAt: new Date(r.created_at),
  savedBy: Number(r.saved_by ?? 0),
});

const COLUMNS = "app_id, version, mode, tables, saved_by, created_at";

export function createAccessRulesStore(sql: Sql): AccessRulesStore {
  return {
    async current(appId) {
      const { rows } = await sql.query<Row>(`SELECT ${COLUMNS} FROM app_access_rules WHERE app_id = $1 ORDER BY version DESC LIMIT 1`, [appId]);
      return rows[0] ? toRecord(rows[0]) : { appId, mode: "open", version: 0, tables: {}, savedAt: undefined, savedBy: 0 };
    },
    async versions(appId, limit) {
      const { rows } = await sql.query<Row>(`SELECT ${COLUMNS} FROM app_access_rules WHERE app_id = $1 ORDER BY version DESC LIMIT $2`, [appId, limit]);
      return rows.map(toRecord);
    },
    async save(appId, mode, tables, savedBy, expectedVersion) {
      try {
        // the next version, only when the one in force is the one expected
        const { rows } = await sql.query<Row>(
          `INSERT INTO app_access_rules (app_id, version, mode, tables, saved_by)
           SELECT $1, coalesce(max(version), 0) + 1, $2, $3::jsonb, $4 FROM app_access_rules WHERE app_id = $1
           HAVING $5::int = 0 OR coalesce(max(version), 0) = $5::int
           RETURNING ${COLUMNS}`,
          [appId, mode, JSON.stringify(tables), savedBy || null, expectedVersion],
        );
        if (!rows[0]) throw appError("failed_precondition", `The rules were changed since version ${expectedVersion}: load them again and repeat the edit.`);
        return toRecord(rows[0]);
      } catch (e) {
        // two saves at once: the second takes the same version number
        if ((e as { code?: string }).code === "23505") throw appError("failed_precondition", "The rules were saved by someone else at the same time: load them again and repeat the edit.", { cause: e });
        throw e;
      }
    },
    async appExists(appId) {
      const { rows } = await sql.query<{ n: string | number }>(`SELECT count(*) AS n FROM apps WHERE id = $1`, [appId]);
      return Number(rows[0]?.n ?? 0) > 0;
    },
    async consumerUser(appId, consumerId) {
      const { rows } = await sql.query<{ user_id: string }>(`SELECT user_id FROM consumers WHERE id = $1 AND app_id = $2`, [consumerId, appId]);
      return rows[0]?.user_id;
    },
  };
}
