// Configuration of the functions module (passed in by the app factory).
import type { SandboxLimits } from "../../infra/sandbox/types.js";
import type { RecorderOptions } from "./invocation-recorder.js";
import type { KvLimits } from "./kv-store.js";
import type { FetchLimits } from "../../infra/sandbox/fetch-host.js";

export interface FunctionsConfig {
  /** When on, an application whose plan has functionsEnabled=false gets 402 plan_required. */
  enforcePlan: boolean;
  /** Settings given to a new function when none are set (then bounded by the plan). */
  defaultTimeoutMs: number;
  defaultMemoryMb: number;
  /** Process-wide upper bounds, whatever the plan says. */
  maxTimeoutMs: number;
  maxMemoryMb: number;
  /** isolated-vm needs at least 8 MB; small heaps also make startup fail. */
  minMemoryMb: number;
  /** How long a resolved HTTP trigger (plan, trigger, active version, secrets) is reused; 0 = never cached. */
  resolveCacheMs: number;
  sandbox: Partial<SandboxLimits>;
  recorder: Partial<RecorderOptions>;
  /** Calls of one public or signed trigger per minute, across all processes (0 = unlimited). */
  publicTriggerPerMinute: number;
  /** Calls of one public or signed trigger per minute from one client address, per process (0 = unlimited). */
  publicPerAddressPerMinute: number;
  /** Schedule triggers per application. */
  maxSchedulesPerApp: number;
  /** HTTP trigger answers carry the sandbox CSP (response-shaping.ts, FUNCTION_SANDBOX_CSP). */
  sandboxCsp: boolean;
  scheduler: Partial<SchedulerOptions>;
  kv: Partial<KvLimits>;
  /** Per-invocation limits of fetch (docs/functions.md, "Calling other services: fetch"). */
  fetch: Partial<FetchLimits>;
}

export interface SchedulerOptions {
  /** How often each process looks for due ticks. */
  pollMs: number;
  /** A tick later than this is missed (handled by the trigger's missed-tick policy). */
  graceMs: number;
  /** Scheduled runs one process runs at once; past it, it claims nothing (another process may). */
  maxConcurrent: number;
  /** Run history older than this is deleted (checked hourly); 0 keeps it. */
  retentionDays: number;
  /** A run still "running" after this long belonged to a process that stopped: it is marked failed. */
  abandonAfterMs: number;
}

export const DEFAULT_FUNCTIONS_CONFIG: FunctionsConfig = {
  enforcePlan: true,
  defaultTimeoutMs: 5_000,
  defaultMemoryMb: 64,
  maxTimeoutMs: 30_000,
  maxMemoryMb: 256,
  minMemoryMb: 16,
  resolveCacheMs: 1_000,
  sandbox: {},
  recorder: {},
  publicTriggerPerMinute: 600,
  publicPerAddressPerMinute: 120,
  maxSchedulesPerApp: 50,
  sandboxCsp: true,
  scheduler: {},
  kv: {},
  fetch: {},
};
