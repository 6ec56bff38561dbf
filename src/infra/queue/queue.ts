// The durable batch queue behind the asynchronous analytics endpoints. Two
// backends implement it: NATS JetStream (scale-out) and a table in the
// embedded database (no NATS configured). Both give the same guarantees:
// publish resolves only once the message is stored, consumers share the
// work, a failed message is retried with backoff and, after maxAttempts
// deliveries, moved to a dead-letter store that operators list and replay.
import { errorDetail } from "../../kernel/errors.js";

export interface QueueMessage {
  /** The publisher's message id (the batch id). */
  id: string;
  data: Uint8Array;
  /** 1 on first delivery. */
  attempt: number;
}

/** Thrown by a handler for a message that can never succeed (bad payload). */
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

export type MessageHandler = (msg: QueueMessage) => Promise<void>;

export interface ConsumeOptions {
  /** Messages processed at once by this consumer instance. */
  concurrency: number;
}

export interface QueueConsumer {
  /** Stops fetching, waits for the messages in flight. */
  stop(): Promise<void>;
}

export interface QueueStatsData {
  backend: "jetstream" | "embedded";
  /** Accepted and not yet processed (waiting or in flight). */
  lag: number;
  inFlight: number;
  deadLetters: number;
}

export interface DeadLetterEntry {
  id: string;
  msgId: string;
  data: Uint8Array;
  attempts: number;
  lastError: string;
  deadAt: Date;
}

export interface BatchQueue {
  readonly backend: "jetstream" | "embedded";
  /** Largest message publish accepts, in bytes. */
  readonly maxMessageBytes: number;
  /**
   * Stores a message durably; a msgId seen before (within the de-duplication
   * window) is accepted again and reported as duplicate. Throws the catalogue
   * error `unavailable` when the queue cannot store it.
   */
  publish(msgId: string, data: Uint8Array): Promise<{ duplicate: boolean }>;
  /** Handler resolving = ack; throwing = retry with backoff or dead-letter. */
  consume(handler: MessageHandler, opts: ConsumeOptions): QueueConsumer;
  stats(): Promise<QueueStatsData>;
  listDeadLetters(pageSize: number, pageToken: string): Promise<{ entries: DeadLetterEntry[]; nextPageToken: string }>;
  /** Puts dead letters back on the queue (every one when ids is undefined). */
  replayDeadLetters(ids?: string[]): Promise<number>;
  close(): Promise<void>;
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
