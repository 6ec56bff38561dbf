// Who runs next on a shared database resource (the engine processes, the
// connections to remote libSQL servers): one FIFO queue per owner (an
// application), served round robin, one request per turn, and never more
// than `running` requests of one owner at once. So an application that
// floods its queue with runaway statements holds at most its own share; the
// others keep theirs and are served in turn (docs/database.md, "Scheduling"). The queue
// decides when a request may start; its user decides where it runs.
//
// A request that cannot start in time is refused rather than left waiting:
// an owner's queue holds at most `queued` requests (more are refused at
// once), and a request still queued `waitMs` after it arrived is refused
// then. A request whose signal fires (the function run that made it ended)
// leaves the queue at once; once running, its user is told (onAbort) and
// decides how to stop it.
import { deadline } from "../../kernel/deadlines.js";

export type OwnerKey = number | string;

export interface FairLimits {
  /** Requests of one owner running at once. */
  running: number;
  /** Requests of one owner waiting to start; more are refused at once. */
  queued: number;
  /** How long a request may wait to start, in milliseconds. */
  waitMs: number;
}

/** Why a request left the queue without starting. */
export type RefusalReason = "queue_full" | "queue_timeout" | "cancelled" | "shutdown";

export interface FairJob {
  readonly owner: OwnerKey;
  /** Fires when the request is no longer wanted (its function run ended). */
  readonly signal?: AbortSignal;
  /** The request left the queue without starting. */
  refuse(reason: RefusalReason): void;
  /** The signal fired while the request was running. */
  onAbort?(): void;
}

interface Owner<J> {
  key: OwnerKey;
  queue: J[];
  running: number;
}

interface Entry<J> {
  job: J;
  owner: Owner<J>;
  /** Cancels the wait deadline (while queued). */
  cancelWait: (() => void) | undefined;
  removeAbort: (() => void) | undefined;
  state: "queued" | "running" | "done";
}

export interface OwnerStats {
  owner: OwnerKey;
  queued: number;
  running: number;
}

export class FairQueue<J extends FairJob> {
  private readonly owners = new Map<OwnerKey, Owner<J>>();
  /** Owners with queued requests, in the order they get their next turn. */
  private turn: Owner<J>[] = [];
  private readonly entries = new Map<J, Entry<J>>();
  queuedCount = 0;
  runningCount = 0;
  /** Requests refused, by reason, since start (for metrics). */
  readonly refused: Record<RefusalReason, number> = { queue_full: 0, queue_timeout: 0, cancelled: 0, shutdown: 0 };

  constructor(readonly limits: FairLimits) {}

  private ownerOf(key: OwnerKey): Owner<J> {
    let o = this.owners.get(key);
    if (!o) {
      o = { key, queue: [], running: 0 };
      this.owners.set(key, o);
    }
    return o;
  }

  private forgetIfIdle(o: Owner<J>): void {
    if (o.running === 0 && o.queue.length === 0) this.owners.delete(o.key);
  }

  /**
   * Queues a request. Refuses it at once (refuse("queue_full") or
   * refuse("cancelled")) when its owner's queue is full or its signal has
   * already fired; the caller then takes jobs with take().
   */
  push(job: J): void {
    if (job.signal?.aborted) {
      this.refused.cancelled++;
      job.refuse("cancelled");
      return;
    }
    const o = this.ownerOf(job.owner);
    if (o.queue.length >= this.limits.queued) {
      this.forgetIfIdle(o);
      this.refused.queue_full++;
      job.refuse("queue_full");
      return;
    }
    const e: Entry<J> = { job, owner: o, cancelWait: undefined, removeAbort: undefined, state: "queued" };
    e.cancelWait = deadline(this.limits.waitMs, () => this.drop(e, "queue_timeout"));
    const signal = job.signal;
    if (signal) {
      const onAbort = () => this.aborted(e);
      signal.addEventListener("abort", onAbort, { once: true });
      e.removeAbort = () => signal.removeEventListener("abort", onAbort);
    }
    this.entries.set(job, e);
    if (o.queue.length === 0) this.turn.push(o);
    o.queue.push(job);
    this.queuedCount++;
  }

  /**
   * The next request to start: the first owner in turn order that is under
   * its cap gives its oldest request and goes to the back of the turn. The
   * request counts as running until finish(job).
   */
  take(): J | undefined {
    const cap = this.limits.running;
    for (let i = 0; i < this.turn.length; i++) {
      const o = this.turn[i]!;
      if (o.running >= cap) continue;
      const job = o.queue.shift()!;
      this.turn.splice(i, 1);
      if (o.queue.length > 0) this.turn.push(o);
      const e = this.entries.get(job)!;
      e.cancelWait?.();
      e.cancelWait = undefined;
      e.state = "running";
      o.running++;
      this.queuedCount--;
      this.runningCount++;
      return job;
    }
    return undefined;
  }

  /** The request stopped running (answered, failed or stopped): its owner's slot is free again. */
  finish(job: J): void {
    const e = this.entries.get(job);
    if (!e || e.state !== "running") return;
    e.state = "done";
    e.removeAbort?.();
    this.entries.delete(job);
    e.owner.running--;
    this.runningCount--;
    this.forgetIfIdle(e.owner);
  }

  private aborted(e: Entry<J>): void {
    e.removeAbort = undefined;
    if (e.state === "queued") this.drop(e, "cancelled");
    else if (e.state === "running") e.job.onAbort?.();
  }

  private drop(e: Entry<J>, reason: RefusalReason): void {
    if (e.state !== "queued") return;
    e.state = "done";
    e.cancelWait?.();
    e.removeAbort?.();
    this.entries.delete(e.job);
    const o = e.owner;
    const i = o.queue.indexOf(e.job);
    if (i >= 0) o.queue.splice(i, 1);
    if (o.queue.length === 0) {
      const t = this.turn.indexOf(o);
      if (t >= 0) this.turn.splice(t, 1);
    }
    this.queuedCount--;
    this.forgetIfIdle(o);
    this.refused[reason]++;
    e.job.refuse(reason);
  }

  /** Refuses every queued request (shutdown). */
  clear(reason: RefusalReason): void {
    for (const e of [...this.entries.values()]) if (e.state === "queued") this.drop(e, reason);
  }

  /** Owners with requests queued or running, for metrics. */
  ownerStats(): OwnerStats[] {
    return [...this.owners.values()].map((o) => ({ owner: o.key, queued: o.queue.length, running: o.running }));
  }
}
