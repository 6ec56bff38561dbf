// One isolate holding one function version: a fresh V8 isolate with its own
// heap limit, one context, the bootstrap and the function's module. Used by
// one invocation at a time (the pool leases it), so console capture and the
// wall-clock timeout apply to exactly one run. Every isolated-vm handle it
// creates is released in dispose() (or in finally when setup fails).
import ivm from "isolated-vm";
import { BOOTSTRAP_SOURCE } from "./bootstrap.js";
import { deadline } from "./deadlines.js";
import type { LogLine, RawResponse, RunInput, SandboxLimits } from "./types.js";

/** Called by the isolate's db object; never rejects (errors come back as { ok: false }). */
export type DbBridge = (op: string, a: unknown, b: unknown) => Promise<unknown>;

export class CompileError extends Error {}

interface RunnerOutput {
  response?: RawResponse;
  error?: string;
  logs?: LogLine[];
  truncated?: boolean;
}

export interface IsolateRunOutput {
  /** "slice": the synchronous slice ran out before the run finished; nothing of it took effect. */
  kind: "ok" | "error" | "timeout" | "slice";
  response?: RawResponse;
  error?: string;
  logs: LogLine[];
  logsTruncated: boolean;
}

const TIMEOUT_MESSAGE = "Script execution timed out.";
const HEAP_SAMPLE_MS = 50;

/** CPU time of this thread in µs (Node ≥ 23.9; wall time on older Nodes). */
const threadCpuUs: () => number =
  typeof process.threadCpuUsage === "function"
    ? () => {
        const u = process.threadCpuUsage();
        return u.user + u.system;
      }
    : () => performance.now() * 1000;

export class FunctionIsolate {
  readonly isolate: ivm.Isolate;
  private handles: Array<{ release(): void }> = [];
  private runner: ivm.Reference<(mode: number, input?: string) => unknown> | undefined;
  /** Resolves the run waiting on the host (fast path, see run()). */
  private settle: ((output: string) => void) | undefined;
  lastUsed = Date.now();
  busy = false;
  /** CPU time of the last fast-path run's synchronous slice on this thread, in ms (0 after a slow-path run). */
  lastSliceMs = 0;
  /** Host calls (db) the isolate started that have not been answered yet. */
  private inflight = 0;
  /**
   * True when the isolate is known to run nothing until the host calls it:
   * its last run finished inside the synchronous call with no host call left
   * in flight. Otherwise code of an earlier run may still be running on
   * isolated-vm's thread (microtasks after its output, or the continuation
   * of a db call it did not await), and a synchronous call would wait for it
   * on the service's thread, without any time limit.
   */
  private idle = true;
  private running = false;

  private constructor(memoryMb: number) {
    this.isolate = new ivm.Isolate({ memoryLimit: memoryMb });
  }

  /**
   * Creates an isolate and loads the module into it. Throws CompileError with
   * the compiler's (or the top-level code's) message when the code is unusable.
   */
  static async create(code: string, memoryMb: number, limits: SandboxLimits, db: DbBridge, evalTimeoutMs: number): Promise<FunctionIsolate> {
    const fi = new FunctionIsolate(memoryMb);
    try {
      await fi.load(code, limits, db, evalTimeoutMs);
      return fi;
    } catch (err) {
      fi.dispose();
      throw err;
    }
  }

  private keep<T extends { release(): void }>(h: T): T {
    this.handles.push(h);
    return h;
  }

  private async load(code: string, limits: SandboxLimits, db: DbBridge, evalTimeoutMs: number): Promise<void> {
    const context = this.keep(await this.isolate.createContext());
    const factory = this.keep(await context.eval(BOOTSTRAP_SOURCE, { reference: true, timeout: evalTimeoutMs }));
    // A run cut at its slice is run again elsewhere: db calls it queued
    // before it was cut must not take effect, and they reach this only after
    // the isolate is disposed.
    const guarded: DbBridge = (op, a, b) => {
      if (this.isolate.isDisposed) return Promise.resolve({ ok: false, code: "unavailable", message: "the run was stopped" });
      // A call reaches the host only after the synchronous call that made it
      // returned: one arriving between runs was left by a finished run.
      if (!this.running) this.idle = false;
      this.inflight++;
      return db(op, a, b).finally(() => this.inflight--);
    };
    const dbRef = this.keep(new ivm.Reference(guarded));
    const doneRef = this.keep(
      new ivm.Reference((output: string) => {
        const settle = this.settle;
        this.settle = undefined;
        settle?.(output);
      }),
    );
    const limitsCopy = {
      maxLogChars: limits.maxLogChars,
      maxLogLineChars: limits.maxLogLineChars,
      maxResponseBytes: limits.maxResponseBytes,
    };
    const bind = this.keep(
      await factory.apply(undefined, [dbRef, new ivm.ExternalCopy(limitsCopy).copyInto({ release: true })], {
        result: { reference: true },
        timeout: evalTimeoutMs,
      }),
    );

    let mod: ivm.Module;
    try {
      mod = this.keep(await this.isolate.compileModule(code, { filename: "function.js" }));
    } catch (err) {
      throw new CompileError(describe(err));
    }
    if (mod.dependencySpecifiers.length > 0) {
      throw new CompileError(`imports are not available in functions (found "${mod.dependencySpecifiers[0]}")`);
    }
    try {
      await mod.instantiate(context, (specifier) => {
        throw new Error(`imports are not available in functions (found "${specifier}")`);
      });
      await mod.evaluate({ timeout: evalTimeoutMs });
    } catch (err) {
      throw new CompileError(describe(err));
    }
    const ns = this.keep(mod.namespace);
    const handler = this.keep(await ns.get("default", { reference: true }));
    if (handler.typeof !== "function") {
      throw new CompileError("the module must have a default export that is a function (export default async function (req, ctx) { ... })");
    }
    this.runner = this.keep(
      (await bind.apply(undefined, [handler.derefInto(), doneRef], { result: { reference: true }, timeout: evalTimeoutMs })) as ivm.Reference<
        (mode: number, input?: string) => unknown
      >,
    );
  }

  /**
   * Runs one invocation. `timeoutMs` bounds the whole run (CPU and awaits).
   *
   * With `sliceMs` > 0 the run starts inside a synchronous call on this
   * thread, cut after `sliceMs` (V8's own timeout): a warm async apply costs
   * the host about 4x the CPU of two synchronous calls (measured with
   * isolated-vm 7 on one core: 35-45 us against 8.5 us). A run that waits on
   * the host (db calls) goes on on isolated-vm's thread and reports back
   * through doneRef. A run cut at its slice comes back as kind "slice": the
   * isolate is disposed (its db calls never run) and the caller runs it again
   * on the slow path. Without `sliceMs` the whole run is an async apply on
   * isolated-vm's thread.
   */
  async run(input: RunInput, timeoutMs: number, sliceMs = 0): Promise<IsolateRunOutput> {
    const runner = this.runner;
    if (!runner) throw new Error("isolate not loaded");
    let timedOut = false;
    let cancel: (() => void) | undefined;
    // V8's own timeout cuts CPU-bound code; the host deadline also covers a run
    // stuck awaiting (e.g. a never-settling promise) by disposing the isolate.
    // Made only when the run waits: a run that ends inside its synchronous
    // slice (bounded by V8's timeout) needs no timer and no promise.
    let watchdogPromise: Promise<never> | undefined;
    const watchdog = () =>
      (watchdogPromise ??= new Promise<never>((_, reject) => {
        cancel = deadline(timeoutMs + 20, () => {
          timedOut = true;
          reject(new Error(TIMEOUT_MESSAGE));
        });
      }));
    this.lastSliceMs = 0;
    let finishedInSlice = false;
    this.running = true;
    try {
      if (sliceMs > 0 && !this.idle) {
        // An async call runs only once the isolate is free: it proves the
        // earlier run's left-over work done without holding this thread.
        await Promise.race([runner.apply(undefined, [3], { timeout: timeoutMs }), watchdog()]);
        if (this.inflight === 0) this.idle = true;
        else sliceMs = 0; // a db call left running resumes the isolate later
      }
      const payload = JSON.stringify([
        input.req,
        { consumer: input.consumer, event: input.event, env: input.env, trigger: input.trigger, requestId: input.requestId },
      ]);
      let raw: unknown;
      if (sliceMs > 0) {
        const slice = Math.min(sliceMs, timeoutMs);
        // CPU time of this thread, not wall time: a slice preempted by the
        // machine (or by another process) would otherwise look slow and move
        // a quick version off the fast path.
        const t0 = threadCpuUs();
        try {
          runner.applySync(undefined, [1, payload], { timeout: slice });
          // Reads the run's output: no user code runs in this call (the
          // first call's microtask checkpoint finished the run and emptied
          // the queue), so it needs no timeout, whose timer costs a thread
          // handoff per call.
          raw = runner.applySync(undefined, [2]);
          finishedInSlice = raw !== undefined;
        } catch (err) {
          if (slice < timeoutMs && messageOf(err).includes(TIMEOUT_MESSAGE)) {
            this.dispose();
            return { kind: "slice", logs: [], logsTruncated: false };
          }
          throw err;
        } finally {
          this.lastSliceMs = (threadCpuUs() - t0) / 1000;
        }
        if (raw === undefined) raw = await Promise.race([new Promise<string>((resolve) => (this.settle = resolve)), watchdog()]);
      } else {
        raw = await Promise.race([runner.apply(undefined, [0, payload], { result: { promise: true }, timeout: timeoutMs }), watchdog()]);
      }
      if (typeof raw !== "string") throw new Error("the sandbox returned no result");
      const out = JSON.parse(raw) as RunnerOutput;
      const logs = Array.isArray(out.logs) ? out.logs : [];
      if (out.error !== undefined) return { kind: "error", error: String(out.error), logs, logsTruncated: !!out.truncated };
      return { kind: "ok", response: out.response, logs, logsTruncated: !!out.truncated };
    } catch (err) {
      const msg = messageOf(err);
      if (timedOut || msg.includes(TIMEOUT_MESSAGE)) {
        // The isolate may still be spinning: it is never reused.
        this.dispose();
        return { kind: "timeout", error: `timed out after ${timeoutMs} ms`, logs: [], logsTruncated: false };
      }
      if (this.isolate.isDisposed || /memory limit/i.test(msg)) {
        this.dispose();
        return { kind: "error", error: "memory limit exceeded", logs: [], logsTruncated: false };
      }
      // e.g. an argument that could not be copied in.
      return { kind: "error", error: msg, logs: [], logsTruncated: false };
    } finally {
      this.settle = undefined;
      this.idle = finishedInSlice && this.inflight === 0;
      this.running = false;
      cancel?.();
    }
  }

  get disposed(): boolean {
    return this.isolate.isDisposed;
  }

  private heapAt = 0;
  private heapBytes = 0;

  /**
   * Heap in use (plus external memory). Reading heap statistics costs about
   * 5% of a warm call, so it is read at most every HEAP_SAMPLE_MS per isolate
   * and the last reading is reused in between.
   */
  heapUsed(): number {
    if (this.isolate.isDisposed) return this.heapBytes;
    const now = performance.now();
    if (now - this.heapAt < HEAP_SAMPLE_MS && this.heapAt > 0) return this.heapBytes;
    try {
      const s = this.isolate.getHeapStatisticsSync();
      this.heapBytes = s.used_heap_size + s.externally_allocated_size;
      this.heapAt = now;
    } catch {
      // disposed meanwhile: keep the last reading
    }
    return this.heapBytes;
  }

  /** The last heap reading of heapUsed(), without reading again. */
  get heapSampled(): number {
    return this.heapBytes;
  }

  dispose(): void {
    const hs = this.handles;
    this.handles = [];
    this.runner = undefined;
    for (const h of hs) {
      try {
        h.release();
      } catch {
        // already released with the isolate
      }
    }
    if (!this.isolate.isDisposed) {
      try {
        this.isolate.dispose();
      } catch {
        // disposed concurrently (memory limit)
      }
    }
  }
}

function messageOf(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}

/** "SyntaxError: Unexpected token [function.js:1:20]", as the compiler said it. */
function describe(err: unknown): string {
  if (err instanceof Error) return err.name && err.name !== "Error" ? `${err.name}: ${err.message}` : err.message;
  return String(err);
}
