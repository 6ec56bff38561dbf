// Reads aggregated records back and turns rows into response messages, for
// the single endpoints (inside their write transaction) and the operator API.
import { create, type JsonObject } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  BreadcrumbSchema,
  EventSchema,
  LogSchema,
  type Breadcrumb,
  type Event,
  type Log,
} from "../../../gen/pulsebase/platform/v1/analytics_pb.js";
import type { Sql } from "../../infra/storage/sql.js";

/** event_data rows returned with one event (highest occurrences first). */
export const EVENT_DATA_MAX = 1000;

export interface EventRowDb {
  id: number;
  app_id: number;
  name: string;
  occurrences: number;
  unique_users: number;
  created_at: Date;
  updated_at: Date;
}

export interface EventDataRowDb {
  id: number;
  event_id: number;
  key: string;
  value: string;
  occurrences: number;
  created_at: Date;
  updated_at: Date;
}

export interface LogRowDb {
  id: number;
  app_id: number;
  hash: string;
  app_versions: string;
  class_fqn: string;
  message: string;
  type: string;
  context: JsonObject | null;
  file_name: string | null;
  line_number: number | null;
  stack_trace: string | null;
  occurrences: number;
  users_affected: number;
  created_at: Date;
  last_seen_at: Date;
}

export interface BreadcrumbRowDb {
  id: number;
  app_id: number;
  name: string;
  occurrences: number;
  created_at: Date;
  last_seen_at: Date;
}

export const ts = (d: Date | string) => timestampFromDate(d instanceof Date ? d : new Date(d));

/** event_data of several events, at most EVENT_DATA_MAX per event. */
export async function loadEventData(sql: Sql, eventIds: number[]): Promise<Map<number, EventDataRowDb[]>> {
  const out = new Map<number, EventDataRowDb[]>();
  if (eventIds.length === 0) return out;
  const { rows } = await sql.query<EventDataRowDb>(
    `SELECT d.* FROM unnest($1::bigint[]) AS e(id)
     CROSS JOIN LATERAL (
       SELECT id, event_id, key, value, occurrences, created_at, updated_at FROM analytics_event_data
       WHERE event_id = e.id ORDER BY occurrences DESC, key, value LIMIT $2
     ) d`,
    [eventIds, EVENT_DATA_MAX],
  );
  for (const r of rows) {
    const list = out.get(Number(r.event_id)) ?? [];
    list.push(r);
    out.set(Number(r.event_id), list);
  }
  return out;
}

/** The fields an event has on the device API and in the operator API alike. */
export function eventInit(row: EventRowDb, data: EventDataRowDb[]) {
  return {
    id: BigInt(row.id),
    name: row.name,
    createdAt: ts(row.created_at),
    updatedAt: ts(row.updated_at),
    uniqueUsers: BigInt(row.unique_users),
    occurrences: BigInt(row.occurrences),
    eventData: data.map((d) => ({
      id: String(d.id),
      key: d.key,
      value: d.value,
      createdAt: ts(d.created_at),
      updatedAt: ts(d.updated_at),
      occurrences: BigInt(d.occurrences),
    })),
  };
}

export function eventMessage(row: EventRowDb, data: EventDataRowDb[]): Event {
  return create(EventSchema, eventInit(row, data));
}

export function logMessage(r: LogRowDb): Log {
  return create(LogSchema, {
    id: BigInt(r.id),
    hash: r.hash,
    appVersions: r.app_versions,
    classFqn: r.class_fqn,
    context: r.context ?? undefined,
    fileName: r.file_name ?? undefined,
    lineNumber: r.line_number === null ? undefined : BigInt(r.line_number),
    lastSeenAt: ts(r.last_seen_at),
    message: r.message,
    stackTrace: r.stack_trace ?? undefined,
    type: r.type,
    occurrences: BigInt(r.occurrences),
    usersAffected: BigInt(r.users_affected),
    createdAt: ts(r.created_at),
  });
}

/** Several events with their event_data, in two queries. */
export async function readEvents(sql: Sql, ids: number[]): Promise<Map<number, Event>> {
  const unique = [...new Set(ids)];
  const [{ rows }, data] = await Promise.all([
    sql.query<EventRowDb>("SELECT * FROM analytics_events WHERE id = ANY($1::bigint[])", [unique]),
    loadEventData(sql, unique),
  ]);
  return new Map(rows.map((r) => [Number(r.id), eventMessage(r, data.get(Number(r.id)) ?? [])]));
}

export async function readLogs(sql: Sql, ids: number[]): Promise<Map<number, Log>> {
  const { rows } = await sql.query<LogRowDb>("SELECT * FROM analytics_logs WHERE id = ANY($1::bigint[])", [[...new Set(ids)]]);
  return new Map(rows.map((r) => [Number(r.id), logMessage(r)]));
}

export async function readBreadcrumbs(sql: Sql, ids: number[]): Promise<Map<number, Breadcrumb>> {
  const { rows } = await sql.query<BreadcrumbRowDb>("SELECT * FROM analytics_breadcrumbs WHERE id = ANY($1::bigint[])", [[...new Set(ids)]]);
  return new Map(
    rows.map((r) => [Number(r.id), create(BreadcrumbSchema, { id: BigInt(r.id), name: r.name, appId: BigInt(r.app_id), createdAt: ts(r.created_at) })]),
  );
}
