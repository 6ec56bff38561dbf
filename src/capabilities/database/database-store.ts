// Databases and their application links in the service's own PostgreSQL
// (or PGlite). Status changes are conditional UPDATEs so only the allowed
// transitions (database-status.ts) ever happen.
import { appError } from "../../kernel/errors.js";
import type { Sql } from "../../infra/storage/sql.js";
import type { AccessRules } from "../../infra/libsql/access-rules.js";
import { allowedFrom, type DatabaseStatus } from "./database-status.js";

export type DatabaseKind = "embedded" | "remote";

export interface DatabaseRecord {
  id: number;
  teamId: number;
  name: string;
  kind: DatabaseKind;
  status: DatabaseStatus;
  statusMessage: string;
  filePath: string | null;
  url: string | null;
  authToken: string | null;
  linkedAppIds: number[];
  createdAt: Date;
  updatedAt: Date;
}

interface Row {
  id: string | number;
  team_id: string | number;
  name: string;
  kind: DatabaseKind;
  status: DatabaseStatus;
  status_message: string;
  file_path: string | null;
  url: string | null;
  auth_token: string | null;
  linked: (string | number)[] | null;
  created_at: Date | string;
  updated_at: Date | string;
  access?: unknown;
}

const SELECT = `
  SELECT d.id, d.team_id, d.name, d.kind, d.status, d.status_message, d.file_path, d.url, d.auth_token,
         d.created_at, d.updated_at,
         COALESCE((SELECT array_agg(l.app_id ORDER BY l.app_id) FROM app_databases l WHERE l.database_id = d.id),
                  '{}'::bigint[]) AS linked
    FROM databases d`;

function toRecord(r: Row): DatabaseRecord {
  return {
    id: Number(r.id),
    teamId: Number(r.team_id),
    name: r.name,
    kind: r.kind,
    status: r.status,
    statusMessage: r.status_message,
    filePath: r.file_path,
    url: r.url,
    authToken: r.auth_token,
    linkedAppIds: (r.linked ?? []).map(Number),
    createdAt: new Date(r.created_at),
    updatedAt: new Date(r.updated_at),
  };
}

/** What the query path needs to know about an application's database. */
export interface LinkedDatabase {
  id: number;
  kind: DatabaseKind;
  status: DatabaseStatus;
  filePath: string | null;
  url: string | null;
  authToken: string | null;
  /** The application's access rules when it is in `rules` mode (docs/database.md, "Access rules"). */
  access?: AccessRules;
}

export interface DatabaseStore {
  create(input: { teamId: number; name: string; kind: DatabaseKind; url?: string; authToken?: string }): Promise<DatabaseRecord>;
  setFilePath(id: number, filePath: string): Promise<void>;
  get(id: number): Promise<DatabaseRecord | undefined>;
  listByTeam(teamId: number, includeDeleted: boolean): Promise<DatabaseRecord[]>;
  /** Moves to `to` when the current status allows it; undefined when it does not. */
  transition(id: number, to: DatabaseStatus, statusMessage?: string): Promise<DatabaseRecord | undefined>;
  link(databaseId: number, appId: number): Promise<void>;
  /** Removes the link; returns false when the app was not linked to it. */
  unlink(databaseId: number, appId: number): Promise<boolean>;
  linkedTo(appId: number): Promise<LinkedDatabase | undefined>;
  appTeam(appId: number): Promise<number | undefined>;
}

export function createDatabaseStore(sql: Sql): DatabaseStore {
  const get = async (id: number) => {
    const { rows } = await sql.query<Row>(`${SELECT} WHERE d.id = $1`, [id]);
    return rows[0] ? toRecord(rows[0]) : undefined;
  };
  return {
    async create({ teamId, name, kind, url, authToken }) {
      const { rows } = await sql.query<{ id: string }>(
        `INSERT INTO databases (team_id, name, kind, url, auth_token) VALUES ($1, $2, $3, $4, $5) RETURNING id`,
        [teamId, name, kind, kind === "remote" ? url : null, kind === "remote" ? authToken ?? "" : null],
      );
      return (await get(Number(rows[0]!.id)))!;
    },
    async setFilePath(id, filePath) {
      await sql.query(`UPDATE databases SET file_path = $2, updated_at = now() WHERE id = $1`, [id, filePath]);
    },
    get,
    async listByTeam(teamId, includeDeleted) {
      const { rows } = await sql.query<Row>(
        `${SELECT} WHERE d.team_id = $1 AND ($2 OR d.status <> 'deleted') ORDER BY d.id`,
        [teamId, includeDeleted],
      );
      return rows.map(toRecord);
    },
    async transition(id, to, statusMessage = "") {
      const { rowCount } = await sql.query(
        `UPDATE databases SET status = $2, status_message = $3, updated_at = now()
          WHERE id = $1 AND status = ANY($4::text[])`,
        [id, to, statusMessage, allowedFrom(to)],
      );
      return rowCount === 1 ? get(id) : undefined;
    },
    async link(databaseId, appId) {
      // one statement: the app's existing link (if any) must be this database
      const { rows } = await sql.query<{ database_id: string }>(
        `INSERT INTO app_databases (app_id, database_id) VALUES ($1, $2)
         ON CONFLICT (app_id) DO UPDATE SET app_id = EXCLUDED.app_id
         RETURNING database_id`,
        [appId, databaseId],
      );
      if (Number(rows[0]!.database_id) !== databaseId) {
        throw appError("conflict", "The application is already linked to another database; unlink it first.");
      }
    },
    async unlink(databaseId, appId) {
      const { rowCount } = await sql.query(`DELETE FROM app_databases WHERE app_id = $1 AND database_id = $2`, [
        appId,
        databaseId,
      ]);
      return rowCount === 1;
    },
    async linkedTo(appId) {
      const { rows } = await sql.query<Row>(
        `SELECT d.id, d.kind, d.status, d.file_path, d.url, d.auth_token,
                (SELECT json_build_object('version', r.version, 'mode', r.mode, 'tables', r.tables)
                   FROM app_access_rules r WHERE r.app_id = l.app_id ORDER BY r.version DESC LIMIT 1) AS access
           FROM app_databases l JOIN databases d ON d.id = l.database_id WHERE l.app_id = $1`,
        [appId],
      );
      const r = rows[0];
      if (!r) return undefined;
      const a = r.access as { version: number; mode: "open" | "rules"; tables: AccessRules["tables"] } | null;
      const access = a && a.mode === "rules" ? { version: Number(a.version), tables: a.tables } : undefined;
      return { id: Number(r.id), kind: r.kind, status: r.status, filePath: r.file_path, url: r.url, authToken: r.auth_token, access };
    },
    async appTeam(appId) {
      const { rows } = await sql.query<{ team_id: string }>(`SELECT team_id FROM apps WHERE id = $1`, [appId]);
      return rows[0] ? Number(rows[0].team_id) : undefined;
    },
  };
}
