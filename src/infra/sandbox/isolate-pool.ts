// Warm isolates per function version. An isolate serves one invocation at a
// time; a version keeps up to `perKey` of them, the process at most
// `maxIsolates`. When the process bound is reached an idle isolate of
// another version (least recently used) is released to make room; otherwise
// the caller waits (its wait counts against its own timeout). Isolates idle
// longer than `idleMs` are released by a sweep.
//
// Hostile tenants (docs/functions-operator.md, "Sharing the isolates"):
// - An application holds at most `appIsolates` isolates at once, counted by
//   runs holding one (a run awaiting a timer or a fetch holds it), so one
//   application cannot take every isolate. Its further runs wait in its own
//   FIFO queue; the applications with waiting runs are served round robin,
//   one run per turn, as the SQL engines' fair queue does
//   (src/infra/libsql/fair-queue.ts). That queue is not reused: whether a run
//   can start here depends on more than its owner's count (a warm isolate of
//   its version, the version's bound, room in the process and in the heap
//   budgets), and a run blocked on its version must not hold up its
//   application's runs of other versions.
// - Heap: each isolate's heap sample (taken while it is idle) counts against
//   its application and the process. An isolate holding more than
//   `keepHeapBytes` after a run is disposed, not pooled. An application over
//   `appHeapBytes` gets no new isolate until its own idle ones are released
//   (never another application's); over `heapBudgetBytes` the least recently
//   used idle isolates of any application go first.
import { deadline } from "../../kernel/deadlines.js";
import { FunctionIsolate, HEAP_SAMPLE_MS } from "./function-isolate.js";

export interface PoolLimits {
  maxIsolates: number;
  /** Isolates of one key (function version and memory limit). */
  perKey: number;
  idleMs: number;
  /** Isolates one application holds in runs at once. */
  appIsolates: number;
  /** Heap the process's isolates keep (sampled), in bytes. */
  heapBudgetBytes: number;
  /** Heap one application's isolates keep, in bytes. */
  appHeapBytes: number;
  /** An isolate holding more after a run is disposed rather than pooled. */
  keepHeapBytes: number;
  /**
   * Runs of one application waiting for an isolate at once (default 16 per
   * isolate of its share, at least 256); more are refused at once (PoolBusyError). Each
   * holds its input (a request body, an event) after its client may have
   * gone, so the queue may not grow with the rate of requests (issue #28).
   */
  appQueue?: number;
}

interface Waiter {
  key: string;
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
/** The application already has PoolLimits.appQueue runs waiting. */
export class PoolBusyError extends Error {}

interface App {
  id: number;
  /** Isolates leased to its runs or being created for them. */
  busy: number;
  /** Isolates it has, idle, busy or being created. */
  isolates: number;
  /** Heap its isolates hold, as last sampled. */
  heap: number;
  /** Its runs waiting for an isolate, oldest first. */
  queue: Waiter[];
}

interface Slot {
  app: App;
  idle: FunctionIsolate[];
  /** Isolates of this key, idle, busy or being created. */
  count: number;
}

export interface AppIsolateStats {
  app: number;
  busy: number;
  isolates: number;
  heapBytes: number;
  waiting: number;
}

export interface PoolStats {
  total: number;
  idle: number;
  keys: number;
  waiting: number;
  heapBytes: number;
  /** Applications holding isolates or waiting for one (at most maxIsolates plus those waiting). */
  apps: AppIsolateStats[];
  /** Isolates disposed after a run for holding more than keepHeapBytes, since start. */
  disposedOverHeap: number;
}

export class IsolatePool {
  private slots = new Map<string, Slot>();
  private apps = new Map<number, App>();
  /** Applications with waiting runs, in the order they get their next turn. */
  private turn: App[] = [];
  private total = 0;
  private heap = 0;
  /** The heap sample each isolate is counted with (in heap and its app's heap). */
  private counted = new Map<FunctionIsolate, number>();
  /** Idle isolates whose last run's end was not sampled (the isolate's throttle), to sample shortly. */
  private stale = new Set<FunctionIsolate>();
  private cancelResample: (() => void) | undefined;
  private sweeper: NodeJS.Timeout;
  private closed = false;
  private disposedOverHeap = 0;
  /** Isolates handed out and not yet released. */
  private leased = new Set<FunctionIsolate>();

  constructor(private readonly limits: PoolLimits) {
    this.sweeper = setInterval(() => this.sweep(), Math.max(1000, Math.min(limits.idleMs, 30_000)));
    this.sweeper.unref();
  }

  private app(id: number): App {
    let a = this.apps.get(id);
    if (!a) {
      a = { id, busy: 0, isolates: 0, heap: 0, queue: [] };
      this.apps.set(id, a);
    }
    return a;
  }

  private forgetIfIdle(a: App): void {
    if (a.isolates <= 0 && a.busy <= 0 && a.queue.length === 0) this.apps.delete(a.id);
  }

  /** Takes a warm isolate of `key` (at once, without a promise), or creates one with `create`. */
  acquire(key: string, appId: number, create: () => Promise<FunctionIsolate>, waitMs: number): Lease | Promise<Lease> {
    if (this.closed) return Promise.reject(new Error("sandbox closed"));
    const app = this.app(appId);
    const now = this.tryAcquire(key, app, create);
    if (now) return now;
    const maxQueue = this.limits.appQueue ?? Math.max(256, this.limits.appIsolates * 16);
    if (app.queue.length >= maxQueue) {
      this.forgetIfIdle(app);
      return Promise.reject(new PoolBusyError(`too many runs of this application are waiting for an isolate (${maxQueue}); retry shortly`));
    }
    return new Promise<Lease>((resolve, reject) => {
      const waiter: Waiter = {
        key,
        resolve,
        reject,
        create,
        cancel: deadline(waitMs, () => {
          this.dropWaiter(app, waiter);
          reject(new PoolTimeoutError("no isolate became free in time"));
        }),
      };
      if (app.queue.length === 0) this.turn.push(app);
      app.queue.push(waiter);
    });
  }

  private tryAcquire(key: string, app: App, create: () => Promise<FunctionIsolate>): Lease | Promise<Lease> | undefined {
    if (app.busy >= this.limits.appIsolates) return undefined;
    let s = this.slots.get(key);
    if (s) {
      let warm = s.idle.pop();
      // never hand out one disposed while idle (a call left behind by its last run)
      while (warm?.disposed) {
        this.remove(s, key, warm);
        warm = s.idle.pop();
      }
      if (warm) {
        warm.busy = true;
        this.leased.add(warm);
        app.busy++;
        return { isolate: warm, cold: false };
      }
      if (s.count >= this.limits.perKey) return undefined;
    }
    if (!this.makeRoom(app)) return undefined;
    if (!s) {
      s = { app, idle: [], count: 0 };
      this.slots.set(key, s);
    }
    s.count++;
    this.total++;
    app.isolates++;
    app.busy++;
    return create().then(
      (isolate) => {
        isolate.busy = true;
        this.leased.add(isolate);
        this.counted.set(isolate, 0);
        this.account(app, isolate);
        return { isolate, cold: true };
      },
      (err: unknown) => {
        const slot = this.slots.get(key);
        if (slot && !this.closed) {
          app.busy--;
          this.remove(slot, key, undefined);
          this.pump();
        }
        throw err;
      },
    );
  }

  /** Room for one more isolate of `app`: its own heap share first (its own idle isolates), then the process's bounds. */
  private makeRoom(app: App): boolean {
    while (app.heap >= this.limits.appHeapBytes) if (!this.evictIdle(app)) return false;
    while (this.total >= this.limits.maxIsolates || this.heap >= this.limits.heapBudgetBytes) if (!this.evictIdle(undefined)) return false;
    return true;
  }

  /** Counts the isolate's latest heap sample. */
  private account(app: App, iso: FunctionIsolate): void {
    const was = this.counted.get(iso);
    if (was === undefined) return;
    const now = iso.heapSampled;
    this.counted.set(iso, now);
    app.heap += now - was;
    this.heap += now - was;
  }

  /** Forgets an isolate (disposed, or `iso` undefined: one whose creation failed). */
  private remove(s: Slot, key: string, iso: FunctionIsolate | undefined): void {
    const app = s.app;
    if (iso) {
      const was = this.counted.get(iso) ?? 0;
      this.counted.delete(iso);
      this.stale.delete(iso);
      app.heap -= was;
      this.heap -= was;
    }
    s.count--;
    this.total--;
    app.isolates--;
    if (s.count <= 0 && s.idle.length === 0) this.slots.delete(key);
    this.forgetIfIdle(app);
  }

  /** Returns a leased isolate; a disposed one, or one holding more heap than keepHeapBytes, is dropped. */
  release(key: string, isolate: FunctionIsolate): void {
    this.leased.delete(isolate);
    isolate.busy = false;
    isolate.lastUsed = Date.now();
    const s = this.slots.get(key);
    if (!s || this.closed) {
      isolate.dispose();
      return;
    }
    const app = s.app;
    app.busy--;
    if (isolate.disposed) {
      isolate.dispose();
      this.remove(s, key, isolate);
      this.pump();
      return;
    }
    this.account(app, isolate);
    if (isolate.heapSampled > this.limits.keepHeapBytes) {
      this.disposedOverHeap++;
      isolate.dispose();
      this.remove(s, key, isolate);
      this.pump();
      return;
    }
    s.idle.push(isolate);
    if (isolate.heapStale) this.resampleSoon(isolate);
    this.trim(app);
    this.pump();
  }

  /** What idle isolates keep back within the application's share and the process's budget (least recently used go first). */
  private trim(app: App): void {
    while (app.heap > this.limits.appHeapBytes && this.evictIdle(app));
    while (this.heap > this.limits.heapBudgetBytes && this.evictIdle(undefined));
  }

  private resampleSoon(iso: FunctionIsolate): void {
    this.stale.add(iso);
    this.cancelResample ??= deadline(HEAP_SAMPLE_MS, () => {
      this.cancelResample = undefined;
      this.resample();
    });
  }

  /** Samples the idle isolates whose last run's end was not sampled, and applies the heap bounds. */
  private resample(): void {
    const stale = [...this.stale];
    this.stale.clear();
    for (const [key, s] of this.slots) {
      for (const iso of [...s.idle]) {
        if (!stale.includes(iso)) continue;
        iso.sampleIdleHeap();
        this.account(s.app, iso);
        if (iso.heapSampled > this.limits.keepHeapBytes) {
          this.disposedOverHeap++;
          s.idle = s.idle.filter((i) => i !== iso);
          iso.dispose();
          this.remove(s, key, iso);
        } else this.trim(s.app);
      }
    }
    this.pump();
  }

  /**
   * Lets waiting runs in as far as room allows: the applications in turn,
   * each its oldest run that can start (a run waiting for its version's
   * bound does not hold up its application's other versions); an
   * application served goes to the back of the turn.
   */
  private pump(): void {
    let served = true;
    while (served && this.turn.length > 0) {
      served = false;
      for (let i = 0; i < this.turn.length && !served; i++) {
        const app = this.turn[i]!;
        if (app.busy >= this.limits.appIsolates) continue;
        const blocked = new Set<string>();
        for (let j = 0; j < app.queue.length; j++) {
          const w = app.queue[j]!;
          if (blocked.has(w.key)) continue;
          const p = this.tryAcquire(w.key, app, w.create);
          if (!p) {
            if (app.busy >= this.limits.appIsolates) break;
            blocked.add(w.key);
            continue;
          }
          app.queue.splice(j, 1);
          w.cancel();
          this.turn.splice(i, 1);
          if (app.queue.length > 0) this.turn.push(app);
          if (p instanceof Promise) p.then(w.resolve, w.reject);
          else w.resolve(p);
          served = true;
          break;
        }
      }
    }
  }

  private dropWaiter(app: App, w: Waiter): void {
    const i = app.queue.indexOf(w);
    if (i < 0) return;
    app.queue.splice(i, 1);
    if (app.queue.length === 0) {
      const t = this.turn.indexOf(app);
      if (t >= 0) this.turn.splice(t, 1);
    }
    this.forgetIfIdle(app);
  }

  /** Releases the least recently used idle isolate of `app` (of any application when undefined). */
  private evictIdle(app: App | undefined): boolean {
    let victim: { key: string; s: Slot; iso: FunctionIsolate } | undefined;
    for (const [key, s] of this.slots) {
      if (app && s.app !== app) continue;
      for (const iso of s.idle) {
        if (!victim || iso.lastUsed < victim.iso.lastUsed) victim = { key, s, iso };
      }
    }
    if (!victim) return false;
    const { key, s, iso } = victim;
    s.idle = s.idle.filter((i) => i !== iso);
    iso.dispose();
    this.remove(s, key, iso);
    return true;
  }

  private sweep(): void {
    const cutoff = Date.now() - this.limits.idleMs;
    this.evict((_, iso) => iso.lastUsed < cutoff);
  }

  /** Releases the idle isolates that `pred` picks (e.g. of a deactivated version, or idle too long). */
  evict(pred: (key: string, iso: FunctionIsolate) => boolean): void {
    for (const [key, s] of [...this.slots]) {
      const keep: FunctionIsolate[] = [];
      const drop: FunctionIsolate[] = [];
      for (const iso of s.idle) (pred(key, iso) ? drop : keep).push(iso);
      s.idle = keep;
      for (const iso of drop) {
        iso.dispose();
        this.remove(s, key, iso);
      }
    }
    this.pump();
  }

  /**
   * Counts for metrics. Heap: each isolate's last sample, taken while it
   * was idle; nothing here calls into an isolate (a synchronous read of one
   * that is running would wait for it on the service's thread).
   */
  stats(): PoolStats {
    let idle = 0;
    for (const s of this.slots.values()) idle += s.idle.length;
    let waiting = 0;
    const apps: AppIsolateStats[] = [];
    for (const a of this.apps.values()) {
      waiting += a.queue.length;
      apps.push({ app: a.id, busy: a.busy, isolates: a.isolates, heapBytes: a.heap, waiting: a.queue.length });
    }
    return { total: this.total, idle, keys: this.slots.size, waiting, heapBytes: this.heap, apps, disposedOverHeap: this.disposedOverHeap };
  }

  close(): void {
    this.closed = true;
    clearInterval(this.sweeper);
    this.cancelResample?.();
    this.stale.clear();
    for (const a of this.apps.values()) {
      for (const w of a.queue) {
        w.cancel();
        w.reject(new Error("sandbox closed"));
      }
      a.queue = [];
    }
    this.turn = [];
    // runs still going (or their left-over work) stop with the sandbox
    for (const iso of this.leased) iso.dispose();
    this.leased.clear();
    for (const s of this.slots.values()) for (const iso of s.idle) iso.dispose();
    this.slots.clear();
    this.apps.clear();
    this.counted.clear();
    this.total = 0;
    this.heap = 0;
  }
}
