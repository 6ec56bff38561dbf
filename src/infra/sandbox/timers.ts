// Timers in functions (docs/functions.md, "Timers and waitUntil"):
// setTimeout, setInterval, their clear functions and queueMicrotask, kept in
// the isolate and driven by the host.
//
// Code runs in an isolate only inside calls the host makes, each bounded by
// the run's deadline (function-isolate.ts), so a timer cannot fire by itself:
// the isolate keeps its timers in a table and tells the host, fire-and-forget,
// when the earliest one is due (`wake(run, dueAt)`); the host keeps one Node
// timer per run (RunWake) and, when it rings, enters the isolate with a call
// bounded by the deadline that runs the callbacks due. A timer due after the
// deadline is accepted and never fires; the run's end stops the host's timer
// and the next run starts with an empty table.

/** Timers (timeouts and intervals) one run may have pending at once; more throw RangeError. */
export const MAX_TIMERS_PER_RUN = 1000;
/** ctx.waitUntil promises one run may hand over; more throw RangeError. */
export const MAX_WAIT_UNTIL_PER_RUN = 100;
/** Like browsers: a timer nested deeper than this (or an interval past this many repeats) waits at least NESTED_MIN_MS. */
export const NESTING_LEVEL = 5;
export const NESTED_MIN_MS = 4;
/** An interval repeats at most once a millisecond. */
export const INTERVAL_MIN_MS = 1;

/**
 * Evaluates in the isolate to `install(wakeRef, logError)`, which defines
 * the timer globals and returns the controller the bootstrap keeps (out of
 * user code's reach): reset(run, deadline) empties the table for a new run, runDue()
 * runs the callbacks due (in due order, each after the previous one's
 * microtasks), pending() counts live timers.
 */
export const TIMERS_SOURCE = String.raw`(function (wakeRef, logError) {
  "use strict";
  const PromiseCtor = Promise;
  const now = Date.now;
  const ceil = Math.ceil;
  const TypeErrorCtor = TypeError;
  const RangeErrorCtor = RangeError;
  const MAX = ${MAX_TIMERS_PER_RUN}, NESTING = ${NESTING_LEVEL}, NESTED_MIN = ${NESTED_MIN_MS}, INTERVAL_MIN = ${INTERVAL_MIN_MS};
  // id -> { fn, args, due, delay, repeat, nesting, seq }; no prototype
  let table = Object.create(null);
  let live = 0;
  let nextId = 1;
  let seq = 0;
  let run = 0;
  // the run's deadline (Date.now() ms): a timer due later never fires, and
  // the host is told so once (not once per timer: a set-and-clear loop
  // must not flood the host with messages)
  let deadline = 0;
  let lateTold = false;
  // the due time the host was last told (it wakes the isolate at or before it)
  let told = Infinity;
  // the nesting level of the callback running now (0 outside callbacks)
  let nestingNow = 0;

  function tell(due) {
    if (due >= told) return;
    if (due > deadline) {
      if (!lateTold) { lateTold = true; wakeRef.applyIgnored(undefined, [run, due]); }
      return;
    }
    told = due;
    wakeRef.applyIgnored(undefined, [run, due]);
  }
  function toDelay(ms) {
    const n = +ms;
    return n > 0 ? (n > 2147483647 ? 2147483647 : n) : 0;
  }
  function add(fn, ms, args, repeat) {
    if (typeof fn !== "function") throw new TypeErrorCtor("the callback must be a function");
    if (live >= MAX) throw new RangeErrorCtor("too many timers: at most " + MAX + " pending in one invocation");
    const nesting = nestingNow + 1;
    let delay = toDelay(ms);
    if (repeat && delay < INTERVAL_MIN) delay = INTERVAL_MIN;
    if (nesting > NESTING && delay < NESTED_MIN) delay = NESTED_MIN;
    const id = nextId++;
    // whole milliseconds: at most one message to the host per millisecond of the run
    const due = ceil(now() + delay);
    table[id] = { fn: fn, args: args, due: due, delay: delay, repeat: repeat, nesting: nesting, seq: seq++ };
    live++;
    tell(due);
    return id;
  }
  function clear(id) {
    const n = +id;
    if (table[n] === undefined) return;
    delete table[n];
    live--;
  }
  function fire(id, t) {
    if (table[id] !== t) return; // cleared by an earlier callback
    if (t.repeat) {
      t.nesting++;
      if (t.nesting > NESTING && t.delay < NESTED_MIN) t.delay = NESTED_MIN;
      t.seq = seq++;
    } else {
      delete table[id];
      live--;
    }
    nestingNow = t.nesting;
    try {
      t.fn.apply(undefined, t.args);
    } catch (e) {
      logError("Uncaught exception in a timer callback:", e);
    } finally {
      nestingNow = 0;
      // an interval's next run counts from the end of this one
      if (t.repeat && table[id] === t) t.due = ceil(now() + t.delay);
    }
  }
  globalThis.setTimeout = function setTimeout(fn, ms, ...args) { return add(fn, ms, args, false); };
  globalThis.setInterval = function setInterval(fn, ms, ...args) { return add(fn, ms, args, true); };
  globalThis.clearTimeout = function clearTimeout(id) { clear(id); };
  globalThis.clearInterval = function clearInterval(id) { clear(id); };
  if (typeof globalThis.queueMicrotask !== "function") {
    globalThis.queueMicrotask = function queueMicrotask(fn) {
      if (typeof fn !== "function") throw new TypeErrorCtor("the callback must be a function");
      PromiseCtor.resolve().then(function () {
        try { fn(); } catch (e) { logError("Uncaught exception in a microtask:", e); }
      });
    };
  }

  return {
    reset(r, deadlineAt) {
      // (most runs set no timer: nothing to drop)
      if (live !== 0) table = Object.create(null);
      live = 0;
      told = Infinity;
      deadline = deadlineAt;
      lateTold = false;
      nestingNow = 0;
      run = r;
    },
    pending() { return live; },
    // The host's timer rang: run what is due, then tell it the next due time.
    runDue() {
      told = Infinity;
      const t0 = now();
      const due = [];
      for (const id in table) {
        const t = table[id];
        if (t.due <= t0) due[due.length] = [id, t];
      }
      due.sort(function (a, b) { return a[1].due - b[1].due || a[1].seq - b[1].seq; });
      let p = PromiseCtor.resolve();
      for (let i = 0; i < due.length; i++) {
        const id = due[i][0], t = due[i][1];
        p = p.then(function () { fire(id, t); });
      }
      p.then(function () {
        let next = Infinity;
        for (const id in table) if (table[id].due < next) next = table[id].due;
        if (next !== Infinity) tell(next);
      });
    },
  };
})`;

/**
 * The host's side of one run's timers: one Node timer at the earliest due
 * time the isolate reported, none past the run's deadline. `ring` is called
 * when it is due; `due` stays set until the call into the isolate that runs
 * the timers takes it (the run may be in another call into the isolate
 * then: one call at a time).
 */
export class RunWake {
  private timer: NodeJS.Timeout | undefined;
  private immediate: NodeJS.Immediate | undefined;
  private at = Infinity;
  private stopped = false;
  /** Rings so far, and when the last one came (Date.now() ms). */
  private rings = 0;
  private lastRing = -Infinity;
  /** The isolate has timers due: the next call into it runs them. */
  due = false;
  /** A timer was set due after the deadline (it never fires). */
  late = false;

  constructor(
    /** The run's deadline in Date.now() time (the isolate's clock). */
    private readonly deadlineAt: number,
    private readonly ring: () => void,
  ) {}

  /** The isolate's earliest timer is due at `dueAt` (Date.now() ms). */
  schedule(dueAt: number): void {
    if (this.stopped || typeof dueAt !== "number" || Number.isNaN(dueAt)) return;
    if (dueAt > this.deadlineAt) {
      this.late = true;
      return;
    }
    // Each ring costs the service's thread a call into the isolate: after
    // the first few, at most one per NESTED_MIN_MS per run, the timers due
    // meanwhile run together (like browsers' clamp; docs/functions.md, "Timers
    // and waitUntil"). Without it, timers with staggered due times rang once
    // a millisecond. A ring past the deadline enters nothing: the run ends there.
    const at = this.rings >= NESTING_LEVEL ? Math.max(dueAt, this.lastRing + NESTED_MIN_MS) : dueAt;
    if ((this.timer || this.immediate) && this.at <= at) return;
    this.clear();
    this.at = at;
    const ms = at - Date.now();
    if (ms <= 0) this.immediate = setImmediate(this.fire);
    else this.timer = setTimeout(this.fire, Math.ceil(ms));
  }

  private readonly fire = (): void => {
    this.timer = this.immediate = undefined;
    this.at = Infinity;
    if (this.stopped) return;
    this.rings++;
    this.lastRing = Date.now();
    this.due = true;
    this.ring();
  };

  /** Takes the due flag (the call going in now runs the due timers). */
  take(): boolean {
    const d = this.due;
    this.due = false;
    return d;
  }

  private clear(): void {
    if (this.timer) clearTimeout(this.timer);
    if (this.immediate) clearImmediate(this.immediate);
    this.timer = this.immediate = undefined;
    this.at = Infinity;
  }

  /** The run ended: nothing rings any more. */
  stop(): void {
    this.stopped = true;
    this.due = false;
    this.clear();
  }
}
