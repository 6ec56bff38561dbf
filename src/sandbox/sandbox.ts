// The sandbox as the rest of the service sees it: run a function version with
// inputs, check code at deploy time, release isolates of retired versions.
// One pool of warm isolates per (version, memory limit).
import { CompileError, FunctionIsolate, type DbBridge } from "./function-isolate.js";
import { IsolatePool, PoolTimeoutError } from "./isolate-pool.js";
import { DEFAULT_SANDBOX_LIMITS, type RunInput, type RunResult, type RunTarget, type SandboxLimits } from "./types.js";

export { CompileError };

export interface SandboxOptions {
  limits?: Partial<SandboxLimits>;
  /** The db object's host side for one application (called from inside isolates). */
  dbBridge: (appId: number) => DbBridge;
}

export interface Sandbox {
  readonly limits: SandboxLimits;
  run(target: RunTarget, input: RunInput): Promise<RunResult>;
  /** Compiles and evaluates the module in a throwaway isolate; throws CompileError. */
  check(code: string, memoryMb: number): Promise<void>;
  /** Releases the idle isolates of a version (after it stops being active). */
  evictVersion(versionId: number): void;
  stats(): { total: number; idle: number; keys: number };
  close(): void;
}

/** Heap limit of the throwaway isolate used by check(). */
const CHECK_MEMORY_MB = 32;

export function createSandbox(opts: SandboxOptions): Sandbox {
  const limits: SandboxLimits = { ...DEFAULT_SANDBOX_LIMITS, ...opts.limits };
  const pool = new IsolatePool(limits.maxIsolates, limits.isolatesPerVersion, limits.idleMs);
  const noDb: DbBridge = async () => ({ ok: false, code: "unavailable", message: "db is not available at deploy time" });

  return {
    limits,

    async run(target, input) {
      const started = performance.now();
      const deadline = started + target.timeoutMs;
      const key = `${target.versionId}:${target.memoryMb}`;
      const create = () =>
        FunctionIsolate.create(target.code, target.memoryMb, limits, opts.dbBridge(target.appId), Math.max(1, target.timeoutMs));
      let lease;
      try {
        lease = await pool.acquire(key, create, target.timeoutMs);
      } catch (err) {
        const ms = performance.now() - started;
        if (err instanceof PoolTimeoutError) {
          return { outcome: "timeout", error: `timed out after ${target.timeoutMs} ms waiting for a free isolate`, logs: [], logsTruncated: false, durationMs: ms, memoryBytes: 0, coldStart: false };
        }
        // A version that no longer loads (e.g. memory limit too low for its top level).
        return { outcome: "error", error: err instanceof Error ? err.message : String(err), logs: [], logsTruncated: false, durationMs: ms, memoryBytes: 0, coldStart: true };
      }
      const iso = lease.isolate;
      try {
        const remaining = Math.max(1, Math.round(deadline - performance.now()));
        const out = await iso.run(input, remaining);
        return {
          outcome: out.kind,
          response: out.response,
          error: out.error,
          logs: out.logs,
          logsTruncated: out.logsTruncated,
          durationMs: performance.now() - started,
          memoryBytes: iso.heapUsed(),
          coldStart: lease.cold,
        };
      } finally {
        pool.release(key, iso);
      }
    },

    async check(code, memoryMb) {
      const iso = await FunctionIsolate.create(code, Math.max(CHECK_MEMORY_MB, memoryMb), limits, noDb, limits.compileTimeoutMs);
      iso.dispose();
    },

    evictVersion(versionId) {
      const prefix = `${versionId}:`;
      pool.evict((k) => k.startsWith(prefix));
    },

    stats: () => pool.stats(),
    close: () => pool.close(),
  };
}
