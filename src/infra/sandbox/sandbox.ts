// The sandbox as the rest of the service sees it: run a function version with
// inputs, check code at deploy time, release isolates of retired versions.
// One pool of warm isolates per (version, memory limit, application).
import { CompileError, FunctionIsolate, type IsolateRunOutput } from "./function-isolate.js";
import { IsolatePool, PoolBusyError, PoolTimeoutError, type Lease, type PoolStats } from "./isolate-pool.js";
import { appError } from "../../kernel/errors.js";
import type { HostCapability } from "../../kernel/host-capability.js";
import { DEFAULT_SANDBOX_LIMITS, type RunInput, type RunResult, type RunTarget, type SandboxLimits } from "./types.js";

export { CompileError };

export interface SandboxOptions {
  limits?: Partial<SandboxLimits>;
  /** The host APIs functions get as ctx.<name> (ctx.db, ctx.kv, ...). */
  capabilities: readonly HostCapability[];
}

export interface Sandbox {
  readonly limits: SandboxLimits;
  /** Synchronous when a warm isolate runs the function start to end inside its slice (the warm path of a quick function). */
  run(target: RunTarget, input: RunInput): RunResult | Promise<RunResult>;
  /** Compiles and evaluates the module in a throwaway isolate; throws CompileError. */
  check(code: string, memoryMb: number): Promise<void>;
  /** Releases the idle isolates of a version (after it stops being active). */
  evictVersion(versionId: number): void;
  stats(): PoolStats & { slowVersions: number };
  close(): void;
}

/**
 * Warm runs whose slice times decide whether a version stays on the fast
 * path: it leaves when more than half of them took more than the budget
 * (their median). Eleven, not five: the isolate's CPU clock counts a GC
 * pause in the isolate, and on a shared VM the time the hypervisor took,
 * and a trivial function showed 1-12 ms in 2-3 % of its runs under load;
 * three of five such runs in a row happened every few seconds at a few
 * thousand runs per second, six of eleven practically never does.
 */
const SLICE_SAMPLES = 11;
/** Fast-path runs after a cut within which a second cut moves the version off the fast path. */
const CUT_WINDOW = 10;

/** The result of a run that got no isolate: none free in time, or the version no longer loads. */
function acquireFailed(err: unknown, target: RunTarget, started: number): RunResult {
  const durationMs = performance.now() - started;
  if (err instanceof PoolTimeoutError) {
    return { outcome: "timeout", error: `timed out after ${target.timeoutMs} ms waiting for a free isolate`, logs: [], logsTruncated: false, durationMs, memoryBytes: 0, coldStart: false };
  }
  if (err instanceof PoolBusyError) {
    return { outcome: "error", busy: true, error: err.message, logs: [], logsTruncated: false, durationMs, memoryBytes: 0, coldStart: false };
  }
  // e.g. a memory limit too low for its top level
  return { outcome: "error", error: err instanceof Error ? err.message : String(err), logs: [], logsTruncated: false, durationMs, memoryBytes: 0, coldStart: true };
}

/** What is left of a run's timeout, in whole ms (at least 1). */
function left(started: number, target: RunTarget): number {
  return Math.max(1, Math.round(started + target.timeoutMs - performance.now()));
}

/** Heap limit of the throwaway isolate used by check(). */
const CHECK_MEMORY_MB = 32;

export function createSandbox(opts: SandboxOptions): Sandbox {
  const limits: SandboxLimits = { ...DEFAULT_SANDBOX_LIMITS, ...opts.limits };
  // the shares left at 0 are a quarter of the process's bounds
  limits.appIsolates ||= Math.max(1, Math.floor(limits.maxIsolates / 4));
  limits.appHeapBytes ||= Math.max(1, Math.floor(limits.heapBudgetBytes / 4));
  const pool = new IsolatePool({
    maxIsolates: limits.maxIsolates,
    perKey: limits.isolatesPerVersion,
    idleMs: limits.idleMs,
    appIsolates: limits.appIsolates,
    heapBudgetBytes: limits.heapBudgetBytes,
    appHeapBytes: limits.appHeapBytes,
    keepHeapBytes: limits.keepHeapBytes,
  });
  // Deploy-time checks (check()) run throwaway isolates outside the pool:
  // at most an application's share of them at once, a bounded queue behind
  // (whoever may deploy could otherwise start any number at once, each up
  // to the plan's memory limit) (issue #28, point 1).
  const checking = { running: 0, queue: [] as Array<() => void> };
  const checkSlots = Math.max(1, limits.appIsolates);
  const checkQueue = checkSlots * 4;
  const capabilities = opts.capabilities;
  const taken = capabilities.find((c) => ["consumer", "event", "env", "trigger", "requestId", "waitUntil"].includes(c.name));
  if (taken) throw new Error(`ctx.${taken.name} cannot be a host capability`);
  // Pool keys whose runs left the fast path (see SandboxLimits.syncBudgetMs),
  // with the time they left it: after slowRecheckMs a version is judged
  // again (a version slow only while its data was cold gets back).
  const slow = new Map<string, number>();
  const isSlow = (key: string) => {
    const since = slow.get(key);
    if (since === undefined) return false;
    if (performance.now() - since < limits.slowRecheckMs) return true;
    slow.delete(key);
    return false;
  };
  // The last warm slice times per key: one GC pause or a preempted thread
  // must not move a quick version off the fast path, so the median decides
  // (as soon as more than half of SLICE_SAMPLES are over the budget).
  const slices = new Map<string, number[]>();
  const judge = (key: string, ms: number) => {
    let last = slices.get(key);
    if (!last) slices.set(key, (last = []));
    last.push(ms);
    if (last.length > SLICE_SAMPLES) last.shift();
    let over = 0;
    for (const x of last) if (x > limits.syncBudgetMs) over++;
    if (over > SLICE_SAMPLES >> 1) {
      slow.set(key, performance.now());
      slices.delete(key);
    }
  };

  // Versions cut at their slice within their last CUT_WINDOW fast-path
  // runs, with the runs made since. V8 cuts a slice by wall time: a quick
  // version is cut now and then when the machine preempts its thread
  // mid-slice (seen about once per thousand runs under load), and is then
  // only run again; a second cut within CUT_WINDOW runs moves it off the
  // fast path (a version that computes past its slice every run is cut
  // twice; one that does so every few runs holds the thread no longer on
  // average than the budget allows).
  const sinceCut = new Map<string, number>();
  const cut = (key: string) => {
    if (sinceCut.delete(key)) {
      slow.set(key, performance.now());
      slices.delete(key);
    } else sinceCut.set(key, 0);
  };
  const fastRun = (key: string) => {
    const n = sinceCut.get(key);
    if (n === undefined) return;
    if (n + 1 >= CUT_WINDOW) sinceCut.delete(key);
    else sinceCut.set(key, n + 1);
  };

  /**
   * Runs on a leased isolate; synchronous when the run ends inside its
   * slice. A run cut at its slice is run again on the slow path (nothing of
   * it took effect). The isolate goes back to the pool when the run is over:
   * after its ctx.waitUntil work, or once a call still in flight is (see
   * FunctionIsolate.afterRun).
   */
  function runLeased(target: RunTarget, input: RunInput, key: string, create: () => Promise<FunctionIsolate>, started: number, lease: Lease): RunResult | Promise<RunResult> {
    const iso = lease.isolate;
    const sliceMs = isSlow(key) ? 0 : limits.syncSliceMs;
    let out: IsolateRunOutput | Promise<IsolateRunOutput>;
    try {
      out = iso.run(input, left(started, target), sliceMs);
    } catch (err) {
      pool.release(key, iso);
      throw err;
    }
    const first = (o: IsolateRunOutput): RunResult | Promise<RunResult> => {
      if (o.kind === "slice") {
        cut(key);
        pool.release(key, iso);
        return runAgain(target, input, key, create, started);
      }
      if (sliceMs > 0) {
        fastRun(key);
        if (!lease.cold) judge(key, iso.lastSliceMs);
      }
      return settled(key, iso, lease.cold, started, o, target);
    };
    if (out instanceof Promise) {
      return out.then(first, (err: unknown) => {
        pool.release(key, iso);
        throw err;
      });
    }
    return first(out);
  }

  /** A run cut at its slice, again on the slow path. */
  async function runAgain(target: RunTarget, input: RunInput, key: string, create: () => Promise<FunctionIsolate>, started: number): Promise<RunResult> {
    let lease: Lease;
    try {
      lease = await pool.acquire(key, target.appId, create, left(started, target));
    } catch (err) {
      return acquireFailed(err, target, started);
    }
    let out: IsolateRunOutput;
    try {
      out = await lease.isolate.run(input, left(started, target), 0);
    } catch (err) {
      pool.release(key, lease.isolate);
      throw err;
    }
    return settled(key, lease.isolate, lease.cold, started, out, target);
  }

  /** The run's result; the isolate goes back to the pool once the run is over. */
  function settled(key: string, iso: FunctionIsolate, cold: boolean, started: number, out: IsolateRunOutput, target: RunTarget): RunResult {
    const background = out.background;
    // An isolate whose run's end is still being checked stays leased
    // until it is known idle (or disposed): see FunctionIsolate.afterRun.
    if (background) void background.then(() => iso.afterRun, () => undefined).then(() => pool.release(key, iso));
    else if (iso.afterRun) void iso.afterRun.then(() => pool.release(key, iso));
    else pool.release(key, iso);
    return {
      background: background?.then((bg) => ({
        outcome: bg.kind,
        error: bg.error,
        logs: bg.logs,
        logsTruncated: bg.logsTruncated,
        durationMs: performance.now() - started,
        memoryBytes: iso.heapSampled,
      })),
      outcome: out.kind === "slice" ? "timeout" : out.kind,
      response: out.response,
      // the function's timeout, not what was left of it when this isolate started the run
      error: out.kind === "timeout" || out.kind === "slice" ? `timed out after ${target.timeoutMs} ms` : out.error,
      errorName: out.errorName,
      errorMessage: out.errorMessage,
      errorStack: out.errorStack,
      logs: out.logs,
      logsTruncated: out.logsTruncated,
      durationMs: performance.now() - started,
      memoryBytes: iso.heapSampled,
      coldStart: cold,
    };
  }

  return {
    limits,

    run(target, input) {
      const started = performance.now();
      // (the application too: the pool counts a key's isolates against one application)
      const key = `${target.versionId}:${target.memoryMb}:${target.appId}`;
      const create = () =>
        FunctionIsolate.create(target.code, target.memoryMb, limits, target.appId, capabilities, Math.max(1, target.timeoutMs), target.fileName);
      let lease: Lease | Promise<Lease>;
      try {
        lease = pool.acquire(key, target.appId, create, target.timeoutMs);
      } catch (err) {
        return acquireFailed(err, target, started);
      }
      if (lease instanceof Promise) return lease.then((l) => runLeased(target, input, key, create, started, l), (err: unknown) => acquireFailed(err, target, started));
      // A warm isolate: a quick function runs start to end in this call, without a promise.
      return runLeased(target, input, key, create, started, lease);
    },

    async check(code, memoryMb) {
      if (checking.running >= checkSlots) {
        if (checking.queue.length >= checkQueue) throw appError("unavailable", "Too many function versions are being checked at the moment; retry shortly.", { retryAfterSeconds: 1 });
        await new Promise<void>((resolve) => checking.queue.push(resolve));
      } else checking.running++;
      try {
        // (the module's top level has no ctx: no capability is called)
        const iso = await FunctionIsolate.create(code, Math.max(CHECK_MEMORY_MB, memoryMb), limits, 0, capabilities, limits.compileTimeoutMs);
        iso.dispose();
      } finally {
        // the slot goes to the next waiting check, else back
        const next = checking.queue.shift();
        if (next) next();
        else checking.running--;
      }
    },

    evictVersion(versionId) {
      const prefix = `${versionId}:`;
      pool.evict((k) => k.startsWith(prefix));
      for (const k of slices.keys()) if (k.startsWith(prefix)) slices.delete(k);
      for (const k of slow.keys()) if (k.startsWith(prefix)) slow.delete(k);
      for (const k of sinceCut.keys()) if (k.startsWith(prefix)) sinceCut.delete(k);
    },

    stats: () => ({ ...pool.stats(), slowVersions: slow.size }),
    close: () => pool.close(),
  };
}
