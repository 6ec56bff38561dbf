// Which tables realtime subscribers need captured (migration
// 620_realtime_interest.sql): a row per (application, table, server) while
// that server has a subscriber of the table, refreshed every third of its
// lifetime and deleted when the last subscriber leaves. The change-capture
// drainer (the functions' event worker, wired in src/server/modules.ts)
// captures the tables of the rows that have not expired; those of a server
// that died expire on their own, and the drainer then drops the capture.
import type { Sql } from "../../infra/storage/sql.js";

export const INTEREST_TTL_MS = 30_000;

export interface Interest {
  /** This server has a subscriber of the table now (stored before it resolves). */
  add(appId: number, table: string): Promise<void>;
  /** This server's last subscriber of the table left. */
  remove(appId: number, table: string): void;
  /** The tables with a live interest, by application (of one application, or all), read on `q`. */
  watched(q: Sql, onlyApp?: number): Promise<Map<number, Set<string>>>;
  start(): void;
  stop(): Promise<void>;
}

export function createInterest(sql: Sql, serverId: string, onError: (err: unknown) => void, ttlMs = INTEREST_TTL_MS): Interest {
  const mine = new Set<string>();
  const key = (appId: number, table: string) => `${appId}\u0000${table}`;
  let timer: NodeJS.Timeout | undefined;
  const upsert = (appId: number, table: string) =>
    sql.query(
      `INSERT INTO realtime_interest (app_id, tbl, server_id, expires_at) VALUES ($1, $2, $3, now() + ($4 || ' milliseconds')::interval)
       ON CONFLICT (app_id, tbl, server_id) DO UPDATE SET expires_at = EXCLUDED.expires_at`,
      [appId, table, serverId, String(ttlMs)],
    );
  async function refresh(): Promise<void> {
    for (const k of mine) {
      const [a, t] = k.split("\u0000");
      await upsert(Number(a), t!);
    }
    // rows of servers gone long ago
    await sql.query("DELETE FROM realtime_interest WHERE expires_at < now() - interval '1 hour'");
  }
  return {
    async add(appId, table) {
      mine.add(key(appId, table));
      await upsert(appId, table);
    },
    remove(appId, table) {
      mine.delete(key(appId, table));
      sql.query("DELETE FROM realtime_interest WHERE app_id = $1 AND tbl = $2 AND server_id = $3", [appId, table, serverId]).catch(onError);
    },
    async watched(q, onlyApp) {
      const r = await q.query<{ app_id: string | number; tbl: string }>(
        `SELECT DISTINCT app_id, tbl FROM realtime_interest WHERE expires_at > now() ${onlyApp === undefined ? "" : "AND app_id = $1"}`,
        onlyApp === undefined ? [] : [onlyApp],
      );
      const out = new Map<number, Set<string>>();
      for (const row of r.rows) {
        const appId = Number(row.app_id);
        let s = out.get(appId);
        if (!s) out.set(appId, (s = new Set()));
        s.add(row.tbl);
      }
      return out;
    },
    start() {
      timer ??= setInterval(() => void refresh().catch(onError), Math.max(50, Math.floor(ttlMs / 3)));
      timer.unref();
    },
    async stop() {
      clearInterval(timer);
      timer = undefined;
      const keys = [...mine];
      mine.clear();
      for (const k of keys) {
        const [a, t] = k.split("\u0000");
        await sql.query("DELETE FROM realtime_interest WHERE app_id = $1 AND tbl = $2 AND server_id = $3", [Number(a), t, serverId]).catch(onError);
      }
    },
  };
}
