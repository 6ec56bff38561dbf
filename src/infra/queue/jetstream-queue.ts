// The queue over NATS JetStream. Without lanes: a work-queue stream
// (`<prefix>.batches`) with one durable pull consumer shared by every
// worker, and the dead letters in `<stream>_DLQ` (`<prefix>.dead`). With
// lanes: one stream keeping messages and dead letters for retentionMs
// (`<prefix>.events.<lane>.<topic>`, `<prefix>.dead.<topic>`) and one durable
// consumer per lane with one message in flight. The layouts are those of
// the streams of earlier versions, so existing installs keep their data.
// The publisher's msg id (Nats-Msg-Id) lets JetStream drop duplicates
// within the de-duplication window. A consumer holds at most twice its
// concurrency (the ones it handles and as many ready for the next free
// slot) and marks each one in progress (+WPI) every third of ack_wait until
// it is settled, so ack_wait can be short: the messages of a worker that
// dies go to another one ack_wait after their last progress mark; a worker
// that stops hands back the ones it had not started. While NATS is
// unreachable publish fails fast with `unavailable` (HTTP 503).
import { headers as natsHeaders, nanos, type MsgHdrs, type NatsConnection } from "@nats-io/transport-node";
import { AckPolicy, jetstream, jetstreamManager, RetentionPolicy, StorageType, type JetStreamClient, type JetStreamManager, type JsMsg, type StoredMsg } from "@nats-io/jetstream";
import { appError } from "../../kernel/errors.js";
import { NatsLink, natsConnection, type NatsSource } from "../nats/nats-link.js";
import {
  DEFAULT_ACK_WAIT_MS,
  deadKey,
  defaultRetryPolicy,
  errorText,
  matchesAttrs,
  numericIds,
  parsePageToken,
  progressEveryMs,
  replayId,
  runHandler,
  sleep,
  topicPattern,
  type Attrs,
  type DeadLetter,
  type DeadNote,
  type Queue,
  type QueueOptions,
} from "./queue.js";

/** An idle pull is renewed this often. */
const FETCH_EXPIRES_MS = 5000;
/** Headers of a dead letter that are not its attributes. */
const OWN_HEADERS = new Set(["pb-msg-id", "pb-attempts", "pb-error", "nats-msg-id", "nats-expected-stream"]);

export function createJetStreamQueue(opts: Omit<QueueOptions, "sql" | "pollMs"> & { nats: NatsSource }): Queue {
  const { nats } = opts;
  const { stream, subjectPrefix: prefix } = opts.jetstream;
  const lanes = opts.lanes?.count ?? 0;
  const durable = opts.jetstream.durable ?? `${opts.name}-workers`;
  const durables = lanes ? Array.from({ length: lanes }, (_, p) => `${durable}-${p}`) : [durable];
  const policy = { ...defaultRetryPolicy, ...opts.retry };
  const ackWaitMs = opts.ackWaitMs ?? DEFAULT_ACK_WAIT_MS;
  const publishTimeoutMs = opts.jetstream.publishTimeoutMs ?? 5000;
  const retention = opts.jetstream.retentionMs;
  const deadStream = retention === undefined ? `${stream}_DLQ` : stream;
  const msgSubject = (lane: number, topic = "") => (lanes ? `${prefix}.events.${lane}.${topic || "_"}` : `${prefix}.batches`);
  const deadSubject = (topic = "") => (lanes ? `${prefix}.dead.${topic || "_"}` : `${prefix}.dead`);
  const deadFilter = (topic?: string) => (lanes ? `${prefix}.dead.${topic ?? ">"}` : `${prefix}.dead`);
  const topicOf = (subject: string, head: string) => (lanes ? subject.split(".").slice(head.split(".").length + (head.endsWith(".events") ? 1 : 0)).join(".") : "");

  let closed = false;
  let ensured: Promise<void> | undefined;
  let client: { nc: NatsConnection; js: JetStreamClient; jsm: JetStreamManager } | undefined;
  // The server may have lost the streams while it was away.
  const unfollow = nats instanceof NatsLink ? nats.onChange((s) => s === "connected" && (ensured = undefined)) : () => {};
  const current = () => (nats instanceof NatsLink ? nats.current : nats);
  const up = () => !closed && (nats instanceof NatsLink ? nats.connected : !nats.isClosed());
  const unavailable = (cause?: unknown) => appError("unavailable", "The ingestion queue is unavailable.", { cause, retryAfterSeconds: 1 });

  const clientOf = async () => {
    const nc = await natsConnection(nats, 5000);
    if (client?.nc !== nc) client = { nc, js: jetstream(nc, { timeout: publishTimeoutMs }), jsm: await jetstreamManager(nc, { timeout: publishTimeoutMs }) };
    return client;
  };

  const ensure = (): Promise<void> => {
    ensured ??= (async () => {
      const { jsm } = await clientOf();
      const window = nanos(opts.jetstream.duplicateWindowMs ?? 10 * 60_000);
      if (retention === undefined) {
        await addOrUpdateStream(jsm, { name: stream, subjects: [msgSubject(0)], retention: RetentionPolicy.Workqueue, storage: StorageType.File, duplicate_window: window });
        await addOrUpdateStream(jsm, { name: deadStream, subjects: [deadSubject()], retention: RetentionPolicy.Limits, storage: StorageType.File, allow_direct: true });
      } else {
        await addOrUpdateStream(jsm, { name: stream, subjects: [`${prefix}.>`], retention: RetentionPolicy.Limits, storage: StorageType.File, max_age: nanos(retention), duplicate_window: window });
      }
      for (const [p, name] of durables.entries()) {
        await addOrUpdateConsumer(jsm, stream, {
          durable_name: name,
          ack_policy: AckPolicy.Explicit,
          ack_wait: nanos(ackWaitMs),
          max_deliver: -1,
          max_ack_pending: lanes ? 1 : 10_000,
          ...(lanes ? { filter_subject: `${prefix}.events.${p}.>` } : {}),
        });
      }
    })();
    ensured.catch(() => {
      ensured = undefined;
    });
    return ensured;
  };

  const requireUp = async () => {
    if (!up()) throw unavailable();
    try {
      const c = await clientOf();
      await ensure();
      return c;
    } catch (err) {
      throw unavailable(err);
    }
  };

  const deadLetterOf = (m: StoredMsg): DeadLetter => ({
    id: String(m.seq),
    msgId: m.header?.get("Pb-Msg-Id") ?? "",
    data: m.data,
    topic: topicOf(m.subject, `${prefix}.dead`),
    attrs: headerAttrs(m.header),
    attempts: Number(m.header?.get("Pb-Attempts") ?? 0),
    lastError: m.header?.get("Pb-Error") ?? "",
    deadAt: m.time,
  });

  const getStored = async (jsm: JetStreamManager, seq: number): Promise<StoredMsg | undefined> => {
    try {
      return (await jsm.streams.getMessage(deadStream, { seq })) ?? undefined;
    } catch (err) {
      if (/no message found|not found|404/i.test(errorText(err))) return undefined;
      throw err;
    }
  };

  /**
   * Sequences of the matching dead letters, oldest first: one pass of a
   * headers-only ordered consumer, so payloads are read only for the page
   * that is returned.
   */
  const deadSeqs = async (js: JetStreamClient, topic: string | undefined, attrs: Attrs | undefined): Promise<number[]> => {
    const consumer = await js.consumers.get(deadStream, { filter_subjects: deadFilter(topic), headers_only: true });
    const seqs: number[] = [];
    try {
      if ((await consumer.info(true)).num_pending === 0) return seqs;
      const iter = await consumer.consume({ max_messages: 512 });
      try {
        for await (const m of iter) {
          if (matchesAttrs(headerAttrs(m.headers), attrs)) seqs.push(m.seq);
          if (m.info.pending === 0) break;
        }
      } finally {
        await iter.close();
      }
    } finally {
      await consumer.delete().catch(() => {});
    }
    return seqs;
  };

  const publishDead = async (js: JetStreamClient, m: JsMsg, note: DeadNote) => {
    const h = natsHeaders();
    for (const [k, v] of Object.entries(note.attrs ?? {})) h.set(k, v);
    const msgId = m.headers?.get("Nats-Msg-Id") || String(m.seq);
    h.set("Pb-Msg-Id", msgId);
    h.set("Pb-Attempts", String(note.attempts ?? m.info.deliveryCount));
    h.set("Pb-Error", note.error.slice(0, 1000).replace(/[\r\n]+/g, " "));
    await js.publish(deadSubject(topicOf(m.subject, `${prefix}.events`)), m.data, { headers: h, msgID: deadKey(msgId, note), timeout: publishTimeoutMs });
  };

  return {
    backend: "jetstream",
    get maxMessageBytes() {
      return current()?.info?.max_payload ?? 1024 * 1024;
    },

    async ready() {
      await natsConnection(nats);
      if (closed) throw unavailable();
      await ensure();
    },

    async publish(msgId, data, o = {}) {
      const c = await requireUp();
      try {
        const lane = opts.lanes ? opts.lanes.of(data) : 0;
        const ack = await c.js.publish(msgSubject(lane, o.topic), data, { msgID: msgId, timeout: publishTimeoutMs });
        return { duplicate: ack.duplicate };
      } catch (err) {
        ensured = undefined;
        throw unavailable(err);
      }
    },

    consume(handler, { concurrency }) {
      let stopped = false;
      const loops = durables.map((name) => pull(name, lanes ? 1 : concurrency));
      return {
        async stop() {
          stopped = true;
          await Promise.all(loops.map((l) => l.stop()));
        },
      };

      function pull(name: string, limit: number) {
        let stopFetch = () => {};
        // Messages in hand: being handled (at most `limit`) or waiting for a
        // slot (at most as many again, so a slot never waits for a pull).
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

        const run = (m: JsMsg) => {
          active++;
          void (async () => {
            try {
              const outcome = await runHandler(handler, { id: m.headers?.get("Nats-Msg-Id") || String(m.seq), data: m.data, attempt: m.info.deliveryCount, attrs: headerAttrs(m.headers) }, policy);
              if ("retryInMs" in outcome) m.nak(outcome.retryInMs);
              else {
                try {
                  const { js } = await clientOf();
                  for (const note of "dead" in outcome ? outcome.dead : []) await publishDead(js, m, note);
                  m.ack();
                } catch {
                  m.nak(policy.baseBackoffMs);
                }
              }
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
          while (active < limit && waiting.length > 0) run(waiting.shift()!);
        };

        const loop = (async () => {
          let consumer: Awaited<ReturnType<JetStreamClient["consumers"]["get"]>> | undefined;
          let fetching: { stop(): void } | undefined;
          stopFetch = () => fetching?.stop();
          while (!stopped && !closed) {
            try {
              if (!up() || !current()) {
                await sleep(250);
                continue;
              }
              await ensure();
              consumer ??= await (await clientOf()).js.consumers.get(stream, name);
              if (inHand.size >= limit * 2) {
                await new Promise<void>((r) => (wake = r));
                continue;
              }
              // Pull no more than there is room for: nothing waits unmarked
              // in a client buffer (it would time out and go to another worker).
              const messages = await consumer.fetch({ max_messages: limit * 2 - inHand.size, expires: FETCH_EXPIRES_MS });
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
      }
    },

    async stats() {
      const { jsm } = await requireUp();
      const [cs, dead] = await Promise.all([
        Promise.all(durables.map((d) => jsm.consumers.info(stream, d))),
        jsm.streams.info(deadStream, { subjects_filter: deadFilter() }),
      ]);
      return {
        backend: "jetstream",
        lag: cs.reduce((n, c) => n + c.num_pending + c.num_ack_pending, 0),
        inFlight: cs.reduce((n, c) => n + c.num_ack_pending, 0),
        deadLetters: Object.values(dead.state.subjects ?? {}).reduce((n, c) => n + c, 0),
      };
    },

    async listDeadLetters(q) {
      const after = parsePageToken(q.pageToken);
      const { js, jsm } = await requireUp();
      let seqs = await deadSeqs(js, q.topic, q.attrs);
      if (q.newestFirst) seqs = seqs.reverse().filter((n) => after === 0 || n < after);
      else seqs = seqs.filter((n) => n > after);
      const page = seqs.slice(0, q.pageSize);
      const entries: DeadLetter[] = [];
      for (const seq of page) {
        const m = await getStored(jsm, seq);
        if (m) entries.push(deadLetterOf(m));
      }
      return { entries, nextPageToken: seqs.length > q.pageSize ? String(page[page.length - 1]) : "" };
    },

    async replayDeadLetters(q) {
      const { js, jsm } = await requireUp();
      const seqs = q.ids ? numericIds(q.ids) : await deadSeqs(js, q.topic, q.attrs);
      const pattern = q.topic === undefined ? undefined : topicPattern(q.topic);
      let replayed = 0;
      for (const seq of seqs) {
        const m = await getStored(jsm, seq);
        if (!m || !m.subject.startsWith(`${prefix}.dead`)) continue;
        const d = deadLetterOf(m);
        if ((pattern && !pattern.test(d.topic)) || !matchesAttrs(d.attrs, q.attrs)) continue;
        const h = natsHeaders();
        for (const [k, v] of Object.entries(d.attrs)) h.set(k, v);
        // The msg id is the dead letter's: a concurrent replay of the same
        // one is dropped by JetStream's de-duplication.
        await js.publish(msgSubject(opts.lanes ? opts.lanes.of(m.data) : 0, d.topic), m.data, { headers: h, msgID: replayId(d.msgId || "dead", d.id), timeout: publishTimeoutMs });
        try {
          if (await jsm.streams.deleteMessage(deadStream, seq, false)) replayed++;
        } catch (err) {
          // Removed by a concurrent replay since it was read: counted there.
          if (!/no message found|not found/i.test(errorText(err))) throw err;
        }
      }
      return replayed;
    },

    async close() {
      closed = true;
      unfollow();
    },
  };
}

/** A message's or dead letter's attributes: its headers but those the queue sets. */
function headerAttrs(h: MsgHdrs | undefined): Attrs {
  const attrs: Attrs = {};
  for (const k of h?.keys() ?? []) if (!OWN_HEADERS.has(k.toLowerCase())) attrs[k] = h!.get(k);
  return attrs;
}

/**
 * Creates the durable consumer, or brings an existing one to this
 * configuration (ack_wait was 30 s in earlier versions): NATS 2.9 updates
 * on create, 2.10 and later refuse a create that differs.
 */
async function addOrUpdateConsumer(jsm: JetStreamManager, stream: string, cfg: Parameters<JetStreamManager["consumers"]["add"]>[1] & { durable_name: string }): Promise<void> {
  try {
    await jsm.consumers.add(stream, cfg);
  } catch (err) {
    if (!/already (exists|in use)/i.test(errorText(err))) throw err;
    await jsm.consumers.update(stream, cfg.durable_name, { ack_wait: cfg.ack_wait, max_ack_pending: cfg.max_ack_pending });
  }
}

async function addOrUpdateStream(jsm: JetStreamManager, cfg: Parameters<JetStreamManager["streams"]["add"]>[0] & { name: string }): Promise<void> {
  try {
    await jsm.streams.add(cfg);
  } catch {
    await jsm.streams.update(cfg.name, cfg);
  }
}
