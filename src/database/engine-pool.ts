// A small pool of engine processes (engine-process.ts) that run embedded
// databases' statements off the service's event loop. A request goes to the
// process its database prefers (database id modulo pool size, so that
// process has the connection and compiled statements warm) when that one is
// idle, else to the least busy one. Each process runs one request at a time;
// the request at the head of a process gets the query time limit, and when
// it runs over, the process is killed (the only way to stop a statement
// inside the native driver), its request fails with a timeout, and requests
// queued behind it move to a fresh process. SQLite rolls back whatever the
// killed process had not committed, and the new process checkpoints that
// file's WAL (a killed write leaves its frames behind). Each process's
// resident memory is watched: one that passes the limit while it runs a
// request is killed the same way (the request fails with
// EngineMemoryError), an idle one is replaced.
import { spawn, type ChildProcess } from "node:child_process";
import { closeSync, openSync, readSync } from "node:fs";
import type { Duplex } from "node:stream";
import { fileURLToPath } from "node:url";
import type { EngineMessage, EngineReply, EngineRequest, EngineResult, EngineSettings } from "./engine-protocol.js";

const enginePath = fileURLToPath(new URL("./engine-process.ts", import.meta.url));

export class EngineTimeoutError extends Error {}
export class EngineFailure extends Error {}
/** The request's engine passed its memory limit and was stopped. */
export class EngineMemoryError extends Error {}

export interface EnginePoolOptions {
  /** Number of engine processes (default 2). */
  processes?: number;
  /** Query time limit per request in milliseconds. */
  timeoutMs: number;
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

interface Pending {
  msg: EngineMessage;
  resolve(results: EngineResult[]): void;
  reject(err: Error): void;
}

class Engine {
  child!: ChildProcess;
  private channel!: Duplex;
  queue: Pending[] = [];
  timer: NodeJS.Timeout | undefined;
  closing = false;

  private readonly memoryTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly timeoutMs: number,
    private readonly onKilled: (orphans: Pending[]) => void,
    private readonly opts: Pick<EnginePoolOptions, "settings" | "maxMemoryBytes" | "tempDir"> = {},
  ) {
    this.spawn();
    if (opts.maxMemoryBytes !== undefined && residentBytes(this.child.pid) !== undefined) {
      this.memoryTimer = setInterval(() => this.checkMemory(), MEMORY_POLL_MS).unref();
    }
  }

  private spawn(): void {
    // Node's built-in type stripping runs the .ts file; no loader flags.
    const child = spawn(process.execPath, [enginePath, JSON.stringify(this.opts.settings ?? {})], {
      stdio: ["ignore", "inherit", "inherit", "pipe"],
      env: this.opts.tempDir ? { ...process.env, SQLITE_TMPDIR: this.opts.tempDir } : process.env,
    });
    const bornAt = Date.now();
    const channel = child.stdio[3] as Duplex;
    this.child = child;
    this.channel = channel;
    channel.setEncoding("utf8");
    let pending: string[] = [];
    channel.on("data", (chunk: string) => {
      if (this.child !== child) return;
      let from = 0;
      for (let nl = chunk.indexOf("\n"); nl >= 0; nl = chunk.indexOf("\n", from)) {
        pending.push(chunk.slice(from, nl));
        const line = pending.join("");
        pending = [];
        from = nl + 1;
        this.onReply(JSON.parse(line) as EngineReply);
      }
      if (from < chunk.length) pending.push(chunk.slice(from));
    });
    channel.on("error", () => {
      // a write to a process that just died; its exit handler deals with it
    });
    child.on("error", () => {
      // spawn failure: reported through "exit"
    });
    child.on("exit", () => {
      if (this.child !== child || this.closing) return;
      // died on its own (crash, out of memory): fail the running request,
      // requeue the others on a fresh process
      const [head, ...rest] = this.queue;
      this.queue = [];
      this.clearTimer();
      head?.reject(new EngineFailure("the database engine process exited"));
      this.respawning = true;
      // a process that dies at once (broken install) is not restarted in a tight loop
      setTimeout(() => {
        this.respawning = false;
        if (this.closing) return;
        this.spawn();
        const ck = head && this.checkpointAfter(head);
        if (ck) this.queue.unshift(ck);
        for (const p of this.queue) this.send(p.msg);
        this.arm();
      }, Date.now() - bornAt < 1000 ? 500 : 0).unref();
      this.onKilled(rest);
    });
  }

  /** True while a crashed process waits to be replaced; submit() only queues then. */
  private respawning = false;

  // Messages submitted in the same event-loop turn go out in one write: on a
  // busy server this saves a pipe write and a context switch per request.
  private outbox: string[] = [];
  private flushScheduled = false;

  private send(msg: EngineMessage): void {
    this.outbox.push(`${JSON.stringify(msg)}\n`);
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => {
      this.flushScheduled = false;
      const data = this.outbox.join("");
      this.outbox = [];
      if (data) this.channel.write(data);
    });
  }

  get load(): number {
    return this.queue.length;
  }

  submit(p: Pending): void {
    if (this.closing) {
      p.reject(new EngineFailure("the database engine is shut down"));
      return;
    }
    this.queue.push(p);
    if (this.respawning) return; // sent when the new process starts
    this.send(p.msg);
    if (this.queue.length === 1) this.arm();
  }

  private arm(): void {
    this.clearTimer();
    const head = this.queue[0];
    // a close or a checkpoint is bounded by itself (the checkpoint never waits for a lock)
    if (!head || head.msg.type !== "run") return;
    this.timer = setTimeout(() => this.kill(), this.timeoutMs);
  }

  private clearTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private onReply(reply: EngineReply): void {
    const head = this.queue.shift();
    this.arm();
    if (!head) return;
    if (reply.ok) head.resolve(reply.results);
    else head.reject(new EngineFailure(reply.fatal));
  }

  private kill(reason: Error = new EngineTimeoutError(`the query ran longer than ${this.timeoutMs} ms and was stopped`)): void {
    const [head, ...rest] = this.queue;
    this.queue = [];
    this.clearTimer();
    const old = this.child;
    old.kill("SIGKILL");
    this.spawn();
    const ck = head && this.checkpointAfter(head);
    if (ck) this.submit(ck);
    head?.reject(reason);
    this.onKilled(rest);
  }

  /**
   * A request for the fresh process, before anything else: checkpoint and
   * truncate the WAL of the file the killed request was using (not after a
   * killed checkpoint, which would only be killed again).
   */
  private checkpointAfter(head: Pending): Pending | undefined {
    if (head.msg.type !== "run") return undefined;
    return { msg: { type: "checkpoint", id: 0, path: head.msg.path }, resolve: () => {}, reject: () => {} };
  }

  /** Stops a busy engine over its memory limit; replaces an idle one (memory freed but kept by the process). */
  private checkMemory(): void {
    if (this.closing || this.respawning || this.opts.maxMemoryBytes === undefined) return;
    const rss = residentBytes(this.child.pid);
    if (rss === undefined || rss <= this.opts.maxMemoryBytes) return;
    const mib = Math.round(this.opts.maxMemoryBytes / (1024 * 1024));
    if (this.queue.length > 0) {
      if (this.queue[0]!.msg.type !== "run") return; // looked at again in a moment
      this.kill(new EngineMemoryError(`the query needed more than the engine's ${mib} MiB of memory and was stopped`));
      return;
    }
    const old = this.child;
    this.spawn();
    old.kill("SIGKILL"); // idle: no request and no transaction in it
  }

  async close(): Promise<void> {
    this.closing = true;
    this.clearTimer();
    if (this.memoryTimer) clearInterval(this.memoryTimer);
    const queued = this.queue;
    this.queue = [];
    for (const p of queued) p.reject(new EngineFailure("the database engine is shut down"));
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
  private nextId = 1;
  private closed = false;

  constructor(opts: EnginePoolOptions) {
    const n = Math.max(1, opts.processes ?? 2);
    this.engines = Array.from({ length: n }, () => new Engine(opts.timeoutMs, (orphans) => this.requeue(orphans), opts));
  }

  private requeue(orphans: Pending[]): void {
    for (const p of orphans) this.pick(undefined).submit(p);
  }

  private pick(preferred: number | undefined): Engine {
    if (preferred !== undefined) {
      const e = this.engines[preferred % this.engines.length]!;
      if (e.load === 0) return e;
    }
    let best = this.engines[0]!;
    for (const e of this.engines) if (e.load < best.load) best = e;
    return best;
  }

  /** Process ids of the engine processes (operations, tests). */
  pids(): number[] {
    return this.engines.map((e) => e.child.pid ?? 0);
  }

  /** Runs a request; `affinity` (the database id) picks the preferred process. */
  run(req: Omit<EngineRequest, "id" | "type">, affinity: number): Promise<EngineResult[]> {
    if (this.closed) return Promise.reject(new EngineFailure("the database engine is shut down"));
    const msg: EngineRequest = { ...req, type: "run", id: this.nextId++ };
    return new Promise((resolve, reject) => this.pick(affinity).submit({ msg, resolve, reject }));
  }

  /** Closes every process's connection to a file (before the file is removed). */
  async closeFile(path: string): Promise<void> {
    await Promise.all(
      this.engines.map(
        (e) =>
          new Promise<void>((resolve, reject) =>
            e.submit({ msg: { type: "close", id: this.nextId++, path }, resolve: () => resolve(), reject }),
          ),
      ),
    );
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(this.engines.map((e) => e.close()));
  }
}
