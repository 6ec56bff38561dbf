// The realtime wire protocol (docs/realtime.md): client messages read and
// checked from JSON text, server messages written as JSON text, close codes.
// One reader for every transport (WebSocket frames, SSE query, Connect
// requests turned into the same shapes).
import { appError, type ErrorCode } from "../../kernel/errors.js";
import type { ConnectError } from "@connectrpc/connect";

export const SUBPROTOCOL = "pulsebase.v1";
/** A browser's token travels as a second subprotocol `bearer.<token>`. */
export const BEARER_PROTOCOL_PREFIX = "bearer.";

/** WebSocket close codes (docs/realtime.md, "Close codes"). */
export const CLOSE = {
  goingAway: 1001,
  tooBig: 1009,
  unauthenticated: 4001,
  slowConsumer: 4008,
  heartbeat: 4010,
  limit: 4029,
} as const;

const CHANNEL_RE = /^[A-Za-z0-9_\-:.@]{1,100}$/;
const ID_MAX = 100;
const EVENT_MAX = 100;
/** Largest presence state, as JSON. */
export const PRESENCE_STATE_BYTES = 1024;

export interface ChannelTopic {
  kind: "channel";
  channel: string;
  self: boolean;
  /** Join presence with this state; undefined: do not join. */
  presence?: Record<string, unknown>;
}
export interface TableTopic {
  kind: "table";
  table: string;
  filter?: { column: string; op: "eq" | "in"; value: unknown };
}
export interface CmsTopic {
  kind: "cms";
  content_type: string;
}
export type Topic = ChannelTopic | TableTopic | CmsTopic;

export type ClientMessage =
  | { type: "subscribe"; id: string; topic: Topic; resume?: string; ref?: string }
  | { type: "unsubscribe"; id: string; ref?: string }
  | { type: "broadcast"; channel: string; event: string; payload: unknown; ref?: string }
  | { type: "presence"; id: string; state: Record<string, unknown>; ref?: string }
  | { type: "ping"; ref?: string };

/** A refused client message: the error to answer, with the message's ref and id when it had them. */
export class ProtocolError extends Error {
  constructor(readonly error: ConnectError, readonly ref?: string, readonly id?: string) {
    super(error.rawMessage);
  }
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

function str(v: unknown, field: string, max: number, re?: RegExp): string {
  if (typeof v !== "string" || v.length === 0 || v.length > max || (re && !re.test(v))) {
    throw appError("validation_failed", `${field} must be ${re ? "a valid name" : "a string"} of 1 to ${max} characters.`, {
      fields: { [field]: [re ? `1 to ${max} of A-Z a-z 0-9 _ - : . @` : `1 to ${max} characters`] },
    });
  }
  return v;
}

export function checkChannel(v: unknown, field = "channel"): string {
  return str(v, field, 100, CHANNEL_RE);
}

export function checkEvent(v: unknown, field = "event"): string {
  return str(v, field, EVENT_MAX);
}

export function checkPresenceState(v: unknown, field: string): Record<string, unknown> {
  if (!isObject(v)) throw appError("validation_failed", `${field} must be an object.`, { fields: { [field]: ["an object"] } });
  if (JSON.stringify(v).length > PRESENCE_STATE_BYTES) {
    throw appError("validation_failed", `${field} is larger than ${PRESENCE_STATE_BYTES} bytes.`, { fields: { [field]: [`at most ${PRESENCE_STATE_BYTES} bytes of JSON`] } });
  }
  return v;
}

export function checkTopic(v: unknown, field = "topic"): Topic {
  if (!isObject(v)) throw appError("validation_failed", `${field} must be an object.`, { fields: { [field]: ["an object"] } });
  switch (v.kind) {
    case "channel": {
      const self = v.self ?? false;
      if (typeof self !== "boolean") throw appError("validation_failed", `${field}.self must be a boolean.`, { fields: { [`${field}.self`]: ["a boolean"] } });
      const t: ChannelTopic = { kind: "channel", channel: checkChannel(v.channel, `${field}.channel`), self };
      if (v.presence !== undefined && v.presence !== null) {
        const p = v.presence;
        // {"presence": {"state": {...}}} (the documented form) or the state itself.
        t.presence = checkPresenceState(isObject(p) && "state" in p ? (p.state ?? {}) : p, `${field}.presence.state`);
      }
      return t;
    }
    case "table": {
      const t: TableTopic = { kind: "table", table: str(v.table, `${field}.table`, 128) };
      if (v.filter !== undefined) {
        const f = v.filter;
        if (!isObject(f) || (f.op !== "eq" && f.op !== "in") || (f.op === "in" && !Array.isArray(f.value))) {
          throw appError("validation_failed", `${field}.filter must be {column, op: "eq"|"in", value}.`, { fields: { [`${field}.filter`]: ["column eq value or column in [values]"] } });
        }
        t.filter = { column: str(f.column, `${field}.filter.column`, 128), op: f.op, value: f.value };
      }
      return t;
    }
    case "cms":
      return { kind: "cms", content_type: str(v.content_type, `${field}.content_type`, 128) };
    default:
      throw appError("validation_failed", `${field}.kind must be channel, table or cms.`, { fields: { [`${field}.kind`]: ["channel, table or cms"] } });
  }
}

/** Reads one client text frame; throws a ProtocolError to answer. */
export function parseClientMessage(text: string): ClientMessage {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    throw new ProtocolError(appError("bad_request", "The message is not JSON."));
  }
  if (!isObject(v)) throw new ProtocolError(appError("bad_request", "The message must be a JSON object."));
  const ref = typeof v.ref === "string" && v.ref.length <= ID_MAX ? v.ref : undefined;
  const id = typeof v.id === "string" ? v.id : undefined;
  try {
    switch (v.type) {
      case "subscribe":
        return { type: "subscribe", id: str(v.id, "id", ID_MAX), topic: checkTopic(v.topic), ...(typeof v.resume === "string" && { resume: v.resume }), ref };
      case "unsubscribe":
        return { type: "unsubscribe", id: str(v.id, "id", ID_MAX), ref };
      case "broadcast":
        return { type: "broadcast", channel: checkChannel(v.channel), event: checkEvent(v.event), payload: v.payload ?? null, ref };
      case "presence":
        return { type: "presence", id: str(v.id, "id", ID_MAX), state: checkPresenceState(v.state, "state"), ref };
      case "ping":
        return { type: "ping", ref };
      default:
        throw appError("bad_request", "type must be subscribe, unsubscribe, broadcast, presence or ping.");
    }
  } catch (err) {
    throw new ProtocolError(err as ConnectError, ref, id);
  }
}

export interface Member {
  member: string;
  consumer_id: number;
  state: Record<string, unknown>;
}

/** The `error` message of a refusal. */
export function errorMessage(code: ErrorCode | string, message: string, extra: { ref?: string; id?: string; retryAfterSeconds?: number; fields?: Record<string, string[]> } = {}): string {
  return JSON.stringify({
    type: "error",
    ...(extra.ref !== undefined && { ref: extra.ref }),
    ...(extra.id !== undefined && { id: extra.id }),
    code,
    message,
    ...(extra.retryAfterSeconds && { retry_after_seconds: extra.retryAfterSeconds }),
    ...(extra.fields && Object.keys(extra.fields).length > 0 && { fields: extra.fields }),
  });
}
