// A small pool of engine processes (engine-process.ts) that run embedded
// databases' statements off the service's event loop. Each process runs one
// request at a time and is sent the next only when it answered, so nothing
// waits inside a process behind another application's statement. Who runs
// next is decided by a FairQueue (fair-queue.ts): one queue per application,
// served round robin, at most `appRunning` requests of one application on
// the processes at once (half the processes by default), a bounded queue and
// a bounded wait per request. A request goes to the process its database
// prefers (database id modulo pool size, warm connection and statements)
// when that one is free, else to any free one.
//
// A request that runs past the query time limit is stopped by killing its
// process (the only way to stop a statement inside the native driver); it
// fails with a timeout and SQLite rolls back what it had not committed; the
// new process first checkpoints that file's WAL (a killed write leaves its
// frames behind). Each process's resident memory is watched: one that passes
// the limit while it runs a request is killed the same way (the request
// fails with EngineMemoryError), an idle one is replaced. A
// request whose signal fires while running (the function run that made it
// ended) is answered at once and its process killed if it is still busy
// `abandonGraceMs` later. Either way the application keeps the slot its
// request used until the replacement process is ready, so a tenant that
// keeps getting its statements killed pays for the restarts with its own
// share.
import { spawn, type ChildProcess } from "node:child_process";
import { closeSync, openSync, readSync } from "node:fs";
import { setPriority } from "node:os";
import type { Duplex } from "node:stream";
import { fileURLToPath } from "node:url";
import { lineSplitter, type EngineMessage, type EngineReply, type EngineRequest, type EngineResult, type EngineSettings } from "./engine-protocol.js";
import { FairQueue, type FairJob, type OwnerKey, type OwnerStats, type RefusalReason } from "./fair-queue.js";

const enginePath = fileURLToPath(new URL("./engine-process.ts", import.meta.url));

export class EngineTimeoutError extends Error {}
export class EngineFailure extends Error {}
/** The request's engine passed its memory limit and was stopped. */
export class EngineMemoryError extends Error {}
/** The request never started: its application's queue was full, or it waited longer than the queue limit. */
export class EngineBusyError extends Error {
  constructor(
    message: string,
    readonly reason: "queue_full" | "queue_timeout",
  ) {
    super(message);
  }
}
/** The request's signal fired (the function run that made it ended) before it was answered. */
export class EngineCancelledError extends Error {}

export interface EnginePoolOptions {
  /** Number of engine processes (default 2). */
  processes?: number;
  /** Query time limit per request in milliseconds. */
  timeoutMs: number;
  /** Requests of one application running at once (default: half the processes, at least 1). */
  appRunning?: number;
  /** Requests of one application waiting for a process; more are refused (default 64). */
  appQueued?: number;
  /** How long a request may wait for a process before it is refused, in ms (default 2000). */
  queueWaitMs?: number;
  /** A running request whose signal fired is stopped after this long, in ms (default 500). */
  abandonGraceMs?: number;
  /**
   * CPU priority of the engine processes below the service's (a nice value
   * added, default 5; 0 = the same): a runaway statement yields the CPU to
   * request handling, every application's.
   */
  nice?: number;
  /** Limits every engine process applies (engine-protocol.ts). */
  settings?: Partial<EngineSettings>;
  /** Resident memory an engine process may use (default: unlimited). */
  maxMemoryBytes?: number;
  /** Directory of SQLite's temp files (SQLITE_TMPDIR); default: the system's. */
  tempDir?: string;
}

/** How often an engine's resident memory is read (/proc/<pid>/statm, a few microseconds). */
const MEMORY_POLL_MS = 50;
const PAGE_BYTES = 4096;

/** Resident bytes of a process, or undefined where /proc is not available. */
function residentBytes(pid: number | undefined): number | undefined {
  if (!pid) return undefined;
  let fd: number | undefined;
  try {
    fd = openSync(`/proc/${pid}/statm`, "r");
    const buf = Buffer.allocUnsafe(128);
    const n = readSync(fd, buf, 0, buf.length, 0);
    const pages = Number(buf.toString("latin1", 0, n).split(" ")[1]);
    return Number.isFinite(pages) ? pages * PAGE_BYTES : undefined;
  } catch {
    return undefined;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

export interface EngineRunOptions {
  /** Whose share the request uses: the application id (default: one lane for the service's own work). */
  owner?: OwnerKey;
  /** When it fires, a queued request is dropped and a running one stopped (after abandonGraceMs). */
  signal?: AbortSignal;
}

const SERVICE_OWNER = "service";

export interface EnginePoolStats {
  processes: number;
  /** Processes running a request. */
  busy: number;
  /** Processes starting (after a kill or a crash) and not yet serving. */
  starting: number;
  queued: number;
  running: number;
  /** Applications (owners) with requests queued or running. */
  owners: OwnerStats[];
  refused: Record<RefusalReason, number>;
  /** Processes killed or lost, by cause, since start. */
  restarts: { timeout: number; cancelled: number; memory: number; crash: number };
}

class Job implements FairJob {
  settled = false;
  engine: Engine | undefined;

  constructor(
    readonly owner: OwnerKey,
    readonly signal: AbortSignal | undefined,
    readonly msg: EngineRequest,
    readonly affinity: number,
    private readonly pool: EnginePool,
    private readonly res: (r: EngineResult[]) => void,
    private readonly rej: (e: Error) => void,
  ) {}

  refuse(reason: RefusalReason): void {
    this.fail(this.pool.refusal(reason));
  }

  onAbort(): void {
    this.engine?.abandon(this);
    this.fail(new EngineCancelledError("the request was cancelled: the run that made it ended"));
  }

  succeed(results: EngineResult[]): void {
    if (this.settled) return;
    this.settled = true;
    this.res(results);
  }

  fail(err: Error): void {
    if (this.settled) return;
    this.settled = true;
    this.rej(err);
  }
}

interface Control {
  msg: EngineMessage;
  resolve(): void;
  reject(err: Error): void;
}

class Engine {
  child!: ChildProcess;
  private channel!: Duplex;
  /** The request the process is running. */
  job: Job | undefined;
  private jobDeadline = 0;
  /** The control message the process is handling (closing a file). */
  private ctl: Control | undefined;
  /** Waiting for the new process's first answer: it is not serving yet. */
  starting = true;
  /** Control messages waiting for the process to be free. */
  readonly controls: Control[] = [];
  /**
   * The request whose running cost the previous process (killed or
   * crashed): its application keeps the slot until this process is ready.
   */
  private held: Job | undefined;
  private timer: NodeJS.Timeout | undefined;
  private bornAt = 0;
  closing = false;
  private readonly memoryTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly pool: EnginePool,
    private readonly timeoutMs: number,
    private readonly graceMs: number,
    private readonly opts: Pick<EnginePoolOptions, "settings" | "maxMemoryBytes" | "tempDir"> = {},
  ) {
    this.spawn();
    if (opts.maxMemoryBytes !== undefined && residentBytes(this.child.pid) !== undefined) {
      this.memoryTimer = setInterval(() => this.checkMemory(), MEMORY_POLL_MS).unref();
    }
  }

  get free(): boolean {
    return !this.starting && !this.job && !this.ctl && !this.closing;
  }

  private spawn(): void {
    // Node's built-in type stripping runs the .ts file; no loader flags.
    const child = spawn(process.execPath, [enginePath, JSON.stringify(this.opts.settings ?? {})], {
      stdio: ["ignore", "inherit", "inherit", "pipe"],
      env: this.opts.tempDir ? { ...process.env, SQLITE_TMPDIR: this.opts.tempDir } : process.env,
    });
    if (this.pool.nice > 0 && child.pid) {
      try {
        setPriority(child.pid, this.pool.nice);
      } catch {
        // not allowed here: the process keeps the service's priority
      }
    }
    this.bornAt = Date.now();
    const channel = child.stdio[3] as Duplex;
    this.child = child;
    this.channel = channel;
    this.starting = true;
    channel.setEncoding("utf8");
    const lines = lineSplitter();
    channel.on("data", (chunk: string) => {
      if (this.child !== child) return;
      for (const line of lines(chunk)) this.onReply(JSON.parse(line) as EngineReply);
    });
    channel.on("error", () => {
      // a write to a process that just died; its exit handler deals with it
    });
    child.on("error", () => {
      // spawn failure: reported through "exit"
    });
    child.on("exit", () => {
      if (this.child !== child || this.closing) return;
      this.lost();
    });
    // The first answer says the process is up: a no-op close. Until then it
    // gets no request, so no request's time limit pays for the start-up.
    this.write({ type: "close", id: this.pool.nextId(), path: "" });
  }

  private write(msg: EngineMessage): void {
    this.channel.write(`${JSON.stringify(msg)}\n`);
  }

  /** Died on its own (crash, out of memory): fail what it ran, start another. */
  private lost(): void {
    this.clearTimer();
    const job = this.job;
    const ctl = this.ctl;
    this.job = undefined;
    this.ctl = undefined;
    this.starting = true;
    this.pool.restarts.crash++;
    if (job) {
      job.engine = undefined;
      job.fail(new EngineFailure("the database engine process exited"));
      this.hold(job);
      this.checkpointAfter(job);
    }
    ctl?.resolve(); // its connections died with it
    // a process that dies at once (broken install) is not restarted in a tight loop
    setTimeout(() => {
      if (!this.closing) this.spawn();
    }, Date.now() - this.bornAt < 1000 ? 500 : 0).unref();
  }

  private hold(job: Job): void {
    if (this.held) this.pool.finished(this.held);
    this.held = job;
  }

  /**
   * The fresh process's first work, before any request: checkpoint and
   * truncate the WAL of the file the killed request was using.
   */
  private checkpointAfter(job: Job): void {
    const noop = () => {};
    this.controls.unshift({ msg: { type: "checkpoint", id: this.pool.nextId(), path: job.msg.path }, resolve: noop, reject: noop });
  }

  /** Stops a busy engine over its memory limit; replaces an idle one (memory freed but kept by the process). */
  private checkMemory(): void {
    if (this.closing || this.starting || this.opts.maxMemoryBytes === undefined) return;
    const rss = residentBytes(this.child.pid);
    if (rss === undefined || rss <= this.opts.maxMemoryBytes) return;
    if (this.job) {
      this.kill("memory");
      return;
    }
    if (this.ctl) return; // a close or a checkpoint: looked at again in a moment
    const old = this.child;
    this.spawn();
    old.kill("SIGKILL"); // idle: no request and no transaction in it
  }

  /** Runs a request (the process is free). */
  start(job: Job): void {
    this.job = job;
    job.engine = this;
    this.write(job.msg);
    this.jobDeadline = performance.now() + this.timeoutMs;
    this.timer = setTimeout(() => this.kill("timeout"), this.timeoutMs);
  }

  /** Sends the next control message if the process is free; true if it did. */
  sendControl(): boolean {
    if (!this.free) return false;
    const c = this.controls.shift();
    if (!c) return false;
    this.ctl = c;
    this.write(c.msg);
    return true;
  }

  /** The running request is no longer wanted: stop it if it is still running after the grace time. */
  abandon(job: Job): void {
    if (this.job !== job) return;
    const left = this.jobDeadline - performance.now();
    if (left <= this.graceMs) return; // its time limit comes first
    this.clearTimer();
    this.timer = setTimeout(() => this.kill("cancelled"), this.graceMs);
  }

  private clearTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private onReply(reply: EngineReply): void {
    this.clearTimer();
    if (this.starting) {
      this.starting = false;
      const held = this.held;
      this.held = undefined;
      if (held) this.pool.finished(held);
    } else if (this.ctl) {
      const c = this.ctl;
      this.ctl = undefined;
      if (reply.ok) c.resolve();
      else c.reject(new EngineFailure(reply.fatal));
    } else if (this.job) {
      const job = this.job;
      this.job = undefined;
      job.engine = undefined;
      this.pool.finished(job);
      if (reply.ok) job.succeed(reply.results);
      else job.fail(new EngineFailure(reply.fatal));
    }
    this.pool.pump();
  }

  private kill(cause: "timeout" | "cancelled" | "memory"): void {
    this.clearTimer();
    const job = this.job;
    this.job = undefined;
    this.pool.restarts[cause]++;
    this.child.kill("SIGKILL");
    this.spawn();
    if (job) {
      job.engine = undefined;
      const mib = Math.round((this.opts.maxMemoryBytes ?? 0) / (1024 * 1024));
      job.fail(
        cause === "timeout"
          ? new EngineTimeoutError(`the query ran longer than ${this.timeoutMs} ms and was stopped`)
          : cause === "memory"
            ? new EngineMemoryError(`the query needed more than the engine's ${mib} MiB of memory and was stopped`)
            : new EngineCancelledError("the request was cancelled: the run that made it ended"),
      );
      this.hold(job);
      this.checkpointAfter(job);
    }
  }

  async close(): Promise<void> {
    this.closing = true;
    this.clearTimer();
    if (this.memoryTimer) clearInterval(this.memoryTimer);
    const shut = new EngineFailure("the database engine is shut down");
    this.job?.fail(shut);
    this.ctl?.reject(shut);
    for (const c of this.controls.splice(0)) c.reject(shut);
    const child = this.child;
    if (child.exitCode !== null || child.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      child.once("exit", () => resolve());
      this.channel.end(); // the process exits when its channel closes
      setTimeout(() => child.kill("SIGKILL"), 2000).unref();
    });
  }
}

export class EnginePool {
  private readonly engines: Engine[];
  private lastId = 0;
  private closed = false;
  private readonly queue: FairQueue<Job>;
  readonly restarts = { timeout: 0, cancelled: 0, memory: 0, crash: 0 };
  private readonly queueWaitMs: number;
  readonly nice: number;

  constructor(opts: EnginePoolOptions) {
    this.nice = opts.nice ?? 5;
    const n = Math.max(1, opts.processes ?? 2);
    this.queueWaitMs = opts.queueWaitMs ?? 2000;
    this.queue = new FairQueue<Job>({
      running: opts.appRunning || Math.max(1, Math.floor(n / 2)),
      queued: opts.appQueued ?? 64,
      waitMs: this.queueWaitMs,
    });
    this.engines = Array.from({ length: n }, () => new Engine(this, opts.timeoutMs, opts.abandonGraceMs ?? 500, opts));
  }

  /** The limits in force (after defaults). */
  get limits(): { appRunning: number; appQueued: number; queueWaitMs: number } {
    return { appRunning: this.queue.limits.running, appQueued: this.queue.limits.queued, queueWaitMs: this.queueWaitMs };
  }

  nextId(): number {
    return ++this.lastId;
  }

  /** The error of a request that left the queue without running. */
  refusal(reason: RefusalReason): Error {
    const l = this.queue.limits;
    switch (reason) {
      case "queue_full":
        return new EngineBusyError(`too many requests of this application are waiting for the database (at most ${l.queued})`, reason);
      case "queue_timeout":
        return new EngineBusyError(`the database is busy: the request could not start within ${l.waitMs} ms`, reason);
      case "cancelled":
        return new EngineCancelledError("the request was cancelled: the run that made it ended");
      case "shutdown":
        return new EngineFailure("the database engine is shut down");
    }
  }

  /** A request of the queue stopped using its process (its application's slot is free). */
  finished(job: Job): void {
    this.queue.finish(job);
  }

  /** Hands free processes their next work: control messages first, then requests in fair order. */
  pump(): void {
    for (const e of this.engines) if (e.controls.length > 0) e.sendControl();
    while (this.queue.queuedCount > 0) {
      let any: Engine | undefined;
      for (const e of this.engines) {
        if (e.free) {
          any = e;
          break;
        }
      }
      if (!any) return;
      const job = this.queue.take();
      if (!job) return;
      const preferred = this.engines[job.affinity % this.engines.length]!;
      (preferred.free ? preferred : any).start(job);
    }
  }

  /** Process ids of the engine processes (operations, tests). */
  pids(): number[] {
    return this.engines.map((e) => e.child.pid ?? 0);
  }

  /** Runs a request; `affinity` (the database id) picks the preferred process. */
  run(req: Omit<EngineRequest, "id" | "type">, affinity: number, opts: EngineRunOptions = {}): Promise<EngineResult[]> {
    if (this.closed) return Promise.reject(new EngineFailure("the database engine is shut down"));
    return new Promise((resolve, reject) => {
      const msg: EngineRequest = { ...req, type: "run", id: this.nextId() };
      this.queue.push(new Job(opts.owner ?? SERVICE_OWNER, opts.signal, msg, affinity, this, resolve, reject));
      this.pump();
    });
  }

  /** Closes every process's connection to a file (before the file is removed). */
  async closeFile(path: string): Promise<void> {
    const done = this.engines.map(
      (e) =>
        new Promise<void>((resolve, reject) => {
          e.controls.push({ msg: { type: "close", id: this.nextId(), path }, resolve, reject });
        }),
    );
    this.pump();
    await Promise.all(done);
  }

  stats(): EnginePoolStats {
    let busy = 0;
    let starting = 0;
    for (const e of this.engines) {
      if (e.starting) starting++;
      else if (e.job) busy++;
    }
    return {
      processes: this.engines.length,
      busy,
      starting,
      queued: this.queue.queuedCount,
      running: this.queue.runningCount,
      owners: this.queue.ownerStats(),
      refused: { ...this.queue.refused },
      restarts: { ...this.restarts },
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    this.queue.clear("shutdown");
    await Promise.all(this.engines.map((e) => e.close()));
  }
}
