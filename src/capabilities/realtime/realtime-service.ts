// RealtimeService over Connect, gRPC and gRPC-Web (and Broadcast over REST,
// POST /api/realtime/broadcast): the same hub as the WebSocket. Subscribe
// streams one subscription's events (a channel, a table or a CMS content
// type, resumable with `resume` like the WebSocket's); the stream is a
// connection of its own with the same send buffer bound.
import { fromJson, toJson, type JsonValue } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import { RealtimeEventSchema, type RealtimeEvent, type RealtimeService } from "../../../gen/pulsebase/platform/v1/realtime_pb.js";
import { appError } from "../../kernel/errors.js";
import { consumerOf } from "../../kernel/principal.js";
import { QueuedConnection } from "./connection.js";
import type { Hub } from "./hub.js";
import { checkChannel, checkEvent, checkPresenceState, checkTopic, type Topic } from "./protocol.js";

/** A server message (JSON text) as a RealtimeEvent; undefined for those a stream does not carry (welcome, ok). */
function toEvent(text: string): RealtimeEvent | ConnectError | undefined {
  const m = JSON.parse(text) as Record<string, JsonValue>;
  const pick = (...keys: string[]) => Object.fromEntries(keys.filter((k) => m[k] !== undefined).map((k) => [k, m[k]!]));
  switch (m.type) {
    case "subscribed": {
      const t = m.topic as Record<string, JsonValue>;
      const topic: JsonValue =
        t.kind === "table"
          ? { table: { table: t.table!, ...(t.filter !== undefined && { filter: t.filter }) } }
          : t.kind === "cms"
            ? { cms: { contentType: t.content_type! } }
            : { channel: { channel: t.channel!, self: t.self! } };
      return fromJson(RealtimeEventSchema, { subscribed: { topic } });
    }
    case "change": {
      const c = pick("op", "table", "row", "content_type", "entry", "cursor", "at");
      if (m.old_key !== undefined && m.old_key !== null) c.oldKey = m.old_key;
      if (c.content_type !== undefined) {
        c.contentType = c.content_type;
        delete c.content_type;
      }
      return fromJson(RealtimeEventSchema, { change: c });
    }
    case "resync":
      return fromJson(RealtimeEventSchema, { resync: {} });
    case "broadcast":
      return fromJson(RealtimeEventSchema, { broadcast: pick("channel", "event", "payload", "from") });
    case "presence_state":
      return fromJson(RealtimeEventSchema, { presenceState: pick("channel", "members") });
    case "presence_diff":
      return fromJson(RealtimeEventSchema, { presenceDiff: pick("channel", "joins", "leaves") });
    case "heartbeat":
      return fromJson(RealtimeEventSchema, { heartbeat: {} });
    case "closing":
      return appError(m.reason === "revoked" ? "unauthenticated" : "limit_exceeded", `The subscription was closed: ${String(m.reason)}.`);
    default:
      return undefined;
  }
}

export function createRealtimeServiceImpl(hub: Hub): ServiceImpl<typeof RealtimeService> {
  return {
    async broadcast(req, ctx: HandlerContext) {
      const p = consumerOf(ctx);
      const channel = checkChannel(req.channel);
      const event = checkEvent(req.event);
      await hub.broadcast(p, undefined, channel, event, req.payload ? toJson(ValueSchema, req.payload) : null);
      return {};
    },
    async *subscribe(req, ctx: HandlerContext) {
      const p = consumerOf(ctx);
      const t = req.topic?.kind;
      let topic: Topic;
      if (t?.case === "channel") {
        topic = { kind: "channel", channel: checkChannel(t.value.channel, "topic.channel"), self: t.value.self };
        if (t.value.presence) topic.presence = checkPresenceState(t.value.presence, "topic.presence");
      } else if (t?.case === "table") {
        const f = t.value.filter;
        topic = checkTopic({ kind: "table", table: t.value.table, ...(f && { filter: { column: f.column, op: f.op, value: f.value ? toJson(ValueSchema, f.value) : null } }) });
      } else if (t?.case === "cms") {
        topic = checkTopic({ kind: "cms", content_type: t.value.contentType });
      } else {
        throw appError("validation_failed", "topic is required.", { fields: { topic: ["channel, table or cms"] } });
      }
      const conn = new QueuedConnection("stream", p, ctx.requestHeader.get("authorization") ?? "", hub.limits.sendBufferBytes);
      if (!hub.admit(conn)) throw appError("limit_exceeded", `The application has ${hub.limits.connectionsPerApp} realtime connections open (the limit).`);
      try {
        await hub.subscribe(conn, "stream", topic, topic.kind !== "channel" && req.resume ? req.resume : undefined);
      } catch (err) {
        conn.close(1000, "limit");
        throw err;
      }
      for await (const text of conn.messages(ctx.signal)) {
        const e = toEvent(text);
        if (e instanceof ConnectError) throw e;
        if (e) yield e;
      }
      if (conn.ended && conn.ended.reason !== "client") throw appError(conn.ended.reason === "revoked" ? "unauthenticated" : "limit_exceeded", `The subscription was closed: ${conn.ended.reason}.`);
    },
  };
}
