// BatchQueue over NATS JetStream. One work-queue stream holds accepted
// batches; one durable pull consumer is shared by every worker (in this
// process and in separate worker processes), so each message goes to one of
// them. The publisher's msg id (Nats-Msg-Id) lets JetStream drop duplicates
// within duplicateWindowMs. Failed messages are nak'ed with backoff; after
// maxAttempts deliveries they are moved to a dead-letter stream and acked.
// A worker holds at most twice its concurrency (the ones it handles and as
// many ready for the next free slot) and marks each one in progress (+WPI)
// every third of ack_wait until it is settled, so ack_wait can be short: the
// batches of a worker that dies (kill -9, lost host) go to another worker
// ack_wait after their last progress mark, at most ackWaitMs (5 s by
// default); a worker that stops hands back the ones it had not started.
// The connection is the process's NatsLink when given (servers and workers
// share one), else owned here; either way it reconnects forever, and while
// NATS is unreachable publish fails fast with `unavailable` (HTTP 503).
import { connect, headers, nanos, type NatsConnection } from "@nats-io/transport-node";
import {
  AckPolicy,
  jetstream,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
  type StoredMsg,
} from "@nats-io/jetstream";
import { appError } from "../../kernel/errors.js";
import type { NatsLink } from "../nats/nats-link.js";
import {
  backoffMs,
  defaultRetryPolicy,
  errorText,
  isTransient,
  PermanentError,
  sleep,
  type BatchQueue,
  type DeadLetterEntry,
  type MessageHandler,
  type QueueConsumer,
  type RetryPolicy,
} from "./queue.js";

/** JetStream redelivers a message this long after its last progress mark. */
export const DEFAULT_ACK_WAIT_MS = 5000;
/** An idle pull is renewed this often. */
const FETCH_EXPIRES_MS = 5000;

export interface JetStreamQueueOptions {
  /** NATS server URL(s), e.g. "nats://127.0.0.1:4222" (ignored when `link` is given). */
  servers: string | string[];
  /** The process's shared connection; the queue then neither opens nor closes one. */
  link?: NatsLink;
  /** Stream name (default PB_ANALYTICS); the dead letters go to `${stream}_DLQ`. */
  stream?: string;
  /** Subject prefix (default "pulsebase.analytics"): `.batches` and `.dead`. */
  subjectPrefix?: string;
  /** Durable consumer shared by all workers (default "analytics-workers"). */
  durable?: string;
  retry?: Partial<RetryPolicy>;
  /** JetStream msg-id de-duplication window (default 10 minutes). */
  duplicateWindowMs?: number;
  /** Redelivery after a worker stops marking progress, i.e. died (default 5 s). */
  ackWaitMs?: number;
  /** Publish acknowledgement timeout (default 5 s). */
  publishTimeoutMs?: number;
  /** Connection name shown by the server. */
  name?: string;
}

export interface JetStreamQueue extends BatchQueue {
  /** Resolves once connected (tests and readiness checks). */
  ready(): Promise<void>;
}

export function createJetStreamQueue(opts: JetStreamQueueOptions): JetStreamQueue {
  const stream = opts.stream ?? "PB_ANALYTICS";
  const dlqStream = `${stream}_DLQ`;
  const prefix = opts.subjectPrefix ?? "pulsebase.analytics";
  const subject = `${prefix}.batches`;
  const dlqSubject = `${prefix}.dead`;
  const durable = opts.durable ?? "analytics-workers";
  const policy: RetryPolicy = { ...defaultRetryPolicy, ...opts.retry };
  const publishTimeoutMs = opts.publishTimeoutMs ?? 5000;
  const ackWaitMs = opts.ackWaitMs ?? DEFAULT_ACK_WAIT_MS;

  let nc: NatsConnection | undefined;
  let js: JetStreamClient | undefined;
  let jsm: JetStreamManager | undefined;
  let up = false;
  let closed = false;
  let ensured: Promise<void> | undefined;
  let maxPayload = 1024 * 1024;

  // The first connection is retried here (so close() can stop it); after
  // that the client reconnects by itself, forever.
  const connected = (async () => {
    let conn: NatsConnection | undefined = opts.link ? await opts.link.connection() : undefined;
    while (!conn) {
      if (closed) return;
      try {
        conn = await connect({
          servers: opts.servers,
          name: opts.name ?? "pulsebase-analytics",
          maxReconnectAttempts: -1,
          reconnectTimeWait: 250,
          timeout: 2000,
        });
      } catch {
        await sleep(500);
      }
    }
    if (closed) {
      if (!opts.link) await conn.close();
      return;
    }
    nc = conn;
    maxPayload = conn.info?.max_payload ?? maxPayload;
    js = jetstream(conn, { timeout: publishTimeoutMs });
    jsm = await jetstreamManager(conn, { timeout: publishTimeoutMs });
    // A shared connection may be reconnecting right now.
    up = opts.link ? opts.link.connected : true;
    void (async () => {
      for await (const s of conn.status()) {
        if (s.type === "disconnect" || s.type === "reconnecting") up = false;
        else if (s.type === "reconnect") {
          up = true;
          ensured = undefined; // the server may have lost the streams
        }
      }
    })();
  })();
  connected.catch(() => {});

  const ensure = (): Promise<void> => {
    ensured ??= (async () => {
      const m = jsm!;
      await addStream(m, {
        name: stream,
        subjects: [subject],
        retention: RetentionPolicy.Workqueue,
        storage: StorageType.File,
        duplicate_window: nanos(opts.duplicateWindowMs ?? 10 * 60_000),
      });
      await addStream(m, {
        name: dlqStream,
        subjects: [dlqSubject],
        retention: RetentionPolicy.Limits,
        storage: StorageType.File,
        allow_direct: true,
      });
      await addOrUpdateConsumer(m, stream, {
        durable_name: durable,
        ack_policy: AckPolicy.Explicit,
        ack_wait: nanos(ackWaitMs),
        max_deliver: -1,
        max_ack_pending: 10_000,
      });
    })();
    ensured.catch(() => {
      ensured = undefined;
    });
    return ensured;
  };

  const unavailable = (cause?: unknown) =>
    appError("unavailable", "The ingestion queue is unavailable.", { cause, retryAfterSeconds: 1 });

  const requireUp = async (): Promise<{ js: JetStreamClient; jsm: JetStreamManager }> => {
    if (!up || !js || !jsm || closed) throw unavailable();
    try {
      await ensure();
    } catch (err) {
      throw unavailable(err);
    }
    return { js, jsm };
  };

  const deadLetterOf = (m: StoredMsg): DeadLetterEntry => ({
    id: String(m.seq),
    msgId: m.header?.get("Pb-Msg-Id") ?? "",
    data: m.data,
    attempts: Number(m.header?.get("Pb-Attempts") ?? 0),
    lastError: m.header?.get("Pb-Error") ?? "",
    deadAt: m.time,
  });

  const nextDead = async (m: JetStreamManager, seq: number): Promise<StoredMsg | null> => {
    try {
      return await m.direct.getMessage(dlqStream, { seq, next_by_subj: dlqSubject });
    } catch (err) {
      if (/no message found|not found|404/i.test(errorText(err))) return null;
      throw err;
    }
  };

  const queue: JetStreamQueue = {
    backend: "jetstream",
    get maxMessageBytes() {
      return maxPayload;
    },

    async ready() {
      await connected;
      if (closed) throw unavailable();
      await ensure();
    },

    async publish(msgId, data) {
      const c = await requireUp();
      try {
        const ack = await c.js.publish(subject, data, { msgID: msgId, timeout: publishTimeoutMs });
        return { duplicate: ack.duplicate };
      } catch (err) {
        ensured = undefined;
        throw unavailable(err);
      }
    },

    consume(handler: MessageHandler, { concurrency }): QueueConsumer {
      let stopped = false;
      let stopFetch = () => {};
      // Messages in hand: being handled (at most `concurrency`) or waiting
      // for a slot (at most as many again, so a slot never waits for a
      // pull). Every one is marked in progress every third of ack_wait
      // until it is settled.
      const limit = concurrency * 2;
      const inHand = new Set<JsMsg>();
      const waiting: JsMsg[] = [];
      let active = 0;
      let wake: (() => void) | undefined;
      const woken = () => {
        const w = wake;
        wake = undefined;
        w?.();
      };
      const progress = setInterval(() => {
        for (const m of inHand) {
          try {
            m.working();
          } catch {
            // connection closed: the message is redelivered anyway
          }
        }
      }, progressEveryMs(ackWaitMs));
      progress.unref();

      const settle = async (m: JsMsg, err: unknown) => {
        const attempt = m.info.deliveryCount;
        if (err === undefined) {
          m.ack();
          return;
        }
        if (err instanceof PermanentError || (attempt >= policy.maxAttempts && !isTransient(err))) {
          try {
            const h = headers();
            h.set("Pb-Msg-Id", m.headers?.get("Nats-Msg-Id") ?? String(m.seq));
            h.set("Pb-Attempts", String(attempt));
            h.set("Pb-Error", errorText(err).replace(/[\r\n]+/g, " "));
            await js!.publish(dlqSubject, m.data, { headers: h, timeout: publishTimeoutMs });
            m.ack();
          } catch {
            m.nak(backoffMs(policy, attempt));
          }
          return;
        }
        m.nak(backoffMs(policy, attempt));
      };

      const run = (m: JsMsg) => {
        active++;
        void (async () => {
          let failure: unknown;
          try {
            const id = m.headers?.get("Nats-Msg-Id") || String(m.seq);
            await handler({ id, data: m.data, attempt: m.info.deliveryCount });
          } catch (err) {
            failure = err ?? new Error("failed");
          }
          try {
            await settle(m, failure);
          } catch {
            // Unacknowledged: JetStream redelivers after ack_wait.
          } finally {
            inHand.delete(m);
            active--;
            pump();
            woken();
          }
        })();
      };
      const pump = () => {
        while (active < concurrency && waiting.length > 0) run(waiting.shift()!);
      };

      const loop = (async () => {
        await connected.catch(() => {});
        let consumer: Awaited<ReturnType<JetStreamClient["consumers"]["get"]>> | undefined;
        let fetching: { stop(): void } | undefined;
        stopFetch = () => fetching?.stop();
        while (!stopped && !closed) {
          try {
            if (!up) {
              await sleep(250);
              continue;
            }
            await ensure();
            consumer ??= await js!.consumers.get(stream, durable);
            if (inHand.size >= limit) {
              await new Promise<void>((r) => (wake = r));
              continue;
            }
            // Pull no more than there is room for: nothing waits unmarked
            // in a client buffer (it would time out and go to another worker).
            const messages = await consumer.fetch({ max_messages: limit - inHand.size, expires: FETCH_EXPIRES_MS });
            fetching = messages;
            for await (const m of messages) {
              inHand.add(m);
              waiting.push(m);
              pump();
              if (stopped) break;
            }
            fetching = undefined;
          } catch {
            ensured = undefined;
            consumer = undefined;
            if (!stopped) await sleep(500);
          }
        }
      })();

      return {
        async stop() {
          stopped = true;
          stopFetch();
          woken();
          await loop;
          // Not started: to another worker now rather than after ack_wait.
          for (const m of waiting.splice(0)) {
            inHand.delete(m);
            try {
              m.nak();
            } catch {
              // connection closed: redelivered after ack_wait
            }
          }
          while (active > 0) await new Promise<void>((r) => (wake = r));
          clearInterval(progress);
        },
      };
    },

    async stats() {
      const c = await requireUp();
      const [ci, dlq] = await Promise.all([c.jsm.consumers.info(stream, durable), c.jsm.streams.info(dlqStream)]);
      return {
        backend: "jetstream",
        lag: ci.num_pending + ci.num_ack_pending,
        inFlight: ci.num_ack_pending,
        deadLetters: dlq.state.messages,
      };
    },

    async listDeadLetters(pageSize, pageToken) {
      const c = await requireUp();
      let seq = pageToken ? Number(pageToken) : 1;
      if (!Number.isSafeInteger(seq) || seq < 1) throw appError("validation_failed", "Invalid page_token.", { fields: { page_token: ["Invalid page token."] } });
      const entries: DeadLetterEntry[] = [];
      let more = false;
      while (true) {
        const m = await nextDead(c.jsm, seq);
        if (!m) break;
        if (entries.length === pageSize) {
          more = true;
          break;
        }
        entries.push(deadLetterOf(m));
        seq = m.seq + 1;
      }
      return { entries, nextPageToken: more ? String(seq) : "" };
    },

    async replayDeadLetters(ids) {
      const c = await requireUp();
      let seqs: number[];
      if (ids) seqs = ids.map(Number).filter((n) => Number.isSafeInteger(n) && n > 0);
      else {
        seqs = [];
        for (let m = await nextDead(c.jsm, 1); m; m = await nextDead(c.jsm, m.seq + 1)) seqs.push(m.seq);
      }
      let replayed = 0;
      for (const seq of seqs) {
        const m = await nextDead(c.jsm, seq);
        if (!m || m.seq !== seq) continue;
        const dl = deadLetterOf(m);
        // A new msg id: the original may still be inside the de-duplication
        // window. The processed-batch record still guarantees one effect.
        await c.js.publish(subject, m.data, { msgID: `${dl.msgId}~replay-${seq}`, timeout: publishTimeoutMs });
        await c.jsm.streams.deleteMessage(dlqStream, seq);
        replayed++;
      }
      return replayed;
    },

    async close() {
      closed = true;
      up = false;
      if (nc && !opts.link) await nc.close();
    },
  };
  return queue;
}

/**
 * Creates the durable consumer, or brings an existing one to this
 * configuration (ack_wait was 30 s in earlier versions): NATS 2.9 updates
 * on create, 2.10 and later refuse a create that differs.
 */
export async function addOrUpdateConsumer(jsm: JetStreamManager, stream: string, cfg: Parameters<JetStreamManager["consumers"]["add"]>[1] & { durable_name: string }): Promise<void> {
  try {
    await jsm.consumers.add(stream, cfg);
  } catch (err) {
    if (!/already (exists|in use)/i.test(errorText(err))) throw err;
    await jsm.consumers.update(stream, cfg.durable_name, { ack_wait: cfg.ack_wait, max_ack_pending: cfg.max_ack_pending });
  }
}

/** How often a message in progress is marked (+WPI): three times per ack_wait. */
export function progressEveryMs(ackWaitMs: number): number {
  return Math.max(100, Math.floor(ackWaitMs / 3));
}

async function addStream(jsm: JetStreamManager, cfg: Parameters<JetStreamManager["streams"]["add"]>[0]): Promise<void> {
  try {
    await jsm.streams.info(cfg.name!);
  } catch (err) {
    if (!/stream not found/i.test(errorText(err))) throw err;
    await jsm.streams.add(cfg);
  }
}
