// Where event-trigger changes wait between capture and delivery. Two
// transports with one contract: JetStream (NATS_URL set; any number of
// processes) and a PostgreSQL table (the embedded default, no external
// server). Both keep each lane in order with one change in flight per lane,
// and both keep the dead letters (one per change and trigger) that operators
// list and replay: a replay queues the change again on its lane for that one
// trigger and removes the dead letter in the same step, under an id derived
// from the dead letter, so a dead letter is delivered again at most once.
// A change being handled is marked in progress every third of ackWaitMs
// (JetStream +WPI, or the table row's claim extended), so a process that
// dies mid-change hands its lane to another process ackWaitMs (5 s by
// default) after the last mark, while a long run keeps its lane.
import { headers as natsHeaders, nanos } from "@nats-io/transport-node";
import { AckPolicy, jetstream, jetstreamManager, RetentionPolicy, StorageType, type JetStreamClient, type JetStreamManager, type StoredMsg } from "@nats-io/jetstream";
import { natsConnection, type NatsSource } from "../../../infra/nats/nats-link.js";
import { appError } from "../../../kernel/errors.js";
import { addOrUpdateConsumer, progressEveryMs } from "../../../infra/queue/jetstream-queue.js";
import type { Sql } from "../../../infra/storage/sql.js";
import type { EventWorkerConfig, FunctionEvent } from "./event-worker.js";

/** FNV-1a, 32 bits. */
function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** The stable lane of a (source, app, table or collection). */
export function laneOf(partitions: number, source: string, appId: number, target: string): number {
  return fnv1a(`${source}\u0000${appId}\u0000${target}`) % partitions;
}

/** The lane of an event (its table or collection). */
export function eventLane(partitions: number, event: FunctionEvent): number {
  return laneOf(partitions, event.source, event.app_id, (event.source === "cms" ? event.collection : event.table) ?? "");
}

export interface TransportMessage {
  /** undefined when the stored payload is not an event (nothing can run it). */
  event: FunctionEvent | undefined;
  /** Unique per queued delivery: the event id, or `<event id>~replay~<dead letter id>` for a replay. */
  deliveryId: string;
  /** A replayed dead letter runs only this trigger; undefined = every matching trigger. */
  triggerId?: number;
  /** Keeps the claim alive (also done periodically until ack or nak). */
  working(): void;
  ack(): Promise<void>;
  /** Leaves it for redelivery after delayMs. */
  nak(delayMs: number): Promise<void>;
}

export interface DeadLetter {
  event: FunctionEvent;
  /** The delivery that failed (TransportMessage.deliveryId). */
  deliveryId: string;
  triggerId: number;
  functionId: number;
  attempts: number;
  error: string;
}

export interface StoredDeadLetter {
  /** Opaque: the JetStream sequence or the table's row id. */
  id: string;
  /** undefined when the stored payload is not an event. */
  event: FunctionEvent | undefined;
  appId: number;
  triggerId: number;
  functionId: number;
  attempts: number;
  error: string;
  deadAt: Date;
}

export interface DeadLetterQuery {
  appId: number;
  /** 0 or undefined: every function of the application. */
  functionId?: number;
  pageSize: number;
  /** "" for the first page, else a next_page_token. */
  pageToken: string;
}

export interface DeadLetterPage {
  /** Newest first. */
  entries: StoredDeadLetter[];
  nextPageToken: string;
}

/** The operator side of the dead letters (the same calls as the analytics queue's). */
export interface DeadLetterStore {
  listDeadLetters(q: DeadLetterQuery): Promise<DeadLetterPage>;
  /**
   * Queues dead letters again (every one of the application, or of
   * functionId, when ids is undefined) and removes them; returns how many
   * were queued. Ids of other applications, unknown or already replayed
   * ones count 0.
   */
  replayDeadLetters(appId: number, opts?: { ids?: string[]; functionId?: number }): Promise<number>;
}

/** What the transport holds now (the metrics' queue gauges). */
export interface TransportStats {
  /** Changes queued and not yet handled (waiting or in flight), every lane. */
  lag: number;
  /** Changes being handled (at most one per lane). */
  inFlight: number;
  /** Dead letters kept. */
  deadLetters: number;
}

export interface EventTransport extends DeadLetterStore {
  readonly backend: "jetstream" | "embedded";
  ensure(): Promise<void>;
  stats(): Promise<TransportStats>;
  publish(event: FunctionEvent, lane: number): Promise<void>;
  deadLetter(d: DeadLetter): Promise<void>;
  /** The next change of a lane, or undefined after waiting about a second. */
  next(lane: number): Promise<TransportMessage | undefined>;
  /** Forget set-up state after a failure (set up again on next use). */
  reset(): void;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Calls mark every third of ackWaitMs until the returned function is called (ack or nak). */
function markWhileHandled(mark: () => void, ackWaitMs: number): () => void {
  const timer = setInterval(() => {
    try {
      mark();
    } catch {
      // connection closed: the change is delivered again anyway
    }
  }, progressEveryMs(ackWaitMs));
  timer.unref();
  return () => clearInterval(timer);
}

/** How often the table transport looks for work when it found none. */
const POLL_MS = 250;

const invalidToken = () => appError("validation_failed", "Invalid page_token.", { fields: { page_token: ["Invalid page token."] } });

function parseToken(t: string): number {
  if (t === "") return 0;
  const n = Number(t);
  if (!/^[0-9]+$/.test(t) || !Number.isSafeInteger(n)) throw invalidToken();
  return n;
}

/** Positive integer ids; anything else cannot name a dead letter. */
function numericIds(ids: string[]): number[] {
  return ids.filter((s) => /^[0-9]+$/.test(s)).map(Number).filter((n) => Number.isSafeInteger(n) && n > 0);
}

/** How long a call waits for a NATS connection not open yet (NATS unreachable since start) before failing like an outage. */
const CONNECT_WAIT_MS = 5000;

export function jetStreamTransport(nats: NatsSource, cfg: EventWorkerConfig): EventTransport {
  // The process's connection may not be open yet: every call waits for it
  // (bounded), so a process started while NATS is down runs this transport
  // too, as soon as NATS answers.
  const conn = () => natsConnection(nats, CONNECT_WAIT_MS);
  let client: JetStreamClient | undefined;
  const jsOf = async () => (client ??= jetstream(await conn()));
  const durableOf = (p: number) => `${cfg.durable}-${p}`;
  let ensured: Promise<void> | undefined;
  const ensure = () => {
    ensured ??= (async () => {
      const jsm = await jetstreamManager(await conn());
      const stream = {
        name: cfg.stream,
        subjects: [`${cfg.subjectPrefix}.>`],
        retention: RetentionPolicy.Limits,
        storage: StorageType.File,
        // Handled changes and dead letters are kept for inspection this long.
        max_age: nanos(cfg.retentionMs),
        duplicate_window: nanos(cfg.duplicateWindowMs),
      };
      try {
        await jsm.streams.add(stream);
      } catch {
        await jsm.streams.update(cfg.stream, stream);
      }
      for (let p = 0; p < cfg.partitions; p++) {
        await addOrUpdateConsumer(jsm, cfg.stream, {
          durable_name: durableOf(p),
          ack_policy: AckPolicy.Explicit,
          ack_wait: nanos(cfg.ackWaitMs),
          max_ack_pending: 1,
          max_deliver: -1,
          filter_subject: `${cfg.subjectPrefix}.events.${p}.>`,
        });
      }
    })();
    ensured.catch(() => {
      ensured = undefined;
    });
    return ensured;
  };
  const deadPrefix = `${cfg.subjectPrefix}.dead.`;
  const isDeadOf = (subject: string, appId: number) => subject.startsWith(deadPrefix) && subject.endsWith(`.${appId}`) && subject.split(".").length === deadPrefix.split(".").length + 1;

  const deadLetterOf = (m: StoredMsg): StoredDeadLetter => {
    let event: FunctionEvent | undefined;
    try {
      const v: unknown = m.json();
      event = isEvent(v) ? v : undefined;
    } catch {
      event = undefined;
    }
    return {
      id: String(m.seq),
      event,
      appId: Number(m.subject.slice(m.subject.lastIndexOf(".") + 1)),
      triggerId: Number(m.header?.get("Pb-Trigger-Id") ?? 0),
      functionId: Number(m.header?.get("Pb-Function-Id") ?? 0),
      attempts: Number(m.header?.get("Pb-Attempts") ?? 0),
      error: m.header?.get("Pb-Error") ?? "",
      deadAt: m.time,
    };
  };

  const getStored = async (jsm: JetStreamManager, seq: number): Promise<StoredMsg | undefined> => {
    try {
      return (await jsm.streams.getMessage(cfg.stream, { seq })) ?? undefined;
    } catch (err) {
      if (/no message found|not found|404/i.test(String((err as Error)?.message ?? err))) return undefined;
      throw err;
    }
  };

  /**
   * Sequences of an application's dead letters, oldest first (of one
   * function when functionId > 0): one pass of a headers-only ordered
   * consumer over `<prefix>.dead.*.<app>`, so payloads are read only for the
   * page that is returned.
   */
  const deadSeqs = async (appId: number, functionId: number): Promise<number[]> => {
    const consumer = await (await jsOf()).consumers.get(cfg.stream, { filter_subjects: `${deadPrefix}*.${appId}`, headers_only: true });
    const seqs: number[] = [];
    try {
      if ((await consumer.info(true)).num_pending === 0) return seqs;
      const iter = await consumer.consume({ max_messages: 512 });
      try {
        for await (const m of iter) {
          if (!functionId || Number(m.headers?.get("Pb-Function-Id") ?? 0) === functionId) seqs.push(m.seq);
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

  return {
    backend: "jetstream",
    ensure,
    reset: () => {
      ensured = undefined;
    },
    async stats() {
      // No set-up here: a reader (the worker process's metrics) creates nothing.
      const jsm = await jetstreamManager(await conn());
      const [lanes, dead] = await Promise.all([
        Promise.all(Array.from({ length: cfg.partitions }, (_, p) => jsm.consumers.info(cfg.stream, durableOf(p)))),
        jsm.streams.info(cfg.stream, { subjects_filter: `${deadPrefix}>` }),
      ]);
      return {
        lag: lanes.reduce((n, c) => n + c.num_pending + c.num_ack_pending, 0),
        inFlight: lanes.reduce((n, c) => n + c.num_ack_pending, 0),
        deadLetters: Object.values(dead.state.subjects ?? {}).reduce((n, c) => n + c, 0),
      };
    },
    async publish(event, lane) {
      await (await jsOf()).publish(`${cfg.subjectPrefix}.events.${lane}.${event.source}.${event.app_id}`, JSON.stringify(event), { msgID: event.id });
    },
    async deadLetter(d) {
      const h = natsHeaders();
      h.set("Pb-Trigger-Id", String(d.triggerId));
      h.set("Pb-Function-Id", String(d.functionId));
      h.set("Pb-Attempts", String(d.attempts));
      h.set("Pb-Error", d.error.slice(0, 1000).replace(/[\r\n]/g, " "));
      await (await jsOf()).publish(`${cfg.subjectPrefix}.dead.${d.event.source}.${d.event.app_id}`, JSON.stringify(d.event), {
        headers: h,
        // Per failed delivery: a redelivered change is dead-lettered once,
        // a replay that fails again is a new dead letter.
        msgID: `${d.deliveryId}~dead~${d.triggerId}`,
      });
    },

    async listDeadLetters(q) {
      await ensure();
      const before = parseToken(q.pageToken);
      const jsm = await jetstreamManager(await conn());
      const seqs = (await deadSeqs(q.appId, q.functionId ?? 0)).filter((n) => before === 0 || n < before).reverse();
      const page = seqs.slice(0, q.pageSize);
      const entries: StoredDeadLetter[] = [];
      for (const seq of page) {
        const m = await getStored(jsm, seq);
        if (m) entries.push(deadLetterOf(m));
      }
      return { entries, nextPageToken: seqs.length > q.pageSize ? String(page[page.length - 1]) : "" };
    },

    async replayDeadLetters(appId, opts = {}) {
      await ensure();
      const jsm = await jetstreamManager(await conn());
      const seqs = opts.ids ? numericIds(opts.ids) : await deadSeqs(appId, opts.functionId ?? 0);
      let replayed = 0;
      for (const seq of seqs) {
        const m = await getStored(jsm, seq);
        if (!m || !isDeadOf(m.subject, appId)) continue;
        const d = deadLetterOf(m);
        if (!d.event || (opts.functionId && d.functionId !== opts.functionId)) continue;
        const h = natsHeaders();
        h.set("Pb-Trigger-Id", String(d.triggerId));
        // The msg id is the dead letter's: a concurrent replay of the same
        // one is dropped by JetStream's de-duplication.
        await (await jsOf()).publish(`${cfg.subjectPrefix}.events.${eventLane(cfg.partitions, d.event)}.${d.event.source}.${d.event.app_id}`, m.data, {
          headers: h,
          msgID: `${d.event.id}~replay~${seq}`,
        });
        try {
          if (await jsm.streams.deleteMessage(cfg.stream, seq, false)) replayed++;
        } catch (err) {
          // Removed by a concurrent replay since it was read: counted there.
          if (!/no message found|not found/i.test(String((err as Error)?.message ?? err))) throw err;
        }
      }
      return replayed;
    },
    async next(lane) {
      await ensure();
      const consumer = await (await jsOf()).consumers.get(cfg.stream, durableOf(lane));
      const batch = await consumer.fetch({ max_messages: 1, expires: 1000 });
      for await (const m of batch) {
        let event: FunctionEvent | undefined;
        try {
          event = JSON.parse(new TextDecoder().decode(m.data)) as FunctionEvent;
        } catch {
          event = undefined;
        }
        const trigger = Number(m.headers?.get("Pb-Trigger-Id") ?? "");
        const done = markWhileHandled(() => m.working(), cfg.ackWaitMs);
        return {
          event,
          deliveryId: m.headers?.get("Nats-Msg-Id") || event?.id || String(m.seq),
          ...(Number.isSafeInteger(trigger) && trigger > 0 ? { triggerId: trigger } : {}),
          working: () => m.working(),
          ack: async () => {
            done();
            m.ack();
          },
          nak: async (ms) => {
            done();
            m.nak(ms);
          },
        };
      }
      return undefined;
    },
  };
}

/**
 * The table transport. A lane's head is claimed under a per-lane advisory
 * lock, and only when no change of that lane is in flight, so order per lane
 * holds even with several processes on one PostgreSQL. A claim not
 * acknowledged within ackWaitMs (a process died) is taken over.
 */
export function sqlTransport(sql: Sql, cfg: EventWorkerConfig): EventTransport {
  const LOCK_BASE = 7_021_000;
  const claimMs = cfg.ackWaitMs;
  // Which lanes have anything to do, asked once per poll for all of them in
  // one query (an index probe per lane, not a DISTINCT over a backlog): an
  // idle server then polls with that, not a claim transaction (four round
  // trips) per lane. A lane this process just published to skips the probe.
  let probe: { at: number; lanes: Promise<Set<number>> } | undefined;
  const published = new Set<number>();
  const busyLanes = () => {
    if (!probe || Date.now() - probe.at >= POLL_MS) {
      const lanes = sql
        .query<{ lane: number }>(
          `SELECT l AS lane FROM generate_series(0, $1::int - 1) AS l
           WHERE EXISTS (SELECT 1 FROM function_event_queue WHERE lane = l AND status <> 'done')`,
          [cfg.partitions],
        )
        .then((r) => new Set(r.rows.map((x) => Number(x.lane))));
      probe = { at: Date.now(), lanes };
      lanes.catch(() => (probe = undefined));
    }
    return probe.lanes;
  };
  return {
    backend: "embedded",
    ensure: async () => {},
    reset: () => {
      probe = undefined;
    },
    async stats() {
      const r = await sql.query<{ lag: string | number; in_flight: string | number; dead: string | number }>(
        `SELECT (SELECT count(*) FROM function_event_queue WHERE status <> 'done') AS lag,
                (SELECT count(*) FROM function_event_queue WHERE status = 'running' AND claimed_until >= clock_timestamp()) AS in_flight,
                (SELECT count(*) FROM function_event_dead_letters) AS dead`,
      );
      const row = r.rows[0]!;
      return { lag: Number(row.lag), inFlight: Number(row.in_flight), deadLetters: Number(row.dead) };
    },
    async publish(event, lane) {
      await sql.query(
        "INSERT INTO function_event_queue (event_id, lane, payload) VALUES ($1, $2, $3) ON CONFLICT (event_id) DO NOTHING",
        [event.id, lane, JSON.stringify(event)],
      );
      published.add(lane);
    },
    async listDeadLetters(q) {
      const before = parseToken(q.pageToken);
      const r = await sql.query<DeadRow>(
        `SELECT id, app_id, trigger_id, function_id, attempts, error, payload, created_at FROM function_event_dead_letters
         WHERE app_id = $1 AND ($2::bigint = 0 OR function_id = $2) AND ($3::bigint = 0 OR id < $3)
         ORDER BY id DESC LIMIT $4`,
        [q.appId, q.functionId ?? 0, before, q.pageSize + 1],
      );
      const page = r.rows.slice(0, q.pageSize);
      return {
        entries: page.map((row) => {
          return {
            id: String(row.id),
            event: eventOfPayload(row.payload),
            appId: Number(row.app_id),
            triggerId: Number(row.trigger_id),
            functionId: Number(row.function_id),
            attempts: Number(row.attempts),
            error: row.error,
            deadAt: new Date(row.created_at),
          };
        }),
        nextPageToken: r.rows.length > q.pageSize ? String(page[page.length - 1]!.id) : "",
      };
    },
    async replayDeadLetters(appId, opts = {}) {
      const ids = opts.ids ? numericIds(opts.ids) : null;
      if (ids && ids.length === 0) return 0;
      // One transaction: the dead letter is deleted (row-locked, so a
      // concurrent replay of it gets nothing) and queued again, or neither.
      return sql.transaction(async (tx) => {
        const r = await tx.query<{ id: string | number; trigger_id: string | number; payload: unknown }>(
          `DELETE FROM function_event_dead_letters
           WHERE app_id = $1 AND ($2::bigint[] IS NULL OR id = ANY($2::bigint[])) AND ($3::bigint = 0 OR function_id = $3)
           RETURNING id, trigger_id, payload`,
          [appId, ids, opts.functionId ?? 0],
        );
        // queued oldest first, in one statement
        const eventIds: string[] = [], lanes: number[] = [], payloads: string[] = [], triggers: number[] = [];
        for (const row of [...r.rows].sort((a, b) => Number(a.id) - Number(b.id))) {
          const event = eventOfPayload(row.payload);
          if (!event) continue;
          eventIds.push(`${event.id}~replay~${row.id}`);
          lanes.push(eventLane(cfg.partitions, event));
          payloads.push(JSON.stringify(event));
          triggers.push(Number(row.trigger_id));
        }
        if (eventIds.length === 0) return 0;
        await tx.query(
          `INSERT INTO function_event_queue (event_id, lane, payload, trigger_id)
           SELECT e, l, p, t FROM unnest($1::text[], $2::int[], $3::text[], $4::bigint[]) WITH ORDINALITY AS u(e, l, p, t, n)
           ORDER BY n
           ON CONFLICT (event_id) DO NOTHING`,
          [eventIds, lanes, payloads, triggers],
        );
        return eventIds.length;
      });
    },
    async deadLetter(d) {
      await sql.query(
        `INSERT INTO function_event_dead_letters (event_id, trigger_id, function_id, app_id, attempts, error, payload)
         VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (event_id, trigger_id) DO NOTHING`,
        [d.event.id, d.triggerId, d.functionId, d.event.app_id, d.attempts, d.error.slice(0, 1000), JSON.stringify(d.event)],
      );
    },
    async next(lane) {
      if (!published.delete(lane) && !(await busyLanes()).has(lane)) {
        await sleep(POLL_MS);
        return undefined;
      }
      const row = await sql.transaction(async (tx) => {
        await tx.query("SELECT pg_advisory_xact_lock($1)", [LOCK_BASE + lane]);
        const r = await tx.query<{ seq: number; event_id: string; trigger_id: string | number | null; payload: unknown }>(
          `UPDATE function_event_queue SET status = 'running', claimed_until = clock_timestamp() + $2 * interval '1 millisecond'
           WHERE seq = (
             SELECT seq FROM function_event_queue
             WHERE lane = $1 AND status <> 'done'
               AND (status = 'pending' OR claimed_until < clock_timestamp())
               AND NOT EXISTS (SELECT 1 FROM function_event_queue r
                               WHERE r.lane = $1 AND r.status = 'running' AND r.claimed_until >= clock_timestamp())
             ORDER BY seq LIMIT 1)
           RETURNING seq, event_id, trigger_id, payload`,
          [lane, claimMs],
        );
        return r.rows[0];
      });
      if (!row) {
        await sleep(POLL_MS);
        return undefined;
      }
      let extended = 0;
      const working = () => {
        // Extend the claim at most once a second (and four times per claim).
        if (Date.now() - extended < Math.min(1000, claimMs / 4)) return;
        extended = Date.now();
        void sql
          .query("UPDATE function_event_queue SET claimed_until = clock_timestamp() + $2 * interval '1 millisecond' WHERE seq = $1", [row.seq, claimMs])
          .catch(() => {});
      };
      const done = markWhileHandled(working, claimMs);
      return {
        event: eventOfPayload(row.payload),
        deliveryId: row.event_id,
        ...(row.trigger_id != null ? { triggerId: Number(row.trigger_id) } : {}),
        working,
        ack: async () => {
          done();
          await sql.query("DELETE FROM function_event_queue WHERE seq = $1", [row.seq]);
        },
        nak: async (ms) => {
          done();
          await sql.query(
            "UPDATE function_event_queue SET status = 'pending', claimed_until = NULL WHERE seq = $1",
            [row.seq],
          );
          await sleep(ms);
        },
      };
    },
  };
}

interface DeadRow {
  id: string | number;
  app_id: string | number;
  trigger_id: string | number;
  function_id: string | number;
  attempts: number;
  error: string;
  payload: unknown;
  created_at: Date | string;
}

/** A stored payload column (text since migration 302) as an event, or undefined. */
function eventOfPayload(payload: unknown): FunctionEvent | undefined {
  let v = payload;
  if (typeof v === "string") {
    try {
      v = JSON.parse(v);
    } catch {
      return undefined;
    }
  }
  return isEvent(v) ? v : undefined;
}

function isEvent(v: unknown): v is FunctionEvent {
  return typeof v === "object" && v !== null && typeof (v as FunctionEvent).id === "string";
}
