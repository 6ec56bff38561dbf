// Warm isolates per function version. An isolate serves one invocation at a
// time; a version keeps up to `isolatesPerVersion` of them, the process at
// most `maxIsolates`. When the process bound is reached an idle isolate of
// another version (least recently used) is released to make room; otherwise
// the caller waits (its wait counts against its own timeout). Isolates idle
// longer than `idleMs` are released by a sweep.
import { deadline } from "../../kernel/deadlines.js";
import { FunctionIsolate } from "./function-isolate.js";

interface Waiter {
  key: string;
  /** Arrival order across all keys (fairness). */
  seq: number;
  resolve: (lease: Lease) => void;
  reject: (err: Error) => void;
  create: () => Promise<FunctionIsolate>;
  cancel: () => void;
}

export interface Lease {
  isolate: FunctionIsolate;
  cold: boolean;
}

export class PoolTimeoutError extends Error {}

interface Slot {
  idle: FunctionIsolate[];
  /** Isolates of this key, idle, busy or being created. */
  count: number;
}

export class IsolatePool {
  private slots = new Map<string, Slot>();
  private total = 0;
  /** Per-key FIFO queues of callers waiting for an isolate. */
  private waiters = new Map<string, Waiter[]>();
  private sweeper: NodeJS.Timeout;
  private closed = false;
  private seq = 0;
  /** Isolates handed out and not yet released (for stats: the pool otherwise tracks only idle ones). */
  private leased = new Set<FunctionIsolate>();

  constructor(
    private readonly maxIsolates: number,
    private readonly perKey: number,
    private readonly idleMs: number,
  ) {
    this.sweeper = setInterval(() => this.sweep(), Math.max(1000, Math.min(idleMs, 30_000)));
    this.sweeper.unref();
  }

  private slot(key: string): Slot {
    let s = this.slots.get(key);
    if (!s) {
      s = { idle: [], count: 0 };
      this.slots.set(key, s);
    }
    return s;
  }

  /** Takes a warm isolate of `key` (at once, without a promise), or creates one with `create`. */
  acquire(key: string, create: () => Promise<FunctionIsolate>, waitMs: number): Lease | Promise<Lease> {
    if (this.closed) return Promise.reject(new Error("sandbox closed"));
    const now = this.tryAcquire(key, create);
    if (now) return now;
    return new Promise<Lease>((resolve, reject) => {
      const waiter: Waiter = {
        key,
        seq: this.seq++,
        resolve,
        reject,
        create,
        cancel: deadline(waitMs, () => {
          this.dropWaiter(waiter);
          reject(new PoolTimeoutError("no isolate became free in time"));
        }),
      };
      const q = this.waiters.get(key);
      if (q) q.push(waiter);
      else this.waiters.set(key, [waiter]);
    });
  }

  private tryAcquire(key: string, create: () => Promise<FunctionIsolate>): Lease | Promise<Lease> | undefined {
    const s = this.slot(key);
    let warm = s.idle.pop();
    // never hand out one disposed while idle (it cannot be, short of a bug: be safe)
    while (warm?.disposed) {
      s.count--;
      this.total--;
      warm = s.idle.pop();
    }
    if (warm) {
      warm.busy = true;
      this.leased.add(warm);
      return { isolate: warm, cold: false };
    }
    if (s.count >= this.perKey) return undefined;
    if (this.total >= this.maxIsolates && !this.evictOneIdle()) return undefined;
    s.count++;
    this.total++;
    return create().then(
      (isolate) => {
        isolate.busy = true;
        this.leased.add(isolate);
        return { isolate, cold: true };
      },
      (err: unknown) => {
        this.forget(key);
        throw err;
      },
    );
  }

  /** Returns a leased isolate; a disposed one is dropped. */
  release(key: string, isolate: FunctionIsolate): void {
    this.leased.delete(isolate);
    isolate.busy = false;
    isolate.lastUsed = Date.now();
    if (isolate.disposed || this.closed) {
      isolate.dispose();
      this.forget(key);
      return;
    }
    const q = this.waiters.get(key);
    const w = q?.[0];
    // Hand the isolate straight to the next caller of the same version,
    // unless the pool is full and a caller of another version came first.
    if (w && (this.total < this.maxIsolates || !this.olderWaiterElsewhere(key, w.seq))) {
      q!.shift();
      if (q!.length === 0) this.waiters.delete(key);
      w.cancel();
      isolate.busy = true;
      this.leased.add(isolate);
      w.resolve({ isolate, cold: false });
      return;
    }
    this.slot(key).idle.push(isolate);
    this.pump();
  }

  private forget(key: string): void {
    const s = this.slot(key);
    s.count--;
    this.total--;
    if (s.count <= 0 && s.idle.length === 0) this.slots.delete(key);
    this.pump();
  }

  private olderWaiterElsewhere(key: string, seq: number): boolean {
    for (const [k, q] of this.waiters) if (k !== key && q[0] && q[0].seq < seq) return true;
    return false;
  }

  /** Lets waiters in, oldest first, as far as room allows. */
  private pump(): void {
    if (this.waiters.size === 0) return;
    const byAge = [...this.waiters].sort((a, b) => a[1][0]!.seq - b[1][0]!.seq);
    for (const [key, q] of byAge) {
      while (q.length > 0) {
        const w = q[0]!;
        const p = this.tryAcquire(key, w.create);
        if (!p) break;
        q.shift();
        w.cancel();
        if (p instanceof Promise) p.then(w.resolve, w.reject);
        else w.resolve(p);
      }
      if (q.length === 0) this.waiters.delete(key);
    }
  }

  private dropWaiter(w: Waiter): void {
    const q = this.waiters.get(w.key);
    if (!q) return;
    const i = q.indexOf(w);
    if (i >= 0) q.splice(i, 1);
    if (q.length === 0) this.waiters.delete(w.key);
  }

  private evictOneIdle(): boolean {
    let victim: { key: string; iso: FunctionIsolate } | undefined;
    for (const [key, s] of this.slots) {
      for (const iso of s.idle) {
        if (!victim || iso.lastUsed < victim.iso.lastUsed) victim = { key, iso };
      }
    }
    if (!victim) return false;
    const s = this.slot(victim.key);
    s.idle = s.idle.filter((i) => i !== victim.iso);
    victim.iso.dispose();
    s.count--;
    this.total--;
    if (s.count <= 0) this.slots.delete(victim.key);
    return true;
  }

  private sweep(): void {
    const cutoff = Date.now() - this.idleMs;
    this.evict((_, iso) => iso.lastUsed < cutoff);
  }

  /** Releases the idle isolates that `pred` picks (e.g. of a deactivated version, or idle too long). */
  evict(pred: (key: string, iso: FunctionIsolate) => boolean): void {
    for (const [key, s] of this.slots) {
      const keep: FunctionIsolate[] = [];
      for (const iso of s.idle) {
        if (pred(key, iso)) {
          iso.dispose();
          s.count--;
          this.total--;
        } else keep.push(iso);
      }
      s.idle = keep;
      if (s.count <= 0) this.slots.delete(key);
    }
    this.pump();
  }

  /**
   * Counts for metrics. heapBytes: each isolate's last sample, taken while
   * it was idle; nothing here calls into an isolate (a synchronous read of
   * one that is running would wait for it on the service's thread).
   */
  stats(): { total: number; idle: number; keys: number; waiting: number; heapBytes: number } {
    let idle = 0;
    let heapBytes = 0;
    for (const s of this.slots.values()) {
      idle += s.idle.length;
      for (const iso of s.idle) heapBytes += iso.heapSampled;
    }
    for (const iso of this.leased) heapBytes += iso.heapSampled;
    let waiting = 0;
    for (const q of this.waiters.values()) waiting += q.length;
    return { total: this.total, idle, keys: this.slots.size, waiting, heapBytes };
  }

  close(): void {
    this.closed = true;
    clearInterval(this.sweeper);
    for (const q of this.waiters.values()) {
      for (const w of q) {
        w.cancel();
        w.reject(new Error("sandbox closed"));
      }
    }
    this.waiters.clear();
    // runs still going (or their left-over work) stop with the sandbox
    for (const iso of this.leased) iso.dispose();
    this.leased.clear();
    for (const s of this.slots.values()) for (const iso of s.idle) iso.dispose();
    this.slots.clear();
    this.total = 0;
  }
}
