// Runs functions for every kind of trigger: resolves what to run (cached for
// `resolveCacheMs`), applies the plan and the rate limits, runs the version in
// the sandbox, shapes the response and records the invocation.
import { randomUUID } from "node:crypto";
import { appError } from "../../kernel/errors.js";
import type { ConsumerPrincipal } from "../../kernel/principal.js";
import { TtlCache } from "../../kernel/ttl-cache.js";
import type { Sandbox } from "../../infra/sandbox/sandbox.js";
import type { Sql } from "../../infra/storage/sql.js";
import { createLeasedLimiter, enforce, type Limit, type RateLimiter } from "../../infra/rate-limit/leased-limiter.js";
import { bucketPolicy } from "../../infra/rate-limit/bucket-policy.js";
import { localLimiter } from "../../infra/rate-limit/local-limiter.js";
import type { BackgroundResult, LogLine, RunResult } from "../../infra/sandbox/types.js";
import { moduleFileName } from "../../infra/sandbox/error-stack.js";
import type { FunctionStore, ResolvedRow } from "./function-store.js";
import type { FunctionsConfig } from "./config.js";
import type { InvocationRecord, InvocationRecorder } from "./invocation-recorder.js";
import { shapeResponse, type ShapedResponse } from "./response-shaping.js";
import { verifySignature } from "./webhook-signature.js";

export type TriggerKind = "http" | "event" | "manual" | "schedule";

/** The raw request of an HTTP trigger call, for the checks made before req is built. */
export interface HttpCall {
  /** Lower-cased header names. */
  headers: Record<string, string>;
  body: Uint8Array;
  clientAddress: string;
}

/** Warn-level lines about the user's code (a throw, a timeout): never server errors. */
export type UserErrorLog = (fields: Record<string, unknown>, message: string) => void;

/**
 * The error's name, message and stack. A thrown Error comes from the sandbox
 * with its parts (RunResult.errorName, errorMessage, errorStack); any other
 * failure has only its text ("Uncaught <value>" for a thrown non-error, or
 * why a run was cut), split at "Name: " when it starts with one, and no stack.
 */
export function errorDetailOf(result: Pick<RunResult, "error" | "errorName" | "errorMessage" | "errorStack">, outcome: string): { name: string; message: string; stack: string } {
  const text = result.error ?? "";
  if (outcome === "ok" || text === "") return { name: "", message: "", stack: "" };
  // (only a failed run has the parts: a later failure, the response's checks or the waitUntil work, replaces an ok run's error)
  if (result.errorName !== undefined && result.errorMessage !== undefined) {
    return { name: result.errorName, message: result.errorMessage, stack: result.errorStack ?? "" };
  }
  const m = /^([A-Za-z_$][\w$]*): ([\s\S]*)$/.exec(text);
  return m ? { name: m[1]!, message: m[2]!, stack: "" } : { name: "", message: text, stack: "" };
}

export interface RunReport {
  status: number;
  outcome: "ok" | "error" | "timeout";
  response?: ShapedResponse;
  error?: string;
  /** The error's parts (errorDetailOf). */
  errorName: string;
  errorMessage: string;
  errorStack: string;
  logs: LogLine[];
  logsTruncated: boolean;
  durationMs: number;
  memoryBytes: number;
  version: number;
  coldStart: boolean;
  invocationId?: number;
}

export interface RunRequest {
  resolved: ResolvedRow;
  req: unknown;
  consumer: unknown;
  event: unknown;
  triggerKind: TriggerKind;
  triggerId: number | null;
  requestId: string;
  /** Write the invocation record before returning (manual runs). */
  recordNow?: boolean;
}

const CODE_CACHE_MAX = 512;
const NO_ERROR = Object.freeze({ name: "", message: "", stack: "" });
const appBucket = (appId: number) => `app:${appId}`;
/** 404 not_found, the platform's code for anything absent: unknown, disabled or malformed slugs alike. */
const NO_SUCH_SLUG = "No enabled HTTP trigger matches this slug.";
const RESOLVE_CACHE_MAX = 10_000;
const RATE_LIMITED = "Function invocation rate limit reached.";
/** Token-less calls: the same answer for an unknown app key, an unknown slug and a consumer-mode trigger (nothing to probe). */
const NO_PUBLIC_SLUG = "No enabled public or signed HTTP trigger matches this slug.";
/** Token-less calls of nothing (404) one client address may make per minute before it gets 429. */
export const MISSES_PER_ADDRESS_PER_MINUTE = 60;

/**
 * Invocation limits per minute shared by every process: a token bucket per
 * key, leases dropped after 1 s unused (docs/functions-operator.md, "Rate limits").
 */
export function createInvocationLimiter(sql: Sql): RateLimiter {
  return createLeasedLimiter(bucketPolicy(sql, { name: "functions", periodMs: 60_000 }), { leaseMs: 1000 });
}

export function createFunctionRuntime(deps: {
  store: FunctionStore;
  sandbox: Sandbox;
  limiter: RateLimiter;
  recorder: InvocationRecorder;
  config: FunctionsConfig;
  /** Where a user's failed invocation is logged (warn, with app, function and version). */
  logUserError?: UserErrorLog;
}) {
  const { store, sandbox, limiter, recorder, config } = deps;
  // Per client address, per process (like the token-issue limits): a
  // cluster-wide bucket row per address would let a crowd of addresses grow
  // the bucket table without bound. The trigger's own limit is cluster-wide.
  const perAddress = config.publicPerAddressPerMinute > 0 ? localLimiter(config.publicPerAddressPerMinute, 60_000) : undefined;
  // Token-less calls that name nothing (a wrong key or slug) cost a lookup
  // and a cache entry each: an address that keeps probing is refused before
  // the lookup (per process).
  const misses = localLimiter(MISSES_PER_ADDRESS_PER_MINUTE, 60_000);
  const codeCache = new TtlCache<number, string>(Infinity, CODE_CACHE_MAX);
  const httpCache = new TtlCache<string, { row: ResolvedRow | undefined }>(config.resolveCacheMs, RESOLVE_CACHE_MAX);
  // Bumped by every invalidation: a lookup that started before one may have
  // read the old state, so its row serves its own request but is not cached
  // (it would otherwise bring the old plan or trigger back for resolveCacheMs).
  let generation = 0;
  function invalidate(): void {
    generation++;
    httpCache.clear();
  }

  // Versions are immutable, so their code is cached by version id for good.
  // A hit is answered without a promise (the warm path makes none it can avoid).
  function codeOf(versionId: number): string | Promise<string> {
    return codeCache.get(versionId) ?? loadCode(versionId);
  }
  async function loadCode(versionId: number): Promise<string> {
    const code = (await store.versionCode(versionId)) ?? "";
    codeCache.set(versionId, code);
    return code;
  }

  /** A cached resolution at once ({ row }), else the lookup's promise. */
  function cached(key: string, load: () => Promise<ResolvedRow | undefined>): { row: ResolvedRow | undefined } | Promise<ResolvedRow | undefined> {
    if (config.resolveCacheMs <= 0) return load();
    return httpCache.get(key) ?? lookup(key, load);
  }
  async function lookup(key: string, load: () => Promise<ResolvedRow | undefined>): Promise<ResolvedRow | undefined> {
    const started = generation;
    const row = await load();
    if (started !== generation) return row;
    httpCache.set(key, { row });
    return row;
  }

  // PostgreSQL refuses U+0000 in a parameter (a 500); no slug or key holds
  // one, so look up "" instead, which matches nothing either (the plan check
  // still comes first).
  const clean = (s: string) => (s.includes("\u0000") ? "" : s);

  async function resolved(r: { row: ResolvedRow | undefined } | Promise<ResolvedRow | undefined>): Promise<ResolvedRow | undefined> {
    return r instanceof Promise ? r : r.row;
  }

  function resolveHttp(appId: number, rawSlug: string): { row: ResolvedRow | undefined } | Promise<ResolvedRow | undefined> {
    const slug = clean(rawSlug);
    return cached(`${appId}\u0000${slug}`, () => store.resolveHttp(appId, slug));
  }

  function resolveHttpByKey(rawKey: string, rawSlug: string): Promise<ResolvedRow | undefined> {
    const appKey = clean(rawKey);
    const slug = clean(rawSlug);
    return resolved(cached(`k\u0000${appKey}\u0000${slug}`, () => store.resolveHttpByKey(appKey, slug)));
  }

  /** 429 past the per-address limit of token-less triggers (checked before anything costs more). */
  async function checkAddress(r: ResolvedRow, address: string): Promise<void> {
    if (perAddress) enforce(await perAddress.take(`${r.trigger_id}\u0000${address}`), "rate_limited", "Too many calls of this trigger from this address.");
  }

  /** Public and signed triggers: the per-address limit, the signature, then the trigger's own limit. */
  async function admitOpen(r: ResolvedRow, call: HttpCall): Promise<void> {
    await checkAddress(r, call.clientAddress);
    if (r.signed) {
      const check = verifySignature(call.headers[r.signed.header], call.body, r.signed.secret, r.signed.toleranceS);
      if (!check.ok) throw appError("unauthenticated", `The request signature was refused: ${check.reason}`);
    }
    enforce(await limiter.take({ key: `trig:${r.trigger_id}`, limit: config.publicTriggerPerMinute }), "rate_limited", "This trigger's rate limit was reached.");
  }

  /** The effective limits: the function's settings clamped by the plan now in force and the process bounds. */
  function effective(r: ResolvedRow): { timeoutMs: number; memoryMb: number } {
    const timeoutMs = Math.max(1, Math.min(r.timeout_ms, r.plan.functionMaxTimeoutMs || Infinity, config.maxTimeoutMs));
    const memoryMb = Math.max(config.minMemoryMb, Math.min(r.memory_mb, r.plan.functionMaxMemoryMb || Infinity, config.maxMemoryMb));
    return { timeoutMs, memoryMb };
  }

  /** The application's and the function's per-minute limits. */
  function invocationLimits(r: ResolvedRow, appId: number): [Limit, Limit] {
    return [{ key: appBucket(appId), limit: r.plan.functionInvocationsPerMinute }, { key: `fn:${r.function_id}`, limit: r.invocations_per_minute }];
  }

  async function checkRate(r: ResolvedRow, appId: number): Promise<void> {
    enforce(await limiter.take(...invocationLimits(r, appId)), "rate_limited", RATE_LIMITED);
  }

  /**
   * Runs the version and reports. Without a promise when the code is cached
   * and the sandbox answers at once (a warm isolate, a run inside its slice):
   * the warm path of a quick HTTP function has no await.
   */
  function run(appId: number, rq: RunRequest): RunReport | Promise<RunReport> {
    const r = rq.resolved;
    const code = codeOf(r.version_id!);
    const start = (c: string): RunReport | Promise<RunReport> => {
      const { timeoutMs, memoryMb } = effective(r);
      const result = sandbox.run(
        { versionId: r.version_id!, appId, code: c, memoryMb, timeoutMs, fileName: moduleFileName(r.function_name, r.version ?? 0) },
        { req: rq.req, consumer: rq.consumer, event: rq.event, env: r.env, trigger: rq.triggerKind, requestId: rq.requestId },
      );
      return result instanceof Promise ? result.then((x) => report(appId, rq, x)) : report(appId, rq, result);
    };
    return typeof code === "string" ? start(code) : code.then(start);
  }

  /** The run's report; the invocation recorded (at once for manual and schedule runs, which wait for their id). */
  function report(appId: number, rq: RunRequest, result: RunResult): RunReport | Promise<RunReport> {
    const r = rq.resolved;
    let logs = result.logs;
    let status: number;
    let response: ShapedResponse | undefined;
    let error = result.error;
    if (result.outcome === "ok") {
      const shaped = shapeResponse(result.response, sandbox.limits.maxResponseBytes);
      for (const w of shaped.warnings) logs.push({ level: "warn", message: `[pulsebase] ${w}` });
      if (shaped.ok) {
        status = shaped.response.status;
        response = shaped.response;
      } else {
        status = 500;
        error = shaped.error;
      }
    } else {
      // a run refused for its application's full isolate queue is the platform's 503, not the function's 500
      status = result.outcome === "timeout" ? 504 : result.busy ? 503 : 500;
    }
    let outcome: RunReport["outcome"] = status === 504 ? "timeout" : response ? "ok" : "error";
    // The error's parts (name, message, stack), worked out once for the
    // record, the report and the warn line (again only if the background
    // work changes the outcome).
    let detailOf: { outcome: string; error: string | undefined; parts: { name: string; message: string; stack: string } } | undefined;
    const detail = () => {
      if (outcome === "ok") return NO_ERROR;
      if (detailOf?.outcome !== outcome || detailOf.error !== error) detailOf = { outcome, error, parts: errorDetailOf({ ...result, error }, outcome) };
      return detailOf.parts;
    };
    const userFields = () => ({ appId, functionId: r.function_id, version: r.version, trigger: rq.triggerKind, triggerId: rq.triggerId, requestId: rq.requestId });
    if (outcome !== "ok" && deps.logUserError) {
      // with the stack in the deployed code's lines, as the invocation record has it
      const stack = detail().stack;
      deps.logUserError({ ...userFields(), outcome, error, ...(stack !== "" && { stack }) }, outcome === "timeout" ? "function timed out" : "function failed");
    }
    // ctx.waitUntil work (docs/functions.md, "Timers and waitUntil"): an
    // HTTP caller has its response now and the invocation is recorded when
    // the work is over; every other trigger's invocation ends with it, and
    // work cut by the timeout (or failing) makes that invocation a timeout
    // (or an error), so an event is retried.
    let durationMs = result.durationMs;
    let memoryBytes = result.memoryBytes;
    let logsTruncated = result.logsTruncated;
    const withBackground = (bg: BackgroundResult) => {
      logs = [...logs, ...bg.logs];
      logsTruncated ||= bg.logsTruncated;
      durationMs = bg.durationMs;
      memoryBytes = bg.memoryBytes;
      if (bg.outcome === "ok") return;
      deps.logUserError?.({ ...userFields(), outcome: bg.outcome, error: bg.error }, bg.outcome === "timeout" ? "function background work timed out" : "function background work failed");
      if (rq.triggerKind === "http" || outcome !== "ok") return;
      outcome = bg.outcome;
      status = bg.outcome === "timeout" ? 504 : 500;
      error = bg.error;
    };
    if (result.background && rq.triggerKind === "http") {
      const report = reportOf(undefined);
      void result.background
        .then((bg) => {
          withBackground(bg);
          recorder.record(recordOf());
        })
        // (nothing here rejects; an unhandled rejection would end the process)
        .catch(() => undefined);
      return report;
    }
    if (result.background || rq.recordNow) return later(result.background);
    recorder.record(recordOf());
    return reportOf(undefined);

    /** The waits of runs that are not HTTP calls: their ctx.waitUntil work, and the recorded id. */
    async function later(background: Promise<BackgroundResult> | undefined): Promise<RunReport> {
      if (background) withBackground(await background);
      let invocationId: number | undefined;
      if (rq.recordNow) invocationId = await recorder.recordNow(recordOf());
      else recorder.record(recordOf());
      return reportOf(invocationId);
    }

    function recordOf(): InvocationRecord {
      const parts = detail();
      return {
        appId,
        functionId: r.function_id!,
        version: r.version,
        triggerKind: rq.triggerKind,
        triggerId: rq.triggerId,
        status,
        outcome,
        durationMs,
        memoryBytes,
        error: error ?? null,
        errorName: parts.name,
        errorMessage: parts.message,
        errorStack: parts.stack,
        logs,
        logsTruncated,
        requestId: rq.requestId,
      };
    }

    function reportOf(invocationId: number | undefined): RunReport {
      const parts = detail();
      return {
        status,
        outcome,
        response,
        error,
        errorName: parts.name,
        errorMessage: parts.message,
        errorStack: parts.stack,
        logs,
        logsTruncated,
        durationMs,
        memoryBytes,
        version: r.version ?? 0,
        coldStart: result.coldStart,
        invocationId,
      };
    }
  }

  /** invokeHttp once the trigger is resolved: 404 (no trigger), 402, 404 (no function), 503, the open triggers' checks, req (422), 429, then the run. */
  function invokeResolved(consumer: ConsumerPrincipal, r: ResolvedRow | undefined, buildReq: () => unknown, requestId: string, call: HttpCall | undefined): ShapedResponse | Promise<ShapedResponse> {
    if (!r) throw appError("not_found", NO_SUCH_SLUG);
    if (config.enforcePlan && !r.plan.functionsEnabled) throw appError("plan_required");
    if (r.function_id === null) throw appError("not_found", NO_SUCH_SLUG);
    if (r.version_id === null) throw appError("no_active_version");
    const withReq = (): ShapedResponse | Promise<ShapedResponse> => {
      const built = buildReq();
      return built instanceof Promise ? built.then((req: unknown) => rateThenRun(consumer, r, req, requestId)) : rateThenRun(consumer, r, built, requestId);
    };
    if (r.trigger_auth !== "consumer") return admitOpen(r, call ?? { headers: {}, body: new Uint8Array(), clientAddress: "" }).then(withReq);
    return withReq();
  }

  function rateThenRun(consumer: ConsumerPrincipal, r: ResolvedRow, req: unknown, requestId: string): ShapedResponse | Promise<ShapedResponse> {
    const go = (): ShapedResponse | Promise<ShapedResponse> => {
      const rep = run(consumer.appId, {
        resolved: r,
        req,
        consumer: { id: consumer.consumerId, user_id: consumer.userId, device_id: consumer.deviceId },
        event: null,
        triggerKind: "http",
        triggerId: r.trigger_id,
        requestId,
      });
      return rep instanceof Promise ? rep.then((x) => answer(x, requestId)) : answer(rep, requestId);
    };
    const now = limiter.takeNow(...invocationLimits(r, consumer.appId));
    if (now === undefined) return checkRate(r, consumer.appId).then(go);
    enforce(now, "rate_limited", RATE_LIMITED);
    return go();
  }

  function answer(report: RunReport, requestId: string): ShapedResponse {
    if (report.status === 504) throw appError("function_timeout");
    if (report.status === 503) throw appError("unavailable", "Too many runs of this application are waiting for a function isolate; retry shortly.", { retryAfterSeconds: 1 });
    if (!report.response) throw appError("function_error", `The function failed. Request id: ${requestId}`);
    return report.response;
  }

  return {
    /**
     * The HTTP trigger. Checks in order: 402 plan (when enforced), 404
     * not_found (no enabled trigger), 503 no active version, 429 rate limit; then runs:
     * 500 when the function failed, 504 past its timeout.
     */
    invokeHttp(
      consumer: ConsumerPrincipal,
      slug: string,
      /** Builds req (parses the body) once the trigger is known to exist: a bad body is a 422 only then. */
      buildReq: () => unknown,
      requestId: string,
      /** The raw request, for the signature and per-address checks of public and signed triggers. */
      call?: HttpCall,
    ): ShapedResponse | Promise<ShapedResponse> {
      // Without a promise on the warm path (cached trigger, leased tokens, a
      // warm isolate that answers inside its slice); any step that has to
      // wait goes on asynchronously from there.
      const hit = resolveHttp(consumer.appId, slug);
      if (hit instanceof Promise) return hit.then((r) => invokeResolved(consumer, r, buildReq, requestId, call));
      return invokeResolved(consumer, hit.row, buildReq, requestId, call);
    },

    /**
     * A public or signed HTTP trigger called without a token, the
     * application named by its key. Checks in order: 404 (unknown key or
     * slug, a disabled or consumer-mode trigger), 402 plan, 503 no active
     * version, 429 per address, 401 signature (signed), 429 per trigger,
     * then as invokeHttp with ctx.consumer null.
     */
    async invokePublic(appKey: string, slug: string, buildReq: () => unknown, requestId: string, call: HttpCall): Promise<ShapedResponse> {
      enforce(await misses.peek(call.clientAddress), "rate_limited", "Too many calls of absent triggers from this address.");
      const miss = () => {
        void misses.charge(call.clientAddress);
        return appError("not_found", NO_PUBLIC_SLUG);
      };
      const r = await resolveHttpByKey(appKey, slug);
      if (!r) throw miss();
      if (config.enforcePlan && !r.plan.functionsEnabled) throw appError("plan_required");
      if (r.function_id === null || r.trigger_auth === "consumer") throw miss();
      if (r.version_id === null) throw appError("no_active_version");
      await admitOpen(r, call);
      const req: unknown = await buildReq();
      await checkRate(r, r.app_id);
      return answer(await run(r.app_id, { resolved: r, req, consumer: null, event: null, triggerKind: "http", triggerId: r.trigger_id, requestId }), requestId);
    },

    /** A manual (operator) run of the active or a given version. */
    async runManual(functionId: number, version: number, payload: unknown): Promise<RunReport> {
      const r = await store.resolveFunction(functionId, version);
      if (!r) throw appError("not_found", "No such function.");
      if (r.version_id === null) {
        if (version > 0) throw appError("not_found", `The function has no version ${version}.`);
        throw appError("no_active_version");
      }
      return run(r.app_id, {
        resolved: r,
        req: payload ?? null,
        consumer: null,
        event: null,
        triggerKind: "manual",
        triggerId: null,
        requestId: randomUUID(),
        recordNow: true,
      });
    },

    /**
     * One tick of a schedule trigger, recorded at once (the run history
     * links the invocation). Undefined when the function has no active
     * version; a catalogue error when the plan or the rate limit refuses it.
     */
    async runSchedule(functionId: number, triggerId: number, event: unknown, requestId: string): Promise<RunReport | undefined> {
      const r = await store.resolveFunction(functionId, 0);
      if (!r || r.version_id === null) return undefined;
      if (config.enforcePlan && !r.plan.functionsEnabled) throw appError("plan_required");
      await checkRate(r, r.app_id);
      return run(r.app_id, { resolved: r, req: null, consumer: null, event, triggerKind: "schedule", triggerId, requestId, recordNow: true });
    },

    /** An event-trigger run (at-least-once delivery calls this per change). */
    async runEvent(appId: number, functionId: number, triggerId: number, event: unknown, requestId: string): Promise<RunReport | undefined> {
      const r = await store.resolveFunction(functionId, 0);
      if (!r || r.version_id === null) return undefined;
      if (config.enforcePlan && !r.plan.functionsEnabled) return undefined;
      return run(appId, { resolved: r, req: null, consumer: null, event, triggerKind: "event", triggerId, requestId });
    },

    /** Forgets cached resolutions (after any change made through this process). */
    invalidate,

    /**
     * An application's plan changed in this process: cached resolutions
     * (which carry the plan) go, also those of lookups still in flight, so
     * the next invocation is judged by the new plan. Tokens leased under the
     * old limit are not spent under the new one (src/infra/rate-limit/leased-limiter.ts).
     */
    planChanged: invalidate,
  };
}

export type FunctionRuntime = ReturnType<typeof createFunctionRuntime>;
