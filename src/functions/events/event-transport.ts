// Where event-trigger changes wait between capture and delivery. Two
// transports with one contract: JetStream (NATS_URL set; any number of
// processes) and a PostgreSQL table (the embedded default, no external
// server). Both keep each lane in order with one change in flight per lane.
import { headers as natsHeaders, nanos, type NatsConnection } from "@nats-io/transport-node";
import { AckPolicy, jetstream, jetstreamManager, RetentionPolicy, StorageType } from "@nats-io/jetstream";
import type { Sql } from "../../storage/sql.js";
import type { EventWorkerConfig, FunctionEvent } from "./event-worker.js";

export interface TransportMessage {
  /** undefined when the stored payload is not an event (nothing can run it). */
  event: FunctionEvent | undefined;
  /** Keeps the claim alive during long retries. */
  working(): void;
  ack(): Promise<void>;
  /** Leaves it for redelivery after delayMs. */
  nak(delayMs: number): Promise<void>;
}

export interface DeadLetter {
  event: FunctionEvent;
  triggerId: number;
  functionId: number;
  attempts: number;
  error: string;
}

export interface EventTransport {
  ensure(): Promise<void>;
  publish(event: FunctionEvent, lane: number): Promise<void>;
  deadLetter(d: DeadLetter): Promise<void>;
  /** The next change of a lane, or undefined after waiting about a second. */
  next(lane: number): Promise<TransportMessage | undefined>;
  /** Forget set-up state after a failure (set up again on next use). */
  reset(): void;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export function jetStreamTransport(nats: NatsConnection, cfg: EventWorkerConfig): EventTransport {
  const js = jetstream(nats);
  const durableOf = (p: number) => `${cfg.durable}-${p}`;
  let ensured: Promise<void> | undefined;
  const ensure = () => {
    ensured ??= (async () => {
      const jsm = await jetstreamManager(nats);
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
        await jsm.consumers.add(cfg.stream, {
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
  return {
    ensure,
    reset: () => {
      ensured = undefined;
    },
    async publish(event, lane) {
      await js.publish(`${cfg.subjectPrefix}.events.${lane}.${event.source}.${event.app_id}`, JSON.stringify(event), { msgID: event.id });
    },
    async deadLetter(d) {
      const h = natsHeaders();
      h.set("Pb-Trigger-Id", String(d.triggerId));
      h.set("Pb-Function-Id", String(d.functionId));
      h.set("Pb-Attempts", String(d.attempts));
      h.set("Pb-Error", d.error.slice(0, 1000).replace(/[\r\n]/g, " "));
      await js.publish(`${cfg.subjectPrefix}.dead.${d.event.source}.${d.event.app_id}`, JSON.stringify(d.event), {
        headers: h,
        msgID: `${d.event.id}~dead~${d.triggerId}`,
      });
    },
    async next(lane) {
      await ensure();
      const consumer = await js.consumers.get(cfg.stream, durableOf(lane));
      const batch = await consumer.fetch({ max_messages: 1, expires: 1000 });
      for await (const m of batch) {
        let event: FunctionEvent | undefined;
        try {
          event = JSON.parse(new TextDecoder().decode(m.data)) as FunctionEvent;
        } catch {
          event = undefined;
        }
        return {
          event,
          working: () => m.working(),
          ack: async () => m.ack(),
          nak: async (ms) => m.nak(ms),
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
  return {
    ensure: async () => {},
    reset: () => {},
    async publish(event, lane) {
      await sql.query(
        "INSERT INTO function_event_queue (event_id, lane, payload) VALUES ($1, $2, $3) ON CONFLICT (event_id) DO NOTHING",
        [event.id, lane, JSON.stringify(event)],
      );
    },
    async deadLetter(d) {
      await sql.query(
        `INSERT INTO function_event_dead_letters (event_id, trigger_id, function_id, app_id, attempts, error, payload)
         VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (event_id, trigger_id) DO NOTHING`,
        [d.event.id, d.triggerId, d.functionId, d.event.app_id, d.attempts, d.error.slice(0, 1000), JSON.stringify(d.event)],
      );
    },
    async next(lane) {
      const row = await sql.transaction(async (tx) => {
        await tx.query("SELECT pg_advisory_xact_lock($1)", [LOCK_BASE + lane]);
        const r = await tx.query<{ seq: number; payload: unknown }>(
          `UPDATE function_event_queue SET status = 'running', claimed_until = clock_timestamp() + $2 * interval '1 millisecond'
           WHERE seq = (
             SELECT seq FROM function_event_queue
             WHERE lane = $1 AND status <> 'done'
               AND (status = 'pending' OR claimed_until < clock_timestamp())
               AND NOT EXISTS (SELECT 1 FROM function_event_queue r
                               WHERE r.lane = $1 AND r.status = 'running' AND r.claimed_until >= clock_timestamp())
             ORDER BY seq LIMIT 1)
           RETURNING seq, payload`,
          [lane, claimMs],
        );
        return r.rows[0];
      });
      if (!row) {
        await sleep(250);
        return undefined;
      }
      const payload = typeof row.payload === "string" ? safeParse(row.payload) : row.payload;
      let extended = 0;
      return {
        event: isEvent(payload) ? payload : undefined,
        working: () => {
          // Extend the claim at most once a second.
          if (Date.now() - extended < 1000) return;
          extended = Date.now();
          void sql
            .query("UPDATE function_event_queue SET claimed_until = clock_timestamp() + $2 * interval '1 millisecond' WHERE seq = $1", [row.seq, claimMs])
            .catch(() => {});
        },
        ack: async () => {
          await sql.query("DELETE FROM function_event_queue WHERE seq = $1", [row.seq]);
        },
        nak: async (ms) => {
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

function safeParse(s: string): unknown {
  try {
    return JSON.parse(s);
  } catch {
    return undefined;
  }
}

function isEvent(v: unknown): v is FunctionEvent {
  return typeof v === "object" && v !== null && typeof (v as FunctionEvent).id === "string";
}
