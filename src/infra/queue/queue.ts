// The one durable queue of the service (analytics batches, function
// events; docs/analytics.md, docs/functions.md). Two backends with one
// contract: NATS JetStream (scale-out) and a table in the application
// database (no NATS configured). Publish resolves only once the message is
// stored; consumers in any number of processes share the work, with bounded
// concurrency, or, with lanes, one message in flight per lane across every
// process (in order per lane). A message in hand is marked in progress every
// third of ackWaitMs, so a process that dies hands its messages to another
// one ackWaitMs after the last mark. The handler decides each message's
// outcome: ack, retry later, or dead-letter (one dead letter per note, the
// message acked); a handler that throws is retried with backoff and
// dead-lettered after maxAttempts. Operators list and replay dead letters.
import { appError, errorDetail } from "../../kernel/errors.js";
import type { NatsSource } from "../nats/nats-link.js";
import type { Sql } from "../storage/sql.js";

export type Attrs = Record<string, string>;

export interface QueueMessage {
  /** The publisher's message id. */
  id: string;
  data: Uint8Array;
  /** 1 on first delivery. */
  attempt: number;
  /** The attributes of the dead letter this message replays ({} otherwise). */
  attrs: Attrs;
}

/** One dead letter of a message (a message may fail for several targets, e.g. triggers). */
export interface DeadNote {
  error: string;
  /** Default: the message's delivery attempt. */
  attempts?: number;
  /** Kept with the dead letter, filterable, and carried by its replay. */
  attrs?: Attrs;
  /** Tells apart several dead letters of one delivery (each is stored once). */
  key?: string;
}

/** What becomes of a handled message: acknowledged, delivered again after retryInMs, or dead-lettered (and acknowledged). */
export type Outcome = { ack: true } | { retryInMs: number } | { dead: DeadNote[] };

/** Thrown by a handler for a message that can never succeed (bad payload): dead-lettered at once. */
export class PermanentError extends Error {
  override readonly name = "PermanentError";
}

/**
 * A failure of a dependency rather than of the message: the database (or
 * another backend) answered `unavailable`. Such a message is retried with
 * backoff for as long as the outage lasts and never dead-lettered, so an
 * outage longer than maxAttempts backoffs loses nothing.
 */
export function isTransient(err: unknown): boolean {
  return errorDetail(err)?.code === "unavailable";
}

/** Resolving with nothing acknowledges; throwing retries with backoff (see RetryPolicy). */
export type MessageHandler = (msg: QueueMessage) => Promise<Outcome | void>;

export interface QueueConsumer {
  /** Stops fetching, hands back what was not started, waits for the messages in flight. */
  stop(): Promise<void>;
}

export interface QueueStatsData {
  backend: "jetstream" | "embedded";
  /** Accepted and not yet processed (waiting or in flight). */
  lag: number;
  inFlight: number;
  deadLetters: number;
}

export interface DeadLetter {
  /** Opaque: the JetStream sequence or the table's row id. */
  id: string;
  msgId: string;
  data: Uint8Array;
  topic: string;
  attrs: Attrs;
  attempts: number;
  lastError: string;
  deadAt: Date;
}

export interface DeadLetterFilter {
  /** Topic pattern, NATS-style ("*" = one token): "*.12" matches "db.12". */
  topic?: string;
  /** Every one of these attributes must match. */
  attrs?: Attrs;
}

export interface Queue {
  readonly backend: "jetstream" | "embedded";
  /** Largest message publish accepts, in bytes. */
  readonly maxMessageBytes: number;
  /** Resolves once the backend is reachable and set up. */
  ready(): Promise<void>;
  /**
   * Stores a message durably; a msgId seen before (within the de-duplication
   * window) is accepted again and reported as duplicate. The topic (dot
   * tokens) goes with it and its dead letters. Throws the catalogue error
   * `unavailable` when the queue cannot store it.
   */
  publish(msgId: string, data: Uint8Array, opts?: { topic?: string }): Promise<{ duplicate: boolean }>;
  consume(handler: MessageHandler, opts: { concurrency: number }): QueueConsumer;
  stats(): Promise<QueueStatsData>;
  /** Oldest first (newestFirst: newest first); the page token is the last id returned. */
  listDeadLetters(q: DeadLetterFilter & { pageSize: number; pageToken: string; newestFirst?: boolean }): Promise<{ entries: DeadLetter[]; nextPageToken: string }>;
  /**
   * Queues the matching dead letters again (those of ids, or every one) and
   * removes them, each at most once; returns how many were queued.
   */
  replayDeadLetters(q: DeadLetterFilter & { ids?: string[] }): Promise<number>;
  close(): Promise<void>;
}

export interface QueueOptions {
  /** The queue's name: its rows in the table backend, its metrics label. */
  name: string;
  sql: Sql;
  /** JetStream on this connection; unset selects the table backend. */
  nats?: NatsSource;
  /** Ordered lanes: a message goes to lane of(data) < count, one in flight per lane. */
  lanes?: { count: number; of(data: Uint8Array): number };
  retry?: Partial<RetryPolicy>;
  /** Redelivery this long after the last progress mark (the takeover time when a process dies). */
  ackWaitMs?: number;
  jetstream: {
    stream: string;
    subjectPrefix: string;
    /** Durable consumer (lanes: `<durable>-<lane>`); default `<name>-workers`. */
    durable?: string;
    /** Keep handled messages and dead letters this long in one stream; unset: a work queue with a `<stream>_DLQ` stream. */
    retentionMs?: number;
    /** Msg-id de-duplication window (default 10 minutes). */
    duplicateWindowMs?: number;
    publishTimeoutMs?: number;
  };
  /** Table backend: idle poll interval (other processes' publishes are seen this late at most). */
  pollMs?: number;
}

/** JetStream redelivers a message this long after its last progress mark. */
export const DEFAULT_ACK_WAIT_MS = 5000;

/** How often a message in progress is marked: three times per ack wait. */
export function progressEveryMs(ackWaitMs: number): number {
  return Math.max(100, Math.floor(ackWaitMs / 3));
}

export interface RetryPolicy {
  /** Deliveries before a message is dead-lettered. */
  maxAttempts: number;
  /** Backoff after the first failure; doubles per attempt up to maxBackoffMs. */
  baseBackoffMs: number;
  maxBackoffMs: number;
}

export const defaultRetryPolicy: RetryPolicy = { maxAttempts: 5, baseBackoffMs: 500, maxBackoffMs: 30_000 };

export function backoffMs(policy: RetryPolicy, attempt: number): number {
  return Math.min(policy.maxBackoffMs, policy.baseBackoffMs * 2 ** Math.max(0, attempt - 1));
}

export function errorText(err: unknown): string {
  const e = err as { rawMessage?: string; message?: string; cause?: { message?: string } };
  const base = e?.rawMessage ?? e?.message ?? String(err);
  const cause = e?.cause?.message;
  return (cause && cause !== base ? `${base}: ${cause}` : base).slice(0, 2000);
}

/** What a handler's run comes to: its outcome, or for a throw the retry policy's (dead at once for a PermanentError). */
export async function runHandler(handler: MessageHandler, msg: QueueMessage, policy: RetryPolicy): Promise<Outcome> {
  try {
    return (await handler(msg)) ?? { ack: true };
  } catch (err) {
    if (err instanceof PermanentError || (msg.attempt >= policy.maxAttempts && !isTransient(err))) return { dead: [{ error: errorText(err ?? "failed") }] };
    return { retryInMs: backoffMs(policy, msg.attempt) };
  }
}

/** The id a dead letter is stored under once per delivery (and note key). */
export const deadKey = (msgId: string, note: DeadNote) => `${msgId}~dead${note.key ? `~${note.key}` : ""}`;

/** The msg id of a dead letter's replay: unique per dead letter, so a concurrent replay of it is stored once. */
export const replayId = (msgId: string, deadId: string) => `${msgId.split("~replay~")[0]}~replay~${deadId}`;

/** A dead-letter page token ("" = from the start). */
export function parsePageToken(t: string): number {
  if (t === "") return 0;
  if (!/^[0-9]+$/.test(t) || !Number.isSafeInteger(Number(t))) {
    throw appError("validation_failed", "Invalid page_token.", { fields: { page_token: ["Invalid page token."] } });
  }
  return Number(t);
}

/** Positive integer ids; anything else cannot name a dead letter. */
export function numericIds(ids: string[]): number[] {
  return ids.filter((s) => /^[0-9]+$/.test(s)).map(Number).filter((n) => Number.isSafeInteger(n) && n > 0);
}

export function matchesAttrs(attrs: Attrs, want: Attrs | undefined): boolean {
  return Object.entries(want ?? {}).every(([k, v]) => attrs[k] === v);
}

/** A NATS-style topic pattern ("*" = one token, ">" = the rest) as a regular expression. */
export function topicPattern(pattern: string): RegExp {
  const body = pattern
    .split(".")
    .map((t) => (t === "*" ? "[^.]+" : t === ">" ? ".+" : t.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")))
    .join("\\.");
  return new RegExp(`^${body}$`);
}

/** Runs tasks with at most `limit` at once; acquire() waits for a slot. */
export class Semaphore {
  private active = 0;
  private waiters: Array<() => void> = [];
  private idleWaiters: Array<() => void> = [];
  constructor(private readonly limit: number) {}
  async acquire(): Promise<void> {
    if (this.active < this.limit) {
      this.active++;
      return;
    }
    await new Promise<void>((resolve) => this.waiters.push(resolve));
  }
  release(): void {
    const next = this.waiters.shift();
    if (next) next();
    else {
      this.active--;
      if (this.active === 0) for (const w of this.idleWaiters.splice(0)) w();
    }
  }
  get inUse(): number {
    return this.active;
  }
  async idle(): Promise<void> {
    if (this.active === 0) return;
    await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
  }
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
