// Shapes shared by the sandbox parts: what the host passes in for one run and
// what comes back. Everything crossing the isolate boundary is copied (plain
// data), never a host object.
import { availableParallelism } from "node:os";

/** One captured console line of an invocation. */
export interface LogLine {
  level: "log" | "info" | "warn" | "error" | "debug";
  message: string;
}

/** The function's raw response as produced inside the isolate (validated on the host). */
export interface RawResponse {
  /** Whatever the function put in `status` (undefined when not shaped or not set). */
  status: unknown;
  /** Header pairs as the function gave them (values stringified in the isolate). */
  headers: Array<[string, string]>;
  /** Body text: the string body as is, or the JSON serialisation. */
  body: string;
  /** True when the body was a string (text/plain default). */
  text: boolean;
}

export interface SandboxLimits {
  /** Upper bound on isolates across the process (all versions). */
  maxIsolates: number;
  /** Warm isolates kept per function version (the per-version pool bound). */
  isolatesPerVersion: number;
  /**
   * Isolates one application's runs hold at once (a run awaiting a timer or
   * a fetch holds its isolate); its further runs wait in its own queue,
   * served in turn with the other applications'. 0: a quarter of
   * maxIsolates, at least 1.
   */
  appIsolates: number;
  /** Heap the process's isolates may keep between runs, in bytes (their samples taken while idle). */
  heapBudgetBytes: number;
  /** Heap one application's isolates may keep, in bytes; 0: a quarter of heapBudgetBytes. */
  appHeapBytes: number;
  /** An isolate holding more heap than this after a run is disposed rather than kept warm, in bytes. */
  keepHeapBytes: number;
  /** An isolate idle this long is released. */
  idleMs: number;
  /** Largest response body in bytes (UTF-8). */
  maxResponseBytes: number;
  /** Captured console output per invocation, in characters. */
  maxLogChars: number;
  /** One console line is cut at this many characters. */
  maxLogLineChars: number;
  /** Deploy-time compile check: timeout for the module's top-level code. */
  compileTimeoutMs: number;
  /**
   * Hard cut of a run's synchronous slice on the service's thread (the fast
   * path, see function-isolate.ts); 0 runs everything on isolated-vm's threads.
   */
  syncSliceMs: number;
  /**
   * A version whose warm synchronous slices take more CPU than this (the
   * median of the last eleven) leaves the fast path for slowRecheckMs, then is
   * judged again: its runs no longer hold up the service's thread.
   */
  syncBudgetMs: number;
  /** How long a version stays off the fast path before it is judged again. */
  slowRecheckMs: number;
  /** Calls of one invocation to one host capability handled at once; more wait. */
  hostCallsRunning: number;
  /** Calls of one invocation to one host capability waiting for one of those slots; more fail with its busyCode. */
  hostCallsQueued: number;
}

export const DEFAULT_SANDBOX_LIMITS: SandboxLimits = {
  maxIsolates: 64,
  // Isolate threads compete for the cores: more warm isolates than about
  // two per core only adds contention (measured: 4 > 16 > 32 on 2 cores).
  isolatesPerVersion: Math.max(2, availableParallelism() * 2),
  appIsolates: 0,
  // 64 isolates keeping 32 MiB each; a quarter per application (docs/functions-operator.md, "Sharing the isolates")
  heapBudgetBytes: 2 * 1024 ** 3,
  appHeapBytes: 0,
  keepHeapBytes: 64 * 1024 ** 2,
  idleMs: 60_000,
  maxResponseBytes: 6 * 1024 * 1024,
  maxLogChars: 16 * 1024,
  maxLogLineChars: 2 * 1024,
  compileTimeoutMs: 1_000,
  syncSliceMs: 10,
  syncBudgetMs: 1,
  slowRecheckMs: 60_000,
  hostCallsRunning: 4,
  hostCallsQueued: 100,
};

/** What identifies the code to run and how much it may use. */
export interface RunTarget {
  /** Key of the pool (one per function version). */
  versionId: number;
  appId: number;
  code: string;
  memoryMb: number;
  timeoutMs: number;
  /** The module's file name in stack frames (error-stack.ts moduleFileName); "function.js" when unset. */
  fileName?: string;
}

/** The handler's inputs. */
export interface RunInput {
  req: unknown;
  consumer: unknown;
  event: unknown;
  env: Record<string, string>;
  /** "http" | "event" | "manual" */
  trigger: string;
  requestId: string;
}

export interface RunResult {
  outcome: "ok" | "error" | "timeout";
  /** The run never started: its application's queue for an isolate was full (retry shortly; not the function's fault). */
  busy?: boolean;
  response?: RawResponse;
  /** The thrown error's message (outcome "error"), or why the run was cut. */
  error?: string;
  /**
   * Set when the function threw (or rejected with) an Error: its name,
   * message and stack, whose frames name the module as RunTarget.fileName
   * with the deployed line and column, platform frames shown as
   * "at <platform>" (error-stack.ts).
   */
  errorName?: string;
  errorMessage?: string;
  errorStack?: string;
  logs: LogLine[];
  logsTruncated: boolean;
  durationMs: number;
  /** Heap in use by the isolate, as last sampled while it was idle (after this run when it ended on the service's thread). */
  memoryBytes: number;
  /** True when this run had to create (and compile into) a new isolate. */
  coldStart: boolean;
  /**
   * Set when the handler handed work to ctx.waitUntil (docs/functions.md,
   * "Timers and waitUntil"): the response above is ready now, the run goes
   * on until that work settles or the timeout cuts it.
   */
  background?: Promise<BackgroundResult>;
}

/** What a run's ctx.waitUntil work came to. */
export interface BackgroundResult {
  /** "timeout": cut at the function's timeout (counted from the run's start). */
  outcome: "ok" | "error" | "timeout";
  error?: string;
  /** The lines logged after the response. */
  logs: LogLine[];
  logsTruncated: boolean;
  /** The whole run's duration, response and background. */
  durationMs: number;
  memoryBytes: number;
}
