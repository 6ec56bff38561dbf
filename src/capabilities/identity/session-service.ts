// pulsebase.platform.v1.SessionService, scoped to the calling consumer.
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import { SessionSchema, SessionService, type Session } from "../../../gen/pulsebase/platform/v1/session_pb.js";
import { appError, Violations } from "../../kernel/errors.js";
import { parseIsoTime } from "../../kernel/iso-time.js";
import { consumerOf } from "../../kernel/principal.js";
import type { IdentityStore, SessionRow } from "./identity-store.js";

export const MAX_SESSION_BATCH = 100;

function toSession(r: SessionRow): Session {
  return create(SessionSchema, {
    sessionId: BigInt(r.id),
    consumerId: BigInt(r.consumer_id),
    startedAt: timestampFromDate(r.started_at),
    endedAt: r.ended_at ? timestampFromDate(r.ended_at) : undefined,
  });
}

export function createSessionServiceImpl({ store }: { store: IdentityStore }): ServiceImpl<typeof SessionService> {
  return {
    async startSession(_req, ctx) {
      const me = consumerOf(ctx);
      return toSession(await store.startSession(me.consumerId, me.appId));
    },

    async endSession(req, ctx) {
      const me = consumerOf(ctx);
      const v = new Violations();
      if (req.sessionId === 0n) v.add("session_id", "The session_id field is required.");
      else if (req.sessionId < 0n) v.add("session_id", "The session_id field must be a positive integer.");
      let at: Date | null = null;
      if (req.timestamp !== "") {
        at = parseIsoTime(req.timestamp) ?? null;
        if (!at) v.add("timestamp", "The timestamp field must be an ISO 8601 date-time.");
      }
      v.throwIfAny();
      // Ids are safe integers: a larger one names no session (and would be
      // rounded into a value PostgreSQL's bigint refuses, a 500).
      if (req.sessionId > BigInt(Number.MAX_SAFE_INTEGER)) throw appError("not_found", "Session not found.");
      const { row, ended } = await store.endSession(Number(req.sessionId), me.consumerId, at);
      if (!row) throw appError("not_found", "Session not found.");
      if (!ended) {
        if (row.ended_at) throw appError("failed_precondition", "The session has already ended.");
        throw appError("validation_failed", "The timestamp must not be earlier than the session's start.", {
          fields: { timestamp: ["The timestamp must not be earlier than the session's started_at."] },
        });
      }
      return toSession(row);
    },

    async batchSessions(req, ctx) {
      const me = consumerOf(ctx);
      const v = new Violations();
      if (req.sessions.length === 0) v.add("sessions", "The sessions field is required.");
      if (req.sessions.length > MAX_SESSION_BATCH) v.add("sessions", `The sessions field must not have more than ${MAX_SESSION_BATCH} items.`);
      const items: { startedAt: Date; endedAt: Date }[] = [];
      req.sessions.forEach((s, i) => {
        const start = s.startedAt ? parseIsoTime(s.startedAt) : undefined;
        const end = s.endedAt ? parseIsoTime(s.endedAt) : undefined;
        if (!s.startedAt) v.add(`sessions.${i}.started_at`, "The started_at field is required.");
        else if (!start) v.add(`sessions.${i}.started_at`, "The started_at field must be an ISO 8601 date-time.");
        if (!s.endedAt) v.add(`sessions.${i}.ended_at`, "The ended_at field is required.");
        else if (!end) v.add(`sessions.${i}.ended_at`, "The ended_at field must be an ISO 8601 date-time.");
        if (start && end) {
          if (end < start) v.add(`sessions.${i}.ended_at`, "The ended_at field must not be earlier than started_at.");
          else items.push({ startedAt: start, endedAt: end });
        }
      });
      v.throwIfAny();
      const rows = await store.insertSessions(me.consumerId, me.appId, items);
      return {
        sessions: rows.map((r) => ({
          sessionId: BigInt(r.id),
          startedAt: timestampFromDate(r.started_at),
          endedAt: timestampFromDate(r.ended_at!),
        })),
      };
    },
  };
}
