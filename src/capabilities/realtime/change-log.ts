// Where drained table changes go for realtime subscribers, and how a
// subscription that reconnects gets what it missed (docs/realtime.md,
// "Resume"). Two implementations of one ChangeLog:
//   - JetStream (NATS_URL set): one stream per namespace,
//     `<NS>_REALTIME`, subject `<ns>.rtc.<appId>`, file storage, messages
//     kept for the resume window (max_age). Every drained change is
//     published with the message id `db:<app>:<capture seq>` (a drain that is
//     retried, or two servers draining one application, store it once). A
//     change's cursor is its stream sequence. Every server follows the
//     stream with one ordered consumer (which resumes after its last
//     sequence when NATS comes back), and a resume reads the application's
//     subject from the cursor on.
//   - In process (embedded, one process): a bounded ring per application
//     (the resume window, at most RING_ENTRIES changes); cursors carry the
//     process's boot id, so a cursor of an earlier process is a resync.
// A cursor older than the window (something after it may be gone) or not
// this log's is answered "resync".
// The same log carries CMS changes (cms.ts) as a second feed: in the
// same stream under `<ns>.rtc.<appId>.cms` (ordered consumer and resume
// read only their feed's subjects), or a ring of its own in process.
import { randomBytes } from "node:crypto";
import { DeliverPolicy, jetstream, jetstreamManager, RetentionPolicy, StorageType, type JetStreamClient, type JetStreamManager } from "@nats-io/jetstream";
import { nanos, type NatsConnection } from "@nats-io/transport-node";
import type { NatsLink } from "../../infra/nats/nats-link.js";
import { appError } from "../../kernel/errors.js";
import { sleep } from "../../kernel/retry.js";

export type Row = Record<string, unknown>;
export type Operation = "insert" | "update" | "delete";

/** One captured change (change-capture.ts of the functions' event triggers). */
export interface TableChange {
  /** The capture's sequence in the application's database. */
  seq: number;
  table: string;
  operation: Operation;
  before: Row | null;
  after: Row | null;
  /** When it was captured (ISO 8601). */
  at: string;
}

export interface LogEntry<C = TableChange> {
  /** The log's sequence (the cursor's number). */
  seq: number;
  appId: number;
  change: C;
}

export interface ChangeLog<C = TableChange> {
  readonly shared: boolean;
  /** Stores drained changes (in order); resolves once stored. */
  append(appId: number, changes: C[]): Promise<void>;
  /** Every stored change of every application, in log order, live, until the returned function is called. */
  follow(fn: (e: LogEntry<C>) => void): () => void;
  /** The changes of the application after `cursor`, at most `max`; "resync" when some may be gone (or too many). */
  replay(appId: number, cursor: string, max: number): Promise<LogEntry<C>[] | "resync">;
  cursorOf(e: LogEntry<C>): string;
  stop(): Promise<void>;
}

/** Where one feed's changes go in the JetStream stream. */
export interface LogFeed<C> {
  /** The subject of an application's changes (under the stream's prefix). */
  subject(prefix: string, appId: number): string;
  /** The subjects of every application's changes (the ordered consumer's filter). */
  filter(prefix: string): string;
  /** The message id (JetStream stores a message id once within its duplicate window). */
  msgId(appId: number, c: C): string;
}

/** Table changes: `<prefix>.<appId>`, stored once per capture sequence. */
export const TABLE_FEED: LogFeed<TableChange> = {
  subject: (prefix, appId) => `${prefix}.${appId}`,
  filter: (prefix) => `${prefix}.*`,
  msgId: (appId, c) => `db:${appId}:${c.seq}`,
};

/** Changes a resume replays at most; further behind is a resync. */
export const MAX_REPLAY = 10_000;
const RING_ENTRIES = 10_000;

export function memoryChangeLog<C = TableChange>(windowMs: number, now: () => number = Date.now): ChangeLog<C> {
  const boot = randomBytes(4).toString("hex");
  let seq = 0;
  type Ring = { entries: Array<LogEntry<C> & { t: number }>; dropped: number };
  const rings = new Map<number, Ring>();
  const listeners = new Set<(e: LogEntry<C>) => void>();
  const trim = (r: Ring) => {
    const before = now() - windowMs;
    let n = 0;
    while (n < r.entries.length && (r.entries.length - n > RING_ENTRIES || r.entries[n]!.t < before)) n++;
    if (n > 0) {
      r.dropped = r.entries[n - 1]!.seq;
      r.entries.splice(0, n);
    }
  };
  return {
    shared: false,
    async append(appId, changes) {
      let r = rings.get(appId);
      if (!r) rings.set(appId, (r = { entries: [], dropped: 0 }));
      for (const change of changes) {
        const e = { seq: ++seq, appId, change, t: now() };
        r.entries.push(e);
        for (const fn of listeners) fn(e);
      }
      trim(r);
    },
    follow(fn) {
      listeners.add(fn);
      return () => listeners.delete(fn);
    },
    async replay(appId, cursor, max) {
      const m = /^([0-9a-f]{8})\.(\d+)$/.exec(cursor);
      if (!m || m[1] !== boot || Number(m[2]) > seq) return "resync";
      const after = Number(m[2]);
      const r = rings.get(appId);
      if (!r) return [];
      trim(r);
      if (after < r.dropped) return "resync";
      const out = r.entries.filter((e) => e.seq > after);
      return out.length > max ? "resync" : out;
    },
    cursorOf: (e) => `${boot}.${e.seq}`,
    async stop() {
      listeners.clear();
    },
  };
}

interface Wire<C> {
  a: number;
  c: C;
}

/** The JetStream names of the realtime change stream of a namespace. */
export function realtimeStream(ns: string): { stream: string; prefix: string } {
  return { stream: `${ns.toUpperCase()}_REALTIME`, prefix: `${ns}.rtc` };
}

export function jetStreamChangeLog<C = TableChange>(
  nats: NatsLink,
  namespace: string,
  windowMs: number,
  onError: (err: unknown) => void,
  feed: LogFeed<C> = TABLE_FEED as unknown as LogFeed<C>,
): ChangeLog<C> {
  const { stream, prefix } = realtimeStream(namespace);
  const subject = (appId: number) => feed.subject(prefix, appId);
  const enc = new TextEncoder();
  const dec = new TextDecoder();
  const listeners = new Set<(e: LogEntry<C>) => void>();
  let stopped = false;
  let ready: Promise<{ js: JetStreamClient; jsm: JetStreamManager }> | undefined;
  let following: Promise<void> | undefined;
  let stopFollow: (() => void) | undefined;

  async function setup(nc: NatsConnection): Promise<{ js: JetStreamClient; jsm: JetStreamManager }> {
    const jsm = await jetstreamManager(nc);
    const cfg = {
      name: stream,
      subjects: [`${prefix}.>`],
      storage: StorageType.File,
      retention: RetentionPolicy.Limits,
      max_age: nanos(windowMs),
      // (JetStream wants the duplicate window within max_age)
      duplicate_window: nanos(Math.min(windowMs, 120_000)),
    };
    try {
      await jsm.streams.add(cfg);
    } catch {
      await jsm.streams.update(stream, cfg);
    }
    return { js: jetstream(nc), jsm };
  }

  /** The stream's clients; retried (not cached) after a failure. */
  function clients(): Promise<{ js: JetStreamClient; jsm: JetStreamManager }> {
    ready ??= nats.connection(5_000).then(setup);
    ready.catch(() => (ready = undefined));
    return ready;
  }

  const toEntry = (seq: number, data: Uint8Array): LogEntry<C> | undefined => {
    try {
      const w = JSON.parse(dec.decode(data)) as Wire<C>;
      return { seq, appId: w.a, change: w.c };
    } catch {
      return undefined;
    }
  };

  /** One ordered consumer for the process: from the first new message, and after a failure from the one after the last seen. */
  async function followLoop(): Promise<void> {
    let last = 0;
    for (let attempt = 0; !stopped; attempt++) {
      try {
        const { js } = await clients();
        // (one subject as a string: the client sends filter_subject, which NATS before 2.10 takes)
        const filter_subjects = feed.filter(prefix);
        const consumer = await js.consumers.get(
          stream,
          last ? { filter_subjects, deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: last + 1 } : { filter_subjects, deliver_policy: DeliverPolicy.New },
        );
        const msgs = await consumer.consume();
        stopFollow = () => void msgs.stop();
        if (stopped) msgs.stop();
        attempt = 0;
        for await (const m of msgs) {
          last = m.seq;
          const e = toEntry(m.seq, m.data);
          if (e) for (const fn of listeners) fn(e);
        }
      } catch (err) {
        if (!stopped) onError(err);
      }
      if (!stopped) await sleep(Math.min(2_000, 100 * 2 ** Math.min(attempt, 5)));
    }
  }

  return {
    shared: true,
    async append(appId, changes) {
      const { js } = await clients();
      for (const c of changes) {
        await js.publish(subject(appId), enc.encode(JSON.stringify({ a: appId, c } satisfies Wire<C>)), { msgID: feed.msgId(appId, c), timeout: 5_000 });
      }
    },
    follow(fn) {
      listeners.add(fn);
      following ??= followLoop();
      return () => listeners.delete(fn);
    },
    async replay(appId, cursor, max) {
      if (!/^\d{1,15}$/.test(cursor)) return "resync";
      const after = Number(cursor);
      let c: { js: JetStreamClient; jsm: JetStreamManager };
      try {
        c = await clients();
      } catch (err) {
        throw appError("unavailable", "Changes cannot be resumed now (NATS is unreachable): try again.", { cause: err, retryAfterSeconds: 1 });
      }
      const info = await c.jsm.streams.info(stream);
      const { first_seq: first, last_seq: last } = info.state;
      // something after the cursor expired (first_seq moved past it), or the stream is not the one the cursor came from
      if (after + 1 < first || after > last) return "resync";
      const out: LogEntry<C>[] = [];
      for (let seq = after + 1; seq <= last; ) {
        // (STREAM.MSG.GET takes next_by_subj since NATS 2.9; the client's type names only seq and last_by_subj)
        const m = await c.jsm.streams.getMessage(stream, { next_by_subj: subject(appId), seq } as unknown as { seq: number });
        if (!m || m.seq > last) break;
        if (out.length >= max) return "resync";
        const e = toEntry(m.seq, m.data);
        if (e) out.push(e);
        seq = m.seq + 1;
      }
      return out;
    },
    cursorOf: (e) => String(e.seq),
    async stop() {
      stopped = true;
      listeners.clear();
      stopFollow?.();
      await following?.catch(() => {});
    },
  };
}
