// One isolate holding one function version: a fresh V8 isolate with its own
// heap limit, one context, the bootstrap and the function's module. Used by
// one invocation at a time (the pool leases it), so console capture and the
// wall-clock timeout apply to exactly one run. Every isolated-vm handle it
// creates is released in dispose() (or in finally when setup fails).
//
// A run must not outlive itself. Any synchronous call
// into an isolate from the service's thread (applySync,
// getHeapStatisticsSync) waits while code of that isolate runs, and code an
// isolate resumes on its own (isolated-vm settling a promise it awaited)
// runs with no time limit; isolate.dispose() does not reliably stop code
// that starts at that very moment (seen: a thread spinning on after
// dispose). So:
// - code runs in an isolate only inside calls this class makes, each with
//   a V8 time limit ending at the run's deadline: host calls (ctx.db, ctx.kv)
//   leave the isolate fire-and-forget and their answers go in through such a
//   call (see bootstrap.ts, host-channel.ts), one call at a time;
// - once a run has ended (answered, timed out), its calls are never answered;
//   a run that ended with calls pending, or makes one after it ended, gets
//   its isolate disposed (never pooled again), and the run's AbortSignal
//   cancels what its host calls still wait for or run on;
// - the service's thread calls synchronously only into an isolate known to
//   be idle (no call of ours in flight): the fast path's first call, and the
//   heap sample that metrics read.
// Timers and ctx.waitUntil follow the same rules (timers.ts): a due timer is
// run by such a call, and a run whose handler handed work to ctx.waitUntil
// answers first and ends only when that work settles or at its deadline.
import ivm from "isolated-vm";
import { BOOTSTRAP_SOURCE } from "./bootstrap.js";
import { MAX_WEB_BYTES_PER_RUN, MAX_WEB_INPUT_BYTES, WEB_APIS_SOURCE, webHost, type WebBudget } from "./web-apis.js";
import { hostDispatch, HostRun, type HostReply } from "./host-channel.js";
import { RunWake, TIMERS_SOURCE } from "./timers.js";
import { FETCH_API_SOURCE, FETCH_CAPABILITIES } from "./fetch-api.js";
import { cleanLogLine, errorStack } from "./error-stack.js";
import { deadline } from "../../kernel/deadlines.js";
import type { HostCapability } from "../../kernel/host-capability.js";
import type { LogLine, RawResponse, RunInput, SandboxLimits } from "./types.js";

export class CompileError extends Error {}

interface RunnerOutput {
  response?: RawResponse;
  error?: string;
  /** A thrown Error's name, message and raw stack (bootstrap.ts). */
  name?: string;
  message?: string;
  stack?: string;
  logs?: LogLine[];
  truncated?: boolean;
  /** Host calls still pending when the run finished, per capability. */
  left?: Record<string, number>;
  /** The handler handed work to ctx.waitUntil: the run goes on, its output comes later. */
  bg?: boolean;
}

/** What the ctx.waitUntil work of a run came to (after the response). */
export interface BackgroundOutput {
  kind: "ok" | "error" | "timeout";
  /** Why the work was cut (timeout, memory). */
  error?: string;
  /** The lines logged after the response. */
  logs: LogLine[];
  logsTruncated: boolean;
}

export interface IsolateRunOutput {
  /** "slice": the synchronous slice ran out before the run finished; nothing of it took effect. */
  kind: "ok" | "error" | "timeout" | "slice";
  response?: RawResponse;
  error?: string;
  /** A thrown Error's name, message and cleaned stack (error-stack.ts). */
  errorName?: string;
  errorMessage?: string;
  errorStack?: string;
  logs: LogLine[];
  logsTruncated: boolean;
  /** Set when the handler handed work to ctx.waitUntil: the run goes on until this settles. */
  background?: Promise<BackgroundOutput>;
}

const TIMEOUT_MESSAGE = "Script execution timed out.";

/** One run as FunctionIsolate.run carries it through its sync and async parts. */
interface RunState {
  run: HostRun;
  timeoutMs: number;
  /** The run goes on in the background (ctx.waitUntil): that part ends it. */
  handedOff: boolean;
  timedOut: boolean;
  /** Cancels the watchdog, once there is one. */
  cancel: (() => void) | undefined;
  watchdog: Promise<never> | undefined;
}
export const HEAP_SAMPLE_MS = 50;

export class FunctionIsolate {
  readonly isolate: ivm.Isolate;
  private handles: Array<{ release(): void }> = [];
  private runner: ivm.Reference<(mode: number, input?: string, notify?: boolean, run?: number | ArrayBuffer[], deadlineAt?: number) => unknown> | undefined;
  /** The run waiting for its output (fast path after the slice, and the slow path). */
  private settle: ((output: string) => void) | undefined;
  /** Fails that run: a call into the isolate timed out or hit the memory limit. */
  private fail: ((err: unknown) => void) | undefined;
  lastUsed = Date.now();
  busy = false;
  /** CPU time of the last fast-path run's synchronous slice in the isolate, in ms (0 after a slow-path run). */
  lastSliceMs = 0;
  /** The run in progress; undefined between runs (a host call then comes from left-over work). */
  private current: HostRun | undefined;
  /** One async call of ours into the isolate is in flight (the slow start, or answers going in). */
  private entering = false;
  /** Something was left behind (pending calls, a call after the end, a failed call in): never reused. */
  private dirty = false;
  /**
   * Set after a run that ended while a call of ours into the isolate was
   * still in flight: the isolate goes back to the pool only when this
   * resolves, idle or disposed.
   */
  afterRun: Promise<void> | undefined;
  /** What the current run (or the module's top level) may still hand the host's crypto (web-apis.ts). */
  private readonly webBudget: WebBudget = { bytes: MAX_WEB_BYTES_PER_RUN };
  private afterRunDone: (() => void) | undefined;
  /** Runs started in this isolate: the isolate's timers tell which run they belong to. */
  private runs = 0;
  /** The current run's timers (made on its first timer). */
  private wake: RunWake | undefined;
  /** The background output of a run, when it came before the host waited for it. */
  private early: string | undefined;
  /** The current run's deadline on the isolate's clock (Date.now() ms). */
  private deadlineAt = 0;
  private constructor(
    memoryMb: number,
    private readonly appId: number,
    /** The module's name in stack frames (error-stack.ts). */
    private readonly fileName: string,
  ) {
    this.isolate = new ivm.Isolate({ memoryLimit: memoryMb });
  }

  /**
   * Creates an isolate and loads the module into it. Throws CompileError with
   * the compiler's (or the top-level code's) message when the code is unusable.
   */
  static async create(
    code: string,
    memoryMb: number,
    limits: SandboxLimits,
    appId: number,
    capabilities: readonly HostCapability[],
    evalTimeoutMs: number,
    fileName = "function.js",
  ): Promise<FunctionIsolate> {
    const fi = new FunctionIsolate(memoryMb, appId, fileName);
    try {
      await fi.load(code, limits, capabilities, evalTimeoutMs);
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

  private async load(code: string, limits: SandboxLimits, capabilities: readonly HostCapability[], evalTimeoutMs: number): Promise<void> {
    const context = this.keep(await this.isolate.createContext());
    // URL, TextEncoder, crypto, ... (web-apis.ts): synchronous host calls, nothing left pending
    const installWeb = this.keep(await context.eval(WEB_APIS_SOURCE, { reference: true, timeout: evalTimeoutMs }));
    const webRef = this.keep(new ivm.Reference((...args: unknown[]) => webHost(this.webBudget, ...(args as [unknown]))));
    await installWeb.apply(undefined, [webRef, MAX_WEB_INPUT_BYTES], { timeout: evalTimeoutMs });
    // fetch, Request, Response, Headers, AbortController (fetch-api.ts): installed by the bootstrap with its channel
    const installFetch = this.keep(await context.eval(FETCH_API_SOURCE, { reference: true, timeout: evalTimeoutMs }));
    const factory = this.keep(await context.eval(BOOTSTRAP_SOURCE, { reference: true, timeout: evalTimeoutMs }));
    const installTimers = this.keep(await context.eval(TIMERS_SOURCE, { reference: true, timeout: evalTimeoutMs }));
    // The isolate's earliest timer is due (fire-and-forget, like host calls).
    const wakeRef = this.keep(new ivm.Reference((run: number, dueAt: number) => this.onWake(run, dueAt)));
    const dispatch = hostDispatch(capabilities, limits, (run, id, reply) => this.answer(run, id, reply));
    // A host call made by the isolate (fire-and-forget, see bootstrap.ts). It
    // arrives only after the call into the isolate that made it returned. A
    // run cut at its slice is run again elsewhere: its calls find the
    // isolate disposed and never reach their capability.
    const onCall = (id: number, name: string, method: string, args: unknown[]): void => {
      if (this.isolate.isDisposed) return;
      const run = this.current;
      if (!run || run.ended) {
        // Left behind by a run that ended: never answered, and the isolate
        // is not used again (disposed now if nothing holds it).
        this.dirty = true;
        if (!this.busy) this.dispose();
        return;
      }
      dispatch(run, id, name, method, args);
    };
    const hostRef = this.keep(new ivm.Reference(onCall));
    const doneRef = this.keep(
      new ivm.Reference((output: string) => {
        const settle = this.settle;
        this.settle = this.fail = undefined;
        if (settle) settle(output);
        else this.early = output;
      }),
    );
    const setup = {
      maxLogChars: limits.maxLogChars,
      maxLogLineChars: limits.maxLogLineChars,
      maxResponseBytes: limits.maxResponseBytes,
      // the method names per capability, from which the bootstrap builds ctx
      capabilities: Object.fromEntries(capabilities.map((c) => [c.name, Object.keys(c.methods)])),
      hidden: FETCH_CAPABILITIES,
      // the isolate refuses fetches past the limit without a host call (the host checks too)
      fetchSubrequests: capabilities.find((c) => c.name === "fetch")?.callLimits?.queued ?? 0,
    };
    const bind = this.keep(
      await factory.apply(undefined, [hostRef, new ivm.ExternalCopy(setup).copyInto({ release: true }), installTimers.derefInto(), wakeRef, installFetch.derefInto()], {
        result: { reference: true },
        timeout: evalTimeoutMs,
      }),
    );

    let mod: ivm.Module;
    try {
      // as deployed, nothing prepended: frames carry the deployed line and column (error-stack.ts)
      mod = this.keep(await this.isolate.compileModule(code, { filename: this.fileName }));
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
        (mode: number, input?: string, notify?: boolean, run?: number | ArrayBuffer[], deadlineAt?: number) => unknown
      >,
    );
    // Idle: the module's code and its microtasks ran within the eval timeout,
    // and nothing else can start code in the isolate.
    this.sampleHeap(true);
    // not a run's heap: the first run's end is sampled whatever the throttle
    this.heapAt = -Infinity;
  }

  /** A host call's reply, for the isolate: goes in with the next call into it (dropped once the run ended). */
  private answer(run: HostRun, id: number, reply: HostReply): void {
    if (run.ended || this.isolate.isDisposed) return;
    run.outbox.push([id, reply]);
    if (!this.entering) this.sendAnswers(run);
  }

  /** A timer of the isolate is due at `dueAt`: the host wakes the current run then (never past its deadline). */
  private onWake(runNo: number, dueAt: number): void {
    const run = this.current;
    if (this.isolate.isDisposed || runNo !== this.runs || !run || run.ended) return;
    this.wake ??= new RunWake(this.deadlineAt, () => {
      if (!this.entering && this.current === run) this.sendAnswers(run);
    });
    this.wake.schedule(dueAt);
  }

  /** Hands the waiting answers (and due timers) in: one async call, with the time the run has left. */
  private sendAnswers(run: HostRun): void {
    const runner = this.runner;
    const left = run.deadlineAt - performance.now();
    // past the deadline the run's watchdog ends it
    if (!runner || left < 1 || run.ended) return;
    if (run.outbox.length > 0) {
      const answers = run.outbox;
      run.outbox = [];
      const bytes = takeBytes(answers);
      this.enter(run, runner.apply(undefined, [4, JSON.stringify(answers), this.wake?.take() === true, bytes], { timeout: Math.ceil(left) }));
    } else if (this.wake?.take()) {
      this.enter(run, runner.apply(undefined, [5], { timeout: Math.ceil(left) }));
    }
  }

  /** Fails the run waiting for its output. */
  private failRun(err: unknown): void {
    const fail = this.fail;
    this.settle = this.fail = undefined;
    fail?.(err);
  }

  /** Tracks one async call into the isolate (at most one at a time). */
  private enter(run: HostRun, call: Promise<unknown>): void {
    this.entering = true;
    call.then(
      () => this.entered(run),
      (err: unknown) => {
        // timed out (the run's deadline) or killed (memory): the run fails,
        // or if it had already answered, the isolate is not used again
        this.dirty = true;
        if (!run.ended) this.failRun(err);
        this.entered(run);
      },
    );
  }

  private entered(run: HostRun): void {
    this.entering = false;
    if (this.isolate.isDisposed && !run.ended) {
      // killed inside the call's microtasks (memory limit): the call itself may still have resolved
      return this.failRun(new Error("the isolate was disposed: memory limit"));
    }
    if (!run.ended) this.sendAnswers(run);
    else this.afterRunDone?.();
  }

  /**
   * Runs one invocation. `timeoutMs` bounds the whole run (CPU and awaits).
   *
   * With `sliceMs` > 0 the run starts inside a synchronous call on this
   * thread, cut after `sliceMs` (V8's own timeout): a warm async apply costs
   * the host about 4x the CPU of two synchronous calls (measured with
   * isolated-vm 7 on one core: 35-45 us against 8.5 us). A run that waits on
   * the host (host calls) goes on in the calls that hand it the answers. A run
   * cut at its slice comes back as kind "slice": the isolate is disposed
   * (its host calls never run) and the caller runs it again on the slow path.
   * Without `sliceMs` the run starts with an async apply on isolated-vm's
   * thread.
   *
   * The output comes back as soon as the run has one. If a call of ours into
   * the isolate is still in flight then, `afterRun` is set until it is over
   * and the isolate idle, or disposed.
   */
  run(input: RunInput, timeoutMs: number, sliceMs = 0): IsolateRunOutput | Promise<IsolateRunOutput> {
    const runner = this.runner;
    if (!runner) return Promise.reject(new Error("isolate not loaded"));
    const run = new HostRun(this.appId, performance.now() + timeoutMs, runConsumer(input.consumer));
    this.current = run;
    const runNo = ++this.runs;
    // the deadline on the isolate's clock, for its timers
    const deadlineAt = (this.deadlineAt = Date.now() + timeoutMs);
    this.wake = undefined;
    this.early = undefined;
    this.webBudget.bytes = MAX_WEB_BYTES_PER_RUN;
    const s: RunState = { run, timeoutMs, handedOff: false, timedOut: false, cancel: undefined, watchdog: undefined };
    this.lastSliceMs = 0;
    let payload: string;
    try {
      payload = JSON.stringify([
        input.req,
        { consumer: input.consumer, event: input.event, env: input.env, trigger: input.trigger, requestId: input.requestId },
      ]);
    } catch (err) {
      // e.g. an argument that cannot be written as JSON
      return this.ended(s, this.failure(s, err));
    }
    try {
      return this.start(s, runner, payload, runNo, deadlineAt, sliceMs);
    } catch (err) {
      // thrown by isolated-vm before the run began (a disposed isolate, a clock read)
      return this.ended(s, this.failure(s, err));
    }
  }

  private start(s: RunState, runner: NonNullable<FunctionIsolate["runner"]>, payload: string, runNo: number, deadlineAt: number, sliceMs: number): IsolateRunOutput | Promise<IsolateRunOutput> {
    const { run, timeoutMs } = s;
    if (sliceMs > 0) {
      const slice = Math.min(sliceMs, timeoutMs);
      let raw: unknown;
      // The isolate's own CPU time (isolated-vm's thread CPU clock around
      // its code), not wall time: a slice preempted by the machine would
      // otherwise look slow and move a quick version off the fast path.
      const t0 = this.isolate.cpuTime;
      try {
        runner.applySync(undefined, [1, payload, false, runNo, deadlineAt], { timeout: slice });
        // Reads the run's output: no user code runs in this call (the
        // first call's microtask checkpoint finished the run and emptied
        // the queue), so it needs no timeout, whose timer costs a thread
        // handoff per call. (One call returning the output's promise
        // instead, with isolated-vm's result { promise: true }, measured
        // about 10 % slower per warm run.)
        raw = runner.applySync(undefined, [2]);
      } catch (err) {
        // (read before dispose(), whose own CPU is no part of the slice)
        this.lastSliceMs = Number(this.isolate.cpuTime - t0) / 1e6;
        if (slice < timeoutMs && messageOf(err).includes(TIMEOUT_MESSAGE)) {
          this.dispose();
          return this.ended(s, { kind: "slice", logs: [], logsTruncated: false });
        }
        return this.ended(s, this.failure(s, err));
      }
      this.lastSliceMs = Number(this.isolate.cpuTime - t0) / 1e6;
      // Finished inside the slice: the answer without a promise (the warm path of a quick function).
      if (raw !== undefined) return this.output(s, raw);
      return this.waitFor(s, Promise.race([this.nextOutput(), this.watchdog(s)]));
    }
    const out = this.nextOutput();
    this.enter(run, runner.apply(undefined, [1, payload, true, runNo, deadlineAt], { timeout: timeoutMs }));
    return this.waitFor(s, Promise.race([out, this.watchdog(s)]));
  }

  /**
   * V8's time limit cuts code in every call into the isolate; the host
   * deadline ends a run stuck awaiting (e.g. a never-settling promise, or
   * a host call still running). Made only when the run waits: a run that
   * ends inside its synchronous slice needs no timer and no promise.
   */
  private watchdog(s: RunState): Promise<never> {
    return (s.watchdog ??= new Promise<never>((_, reject) => {
      // from the run's start (a watchdog made after the slice or the response has less left)
      s.cancel = deadline(s.run.deadlineAt - performance.now() + 20, () => {
        s.timedOut = true;
        reject(new Error(TIMEOUT_MESSAGE));
      });
    }));
  }

  /** The next output doneRef brings (the run's, then its background's). */
  private nextOutput(): Promise<string> {
    return new Promise<string>((resolve, reject) => {
      this.settle = resolve;
      this.fail = reject;
    });
  }

  private async waitFor(s: RunState, raw: Promise<unknown>): Promise<IsolateRunOutput> {
    let value: unknown;
    try {
      value = await raw;
    } catch (err) {
      return this.ended(s, this.failure(s, err));
    }
    return this.output(s, value);
  }

  /** The run's output from the isolate's JSON; a run that handed work to ctx.waitUntil goes on in background(). */
  private output(s: RunState, raw: unknown): IsolateRunOutput {
    let result: IsolateRunOutput;
    try {
      if (typeof raw !== "string") throw new Error("the sandbox returned no result");
      const out = JSON.parse(raw) as RunnerOutput;
      const logs = this.leftOver(out);
      let background: Promise<BackgroundOutput> | undefined;
      if (out.bg === true) {
        s.handedOff = true;
        background = this.background(s);
      }
      if (out.error !== undefined) result = { kind: "error", error: String(out.error), ...this.errorParts(out), logs, logsTruncated: !!out.truncated, background };
      else result = { kind: "ok", response: out.response, logs, logsTruncated: !!out.truncated, background };
    } catch (err) {
      result = this.failure(s, err);
    }
    return this.ended(s, result);
  }

  /** What a run that failed in the host's hands (timed out, killed, unreadable) comes to; the isolate is not used again. */
  private failure(s: RunState, err: unknown): IsolateRunOutput {
    const msg = messageOf(err);
    // isolated-vm disposes an isolate that passes its memory limit
    const killed = this.isolate.isDisposed;
    // Whatever state the isolate is in, it is not used again.
    this.dirty = true;
    if (s.timedOut || msg.includes(TIMEOUT_MESSAGE)) {
      return { kind: "timeout", error: `timed out after ${s.timeoutMs} ms`, logs: this.lateTimerLog(), logsTruncated: false };
    }
    if (killed || /memory limit/i.test(msg)) {
      return { kind: "error", error: "memory limit exceeded", logs: [], logsTruncated: false };
    }
    // e.g. an argument that could not be copied in.
    return { kind: "error", error: msg, logs: [], logsTruncated: false };
  }

  /** The run is over unless its background goes on (background() ends it then). */
  private ended(s: RunState, out: IsolateRunOutput): IsolateRunOutput {
    if (!s.handedOff) this.finish(s.run, s.cancel);
    return out;
  }

  /** A thrown Error's name, message and stack, its frames cleaned (error-stack.ts). */
  private errorParts(out: RunnerOutput): Pick<IsolateRunOutput, "errorName" | "errorMessage" | "errorStack"> {
    if (typeof out.name !== "string" || typeof out.message !== "string") return {};
    const header = out.message === "" ? out.name : `${out.name}: ${out.message}`;
    return { errorName: out.name, errorMessage: out.message, errorStack: typeof out.stack === "string" ? errorStack(header, out.stack, this.fileName) : "" };
  }

  /** The run's output lines, with a warning per capability whose calls were left pending (then the isolate is not used again). */
  private leftOver(out: RunnerOutput): LogLine[] {
    const logs = Array.isArray(out.logs) ? out.logs : [];
    // a line showing an error (console.log(err), a timer's uncaught throw): its platform frames hidden
    for (const l of logs) l.message = cleanLogLine(l.message, this.fileName);
    // Host calls left pending: cancelled, and the isolate is not used again.
    for (const [name, n] of Object.entries(out.left ?? {})) {
      this.dirty = true;
      const what = name === "fetch" ? "fetch" : `ctx.${name}`;
      logs.push({
        level: "warn",
        message: `[pulsebase] ${n} ${what} call${n === 1 ? " was" : "s were"} still pending when the function returned and ${n === 1 ? "was" : "were"} cancelled: await every ${what} call`,
      });
    }
    return logs;
  }

  /** A run cut at its deadline that had set a timer due after it: say why that timer never fired. */
  private lateTimerLog(): LogLine[] {
    if (!this.wake?.late) return [];
    return [{ level: "warn", message: "[pulsebase] a timer was due after the function's timeout: timers due past the timeout never fire" }];
  }

  /**
   * The rest of a run whose handler answered with ctx.waitUntil work
   * pending: it goes on (host calls, timers) until the isolate reports that
   * work settled, bounded by the run's deadline; cut there, the isolate is
   * not used again.
   */
  private async background(s: RunState): Promise<BackgroundOutput> {
    try {
      const early = this.early;
      this.early = undefined;
      const raw = early ?? (await Promise.race([this.nextOutput(), this.watchdog(s)]));
      const out = JSON.parse(raw) as RunnerOutput;
      return { kind: "ok", logs: this.leftOver(out), logsTruncated: !!out.truncated };
    } catch (err) {
      const f = this.failure(s, err);
      if (f.kind !== "timeout") return { kind: "error", error: f.error, logs: f.logs, logsTruncated: false };
      const error = "the ctx.waitUntil work did not settle within the function's timeout and was cut";
      return { kind: "timeout", error, logs: [{ level: "warn", message: `[pulsebase] ${error}` }, ...f.logs], logsTruncated: false };
    } finally {
      this.finish(s.run, s.cancel);
    }
  }

  /** The run is over: no more answers or timers, and the isolate goes idle or is disposed. */
  private finish(run: HostRun, cancel: (() => void) | undefined): void {
    cancel?.();
    this.settle = this.fail = undefined;
    this.early = undefined;
    this.wake?.stop();
    run.end();
    if (this.current === run) this.current = undefined;
    this.afterEnd();
  }

  /**
   * After a run: disposed when it left something behind, else idle (a heap
   * sample, then back to the pool). Idle needs no call of ours in flight:
   * while one is (answers that went in just before the end, whose code may
   * still run), this waits for it; its time limit ends at the run's
   * deadline. Disposing while one of our calls runs is safe: each is a
   * function call, which isolated-vm's termination stops (tested with
   * disposals at every moment around a call; only code that isolated-vm
   * itself resumes, a settled promise, escaped it).
   */
  private afterEnd(): void {
    if (this.isolate.isDisposed) return;
    if (this.entering && !this.dirty) {
      // a timeout, or the run's own code still going on after its output:
      // wait for the call in flight, then judge
      this.afterRun = new Promise<void>((resolve) => {
        this.afterRunDone = () => {
          this.afterRunDone = undefined;
          this.afterRun = undefined;
          this.afterEnd();
          resolve();
        };
      });
      return;
    }
    if (this.dirty) this.dispose();
    else this.sampleHeap(false);
  }

  get disposed(): boolean {
    return this.isolate.isDisposed;
  }

  private heapAt = 0;
  private heapBytes = 0;
  /** A run ended after the last sample (the throttle skipped it): the pool samples the isolate again once idle. */
  heapStale = false;

  /**
   * Takes a heap sample. Only ever called while the isolate is known idle
   * (nothing of it running, nothing that could resume it): a synchronous
   * read of a running isolate would wait for it on the service's thread.
   * Reading costs about 5% of a warm call, so outside `force` it is done at
   * most every HEAP_SAMPLE_MS per isolate.
   */
  private sampleHeap(force: boolean): void {
    if (this.isolate.isDisposed) return;
    const now = performance.now();
    if (!force && now - this.heapAt < HEAP_SAMPLE_MS) {
      this.heapStale = true;
      return;
    }
    try {
      const s = this.isolate.getHeapStatisticsSync();
      this.heapBytes = s.used_heap_size + s.externally_allocated_size;
      this.heapAt = now;
      this.heapStale = false;
    } catch {
      // disposed meanwhile: keep the last sample
    }
  }

  /**
   * Samples a pooled idle isolate whose last run's end the throttle skipped
   * (the pool bounds what idle isolates keep, isolate-pool.ts). Only for an
   * isolate in the pool's idle list: no run, nothing of ours in flight.
   */
  sampleIdleHeap(): void {
    if (this.busy || this.entering || this.current || this.afterRun) return;
    this.sampleHeap(true);
  }

  /** Heap in use (plus external memory) at the last sample, taken while the isolate was idle. */
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

/**
 * Moves the `bytes` of each answer's result (a fetched body) out of the
 * JSON: they go in as one structured copy (an ArrayBuffer each, bootstrap.ts
 * puts them back), the result keeping the index. A body inside the JSON cost
 * the service's thread about 150 ms per 10 MiB (docs/functions.md, "Limits
 * of fetch"). Each is copied from exactly its own bytes: a Buffer may be a
 * view into a larger pooled ArrayBuffer holding other data.
 */
function takeBytes(answers: Array<[number, HostReply]>): ivm.Copy<ArrayBuffer[]> | undefined {
  let out: ArrayBuffer[] | undefined;
  for (const [, reply] of answers) {
    const result = reply.ok ? (reply.result as { bytes?: unknown } | null) : null;
    if (result === null || typeof result !== "object" || !(result.bytes instanceof Uint8Array)) continue;
    const b = result.bytes;
    out ??= [];
    out.push(b.byteOffset === 0 && b.byteLength === b.buffer.byteLength && b.buffer instanceof ArrayBuffer ? b.buffer : b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) as ArrayBuffer);
    result.bytes = out.length - 1;
  }
  return out && new ivm.ExternalCopy(out).copyInto({ release: true });
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

/** The run's consumer as the host knows it (the runtime's { id, user_id, ... }; not the guest's copy). */
function runConsumer(c: unknown): { consumerId: number; userId: string } | undefined {
  if (c === null || typeof c !== "object") return undefined;
  const { id, user_id } = c as { id?: unknown; user_id?: unknown };
  return typeof id === "number" && typeof user_id === "string" ? { consumerId: id, userId: user_id } : undefined;
}
