// The device-API analytics service. Single endpoints write synchronously and
// return the aggregated record; batch endpoints validate every item (sessions
// checked in one query), store log files in the blob store, publish the
// batch to the durable queue and answer only after the queue stored it.
import { createHash, randomUUID } from "node:crypto";
import { create, toBinary, type Message } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import {
  AnalyticsService,
  BatchAcceptedSchema,
  type Breadcrumb,
  type Event,
  type Log,
} from "../../../gen/pulsebase/platform/v1/analytics_pb.js";
import { appError, errorDetail, Violations } from "../../kernel/errors.js";
import { consumerOf, type ConsumerPrincipal } from "../../kernel/principal.js";
import type { Sql } from "../../infra/storage/sql.js";
import type { BlobStore } from "../../infra/blobs/blob-store.js";
import type { Queue } from "../../infra/queue/queue.js";
import { applyBreadcrumbs, applyEvents, applyLogs, foreignSessions, recordKey, stamp } from "./analytics-store.js";
import { claimIdempotencyKey, withTxRetry } from "./apply-batch.js";
import { encodePayload, PAYLOAD_VERSION, type BatchKind, type BatchPayload, type LogRow, type Recorder } from "./batch-payload.js";
import { DEFAULT_CLOCK_SKEW_MS, limits } from "./limits.js";
import { readBreadcrumbs, readEvents, readLogs } from "./record-views.js";
import { CommittedError, createCoalescer } from "./coalescer.js";
import type { BreadcrumbRow, EventRow } from "./batch-payload.js";
import type { Stamped } from "./analytics-store.js";
import {
  checkBatchSize,
  validateBreadcrumb,
  validateEvent,
  validateLog,
  type ItemContext,
  type ValidLog,
} from "./validation.js";

/** A 503 after the single event's COMMIT: stored, not read back (do not resend). */
export const STORED_NOT_READ_MESSAGE = "The change was stored, but the database became unreachable before it could be read back.";

export interface AnalyticsServiceDeps {
  sql: Sql;
  queue: Queue;
  blobs: BlobStore;
  /** How far in the future created_at may be (default 5 minutes). */
  clockSkewMs?: number;
  now?: () => Date;
}

const queuedMessage: Record<BatchKind, string> = {
  events: "Events queued for processing.",
  logs: "Logs queued for processing.",
  breadcrumbs: "Breadcrumbs queued for processing.",
};

export function createAnalyticsServiceImpl(deps: AnalyticsServiceDeps): ServiceImpl<typeof AnalyticsService> {
  const { sql, queue, blobs } = deps;
  const now = deps.now ?? (() => new Date());
  const itemCtx = (): ItemContext => ({ now: now(), clockSkewMs: deps.clockSkewMs ?? DEFAULT_CLOCK_SKEW_MS });
  const recorder = (c: ConsumerPrincipal): Recorder => ({ appId: c.appId, consumerId: c.consumerId, userId: c.userId });

  /** Adds a violation for every session id that is not the caller's. */
  async function checkSessions(v: Violations, consumerId: number, refs: Array<{ path: string; id: number | null }>) {
    const ids = refs.flatMap((r) => (r.id === null ? [] : [r.id]));
    const foreign = await foreignSessions(sql, consumerId, ids);
    for (const r of refs) {
      if (r.id !== null && foreign.has(r.id)) v.add(r.path, "The selected session id is invalid.");
    }
  }

  /**
   * The batch's id: random, or derived from its Idempotency-Key, which is
   * then bound to the body it first came with (a digest of the request
   * message, so the same form sent as JSON or multipart is the same body):
   * the key sent again with another body is 422 idempotency_key_reused, not
   * a 202 whose body the queue would drop as a duplicate.
   */
  async function batchId(c: ConsumerPrincipal, kind: BatchKind, ctx: HandlerContext, req: Message): Promise<string> {
    const key = ctx.requestHeader.get("idempotency-key")?.trim();
    if (!key) return `b-${randomUUID()}`;
    if (key.length > limits.idempotencyKeyMax) {
      throw appError("validation_failed", "The Idempotency-Key header is too long.", {
        fields: { "Idempotency-Key": [`The Idempotency-Key header may not be greater than ${limits.idempotencyKeyMax} characters.`] },
      });
    }
    const digest = createHash("sha256").update(`${c.appId}\n${c.consumerId}\n${kind}\n${key}`).digest("hex").slice(0, 40);
    const id = `k-${digest}`;
    const body = createHash("sha256").update(toBinary(ctx.method.input, req as never)).digest("hex");
    const first = await claimIdempotencyKey(sql, id, body);
    if (first !== body) {
      throw appError("idempotency_key_reused", "This Idempotency-Key was already used with a different body; send a new key for a new batch.", {
        fields: { "Idempotency-Key": ["The Idempotency-Key was already used with a different body."] },
      });
    }
    return id;
  }

  async function publish(payload: BatchPayload): Promise<void> {
    const data = encodePayload(payload);
    if (data.byteLength > queue.maxMessageBytes) {
      throw appError("payload_too_large", `The batch is too large to queue (${data.byteLength} bytes, at most ${queue.maxMessageBytes}); send fewer items per batch.`);
    }
    await queue.publish(payload.batchId, data);
  }

  async function storeFile(key: string, data: Uint8Array): Promise<void> {
    try {
      await blobs.put(key, data);
    } catch (err) {
      throw appError("unavailable", "The attachment store is unavailable.", { cause: err, retryAfterSeconds: 1 });
    }
  }

  function attach(log: ValidLog, key: string): LogRow {
    const f = log.file!;
    return {
      ...log.row,
      attachment: {
        key,
        filename: f.filename || "attachment",
        content_type: f.contentType || "application/octet-stream",
        size: f.data.byteLength,
      },
    };
  }

  // Concurrent single calls share transactions (group commit); the records
  // are read back once per group, after the commit (outside the locks on the
  // hot aggregate rows), so a response shows the counters including its call.
  async function grouped<T, M>(
    items: T[],
    apply: (tx: Sql, items: T[]) => Promise<Map<string, number>>,
    keyOf: (item: T) => string,
    read: (sql: Sql, ids: number[]) => Promise<Map<number, M>>,
  ): Promise<M[]> {
    const ids = await withTxRetry(() =>
      sql.transaction(async (tx) => {
        const byKey = await apply(tx, items);
        return items.map((i) => byKey.get(keyOf(i))!);
      }),
    );
    let records: Map<number, M>;
    try {
      records = await read(sql, ids);
    } catch (err) {
      // Stored already: say so, so that a client does not count it as lost.
      const e = errorDetail(err)?.code === "unavailable"
        ? appError("unavailable", STORED_NOT_READ_MESSAGE, { cause: err, retryAfterSeconds: 1 })
        : err;
      throw new CommittedError(e);
    }
    return ids.map((id) => {
      const m = records.get(id);
      if (!m) throw appError("internal_error", "The record vanished after it was written.");
      return m;
    });
  }
  const eventWriter = createCoalescer<Stamped<EventRow>, Event>((items) =>
    grouped(items, applyEvents, (i) => recordKey(i.app_id, i.name), readEvents),
  );
  const logWriter = createCoalescer<Stamped<LogRow>, Log>((items) =>
    grouped(items, applyLogs, (i) => recordKey(i.app_id, i.hash), readLogs),
  );
  const breadcrumbWriter = createCoalescer<Stamped<BreadcrumbRow>, Breadcrumb>((items) =>
    grouped(items, applyBreadcrumbs, (i) => recordKey(i.app_id, i.name), readBreadcrumbs),
  );

  return {
    async recordEvent(req, ctx) {
      const c = consumerOf(ctx);
      const v = new Violations();
      const row = validateEvent(v, "", { name: req.name, metadata: req.metadata }, itemCtx(), false);
      v.throwIfAny();
      return eventWriter.add(stamp(recorder(c), [row!])[0]!);
    },

    async recordLog(req, ctx) {
      const c = consumerOf(ctx);
      const v = new Violations();
      const log = validateLog(v, "", req, itemCtx(), false);
      v.throwIfAny();
      await checkSessions(v, c.consumerId, [{ path: "session_id", id: log!.row.session_id }]);
      v.throwIfAny();
      let row = log!.row;
      let key: string | undefined;
      if (log!.file) {
        key = `logs/${c.appId}/s-${randomUUID()}`;
        await storeFile(key, log!.file.data);
        row = attach(log!, key);
      }
      try {
        return await logWriter.add(stamp(recorder(c), [row])[0]!);
      } catch (err) {
        if (key) await blobs.delete(key).catch(() => {});
        throw err;
      }
    },

    async recordBreadcrumb(req, ctx) {
      const c = consumerOf(ctx);
      const v = new Violations();
      const row = validateBreadcrumb(v, "", req, itemCtx());
      v.throwIfAny();
      await checkSessions(v, c.consumerId, [{ path: "session_id", id: row!.session_id }]);
      v.throwIfAny();
      return breadcrumbWriter.add(stamp(recorder(c), [row!])[0]!);
    },

    async batchEvents(req, ctx) {
      const c = consumerOf(ctx);
      const v = new Violations();
      const ic = itemCtx();
      const rows = checkBatchSize(v, "events", req.events.length)
        ? req.events.map((it, i) => validateEvent(v, `events.${i}.`, it, ic, true))
        : [];
      v.throwIfAny();
      await checkSessions(v, c.consumerId, rows.map((r, i) => ({ path: `events.${i}.session_id`, id: r!.session_id })));
      v.throwIfAny();
      const id = await batchId(c, "events", ctx, req);
      await publish({ v: PAYLOAD_VERSION, kind: "events", batchId: id, ...recorder(c), acceptedAt: ic.now.toISOString(), items: rows.map((r) => r!) });
      return create(BatchAcceptedSchema, { message: queuedMessage.events });
    },

    async batchLogs(req, ctx) {
      const c = consumerOf(ctx);
      const v = new Violations();
      const ic = itemCtx();
      const logs = checkBatchSize(v, "logs", req.logs.length)
        ? req.logs.map((it, i) => validateLog(v, `logs.${i}.`, it, ic, true))
        : [];
      v.throwIfAny();
      await checkSessions(v, c.consumerId, logs.map((l, i) => ({ path: `logs.${i}.session_id`, id: l!.row.session_id })));
      v.throwIfAny();
      const id = await batchId(c, "logs", ctx, req);
      // Files first: the message only carries their keys. Keys derive from the
      // batch id, so a retried idempotent batch overwrites, not duplicates.
      const rows = await Promise.all(
        logs.map(async (l, i) => {
          if (!l!.file) return l!.row;
          const key = `logs/${c.appId}/${id}/${i}`;
          await storeFile(key, l!.file.data);
          return attach(l!, key);
        }),
      );
      await publish({ v: PAYLOAD_VERSION, kind: "logs", batchId: id, ...recorder(c), acceptedAt: ic.now.toISOString(), items: rows });
      return create(BatchAcceptedSchema, { message: queuedMessage.logs });
    },

    async batchBreadcrumbs(req, ctx) {
      const c = consumerOf(ctx);
      const v = new Violations();
      const ic = itemCtx();
      const rows = checkBatchSize(v, "breadcrumbs", req.breadcrumbs.length)
        ? req.breadcrumbs.map((it, i) => validateBreadcrumb(v, `breadcrumbs.${i}.`, it, ic))
        : [];
      v.throwIfAny();
      await checkSessions(v, c.consumerId, rows.map((r, i) => ({ path: `breadcrumbs.${i}.session_id`, id: r!.session_id })));
      v.throwIfAny();
      const id = await batchId(c, "breadcrumbs", ctx, req);
      await publish({ v: PAYLOAD_VERSION, kind: "breadcrumbs", batchId: id, ...recorder(c), acceptedAt: ic.now.toISOString(), items: rows.map((r) => r!) });
      return create(BatchAcceptedSchema, { message: queuedMessage.breadcrumbs });
    },
  };
}
