// The sandbox as the rest of the service sees it: run a function version with
// inputs, check code at deploy time, release isolates of retired versions.
// One pool of warm isolates per (version, memory limit).
import { CompileError, FunctionIsolate } from "./function-isolate.js";
import { IsolatePool, PoolTimeoutError } from "./isolate-pool.js";
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
  run(target: RunTarget, input: RunInput): Promise<RunResult>;
  /** Compiles and evaluates the module in a throwaway isolate; throws CompileError. */
  check(code: string, memoryMb: number): Promise<void>;
  /** Releases the idle isolates of a version (after it stops being active). */
  evictVersion(versionId: number): void;
  stats(): { total: number; idle: number; keys: number; waiting: number; heapBytes: number; slowVersions: number };
  close(): void;
}

/** Warm runs whose median slice time decides whether a version stays on the fast path. */
const SLICE_SAMPLES = 5;

/** The result of a run that got no isolate: none free in time, or the version no longer loads. */
function acquireFailed(err: unknown, target: RunTarget, started: number): RunResult {
  const durationMs = performance.now() - started;
  if (err instanceof PoolTimeoutError) {
    return { outcome: "timeout", error: `timed out after ${target.timeoutMs} ms waiting for a free isolate`, logs: [], logsTruncated: false, durationMs, memoryBytes: 0, coldStart: false };
  }
  // e.g. a memory limit too low for its top level
  return { outcome: "error", error: err instanceof Error ? err.message : String(err), logs: [], logsTruncated: false, durationMs, memoryBytes: 0, coldStart: true };
}

/** Heap limit of the throwaway isolate used by check(). */
const CHECK_MEMORY_MB = 32;

export function createSandbox(opts: SandboxOptions): Sandbox {
  const limits: SandboxLimits = { ...DEFAULT_SANDBOX_LIMITS, ...opts.limits };
  const pool = new IsolatePool(limits.maxIsolates, limits.isolatesPerVersion, limits.idleMs);
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
  // must not move a quick version off the fast path, so the median decides.
  const slices = new Map<string, number[]>();
  const judge = (key: string, ms: number) => {
    let last = slices.get(key);
    if (!last) slices.set(key, (last = []));
    last.push(ms);
    if (last.length > SLICE_SAMPLES) last.shift();
    if (last.length === SLICE_SAMPLES && [...last].sort((a, b) => a - b)[SLICE_SAMPLES >> 1]! > limits.syncBudgetMs) {
      slow.set(key, performance.now());
      slices.delete(key);
    }
  };

  return {
    limits,

    async run(target, input) {
      const started = performance.now();
      const deadline = started + target.timeoutMs;
      const key = `${target.versionId}:${target.memoryMb}`;
      const create = () =>
        FunctionIsolate.create(target.code, target.memoryMb, limits, target.appId, capabilities, Math.max(1, target.timeoutMs), target.fileName);
      let lease;
      try {
        lease = await pool.acquire(key, create, target.timeoutMs);
      } catch (err) {
        return acquireFailed(err, target, started);
      }
      let iso: FunctionIsolate | undefined = lease.isolate;
      let cold = lease.cold;
      // the run's ctx.waitUntil work: the isolate stays leased until it is over
      let background: Promise<unknown> | undefined;
      const left = () => Math.max(1, Math.round(deadline - performance.now()));
      try {
        const sliceMs = isSlow(key) ? 0 : limits.syncSliceMs;
        let out = await iso.run(input, left(), sliceMs);
        if (out.kind === "slice") slow.set(key, performance.now());
        else if (!cold && sliceMs > 0) judge(key, iso.lastSliceMs);
        if (out.kind === "slice") {
          // Nothing of the cut run took effect: run it again on the slow path.
          pool.release(key, iso);
          iso = undefined;
          try {
            const again = await pool.acquire(key, create, left());
            iso = again.isolate;
            cold = again.cold;
          } catch (err) {
            return acquireFailed(err, target, started);
          }
          out = await iso.run(input, left(), 0);
        }
        const ran = iso;
        background = out.background;
        return {
          background: out.background?.then((bg) => ({
            outcome: bg.kind,
            error: bg.error,
            logs: bg.logs,
            logsTruncated: bg.logsTruncated,
            durationMs: performance.now() - started,
            memoryBytes: ran.heapSampled,
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
      } finally {
        if (iso) {
          // An isolate whose run's end is still being checked stays leased
          // until it is known idle (or disposed): see FunctionIsolate.quiesce.
          const leased = iso;
          if (background) void background.then(() => leased.afterRun, () => undefined).then(() => pool.release(key, leased));
          else if (iso.afterRun) void iso.afterRun.then(() => pool.release(key, leased));
          else pool.release(key, iso);
        }
      }
    },

    async check(code, memoryMb) {
      // (the module's top level has no ctx: no capability is called)
      const iso = await FunctionIsolate.create(code, Math.max(CHECK_MEMORY_MB, memoryMb), limits, 0, capabilities, limits.compileTimeoutMs);
      iso.dispose();
    },

    evictVersion(versionId) {
      const prefix = `${versionId}:`;
      pool.evict((k) => k.startsWith(prefix));
      for (const k of slices.keys()) if (k.startsWith(prefix)) slices.delete(k);
      for (const k of slow.keys()) if (k.startsWith(prefix)) slow.delete(k);
    },

    stats: () => ({ ...pool.stats(), slowVersions: slow.size }),
    close: () => pool.close(),
  };
}
