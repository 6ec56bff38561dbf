// The console's home page (pulsebase.admin.v1.OverviewService): the
// instance at a glance for the teams the caller can see. Every number is an
// index range scan with a limit, so the page stays fast however much data
// there is: applications by team (apps_team_idx), event and log occurrences
// of the last 24 hours by group and time, function invocations of the last
// 24 hours by function and id (ids grow with time: the first id of the
// window is found by a binary search on the primary key), database files
// by stat.
import { stat } from "node:fs/promises";
import { join } from "node:path";
import type { ServiceImpl } from "@connectrpc/connect";
import type { OverviewService } from "../../../gen/pulsebase/admin/v1/overview_pb.js";
import { appError } from "../../kernel/errors.js";
import type { QueueStatsSource } from "../../kernel/module.js";
import type { Sql } from "../../infra/storage/sql.js";
import { operatorOf } from "./principal.js";

/** Counts of the last 24 hours stop here (the console shows "100000+"). */
export const OVERVIEW_COUNT_CAP = 100_000;
/** Applications listed (newest first), each with its counts. */
export const OVERVIEW_MAX_APPS = 50;
export const OVERVIEW_MAX_DATABASES = 200;
const DAY_MS = 86_400_000;

export interface OverviewDeps {
  sql: Sql;
  dataDir: string;
  /** The ingestion queues (the modules' gauges), read when asked. */
  queues(): Record<string, QueueStatsSource>;
}

interface AppRow { id: string; team_id: string; name: string }
interface DbRow { id: string; team_id: string; name: string; kind: string; status: string; file_path: string | null; app_ids: string[] | null }

export function createOverviewServiceImpl(deps: OverviewDeps): ServiceImpl<typeof OverviewService> {
  const { sql } = deps;

  /** The first invocation id of the window, or undefined when none is that recent. */
  async function firstInvocationSince(since: Date): Promise<string | undefined> {
    const { rows } = await sql.query<{ lo: string | null; hi: string | null }>("SELECT min(id)::text AS lo, max(id)::text AS hi FROM function_invocations");
    if (rows[0]?.hi == null) return undefined;
    let lo = BigInt(rows[0].lo!);
    let hi = BigInt(rows[0].hi) + 1n;
    // At most 64 probes, each one primary-key lookup.
    while (lo < hi) {
      const mid = (lo + hi) / 2n;
      const r = await sql.query<{ id: string; created_at: Date }>("SELECT id::text AS id, created_at FROM function_invocations WHERE id >= $1 ORDER BY id LIMIT 1", [String(mid)]);
      const row = r.rows[0];
      if (!row || new Date(row.created_at) >= since) hi = mid;
      else lo = BigInt(row.id) + 1n;
    }
    return lo > BigInt(rows[0].hi) ? undefined : String(lo);
  }

  async function sizeOf(file: string | null): Promise<bigint> {
    if (!file) return 0n;
    let total = 0n;
    for (const f of [file, `${file}-wal`]) {
      try {
        total += BigInt((await stat(join(deps.dataDir, f))).size);
      } catch {
        /* not provisioned yet, or no write-ahead log */
      }
    }
    return total;
  }

  return {
    async getOverview(req, ctx) {
      const p = operatorOf(ctx);
      // team 0: every team the caller sees (the access policy lets only the administrator ask so).
      const teams = req.teamId !== 0n ? [String(req.teamId)] : p.admin || p.everyTeam !== undefined ? null : [...p.teams.keys()].map(String);
      if (req.teamId !== 0n) {
        // The administrator's reads skip the policy's lookups: a team that does not exist is named here.
        const t = await sql.query("SELECT 1 FROM teams WHERE id = $1", [String(req.teamId)]);
        if (t.rows.length === 0) throw appError("not_found", "No such team.");
      }
      const since = new Date(Date.now() - DAY_MS);
      const cap = OVERVIEW_COUNT_CAP;
      const [apps, total] = await Promise.all([
        sql.query<AppRow>(
          "SELECT id::text AS id, team_id::text AS team_id, name FROM apps WHERE ($1::bigint[] IS NULL OR team_id = ANY($1::bigint[])) ORDER BY id DESC LIMIT $2",
          [teams, OVERVIEW_MAX_APPS],
        ),
        sql.query<{ n: string }>("SELECT count(*)::text AS n FROM apps WHERE ($1::bigint[] IS NULL OR team_id = ANY($1::bigint[]))", [teams]),
      ]);
      const ids = apps.rows.map((a) => a.id);
      const firstRun = ids.length ? await firstInvocationSince(since) : undefined;
      // One statement per kind; each application's count is a bounded range scan of its own groups.
      const [events, errors, runs] = await Promise.all([
        sql.query<{ app_id: string; n: string }>(
          `SELECT a.id::text AS app_id, (SELECT count(*) FROM (SELECT 1 FROM analytics_event_occurrences o
             WHERE o.event_id IN (SELECT e.id FROM analytics_events e WHERE e.app_id = a.id) AND o.created_at >= $2 LIMIT $3) x)::text AS n
           FROM unnest($1::bigint[]) AS a(id)`,
          [ids, since, cap],
        ),
        sql.query<{ app_id: string; n: string }>(
          `SELECT a.id::text AS app_id, (SELECT count(*) FROM (SELECT 1 FROM analytics_log_occurrences o
             WHERE o.log_id IN (SELECT l.id FROM analytics_logs l WHERE l.app_id = a.id) AND o.created_at >= $2 LIMIT $3) x)::text AS n
           FROM unnest($1::bigint[]) AS a(id)`,
          [ids, since, cap],
        ),
        firstRun === undefined
          ? Promise.resolve({ rows: [] as { app_id: string; runs: string; failed: string }[] })
          : sql.query<{ app_id: string; runs: string; failed: string }>(
              `SELECT a.id::text AS app_id, x.runs::text AS runs, x.failed::text AS failed FROM unnest($1::bigint[]) AS a(id),
               LATERAL (SELECT count(*) AS runs, count(*) FILTER (WHERE i.outcome <> 'ok') AS failed FROM (SELECT outcome FROM function_invocations
                 WHERE function_id IN (SELECT f.id FROM functions f WHERE f.app_id = a.id) AND id >= $2 LIMIT $3) i) x`,
              [ids, firstRun, cap],
            ),
      ]);
      const by = <R extends { app_id: string }>(rows: R[]) => new Map(rows.map((r) => [r.app_id, r]));
      const ev = by(events.rows);
      const er = by(errors.rows);
      const fn = by(runs.rows);
      const dbs = await sql.query<DbRow>(
        `SELECT d.id::text AS id, d.team_id::text AS team_id, d.name, d.kind, d.status, d.file_path,
                (SELECT array_agg(ad.app_id::text ORDER BY ad.app_id) FROM app_databases ad WHERE ad.database_id = d.id) AS app_ids
         FROM databases d WHERE ($1::bigint[] IS NULL OR d.team_id = ANY($1::bigint[])) AND d.status <> 'deleted'
         ORDER BY d.id DESC LIMIT $2`,
        [teams, OVERVIEW_MAX_DATABASES],
      );
      const queues = await Promise.all(
        Object.entries(deps.queues()).map(async ([name, q]) => {
          try {
            const s = await q.stats();
            return { name, backend: q.backend, lag: BigInt(s.lag), inFlight: BigInt(s.inFlight), deadLetters: BigInt(s.deadLetters) };
          } catch {
            return undefined; // unreachable queue: left out rather than failing the page
          }
        }),
      );
      return {
        apps: apps.rows.map((a) => ({
          appId: BigInt(a.id),
          teamId: BigInt(a.team_id),
          name: a.name,
          events24h: BigInt(ev.get(a.id)?.n ?? 0),
          errors24h: BigInt(er.get(a.id)?.n ?? 0),
          functionFailures24h: BigInt(fn.get(a.id)?.failed ?? 0),
          functionRuns24h: BigInt(fn.get(a.id)?.runs ?? 0),
        })),
        totalApps: BigInt(total.rows[0]?.n ?? 0),
        queues: queues.filter((q) => q !== undefined),
        databases: await Promise.all(
          dbs.rows.map(async (d) => ({
            databaseId: BigInt(d.id),
            teamId: BigInt(d.team_id),
            name: d.name,
            kind: d.kind,
            status: d.status,
            sizeBytes: d.kind === "embedded" ? await sizeOf(d.file_path) : 0n,
            appIds: (d.app_ids ?? []).map((x) => BigInt(x)),
          })),
        ),
        countCap: BigInt(cap),
      };
    },
  };
}
