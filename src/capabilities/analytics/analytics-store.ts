// Set-based writes of analytics occurrences. Each apply* call runs a fixed
// number of statements whatever the number of items (which may come from
// several batches, apps and consumers): items travel as one jsonb parameter
// (jsonb_to_recordset) or as arrays (unnest), and every aggregate is an
// INSERT ... SELECT ... ON CONFLICT DO UPDATE. Aggregate rows are upserted in
// key order so concurrent transactions lock them in the same order (no
// deadlocks); the row lock serialises concurrent writers of one record, and
// a new (record, user) pair is detected by a unique index, which keeps
// occurrences and distinct-user counts exact. Call inside a transaction.
import type { Sql } from "../../infra/storage/sql.js";
import type { BreadcrumbRow, EventRow, LogRow, Recorder } from "./batch-payload.js";

/** An item with who recorded it. */
export type Stamped<T> = T & { app_id: number; consumer_id: number; user_id: string };

export function stamp<T>(rec: Recorder, items: T[]): Array<Stamped<T>> {
  return items.map((it) => ({ ...it, app_id: rec.appId, consumer_id: rec.consumerId, user_id: rec.userId }));
}

/** Map key of an (application, name-or-hash) record. */
export const recordKey = (appId: number, name: string) => `${appId}\u0000${name}`;

// Events run in three statements so that the hot aggregate rows (one per
// event name, locked by every batch that mentions the name) are locked only
// by the last statement, just before COMMIT; raw occurrences and the
// distinct-user set are written before, without touching those rows.

/** Creates missing event rows (no lock on existing ones); returns every id. */
const EVENTS_ENSURE_SQL = `
WITH names AS (
  SELECT DISTINCT app_id, name FROM unnest($1::bigint[], $2::text[]) AS n(app_id, name)
), ins AS (
  INSERT INTO analytics_events (app_id, name, occurrences, unique_users, created_at, updated_at)
  SELECT app_id, name, 0, 0, $3::timestamptz, $3::timestamptz FROM names ORDER BY app_id, name
  ON CONFLICT (app_id, name) DO NOTHING
  RETURNING id, app_id, name
)
SELECT id, app_id, name FROM ins
UNION ALL
SELECT e.id, e.app_id, e.name FROM analytics_events e JOIN names n ON e.app_id = n.app_id AND e.name = n.name`;

/** Raw occurrences and the distinct-user set; returns new users per event. */
const EVENTS_RAW_SQL = `
WITH items AS (
  SELECT * FROM jsonb_to_recordset($1::jsonb)
    AS x(event_id bigint, consumer_id bigint, session_id bigint, user_id text, metadata jsonb, created_at timestamptz)
), occ AS (
  INSERT INTO analytics_event_occurrences (event_id, consumer_id, session_id, user_id, metadata, created_at)
  SELECT event_id, consumer_id, session_id, user_id, metadata, created_at FROM items
  RETURNING 1
), eu AS (
  INSERT INTO analytics_event_users (event_id, user_id)
  SELECT DISTINCT event_id, user_id FROM items ORDER BY 1, 2
  ON CONFLICT DO NOTHING
  RETURNING event_id
)
SELECT event_id, count(*)::int AS n, (SELECT count(*) FROM occ) AS occ_n FROM eu GROUP BY event_id`;

/**
 * The aggregates, pre-computed per event and per (event, key, value) by the
 * caller: event rows in (app, name) order, then event_data rows in key order.
 */
const EVENTS_AGGREGATE_SQL = `
WITH agg AS (
  SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::bigint[], $5::timestamptz[], $6::timestamptz[])
    AS a(app_id, name, n, new_users, first_at, last_at)
), ev AS (
  INSERT INTO analytics_events AS e (app_id, name, occurrences, unique_users, created_at, updated_at)
  SELECT app_id, name, n, new_users, first_at, last_at FROM agg ORDER BY app_id, name
  ON CONFLICT (app_id, name) DO UPDATE SET
    occurrences = e.occurrences + EXCLUDED.occurrences,
    unique_users = e.unique_users + EXCLUDED.unique_users,
    created_at = LEAST(e.created_at, EXCLUDED.created_at),
    updated_at = GREATEST(e.updated_at, EXCLUDED.updated_at)
  RETURNING e.id
), dagg AS (
  SELECT * FROM unnest($7::bigint[], $8::text[], $9::text[], $10::bigint[], $11::timestamptz[], $12::timestamptz[])
    AS d(event_id, key, value, n, first_at, last_at)
), ed AS (
  INSERT INTO analytics_event_data AS d (event_id, key, value, occurrences, created_at, updated_at)
  SELECT g.event_id, g.key, g.value, g.n, g.first_at, g.last_at
  FROM dagg g JOIN ev ON ev.id = g.event_id
  ORDER BY 1, 2, 3
  ON CONFLICT (event_id, key, value) DO UPDATE SET
    occurrences = d.occurrences + EXCLUDED.occurrences,
    created_at = LEAST(d.created_at, EXCLUDED.created_at),
    updated_at = GREATEST(d.updated_at, EXCLUDED.updated_at)
  RETURNING 1
)
SELECT (SELECT count(*) FROM ev) AS ev_n, (SELECT count(*) FROM ed) AS ed_n`;

const LOGS_SQL = `
WITH items AS (
  SELECT * FROM jsonb_to_recordset($1::jsonb)
    AS x(app_id bigint, consumer_id bigint, user_id text, hash text, app_version text, class_fqn text,
         message text, type text, file_name text, line_number bigint, stack_trace text, context jsonb,
         session_id bigint, created_at timestamptz, attachment jsonb, ord int)
), latest AS (
  SELECT DISTINCT ON (app_id, hash) * FROM items ORDER BY app_id, hash, created_at DESC, ord DESC
), agg AS (
  SELECT app_id, hash, count(*) AS n, min(created_at) AS first_at, max(created_at) AS last_at
  FROM items GROUP BY app_id, hash
), lg AS (
  INSERT INTO analytics_logs AS l (app_id, hash, app_versions, class_fqn, message, type, context,
    file_name, line_number, stack_trace, occurrences, created_at, last_seen_at)
  SELECT a.app_id, a.hash, t.app_version, t.class_fqn, t.message, t.type, t.context,
    t.file_name, t.line_number, t.stack_trace, a.n, a.first_at, a.last_at
  FROM agg a JOIN latest t ON t.app_id = a.app_id AND t.hash = a.hash ORDER BY a.app_id, a.hash
  ON CONFLICT (app_id, hash) DO UPDATE SET
    occurrences = l.occurrences + EXCLUDED.occurrences,
    app_versions = CASE WHEN (',' || l.app_versions || ',') LIKE ('%,' || EXCLUDED.app_versions || ',%')
                        THEN l.app_versions ELSE l.app_versions || ',' || EXCLUDED.app_versions END,
    context = CASE WHEN EXCLUDED.last_seen_at >= l.last_seen_at THEN EXCLUDED.context ELSE l.context END,
    file_name = CASE WHEN EXCLUDED.last_seen_at >= l.last_seen_at THEN EXCLUDED.file_name ELSE l.file_name END,
    line_number = CASE WHEN EXCLUDED.last_seen_at >= l.last_seen_at THEN EXCLUDED.line_number ELSE l.line_number END,
    stack_trace = CASE WHEN EXCLUDED.last_seen_at >= l.last_seen_at THEN EXCLUDED.stack_trace ELSE l.stack_trace END,
    created_at = LEAST(l.created_at, EXCLUDED.created_at),
    last_seen_at = GREATEST(l.last_seen_at, EXCLUDED.last_seen_at)
  RETURNING l.id, l.app_id, l.hash
), occ AS (
  INSERT INTO analytics_log_occurrences (log_id, consumer_id, session_id, user_id, app_version, stack_trace,
    file_name, line_number, context, attachment_key, attachment_name, attachment_type, attachment_size, created_at)
  SELECT lg.id, i.consumer_id, i.session_id, i.user_id, i.app_version, i.stack_trace, i.file_name, i.line_number,
    i.context, i.attachment->>'key', i.attachment->>'filename', i.attachment->>'content_type',
    (i.attachment->>'size')::bigint, i.created_at
  FROM items i JOIN lg ON lg.app_id = i.app_id AND lg.hash = i.hash
  RETURNING 1
), lu AS (
  INSERT INTO analytics_log_users (log_id, user_id)
  SELECT DISTINCT lg.id, i.user_id FROM items i JOIN lg ON lg.app_id = i.app_id AND lg.hash = i.hash ORDER BY 1, 2
  ON CONFLICT DO NOTHING
  RETURNING log_id
)
SELECT lg.id, lg.app_id, lg.hash, (SELECT count(*) FROM lu WHERE lu.log_id = lg.id)::int AS new_users,
  (SELECT count(*) FROM occ) AS occ_n
FROM lg`;

const BREADCRUMBS_SQL = `
WITH items AS (
  SELECT * FROM jsonb_to_recordset($1::jsonb)
    AS x(app_id bigint, consumer_id bigint, name text, session_id bigint, created_at timestamptz)
), agg AS (
  SELECT app_id, name, count(*) AS n, min(created_at) AS first_at, max(created_at) AS last_at
  FROM items GROUP BY app_id, name
), bc AS (
  INSERT INTO analytics_breadcrumbs AS b (app_id, name, occurrences, created_at, last_seen_at)
  SELECT app_id, name, n, first_at, last_at FROM agg ORDER BY app_id, name
  ON CONFLICT (app_id, name) DO UPDATE SET
    occurrences = b.occurrences + EXCLUDED.occurrences,
    created_at = LEAST(b.created_at, EXCLUDED.created_at),
    last_seen_at = GREATEST(b.last_seen_at, EXCLUDED.last_seen_at)
  RETURNING b.id, b.app_id, b.name
), occ AS (
  INSERT INTO analytics_breadcrumb_occurrences (breadcrumb_id, consumer_id, session_id, created_at)
  SELECT bc.id, i.consumer_id, i.session_id, i.created_at FROM items i JOIN bc ON bc.app_id = i.app_id AND bc.name = i.name
  RETURNING 1
)
SELECT bc.id, bc.app_id, bc.name, (SELECT count(*) FROM occ) AS occ_n FROM bc`;

interface Span {
  n: number;
  first: string;
  last: string;
}

function widen(map: Map<string, Span>, key: string, at: string): Span {
  const s = map.get(key);
  if (!s) {
    const fresh = { n: 1, first: at, last: at };
    map.set(key, fresh);
    return fresh;
  }
  s.n++;
  // All timestamps are toISOString() output (UTC, fixed width): string order is time order.
  if (at < s.first) s.first = at;
  if (at > s.last) s.last = at;
  return s;
}

/** Returns the event ids by recordKey(app, name). */
export async function applyEvents(tx: Sql, items: Array<Stamped<EventRow>>): Promise<Map<string, number>> {
  const ids = new Map<string, number>();
  if (items.length === 0) return ids;
  const pairs = new Map<string, { app: number; name: string }>();
  let firstAt = items[0]!.created_at;
  for (const it of items) {
    pairs.set(recordKey(it.app_id, it.name), { app: it.app_id, name: it.name });
    if (it.created_at < firstAt) firstAt = it.created_at;
  }
  // A name inserted by a concurrent transaction that committed after this
  // statement's snapshot is neither inserted nor seen: ask again for it.
  for (let attempt = 0; ids.size < pairs.size; attempt++) {
    if (attempt === 5) throw new Error("could not resolve event ids");
    const missing = [...pairs].filter(([k]) => !ids.has(k)).map(([, p]) => p);
    const { rows } = await tx.query<{ id: number; app_id: number; name: string }>(EVENTS_ENSURE_SQL, [
      missing.map((p) => p.app),
      missing.map((p) => p.name),
      firstAt,
    ]);
    for (const r of rows) ids.set(recordKey(Number(r.app_id), r.name), Number(r.id));
  }

  const raw = items.map((it) => ({
    event_id: ids.get(recordKey(it.app_id, it.name))!,
    consumer_id: it.consumer_id,
    session_id: it.session_id,
    user_id: it.user_id,
    metadata: it.metadata,
    created_at: it.created_at,
  }));
  const { rows: fresh } = await tx.query<{ event_id: number; n: number }>(EVENTS_RAW_SQL, [JSON.stringify(raw)]);
  const newUsers = new Map(fresh.map((r) => [Number(r.event_id), Number(r.n)]));

  const perEvent = new Map<string, Span>();
  const perValue = new Map<string, Span>();
  const valueOf = new Map<string, { id: number; key: string; value: string }>();
  for (let i = 0; i < items.length; i++) {
    const it = items[i]!;
    const id = raw[i]!.event_id;
    widen(perEvent, recordKey(it.app_id, it.name), it.created_at);
    for (const [key, value] of Object.entries(it.metadata)) {
      const k = JSON.stringify([id, key, value]);
      widen(perValue, k, it.created_at);
      if (!valueOf.has(k)) valueOf.set(k, { id, key, value });
    }
  }
  const ev = [...perEvent.entries()].map(([k, s]) => ({ ...pairs.get(k)!, id: ids.get(k)!, s }));
  const dv = [...perValue.entries()].map(([k, s]) => ({ ...valueOf.get(k)!, s }));
  await tx.query(EVENTS_AGGREGATE_SQL, [
    ev.map((e) => e.app),
    ev.map((e) => e.name),
    ev.map((e) => e.s.n),
    ev.map((e) => newUsers.get(e.id) ?? 0),
    ev.map((e) => e.s.first),
    ev.map((e) => e.s.last),
    dv.map((d) => d.id),
    dv.map((d) => d.key),
    dv.map((d) => d.value),
    dv.map((d) => d.s.n),
    dv.map((d) => d.s.first),
    dv.map((d) => d.s.last),
  ]);
  return ids;
}

/** Returns the log ids by recordKey(app, hash). */
export async function applyLogs(tx: Sql, items: Array<Stamped<LogRow>>): Promise<Map<string, number>> {
  if (items.length === 0) return new Map();
  const { rows } = await tx.query<{ id: number; app_id: number; hash: string; new_users: number }>(LOGS_SQL, [
    JSON.stringify(items.map((it, ord) => ({ ...it, ord }))),
  ]);
  const fresh = rows.filter((r) => Number(r.new_users) > 0);
  if (fresh.length > 0) {
    await tx.query(
      `UPDATE analytics_logs l SET users_affected = l.users_affected + u.n
       FROM unnest($1::bigint[], $2::bigint[]) AS u(id, n) WHERE l.id = u.id`,
      [fresh.map((r) => r.id), fresh.map((r) => r.new_users)],
    );
  }
  return new Map(rows.map((r) => [recordKey(Number(r.app_id), r.hash), Number(r.id)]));
}

/** Returns the breadcrumb ids by recordKey(app, name). */
export async function applyBreadcrumbs(tx: Sql, items: Array<Stamped<BreadcrumbRow>>): Promise<Map<string, number>> {
  if (items.length === 0) return new Map();
  const { rows } = await tx.query<{ id: number; app_id: number; name: string }>(BREADCRUMBS_SQL, [JSON.stringify(items)]);
  return new Map(rows.map((r) => [recordKey(Number(r.app_id), r.name), Number(r.id)]));
}

/** The ids among `ids` that are not sessions of this consumer (one query). */
export async function foreignSessions(sql: Sql, consumerId: number, ids: number[]): Promise<Set<number>> {
  if (ids.length === 0) return new Set();
  const { rows } = await sql.query<{ id: number }>(
    `SELECT s.id FROM unnest($1::bigint[]) AS s(id)
     WHERE NOT EXISTS (SELECT 1 FROM sessions x WHERE x.id = s.id AND x.consumer_id = $2)`,
    [[...new Set(ids)], consumerId],
  );
  return new Set(rows.map((r) => Number(r.id)));
}
