// The SQL editor's history and saved queries (migration 201), per console
// account and application. Bounded per account: the newest HISTORY_KEPT
// history entries are kept (older ones are dropped as new ones come), and
// at most SAVED_MAX saved queries (one more is refused).
import { appError } from "../../kernel/errors.js";
import type { Sql } from "../../infra/storage/sql.js";

export const HISTORY_KEPT = 100;
export const SAVED_MAX = 200;
export const SAVED_NAME_MAX = 100;
/** Longer statements are kept cut to this many characters in the history. */
export const HISTORY_SQL_CHARS = 20_000;

export interface HistoryEntry {
  id: number;
  sql: string;
  ranAt: Date;
  durationMs: number;
  error: string;
}

export interface SavedQueryRow {
  id: number;
  name: string;
  sql: string;
  createdAt: Date;
  updatedAt: Date;
}

export interface SqlQueryStore {
  addHistory(userId: number, appId: number, sql: string, durationMs: number, error: string): Promise<void>;
  history(userId: number, appId: number): Promise<HistoryEntry[]>;
  saved(userId: number, appId: number): Promise<SavedQueryRow[]>;
  save(userId: number, appId: number, name: string, sql: string): Promise<SavedQueryRow>;
  deleteSaved(userId: number, appId: number, id: number): Promise<boolean>;
}

const asDate = (v: unknown) => (v instanceof Date ? v : new Date(String(v)));

export function createSqlQueryStore(sql: Sql): SqlQueryStore {
  const savedRow = (r: Record<string, unknown>): SavedQueryRow => ({
    id: Number(r.id),
    name: String(r.name),
    sql: String(r.sql),
    createdAt: asDate(r.created_at),
    updatedAt: asDate(r.updated_at),
  });
  return {
    async addHistory(userId, appId, text, durationMs, error) {
      await sql.transaction(async (tx) => {
        await tx.query("INSERT INTO sql_history (user_id, app_id, sql, duration_ms, error) VALUES ($1, $2, $3, $4, $5)", [
          userId,
          appId,
          text.slice(0, HISTORY_SQL_CHARS),
          Math.min(durationMs, 2_147_483_647),
          error.slice(0, 2000),
        ]);
        await tx.query(
          `DELETE FROM sql_history WHERE user_id = $1 AND id < (
             SELECT min(id) FROM (SELECT id FROM sql_history WHERE user_id = $1 ORDER BY id DESC LIMIT ${HISTORY_KEPT}) newest)`,
          [userId],
        );
      });
    },
    async history(userId, appId) {
      const r = await sql.query(
        `SELECT id, sql, ran_at, duration_ms, error FROM sql_history WHERE user_id = $1 AND app_id = $2 ORDER BY id DESC LIMIT ${HISTORY_KEPT}`,
        [userId, appId],
      );
      return r.rows.map((x) => ({ id: Number(x.id), sql: String(x.sql), ranAt: asDate(x.ran_at), durationMs: Number(x.duration_ms), error: String(x.error) }));
    },
    async saved(userId, appId) {
      const r = await sql.query(`SELECT * FROM sql_saved_queries WHERE user_id = $1 AND app_id = $2 ORDER BY name LIMIT ${SAVED_MAX}`, [userId, appId]);
      return r.rows.map(savedRow);
    },
    async save(userId, appId, name, text) {
      return sql.transaction(async (tx) => {
        // One account's saves one at a time, so the count below holds.
        await tx.query("SELECT id FROM users WHERE id = $1 FOR UPDATE", [userId]);
        const existing = await tx.query("SELECT id FROM sql_saved_queries WHERE user_id = $1 AND app_id = $2 AND name = $3", [userId, appId, name]);
        if (!existing.rows.length) {
          const n = await tx.query<{ n: string | number }>("SELECT count(*) AS n FROM sql_saved_queries WHERE user_id = $1", [userId]);
          if (Number(n.rows[0]?.n ?? 0) >= SAVED_MAX) {
            throw appError("failed_precondition", `At most ${SAVED_MAX} saved queries per account: delete one first.`);
          }
        }
        const r = await tx.query(
          `INSERT INTO sql_saved_queries (user_id, app_id, name, sql) VALUES ($1, $2, $3, $4)
           ON CONFLICT (user_id, app_id, name) DO UPDATE SET sql = EXCLUDED.sql, updated_at = now()
           RETURNING *`,
          [userId, appId, name, text],
        );
        return savedRow(r.rows[0]!);
      });
    },
    async deleteSaved(userId, appId, id) {
      const r = await sql.query("DELETE FROM sql_saved_queries WHERE id = $1 AND user_id = $2 AND app_id = $3", [id, userId, appId]);
      return r.rowCount > 0;
    },
  };
}
