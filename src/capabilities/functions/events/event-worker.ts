// Event triggers. Two halves, both started by start() and stopped by stop():
//   - the drainer: for every application with an enabled db event trigger,
//     keeps the capture triggers installed (change-capture.ts: re-installed
//     every resyncMs and when the triggers change, also those changed by
//     another process; the operator API installs them itself through
//     syncApp before it answers, so it never waits for this) and moves the
//     captured changes, oldest first, into the queue (infra/queue: JetStream,
//     or a PostgreSQL table without NATS; id "db:<app>:<seq>", so a change
//     published twice is stored once);
//   - the dispatcher: changes are spread over `partitions` lanes by
//     hash(source, app, table), the queue's ordered lanes: each lane has one
//     change in flight across every process, so a table's changes are
//     handled one at a time in publish order (in order per table) while other
//     lanes proceed. Each matching trigger runs the function's active
//     version with the change as ctx.event; a failed run is retried in place
//     with exponential backoff (keeping the order), and after `maxAttempts`
//     the change is dead-lettered for that trigger and the lane moves on.
//     Delivery is at least once: a process that dies mid-change leaves it
//     unacknowledged and it is delivered again.
//     Operators list and replay dead letters (listDeadLetters,
//     replayDeadLetters); a replayed one runs only its own trigger.
// The drainer reads embedded and remote databases alike through
// ChangeCaptureDb (database-capture.ts picks the executor).
// CMS changes enter through emitCmsChange (called by the CMS authoring side).
// Other consumers of the same capture (realtime table subscriptions) add
// tables to capture (deps.extraWatch) and receive every drained change, in
// seq order, before it is forgotten (deps.changeSink); the function queue
// gets only the changes a function trigger watches.
import { randomUUID } from "node:crypto";
import type { NatsSource } from "../../../infra/nats/nats-link.js";
import type { Sql } from "../../../infra/storage/sql.js";
import type { FunctionStore } from "../function-store.js";
import type { FunctionRuntime } from "../function-runtime.js";
import { deleteChanges, readChanges, syncCapture, type CapturedChange, type ChangeCaptureDb, type Operation } from "./change-capture.js";
import { errorDetail } from "../../../kernel/errors.js";
import { type DeadNote, type Queue, type QueueMessage } from "../../../infra/queue/queue.js";
import { createQueue } from "../../../infra/queue/create-queue.js";
import { Semaphore } from "../../../kernel/semaphore.js";
import { backoffMs, sleep } from "../../../kernel/retry.js";

export interface EventWorkerConfig {
  /** JetStream stream (default PB_FUNCTION_EVENTS) and subject prefix (default pulsebase.fn). */
  stream: string;
  subjectPrefix: string;
  durable: string;
  /** How often captured db changes are drained. */
  drainIntervalMs: number;
  /** Capture triggers are re-installed at least this often (to follow ALTER TABLE). */
  resyncMs: number;
  /** Changes moved per application per drain. */
  drainBatch: number;
  /** Applications drained at once (each one's changes in order; a slow one does not hold up the others). */
  drainConcurrency: number;
  /** Runs per (change, trigger) before it is dead-lettered. */
  maxAttempts: number;
  baseBackoffMs: number;
  maxBackoffMs: number;
  /**
   * Ordered lanes: a change goes to lane hash(source, app, table) % partitions,
   * each lane has its own durable consumer with one message in flight. A slow
   * or failing function holds up only its lane.
   */
  partitions: number;
  /**
   * Redelivery this long after the last progress mark (a change in hand is
   * marked every third of it): the takeover time when a process dies.
   */
  ackWaitMs: number;
  duplicateWindowMs: number;
  /** Messages (handled changes, dead letters) are removed from the stream after this long. */
  retentionMs: number;
}

export const DEFAULT_EVENT_WORKER_CONFIG: EventWorkerConfig = {
  stream: "PB_FUNCTION_EVENTS",
  subjectPrefix: "pulsebase.fn",
  durable: "function-events",
  drainIntervalMs: 250,
  resyncMs: 30_000,
  drainBatch: 500,
  drainConcurrency: 8,
  maxAttempts: 5,
  baseBackoffMs: 500,
  maxBackoffMs: 30_000,
  partitions: 8,
  ackWaitMs: 5_000,
  duplicateWindowMs: 10 * 60_000,
  retentionMs: 7 * 24 * 3600_000,
};

/** JetStream names of the function-event queue for a NATS namespace. */
export function functionEventStreams(ns: string): Pick<EventWorkerConfig, "stream" | "subjectPrefix"> {
  return { stream: `${ns.toUpperCase()}_FUNCTION_EVENTS`, subjectPrefix: `${ns}.fn` };
}

/** What a function receives as ctx.event. */
export interface FunctionEvent {
  /** Unique per change: "db:<app>:<seq>" or "cms:<uuid>". */
  id: string;
  source: "db" | "cms";
  app_id: number;
  /** The table (source db) or collection (source cms). */
  table?: string;
  collection?: string;
  operation: Operation;
  before: Record<string, unknown> | null;
  after: Record<string, unknown> | null;
  /** When the change happened (ISO 8601). */
  at: string;
}

/** The stable lane of a stored event: FNV-1a (32 bits) of (source, app, table or collection). */
function eventLane(partitions: number, data: Uint8Array): number {
  const e = eventOf(data);
  const key = e ? `${e.source}\u0000${e.app_id}\u0000${(e.source === "cms" ? e.collection : e.table) ?? ""}` : "";
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) {
    h ^= key.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) % partitions;
}

/** A stored payload as an event, or undefined (nothing can run it). */
function eventOf(data: Uint8Array): FunctionEvent | undefined {
  try {
    const v = JSON.parse(new TextDecoder().decode(data)) as FunctionEvent;
    return typeof v === "object" && v !== null && typeof v.id === "string" ? v : undefined;
  } catch {
    return undefined;
  }
}

/** The queue of function events (the event worker delivers them; worker processes read its gauges). */
export function functionEventQueue(sql: Sql, nats: NatsSource | undefined, cfg: EventWorkerConfig): Queue {
  return createQueue({
    name: "function-events",
    sql,
    nats,
    lanes: { count: cfg.partitions, of: (data) => eventLane(cfg.partitions, data) },
    ackWaitMs: cfg.ackWaitMs,
    jetstream: { stream: cfg.stream, subjectPrefix: cfg.subjectPrefix, durable: cfg.durable, retentionMs: cfg.retentionMs, duplicateWindowMs: cfg.duplicateWindowMs },
  });
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

/** The operator side of the dead letters. */
export interface DeadLetterStore {
  /** Newest first; of one function when functionId > 0. */
  listDeadLetters(q: { appId: number; functionId?: number; pageSize: number; pageToken: string }): Promise<{ entries: StoredDeadLetter[]; nextPageToken: string }>;
  /**
   * Queues dead letters again (every one of the application, or of
   * functionId, when ids is undefined) and removes them; returns how many
   * were queued. Ids of other applications, unknown or already replayed
   * ones count 0.
   */
  replayDeadLetters(appId: number, opts?: { ids?: string[]; functionId?: number }): Promise<number>;
}

const TRIGGER = "Pb-Trigger-Id";
const FUNCTION = "Pb-Function-Id";

export interface CmsChange {
  collection: string;
  operation: Operation;
  before: Record<string, unknown> | null;
  after: Record<string, unknown> | null;
}

export interface EventWorker extends DeadLetterStore {
  /** The queue's backend and what it holds (metrics). */
  readonly queue: Pick<Queue, "backend" | "stats">;
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Publishes a CMS change for the app's cms event triggers (no-op when none watches it). */
  emitCmsChange(appId: number, change: CmsChange): Promise<void>;
  /** One drain pass now, waiting for it (and for drains already in flight). */
  drainOnce(): Promise<void>;
  /**
   * Makes the application's capture triggers match its enabled db event
   * triggers now (read from the service database under the app's capture
   * lock), so a write committed after this resolves is captured. Rejects
   * when the database cannot be reached; `missing` lists watched tables that
   * do not exist. The operator API calls it before answering.
   */
  syncApp(appId: number): Promise<{ missing: string[] }>;
}

const MISSING_RETRY_MS = 2_000;
/** Class key of the per-application capture lock (pg_advisory_xact_lock(class, app)). */
const CAPTURE_LOCK_CLASS = 7_022;
/** Locked capture syncs at once, at most: each holds a pool connection while it talks to the app's database. */
const MAX_LOCKED_SYNCS = 4;
/** After a failed drain of an application (database down, not linked) it is skipped this long, doubling up to 30 s. */
const FAILURE_BACKOFF_MS = 500;
const MAX_FAILURE_BACKOFF_MS = 30_000;

export function createEventWorker(deps: {
  sql: Sql;
  store: FunctionStore;
  runtime: FunctionRuntime;
  capture: ChangeCaptureDb;
  /** JetStream (any number of processes); without it the PostgreSQL table queue. */
  nats?: NatsSource;
  config?: Partial<EventWorkerConfig>;
  onError?: (err: unknown) => void;
  /**
   * More tables to capture, by application (every operation): read on `q`
   * (the capture lock's connection inside a sync), of one application or all.
   */
  extraWatch?: (q: Sql, onlyApp?: number) => Promise<Map<number, Set<string>>>;
  /**
   * Every drained change of an application, in seq order, before the
   * capture table forgets it; a rejection leaves them captured (the drain is
   * retried, so the sink may see a change again: it dedupes by seq).
   */
  changeSink?: (appId: number, changes: CapturedChange[]) => Promise<void>;
}): EventWorker {
  const cfg = { ...DEFAULT_EVENT_WORKER_CONFIG, ...deps.config };
  const { sql, store, runtime, capture } = deps;
  const queue = functionEventQueue(sql, deps.nats, cfg);
  const report = (err: unknown) => deps.onError?.(err);
  let stopped = true;
  let drainTimer: NodeJS.Timeout | undefined;
  let draining: Promise<void> = Promise.resolve();
  let consumer: { stop(): Promise<void> } | undefined;
  const installed = new Map<number, { signature: string; at: number; missing: boolean }>();
  /** Applications whose last capture sync failed (retried by the drainer even when nobody watches them). */
  const unsynced = new Set<number>();
  const failures = new Map<number, { count: number; until: number }>();
  const inFlight = new Map<number, Promise<void>>();
  const lastStarted = new Map<number, number>();

  async function publish(event: FunctionEvent): Promise<void> {
    await queue.publish(event.id, new TextEncoder().encode(JSON.stringify(event)), { topic: `${event.source}.${event.app_id}` });
  }

  /** Applications with enabled db triggers and what they watch, in one query (all applications, or one; on `q`, default the pool). */
  async function watchedDbTables(onlyApp?: number, q: Sql = sql): Promise<Map<number, Map<string, Set<Operation>>>> {
    const r = await q.query<{ app_id: number; target: string; operations: string[] }>(
      `SELECT app_id, target, operations FROM function_triggers WHERE kind = 'event' AND source = 'db' AND enabled
       ${onlyApp === undefined ? "" : "AND app_id = $1"} ORDER BY app_id, target`,
      onlyApp === undefined ? [] : [onlyApp],
    );
    const out = new Map<number, Map<string, Set<Operation>>>();
    for (const row of r.rows) {
      const appId = Number(row.app_id);
      let tables = out.get(appId);
      if (!tables) out.set(appId, (tables = new Map()));
      let ops = tables.get(row.target);
      if (!ops) tables.set(row.target, (ops = new Set()));
      for (const op of row.operations) ops.add(op as Operation);
    }
    return out;
  }

  /** What the function triggers watch (`fn`, published to the queue) and what is captured (`all`: with deps.extraWatch). */
  async function watchedAll(onlyApp?: number, q: Sql = sql): Promise<{ fn: Map<number, Map<string, Set<Operation>>>; all: Map<number, Map<string, Set<Operation>>> }> {
    const fn = await watchedDbTables(onlyApp, q);
    if (!deps.extraWatch) return { fn, all: fn };
    const extra = await deps.extraWatch(q, onlyApp);
    const all = new Map<number, Map<string, Set<Operation>>>();
    for (const [appId, tables] of fn) all.set(appId, new Map([...tables].map(([t, ops]) => [t, new Set(ops)])));
    for (const [appId, tables] of extra) {
      if (onlyApp !== undefined && appId !== onlyApp) continue;
      let m = all.get(appId);
      if (!m) all.set(appId, (m = new Map()));
      for (const t of tables) {
        // one trigger per table: SQLite names (and so the capture's trigger names) ignore ASCII case
        const same = [...m.keys()].find((k) => k.toLowerCase() === t.toLowerCase()) ?? t;
        m.set(same, new Set<Operation>(["insert", "update", "delete"]));
      }
    }
    return { fn, all };
  }

  const signatureOf = (watch: Map<string, Set<Operation>>) => JSON.stringify([...watch].map(([t, ops]) => [t, [...ops].sort()]));

  /**
   * Runs fn holding the application's capture lock: in this process a queue
   * per application, across processes (PostgreSQL) a transaction-scoped
   * advisory lock. A sync reads the watched tables inside the lock, so one
   * working from a list read before a trigger was added can never run after
   * (and undo) the sync that installed it. fn gets the connection to read
   * them on: the lock's transaction (PostgreSQL), so a sync holds exactly
   * one pool connection and never waits for a second (with a pool of one
   * it would wait forever); the pool on PGlite, which is one process: the
   * queue is enough (and a PGlite transaction would block other queries).
   */
  const appLocks = new Map<number, Promise<void>>();
  // A locked sync holds its connection while it talks to the app's database
  // (maybe remote and slow): at most half the pool (1 to MAX_LOCKED_SYNCS)
  // is held by syncs, the rest stays for requests.
  const lockedSyncs = new Semaphore(Math.max(1, Math.min(MAX_LOCKED_SYNCS, Math.floor((sql.maxConnections ?? 2 * MAX_LOCKED_SYNCS) / 2))));
  async function withCaptureLock<T>(appId: number, fn: (q: Sql) => Promise<T>): Promise<T> {
    const prev = appLocks.get(appId) ?? Promise.resolve();
    let release!: () => void;
    const mine = new Promise<void>((r) => (release = r));
    const tail = prev.then(() => mine);
    appLocks.set(appId, tail);
    await prev;
    try {
      if (sql.kind !== "postgres") return await fn(sql);
      await lockedSyncs.acquire();
      try {
        return await sql.transaction(async (tx) => {
          await tx.query("SELECT pg_advisory_xact_lock($1, ($2::bigint % 2147483647)::int)", [CAPTURE_LOCK_CLASS, appId]);
          return fn(tx);
        });
      } finally {
        lockedSyncs.release();
      }
    } finally {
      release();
      if (appLocks.get(appId) === tail) appLocks.delete(appId);
    }
  }

  async function syncApp(appId: number): Promise<{ missing: string[] }> {
    try {
      // The app's database is looked up before the lock (that lookup needs
      // a pool connection of its own); inside it only the app's database is
      // reached, besides the lock's own connection.
      const target = (await capture.pin?.(appId)) ?? capture;
      return await withCaptureLock(appId, async (q) => {
        const watch = (await watchedAll(appId, q)).all.get(appId) ?? new Map<string, Set<Operation>>();
        const { missing } = await syncCapture(target, appId, watch);
        installed.set(appId, { signature: signatureOf(watch), at: Date.now(), missing: missing.length > 0 });
        failures.delete(appId);
        unsynced.delete(appId);
        return { missing };
      });
    } catch (err) {
      // The drainer tries again (with its backoff), also when nobody
      // watches the app now: capture triggers left behind would fill the
      // change table. Without a linked database there is nothing to reach.
      if (errorDetail(err)?.code === "database_not_linked") unsynced.delete(appId);
      else unsynced.add(appId);
      throw err;
    }
  }

  async function drainApp(appId: number, watch: Map<string, Set<Operation>>, fnWatch: Map<string, Set<Operation>>): Promise<void> {
    const prev = installed.get(appId);
    const age = prev ? Date.now() - prev.at : Infinity;
    // A watched table that does not exist yet is looked for again after MISSING_RETRY_MS.
    if (!prev || prev.signature !== signatureOf(watch) || age > cfg.resyncMs || (prev.missing && age > MISSING_RETRY_MS)) {
      await syncApp(appId);
    }
    await drainChanges(appId, fnWatch);
    // Nobody watches it any more: its capture triggers are gone and what they captured is published.
    if (watch.size === 0 && installed.get(appId)?.signature === signatureOf(watch)) installed.delete(appId);
  }

  async function drainChanges(appId: number, fnWatch: Map<string, Set<Operation>>): Promise<void> {
    const lower = new Map([...fnWatch].map(([t, ops]) => [t.toLowerCase(), ops]));
    for (;;) {
      const changes = await readChanges(capture, appId, cfg.drainBatch);
      if (changes.length === 0) return;
      for (const c of changes) {
        // (without another consumer every captured table is a function's: published as before)
        if (deps.changeSink && !lower.get(c.table.toLowerCase())?.has(c.operation)) continue;
        await publish({
          id: `db:${appId}:${c.seq}`,
          source: "db",
          app_id: appId,
          table: c.table,
          operation: c.operation,
          before: c.before,
          after: c.after,
          at: c.at,
        });
      }
      await deps.changeSink?.(appId, changes);
      await deleteChanges(capture, appId, changes[changes.length - 1]!.seq);
      if (changes.length < cfg.drainBatch) return;
    }
  }

  /**
   * Starts a drain for each due application that is not being drained, up to
   * drainConcurrency at once, least recently started first. A pass does not
   * wait for a slow database (a remote server that does not answer): its
   * drain stays in flight and the other applications go on being drained.
   */
  async function startDrains(): Promise<Promise<void>[]> {
    const { fn: fnWatched, all: watched } = await watchedAll();
    // Applications whose capture this process installed (or failed to sync)
    // and that nobody watches now (triggers disabled or deleted, perhaps
    // elsewhere): one last pass drops their capture triggers and publishes
    // what was captured.
    for (const appId of [...installed.keys(), ...unsynced]) if (!watched.has(appId)) watched.set(appId, new Map());
    const now = Date.now();
    const due = [...watched]
      .filter(([appId]) => !inFlight.has(appId) && (failures.get(appId)?.until ?? 0) <= now)
      .sort(([a], [b]) => (lastStarted.get(a) ?? 0) - (lastStarted.get(b) ?? 0));
    for (const [appId, watch] of due) {
      if (inFlight.size >= cfg.drainConcurrency) break;
      lastStarted.set(appId, now);
      const p = drainApp(appId, watch, fnWatched.get(appId) ?? new Map())
        .then(
          () => void failures.delete(appId),
          (err: unknown) => {
            installed.delete(appId);
            const count = (failures.get(appId)?.count ?? 0) + 1;
            failures.set(appId, { count, until: Date.now() + backoffMs({ baseBackoffMs: FAILURE_BACKOFF_MS, maxBackoffMs: MAX_FAILURE_BACKOFF_MS }, count) });
            report(err);
          },
        )
        .finally(() => inFlight.delete(appId));
      inFlight.set(appId, p);
    }
    for (const appId of lastStarted.keys()) if (!watched.has(appId)) lastStarted.delete(appId);
    return [...inFlight.values()];
  }

  async function drainOnce(): Promise<void> {
    await Promise.all(await startDrains());
  }

  async function handle(m: QueueMessage): Promise<{ dead: DeadNote[] }> {
    const ev = eventOf(m.data);
    if (!ev) return { dead: [] }; // not an event: nothing can ever run it
    const target = ev.source === "cms" ? ev.collection : ev.table;
    let triggers = await store.eventTriggers(ev.app_id, ev.source, target ?? "", ev.operation);
    // A replayed dead letter runs its own trigger only (if it is still
    // enabled and still watches this change); the others had succeeded.
    const only = m.attrs[TRIGGER];
    if (only !== undefined) triggers = triggers.filter((t) => String(t.id) === only);
    const dead: DeadNote[] = [];
    for (const t of triggers) {
      let lastError = "";
      let attempts = 0;
      let done = false;
      while (attempts < cfg.maxAttempts) {
        attempts++;
        const r = await runtime.runEvent(ev.app_id, t.function_id, t.id, ev, `${m.id}#${attempts}`);
        if (!r) {
          lastError = "the function cannot run: no active version, or the plan does not include functions";
          break; // retrying cannot help: dead-letter now
        }
        if (r.outcome === "ok") {
          done = true;
          break;
        }
        lastError = r.error ?? r.outcome;
        if (attempts < cfg.maxAttempts) {
          if (stopped) throw new Error("stopping: the change will be delivered again");
          await sleep(backoffMs(cfg, attempts));
        }
      }
      if (!done) dead.push({ key: String(t.id), attempts, error: lastError, attrs: { [TRIGGER]: String(t.id), [FUNCTION]: String(t.function_id) } });
    }
    return { dead };
  }

  /** A change is retried in place (in order); one that could not be handled at all is left for redelivery (at least once). */
  const dispatch = async (m: QueueMessage) => {
    try {
      return await handle(m);
    } catch (err) {
      if (!stopped) report(err);
      return { retryInMs: cfg.baseBackoffMs };
    }
  };

  const appTopic = (appId: number) => `*.${appId}`;

  return {
    queue,
    async start() {
      if (!stopped) return;
      stopped = false;
      // Not awaited: with NATS unreachable (since start) the process starts
      // anyway; the drainer and the dispatchers set the stream up once it answers.
      queue.ready().catch(() => {});
      const tick = () => {
        draining = startDrains()
          .then(() => {}, report)
          .finally(() => {
            if (!stopped) drainTimer = setTimeout(tick, cfg.drainIntervalMs);
          });
      };
      tick();
      consumer = queue.consume(dispatch, { concurrency: cfg.partitions });
    },

    async stop() {
      stopped = true;
      if (drainTimer) clearTimeout(drainTimer);
      await draining;
      await Promise.all([...inFlight.values(), consumer?.stop()]);
      consumer = undefined;
    },

    async emitCmsChange(appId, change) {
      const triggers = await store.eventTriggers(appId, "cms", change.collection, change.operation);
      if (triggers.length === 0) return;
      await publish({
        id: `cms:${randomUUID()}`,
        source: "cms",
        app_id: appId,
        collection: change.collection,
        operation: change.operation,
        before: change.before,
        after: change.after,
        at: new Date().toISOString(),
      });
    },

    drainOnce,
    syncApp,

    async listDeadLetters(q) {
      const attrs = q.functionId ? { [FUNCTION]: String(q.functionId) } : undefined;
      const page = await queue.listDeadLetters({ topic: appTopic(q.appId), attrs, newestFirst: true, pageSize: q.pageSize, pageToken: q.pageToken });
      return {
        entries: page.entries.map((d) => ({
          id: d.id,
          event: eventOf(d.data),
          appId: Number(d.topic.slice(d.topic.lastIndexOf(".") + 1)),
          triggerId: Number(d.attrs[TRIGGER] ?? 0),
          functionId: Number(d.attrs[FUNCTION] ?? 0),
          attempts: d.attempts,
          error: d.lastError,
          deadAt: d.deadAt,
        })),
        nextPageToken: page.nextPageToken,
      };
    },

    async replayDeadLetters(appId, opts = {}) {
      return queue.replayDeadLetters({ ids: opts.ids, topic: appTopic(appId), attrs: opts.functionId ? { [FUNCTION]: String(opts.functionId) } : undefined });
    },
  };
}

