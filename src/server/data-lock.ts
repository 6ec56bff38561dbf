// An exclusive lock on the data directory, so a second server on the same
// embedded database refuses to start instead of corrupting it (PGlite has no
// lock of its own). The lock is a file created atomically with its holder's
// identity already in it (hard link of a complete temporary file), kept
// fresh by a heartbeat. A holder that is gone never blocks for long:
// - same machine and pid namespace (same hostname, boot id and pid
//   namespace, so its pid means the same process as ours would): a holder
//   whose process no longer exists (kill -9, crash; pid reuse is told apart
//   by the process start time) is replaced at once;
// - otherwise (another host, another container even with the same hostname,
//   a reboot since, or a lock file that does not say): the lock expires
//   `staleMs` after its last heartbeat. A pid from another namespace cannot
//   be checked: kill(pid, 0) would look at an unrelated process of ours.
// One process never holds the same directory twice (a second lockDataDir
// is refused), and a holder that finds its lock replaced (it hung longer
// than staleMs and another server took over) is told through onLost and
// must stop.
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync, readlinkSync, unlinkSync } from "node:fs";
import { link, mkdir, readFile, realpath, rename, stat, unlink, utimes } from "node:fs/promises";
import { hostname } from "node:os";
import { join } from "node:path";
import { writeFileOnce } from "../kernel/write-once.js";

export const LOCK_FILE = "pulsebase.lock";

export interface LockHolder {
  pid: number;
  hostname: string;
  /** Process start time from /proc (Linux), to tell a reused pid apart. */
  procStart?: string;
  /** readlink /proc/self/ns/pid (Linux): the namespace `pid` belongs to. */
  pidNs?: string;
  /** /proc/sys/kernel/random/boot_id (Linux): pids are only comparable within one boot. */
  bootId?: string;
  startedAt: string;
  nonce: string;
}

export class DataDirLockedError extends Error {
  constructor(readonly dataDir: string, readonly holder: LockHolder | undefined, readonly staleMs: number) {
    const who = holder ? `pid ${holder.pid} ${whereIs(holder)}, since ${holder.startedAt}` : "holder unknown";
    super(
      `data directory ${dataDir} is in use by another pulsebase server (${who}); ` +
        `stop that server or set PULSEBASE_DATA_DIR to another directory ` +
        `(a lock left by a server that is gone expires ${Math.round(staleMs / 1000)} s after its last heartbeat)`,
    );
    this.name = "DataDirLockedError";
  }
}

export interface DataDirLock {
  readonly file: string;
  release(): Promise<void>;
}

export interface LockOptions {
  /** A lock whose heartbeat is older than this may be taken over. */
  staleMs?: number;
  heartbeatMs?: number;
  /** The lock was taken over or removed while held: stop using the directory. */
  onLost?(err: Error): void;
}

/**
 * Lock files held (or being taken) by this process, by real path. The file
 * alone cannot say "this process already holds it" reliably, and two
 * holders in one process would each think the directory is theirs.
 */
const heldHere = new Map<string, LockHolder>();

export async function lockDataDir(dataDir: string, opts: LockOptions = {}): Promise<DataDirLock> {
  const staleMs = opts.staleMs ?? 30_000;
  const heartbeatMs = opts.heartbeatMs ?? Math.max(1_000, Math.floor(staleMs / 3));
  await mkdir(dataDir, { recursive: true });
  const file = join(dataDir, LOCK_FILE);
  // Real path: the same directory reached through a symlink or "a/../a" is
  // the same lock.
  const key = join(await realpath(dataDir), LOCK_FILE);
  const me: LockHolder = {
    pid: process.pid,
    hostname: hostname(),
    procStart: procStartOf(process.pid),
    ...ownSpace(),
    startedAt: new Date().toISOString(),
    nonce: randomBytes(12).toString("hex"),
  };
  // Checked and reserved with no await in between, so two concurrent calls
  // in this process cannot both get past here.
  const already = heldHere.get(key);
  if (already) throw new DataDirLockedError(dataDir, already, staleMs);
  heldHere.set(key, me);
  try {
    // A few rounds: each either takes the lock, refuses, or clears a dead
    // holder's lock (or sees it vanish) and tries again.
    for (let round = 0; round < 5; round++) {
      if (await writeFileOnce(file, JSON.stringify(me) + "\n", 0o644)) return hold(file, key, me, heartbeatMs, opts.onLost);
      const current = await readHolder(file);
      if (current === "gone") continue;
      if (!(await isDead(file, current, staleMs))) throw new DataDirLockedError(dataDir, current, staleMs);
      await clearDead(file, current, me);
    }
    throw new DataDirLockedError(dataDir, undefined, staleMs);
  } catch (err) {
    forget(key, me);
    throw err;
  }
}

function forget(key: string, me: LockHolder): void {
  if (heldHere.get(key) === me) heldHere.delete(key);
}

/** The holder, undefined when unreadable (being written, foreign), "gone" when there is no lock. */
async function readHolder(file: string): Promise<LockHolder | undefined | "gone"> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return "gone";
    throw err;
  }
  try {
    const h = JSON.parse(text) as LockHolder;
    return typeof h.pid === "number" && typeof h.nonce === "string" ? h : undefined;
  } catch {
    return undefined;
  }
}

async function isDead(file: string, holder: LockHolder | undefined, staleMs: number): Promise<boolean> {
  // Only where the holder's pid means what it would mean to us: elsewhere a
  // live holder could look dead (or a dead one alive), so only the heartbeat
  // can tell.
  if (holder && inOurPidSpace(holder)) {
    if (!processAlive(holder.pid)) return true;
    // The pid is in use, but by a process started after the holder (reuse).
    const start = procStartOf(holder.pid);
    if (holder.procStart && start && start !== holder.procStart) return true;
  }
  try {
    return Date.now() - (await stat(file)).mtimeMs > staleMs;
  } catch {
    return false;
  }
}

/**
 * Moves a dead holder's lock aside (rename: one contender wins) and deletes
 * it, unless what was moved is no longer that holder's (another server took
 * over meanwhile): then it goes back.
 */
async function clearDead(file: string, dead: LockHolder | undefined, me: LockHolder): Promise<void> {
  const tomb = `${file}.${me.pid}.${me.nonce}.stale`;
  try {
    await rename(file, tomb);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return;
    throw err;
  }
  const moved = await readHolder(tomb);
  const sameLock = moved !== "gone" && (dead ? moved?.nonce === dead.nonce : moved === undefined);
  if (!sameLock) await link(tomb, file).catch(() => undefined);
  await unlink(tomb).catch(() => undefined);
}

function hold(file: string, key: string, me: LockHolder, heartbeatMs: number, onLost?: (err: Error) => void): DataDirLock {
  let held = true;
  const lost = (why: string) => {
    if (!held) return;
    held = false;
    clearInterval(timer);
    process.off("exit", onExit);
    forget(key, me);
    onLost?.(new Error(`lost the lock on ${file}: ${why}`));
  };
  const timer = setInterval(() => {
    void (async () => {
      const current = await readHolder(file).catch(() => undefined);
      if (!held) return;
      if (current === "gone") return lost("the lock file was removed");
      if (current && current.nonce !== me.nonce) return lost(`taken over by pid ${current.pid} ${whereIs(current)}`);
      const now = new Date();
      // A failed heartbeat is retried on the next tick; only a replaced or
      // removed lock counts as lost.
      await utimes(file, now, now).catch(() => undefined);
    })();
  }, heartbeatMs);
  timer.unref();
  // Whatever ends the process normally (process.exit included) frees the
  // directory; only a kill -9 or a crash of the machine leaves the file.
  const onExit = () => {
    if (!held) return;
    try {
      if (existsSync(file) && (JSON.parse(readFileSync(file, "utf8")) as LockHolder).nonce === me.nonce) unlinkSync(file);
    } catch {
      /* best effort at exit */
    }
  };
  process.on("exit", onExit);
  return {
    file,
    async release() {
      if (!held) return;
      held = false;
      clearInterval(timer);
      process.off("exit", onExit);
      try {
        const current = await readHolder(file).catch(() => undefined);
        if (current && current !== "gone" && current.nonce === me.nonce) await unlink(file).catch(() => undefined);
      } finally {
        // Only once the file is gone: until then a new lockDataDir here
        // would meet our own file.
        forget(key, me);
      }
    },
  };
}

/** Our pid namespace and boot, as recorded in the lock file; a field is left out where /proc cannot tell. */
let ownSpaceCache: { pidNs?: string; bootId?: string } | undefined;
function ownSpace(): { pidNs?: string; bootId?: string } {
  if (!ownSpaceCache) {
    const space: { pidNs?: string; bootId?: string } = {};
    try {
      space.pidNs = readlinkSync("/proc/self/ns/pid");
    } catch {
      /* not Linux, or /proc hidden: cannot tell */
    }
    try {
      space.bootId = readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim() || undefined;
    } catch {
      /* same */
    }
    ownSpaceCache = space;
  }
  return ownSpaceCache;
}

/**
 * True only when the holder's pid can be looked up from here: same host
 * name, same boot and same pid namespace, all known. A lock written by an
 * older version (no pidNs/bootId) or on a system without /proc never is.
 */
function inOurPidSpace(holder: LockHolder): boolean {
  const own = ownSpace();
  return (
    holder.hostname === hostname() &&
    own.pidNs !== undefined &&
    own.bootId !== undefined &&
    holder.pidNs === own.pidNs &&
    holder.bootId === own.bootId
  );
}

/** "on this host", "in another container on this host" or "on host X", for messages. */
function whereIs(holder: LockHolder): string {
  if (inOurPidSpace(holder)) return "on this host";
  const own = ownSpace();
  if (holder.hostname === hostname() && own.bootId !== undefined && holder.bootId === own.bootId && typeof holder.pidNs === "string") {
    return "in another container (pid namespace) on this host";
  }
  return `on host ${holder.hostname}`;
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists, owned by another user.
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Field 22 of /proc/<pid>/stat (start time in clock ticks since boot); undefined off Linux. */
function procStartOf(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
  } catch {
    return undefined;
  }
}
