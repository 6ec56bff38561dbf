// Operator read API over analytics (pulsebase.admin.v1.AnalyticsService):
// records per application with keyset paging (newest activity first), raw
// occurrences, attachment download, daily counts, the queue's lag and its
// dead letters (list and replay).
import { create, type JsonObject } from "@bufbuild/protobuf";
import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import {
  AnalyticsService,
  BreadcrumbOccurrenceSchema,
  BreadcrumbRecordSchema,
  DailyCountSchema,
  DeadLetterSchema,
  EventRecordSchema,
  LogAttachmentSchema,
  LogOccurrenceSchema,
  LogRecordSchema,
  QueueStatsSchema,
  type AnalyticsFilter,
  type EventRecord,
  type LogRecord,
} from "../../../gen/pulsebase/admin/v1/analytics_pb.js";
import { appError, validationError } from "../../kernel/errors.js";
import { decodePageToken, pageOf } from "../../kernel/paging.js";
import type { Sql } from "../../infra/storage/sql.js";
import type { BlobStore } from "../../infra/blobs/blob-store.js";
import type { Queue } from "../../infra/queue/queue.js";
import { decodePayload } from "./batch-payload.js";
import { eventInit, loadEventData, ts, type BreadcrumbRowDb, type EventDataRowDb, type EventRowDb, type LogRowDb } from "./record-views.js";

export interface AdminAnalyticsDeps {
  sql: Sql;
  queue: Queue;
  blobs: BlobStore;
}

const PAGE_DEFAULT = 50;
const PAGE_MAX = 500;
const DAILY_MAX_DAYS = 366;
/** The metadata breakdown reads at most this many occurrences of the range (the newest). */
const BREAKDOWN_SCAN = 100_000;
const BREAKDOWN_PER_KEY = 50;
const BREAKDOWN_MAX = 500;

interface Cursor {
  t: string;
  id: number;
}

function pageSize(n: number): number {
  if (n === 0) return PAGE_DEFAULT;
  if (n < 1 || n > PAGE_MAX) throw validationError({ page_size: [`The page size must be between 1 and ${PAGE_MAX}.`] });
  return n;
}

const isCursor = (c: unknown): c is Cursor =>
  typeof (c as Cursor)?.t === "string" && Number.isSafeInteger((c as Cursor).id) && !Number.isNaN(Date.parse((c as Cursor).t));

const dateOf = (t: Timestamp | undefined) => (t ? timestampDate(t) : null);

function id(n: bigint, field: string): number {
  if (n <= 0n || n > BigInt(Number.MAX_SAFE_INTEGER)) throw validationError({ [field]: [`The ${field} must be a positive integer.`] });
  return Number(n);
}

/** Keyset page over a table ordered by (sortCol DESC, id DESC). */
async function page<R extends { id: number }>(
  sql: Sql,
  table: string,
  sortCol: string,
  where: string[],
  params: unknown[],
  pageToken: string,
  size: number,
  sortOf: (r: R) => Date,
): Promise<{ rows: R[]; next: string }> {
  const cursor = decodePageToken(pageToken, isCursor);
  const conds = [...where];
  const ps = [...params];
  if (cursor) {
    ps.push(cursor.t, cursor.id);
    conds.push(`(${sortCol}, id) < ($${ps.length - 1}::timestamptz, $${ps.length})`);
  }
  ps.push(size + 1);
  const { rows } = await sql.query<R>(
    `SELECT * FROM ${table} WHERE ${conds.join(" AND ")} ORDER BY ${sortCol} DESC, id DESC LIMIT $${ps.length}`,
    ps,
  );
  return pageOf(rows, size, (last) => ({ t: sortOf(last).toISOString(), id: Number(last.id) }));
}

/** Filter of the record lists; firstCol/lastCol bound the record's activity. */
function recordFilter(f: AnalyticsFilter | undefined, nameCol: string, firstCol: string, lastCol: string) {
  if (!f || f.appId === 0n) throw validationError({ "filter.app_id": ["The app id field is required."] });
  const where = ["app_id = $1"];
  const params: unknown[] = [id(f.appId, "filter.app_id")];
  if (f.name) {
    params.push(f.name);
    where.push(`${nameCol} = $${params.length}`);
  }
  const from = dateOf(f.from);
  const to = dateOf(f.to);
  if (from) {
    params.push(from);
    where.push(`${lastCol} >= $${params.length}`);
  }
  if (to) {
    params.push(to);
    where.push(`${firstCol} < $${params.length}`);
  }
  return { where, params, size: pageSize(f.pageSize), token: f.pageToken };
}

/** One page of a record's occurrences (`parentCol` = `parentId`), newest first, within the request's time range. */
function occurrences<R extends { id: number; created_at: Date }>(
  sql: Sql,
  table: string,
  parentCol: string,
  parentId: number,
  req: { from?: Timestamp; to?: Timestamp; pageToken: string; pageSize: number },
) {
  const where = [`${parentCol} = $1`];
  const params: unknown[] = [parentId];
  const from = dateOf(req.from);
  const to = dateOf(req.to);
  if (from) {
    params.push(from);
    where.push(`created_at >= $${params.length}`);
  }
  if (to) {
    params.push(to);
    where.push(`created_at < $${params.length}`);
  }
  return page<R>(sql, table, "created_at", where, params, req.pageToken, pageSize(req.pageSize), (r) => r.created_at);
}

function eventRecord(r: EventRowDb, data: EventDataRowDb[]): EventRecord {
  return create(EventRecordSchema, { ...eventInit(r, data), appId: BigInt(r.app_id) });
}

function logRecord(r: LogRowDb): LogRecord {
  return create(LogRecordSchema, {
    id: BigInt(r.id),
    appId: BigInt(r.app_id),
    hash: r.hash,
    appVersions: r.app_versions,
    classFqn: r.class_fqn,
    context: r.context ?? undefined,
    fileName: r.file_name ?? "",
    lineNumber: BigInt(r.line_number ?? 0),
    lastSeenAt: ts(r.last_seen_at),
    message: r.message,
    stackTrace: r.stack_trace ?? "",
    type: r.type,
    occurrences: BigInt(r.occurrences),
    usersAffected: BigInt(r.users_affected),
    createdAt: ts(r.created_at),
  });
}

export function createAdminAnalyticsServiceImpl(deps: AdminAnalyticsDeps): ServiceImpl<typeof AnalyticsService> {
  const { sql, queue, blobs } = deps;

  return {
    async listEvents(req) {
      const f = recordFilter(req.filter, "name", "created_at", "updated_at");
      const { rows, next } = await page<EventRowDb>(sql, "analytics_events", "updated_at", f.where, f.params, f.token, f.size, (r) => r.updated_at);
      const data = await loadEventData(sql, rows.map((r) => Number(r.id)));
      return { events: rows.map((r) => eventRecord(r, data.get(Number(r.id)) ?? [])), nextPageToken: next };
    },

    async getEvent(req) {
      const eventId = id(req.id, "id");
      const { rows } = await sql.query<EventRowDb>("SELECT * FROM analytics_events WHERE id = $1", [eventId]);
      if (!rows[0]) throw appError("not_found", "No such event.");
      const data = await loadEventData(sql, [eventId]);
      return eventRecord(rows[0], data.get(eventId) ?? []);
    },

    async getEventDailyCounts(req) {
      const eventId = id(req.eventId, "event_id");
      const from = dateOf(req.from);
      const to = dateOf(req.to);
      if (!from || !to) {
        throw validationError({ ...(from ? {} : { from: ["The from field is required."] }), ...(to ? {} : { to: ["The to field is required."] }) });
      }
      const startDay = Date.UTC(from.getUTCFullYear(), from.getUTCMonth(), from.getUTCDate());
      const days = Math.ceil((to.getTime() - startDay) / 86_400_000);
      if (days < 1 || days > DAILY_MAX_DAYS) throw validationError({ to: [`The range must cover 1 to ${DAILY_MAX_DAYS} days.`] });
      const { rows: found } = await sql.query("SELECT 1 FROM analytics_events WHERE id = $1", [eventId]);
      if (found.length === 0) throw appError("not_found", "No such event.");
      const { rows } = await sql.query<{ day: string; occurrences: number; unique_users: number }>(
        `SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day,
                count(*) AS occurrences, count(DISTINCT user_id) AS unique_users
         FROM analytics_event_occurrences
         WHERE event_id = $1 AND created_at >= $2 AND created_at < $3
         GROUP BY 1`,
        [eventId, from, to],
      );
      const byDay = new Map(rows.map((r) => [r.day, r]));
      const out = [];
      for (let i = 0; i < days; i++) {
        const day = new Date(startDay + i * 86_400_000).toISOString().slice(0, 10);
        const r = byDay.get(day);
        out.push(create(DailyCountSchema, { day, occurrences: BigInt(r?.occurrences ?? 0), uniqueUsers: BigInt(r?.unique_users ?? 0) }));
      }
      return { days: out };
    },

    async getEventBreakdown(req) {
      const eventId = id(req.eventId, "event_id");
      const from = dateOf(req.from);
      const to = dateOf(req.to);
      if (!from || !to) {
        throw validationError({ ...(from ? {} : { from: ["The from field is required."] }), ...(to ? {} : { to: ["The to field is required."] }) });
      }
      const days = (to.getTime() - from.getTime()) / 86_400_000;
      if (!(days > 0) || days > DAILY_MAX_DAYS) throw validationError({ to: [`The range must cover up to ${DAILY_MAX_DAYS} days, with to after from.`] });
      const { rows: found } = await sql.query("SELECT 1 FROM analytics_events WHERE id = $1", [eventId]);
      if (found.length === 0) throw appError("not_found", "No such event.");
      // The newest BREAKDOWN_SCAN occurrences of the range at most (one index range scan), then their metadata.
      const { rows } = await sql.query<{ key: string | null; value: string | null; n: string | number; total: string | number }>(
        `WITH o AS (SELECT metadata FROM analytics_event_occurrences
                    WHERE event_id = $1 AND created_at >= $2 AND created_at < $3
                    ORDER BY created_at DESC LIMIT $4),
              kv AS (SELECT d.key, d.value, count(*) AS n
                     FROM o, jsonb_each_text(CASE WHEN jsonb_typeof(o.metadata) = 'object' THEN o.metadata ELSE '{}'::jsonb END) AS d(key, value)
                     GROUP BY d.key, d.value),
              ranked AS (SELECT key, value, n, row_number() OVER (PARTITION BY key ORDER BY n DESC, value) AS r FROM kv),
              kept AS (SELECT key, value, n FROM ranked WHERE r <= $5 ORDER BY n DESC, key, value LIMIT $6)
         SELECT k.key, k.value, k.n::int AS n, t.total::int AS total
         FROM (SELECT count(*) AS total FROM o) t LEFT JOIN kept k ON true
         ORDER BY k.n DESC NULLS LAST, k.key, k.value`,
        [eventId, from, to, BREAKDOWN_SCAN, BREAKDOWN_PER_KEY, BREAKDOWN_MAX],
      );
      const total = Number(rows[0]?.total ?? 0);
      return {
        values: rows.filter((r) => r.key !== null).map((r) => ({ key: r.key!, value: r.value ?? "", occurrences: BigInt(r.n) })),
        total: BigInt(total),
        truncated: total >= BREAKDOWN_SCAN,
      };
    },

    async listLogs(req) {
      const f = recordFilter(req.filter, "class_fqn", "created_at", "last_seen_at");
      if (req.type) {
        if (req.type !== "error" && req.type !== "crash") throw validationError({ type: ["The type must be one of: error, crash."] });
        f.params.push(req.type);
        f.where.push(`type = $${f.params.length}`);
      }
      const { rows, next } = await page<LogRowDb>(sql, "analytics_logs", "last_seen_at", f.where, f.params, f.token, f.size, (r) => r.last_seen_at);
      return { logs: rows.map(logRecord), nextPageToken: next };
    },

    async getLog(req) {
      const { rows } = await sql.query<LogRowDb>("SELECT * FROM analytics_logs WHERE id = $1", [id(req.id, "id")]);
      if (!rows[0]) throw appError("not_found", "No such log.");
      return logRecord(rows[0]);
    },

    async listLogOccurrences(req) {
      type Occ = {
        id: number; log_id: number; consumer_id: number; session_id: number | null; user_id: string; app_version: string;
        stack_trace: string | null; file_name: string | null; line_number: number | null; context: JsonObject | null;
        attachment_key: string | null; attachment_name: string | null; attachment_type: string | null; attachment_size: number | null;
        created_at: Date;
      };
      const { rows, next } = await occurrences<Occ>(sql, "analytics_log_occurrences", "log_id", id(req.logId, "log_id"), req);
      return {
        occurrences: rows.map((r) =>
          create(LogOccurrenceSchema, {
            id: BigInt(r.id),
            logId: BigInt(r.log_id),
            consumerId: BigInt(r.consumer_id),
            sessionId: BigInt(r.session_id ?? 0),
            userId: r.user_id,
            appVersion: r.app_version,
            stackTrace: r.stack_trace ?? "",
            fileName: r.file_name ?? "",
            lineNumber: BigInt(r.line_number ?? 0),
            context: r.context ?? undefined,
            createdAt: ts(r.created_at),
            attachment: r.attachment_key
              ? { filename: r.attachment_name ?? "", contentType: r.attachment_type ?? "", size: BigInt(r.attachment_size ?? 0) }
              : undefined,
          }),
        ),
        nextPageToken: next,
      };
    },

    async getLogAttachment(req) {
      const { rows } = await sql.query<{ attachment_key: string | null; attachment_name: string; attachment_type: string }>(
        "SELECT attachment_key, attachment_name, attachment_type FROM analytics_log_occurrences WHERE id = $1",
        [id(req.occurrenceId, "occurrence_id")],
      );
      const r = rows[0];
      if (!r?.attachment_key) throw appError("not_found", "This occurrence has no attachment.");
      const data = await blobs.get(r.attachment_key);
      if (!data) throw appError("not_found", "The attachment is missing from the blob store.");
      return create(LogAttachmentSchema, { filename: r.attachment_name, contentType: r.attachment_type, data });
    },

    async listBreadcrumbs(req) {
      const f = recordFilter(req.filter, "name", "created_at", "last_seen_at");
      const { rows, next } = await page<BreadcrumbRowDb>(sql, "analytics_breadcrumbs", "last_seen_at", f.where, f.params, f.token, f.size, (r) => r.last_seen_at);
      return {
        breadcrumbs: rows.map((r) =>
          create(BreadcrumbRecordSchema, {
            id: BigInt(r.id),
            appId: BigInt(r.app_id),
            name: r.name,
            createdAt: ts(r.created_at),
            lastSeenAt: ts(r.last_seen_at),
            occurrences: BigInt(r.occurrences),
          }),
        ),
        nextPageToken: next,
      };
    },

    async listBreadcrumbOccurrences(req) {
      type Occ = { id: number; breadcrumb_id: number; consumer_id: number; session_id: number | null; created_at: Date };
      const { rows, next } = await occurrences<Occ>(sql, "analytics_breadcrumb_occurrences", "breadcrumb_id", id(req.breadcrumbId, "breadcrumb_id"), req);
      return {
        occurrences: rows.map((r) =>
          create(BreadcrumbOccurrenceSchema, {
            id: BigInt(r.id),
            breadcrumbId: BigInt(r.breadcrumb_id),
            consumerId: BigInt(r.consumer_id),
            sessionId: BigInt(r.session_id ?? 0),
            createdAt: ts(r.created_at),
          }),
        ),
        nextPageToken: next,
      };
    },

    async getQueueStats() {
      const s = await queue.stats();
      return create(QueueStatsSchema, { backend: s.backend, lag: BigInt(s.lag), inFlight: BigInt(s.inFlight), deadLetters: BigInt(s.deadLetters) });
    },

    async listDeadLetters(req) {
      const { entries, nextPageToken } = await queue.listDeadLetters({ pageSize: pageSize(req.pageSize), pageToken: req.pageToken });
      return {
        deadLetters: entries.map((e) => {
          let info = { kind: "unknown", appId: 0n, consumerId: 0n, itemCount: 0 };
          try {
            const p = decodePayload(e.data);
            info = { kind: p.kind, appId: BigInt(p.appId), consumerId: BigInt(p.consumerId), itemCount: p.items.length };
          } catch {
            // an undecodable payload is listed as kind "unknown"
          }
          return create(DeadLetterSchema, { id: e.id, ...info, attempts: e.attempts, lastError: e.lastError, deadLetteredAt: ts(e.deadAt) });
        }),
        nextPageToken,
      };
    },

    async replayDeadLetters(req) {
      const replayed = await queue.replayDeadLetters(req.ids.length > 0 ? { ids: req.ids } : {});
      return { replayed };
    },
  };
}
