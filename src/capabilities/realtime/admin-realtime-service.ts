// The operator's realtime API (pulsebase.admin.v1.RealtimeAdminService,
// docs/realtime.md "For operators"): WatchTable streams a table's changes
// through the operators' feed (admin-watch.ts: the devices' delivery without
// rules); ListChannels and InspectChannel read the hub's channels of this
// server, their presence and the ring of recent broadcasts (admin-recent.ts);
// SetChannelAccess and GetChannelAccess the operator's channel access
// entries (channel-access.ts).
import { create, fromJson, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { timestampFromDate, timestampFromMs, ValueSchema } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import {
  ChannelMessageSchema,
  ChannelAccessEntrySchema,
  ChannelAccessSchema,
  ChannelSummarySchema,
  type ChannelAccess as ChannelAccessMessage,
  PresenceMemberSchema,
  TableWatchEventSchema,
  type RealtimeAdminService,
  type TableWatchEvent,
} from "../../../gen/pulsebase/admin/v1/realtime_pb.js";
import { appError } from "../../kernel/errors.js";
import type { OperatorWatch } from "./admin-watch.js";
import type { Hub } from "./hub.js";
import type { ChannelAccess, ChannelAccessList } from "./channel-access.js";
import { checkChannel } from "./protocol.js";

export interface RealtimeAdminDeps {
  hub: Hub;
  /** Unset: table changes are not available (no change capture). */
  watch?: OperatorWatch;
  /** The operator's channel access entries (SetChannelAccess, GetChannelAccess). */
  access: ChannelAccess;
  /** Quiet time after which a WatchTable stream gets a heartbeat. */
  heartbeatMs?: number;
}

const HEARTBEAT_MS = 25_000;

/** A hub message (JSON text) as a WatchTable event; undefined for those a watch does not carry. */
function toEvent(text: string): TableWatchEvent | "closed" | undefined {
  const m = JSON.parse(text) as Record<string, JsonValue>;
  switch (m.type) {
    case "subscribed":
      return create(TableWatchEventSchema, { kind: { case: "started", value: { table: String((m.topic as JsonObject).table) } } });
    case "change": {
      const at = typeof m.at === "string" ? new Date(m.at) : undefined;
      return create(TableWatchEventSchema, {
        kind: {
          case: "change",
          value: {
            op: String(m.op),
            table: String(m.table),
            ...(m.row !== undefined && { row: m.row as JsonObject }),
            ...(m.old_key !== undefined && { oldKey: m.old_key as JsonObject }),
            cursor: String(m.cursor ?? ""),
            ...(at && !Number.isNaN(at.getTime()) && { at: timestampFromDate(at) }),
          },
        },
      });
    }
    case "heartbeat":
      return create(TableWatchEventSchema, { kind: { case: "heartbeat", value: {} } });
    case "closing":
      return "closed";
    default:
      return undefined;
  }
}

function toAccessMessage(l: ChannelAccessList): ChannelAccessMessage {
  return create(ChannelAccessSchema, {
    entries: l.entries.map((e) => create(ChannelAccessEntrySchema, { pattern: e.pattern, mode: e.mode, rule: e.rule ?? "" })),
    ...(l.updatedAt !== undefined && { updatedAt: timestampFromMs(l.updatedAt) }),
  });
}

export function createRealtimeAdminServiceImpl(deps: RealtimeAdminDeps): ServiceImpl<typeof RealtimeAdminService> {
  const { hub } = deps;
  return {
    async *watchTable(req, ctx) {
      const table = req.table.trim();
      if (!table) throw appError("validation_failed", "table is required.", { fields: { table: ["a table of the linked database"] } });
      if (!deps.watch) throw appError("failed_precondition", "Table changes are not available on this server (no change capture).");
      const conn = await deps.watch.open(Number(req.appId), table);
      const beat = setInterval(() => conn.beat(), deps.heartbeatMs ?? HEARTBEAT_MS);
      beat.unref();
      try {
        for await (const text of conn.messages(ctx.signal)) {
          const e = toEvent(text);
          if (e === "closed") break;
          if (e) yield e;
        }
      } finally {
        clearInterval(beat);
      }
      if (conn.ended?.reason === "slow_consumer") throw appError("limit_exceeded", "The watch fell too far behind and was ended: open it again.");
      if (conn.ended?.reason === "shutdown") throw appError("unavailable", "The server is stopping: open the watch again.", { retryAfterSeconds: 1 });
    },

    listChannels(req) {
      const channels = [...hub.channelsOf(Number(req.appId)).values()]
        .map((ch) => {
          const newest = ch.recent.list()[0];
          return create(ChannelSummarySchema, {
            channel: ch.name,
            subscribers: ch.subs.size,
            presenceMembers: ch.presence.size,
            recentMessages: ch.recent.size,
            ...(newest && { lastMessageAt: timestampFromMs(newest.at) }),
          });
        })
        .sort((a, b) => (a.channel < b.channel ? -1 : a.channel > b.channel ? 1 : 0));
      return { channels, serverId: hub.serverId };
    },

    async setChannelAccess(req) {
      const entries = req.entries.map((e) => ({ pattern: e.pattern, mode: e.mode, ...(e.rule !== "" && { rule: e.rule }) }));
      return toAccessMessage(await deps.access.set(Number(req.appId), entries));
    },

    async getChannelAccess(req) {
      return toAccessMessage(await deps.access.get(Number(req.appId)));
    },

    inspectChannel(req) {
      const name = checkChannel(req.channel, "channel");
      const ch = hub.channelsOf(Number(req.appId)).get(name);
      const here = new Set(ch?.presence.of(hub.serverId).map((m) => m.member) ?? []);
      return {
        channel: name,
        subscribers: ch?.subs.size ?? 0,
        members: (ch?.presence.list() ?? []).map((m) =>
          create(PresenceMemberSchema, { member: m.member, consumerId: BigInt(m.consumer_id), state: m.state as JsonObject, onThisServer: here.has(m.member) }),
        ),
        recent: (ch?.recent.list() ?? []).map((r) =>
          create(ChannelMessageSchema, { event: r.event, payload: fromJson(ValueSchema, r.payload as JsonValue), from: BigInt(r.from), at: timestampFromMs(r.at) }),
        ),
        recentCapacity: ch?.recent.capacity ?? 0,
        serverId: hub.serverId,
      };
    },
  };
}
