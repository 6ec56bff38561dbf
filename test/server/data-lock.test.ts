// The data-directory lock's rules, in process: who may take over a lock
// left behind, and what a holder whose lock was taken learns.
import { spawn } from "node:child_process";
import { readFileSync, readlinkSync } from "node:fs";
import { mkdtemp, readFile, rm, stat, symlink, utimes, writeFile } from "node:fs/promises";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, expect, it } from "vitest";
import { DataDirLockedError, LOCK_FILE, lockDataDir, type LockHolder } from "../../src/server/data-lock.js";
import { until } from "../helpers/until.js";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "pulsebase-datalock-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

// This process's pid namespace and boot: a planted holder has them unless
// a test says otherwise, like a server started on this machine would.
const pidNs = readlinkSync("/proc/self/ns/pid");
const bootId = readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();

async function plant(holder: Partial<LockHolder>, ageMs = 0): Promise<void> {
  const file = join(dir, LOCK_FILE);
  await writeFile(file, JSON.stringify({ hostname: hostname(), pidNs, bootId, startedAt: "2026-01-01T00:00:00.000Z", nonce: "planted", ...holder }));
  const t = new Date(Date.now() - ageMs);
  await utimes(file, t, t);
}

/** A live process that is not us (a sleeping child). */
function liveChild() {
  const child = spawn(process.execPath, ["-e", "setTimeout(() => {}, 60000)"], { stdio: "ignore" });
  return { pid: child.pid!, kill: () => child.kill("SIGKILL") };
}

/** A pid that no process has any more (a child that was killed and reaped). */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ["-e", "setTimeout(() => {}, 60000)"], { stdio: "ignore" });
  const exited = new Promise((r) => child.once("exit", r));
  child.kill("SIGKILL");
  await exited;
  return child.pid!;
}

function holderOf(file: string): LockHolder {
  return JSON.parse(readFileSync(file, "utf8")) as LockHolder;
}

it("refuses while a live process on this host holds the lock, naming it", async () => {
  const other = liveChild();
  try {
    await plant({ pid: other.pid });
    const err = await lockDataDir(dir).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DataDirLockedError);
    expect((err as Error).message).toContain(`data directory ${dir} is in use by another pulsebase server (pid ${other.pid} on this host`);
  } finally {
    other.kill();
  }
});

it("takes over at once from a holder process that no longer exists on this host, pid namespace and boot", async () => {
  await plant({ pid: await deadPid() }, 1_000);
  const lock = await lockDataDir(dir, { staleMs: 60_000 });
  const holder = holderOf(lock.file);
  expect(holder).toMatchObject({ pid: process.pid, hostname: hostname(), pidNs, bootId });
  await lock.release();
});

// Containers sharing a volume and a hostname (--network host, compose
// `hostname:`): a pid from another namespace or boot says nothing here.
for (const [what, other] of [
  ["another pid namespace", { pidNs: "pid:[4026530000]" }],
  ["another boot", { bootId: "00000000-0000-4000-8000-000000000000" }],
  ["an older lock file that does not say", { pidNs: undefined, bootId: undefined }],
] as const) {
  it(`does not take over from a holder in ${what} whose pid is not alive here until it is stale`, async () => {
    const pid = await deadPid();
    await plant({ pid, ...other }, 1_000);
    const err = await lockDataDir(dir, { staleMs: 5_000 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DataDirLockedError);
    expect((err as Error).message).toContain(`(pid ${pid} `);
    expect(holderOf(join(dir, LOCK_FILE)).nonce).toBe("planted");

    await plant({ pid, ...other }, 6_000);
    const lock = await lockDataDir(dir, { staleMs: 5_000 });
    expect(holderOf(lock.file).pid).toBe(process.pid);
    await lock.release();
  });
}

it("names a holder in another container on this host as such", async () => {
  await plant({ pid: 1, pidNs: "pid:[4026530000]" });
  await expect(lockDataDir(dir)).rejects.toThrow(/\(pid 1 in another container \(pid namespace\) on this host, since /);
});

it("refuses a second lock on the same directory in the same process, however the path is spelled", async () => {
  const first = await lockDataDir(dir);
  const firstNonce = holderOf(first.file).nonce;
  try {
    const link = `${dir}-link`;
    await symlink(dir, link);
    try {
      for (const path of [dir, join(dir, "."), link]) {
        const err = await lockDataDir(path).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(DataDirLockedError);
        expect((err as Error).message).toContain(`(pid ${process.pid} on this host`);
      }
    } finally {
      await rm(link);
    }
    // The first lock is untouched and still ours.
    expect(holderOf(first.file)).toMatchObject({ pid: process.pid, nonce: firstNonce });
  } finally {
    await first.release();
  }
  // Released: the directory can be locked again.
  await (await lockDataDir(dir)).release();
});

it("refuses a second lock in the same process even when the first one's heartbeat looks stale", async () => {
  // A blocked event loop or a failing utimes can leave our own file looking
  // old; this process still uses the directory.
  const first = await lockDataDir(dir, { staleMs: 3_000, heartbeatMs: 60_000 });
  try {
    const old = new Date(Date.now() - 10_000);
    await utimes(first.file, old, old);
    await expect(lockDataDir(dir, { staleMs: 3_000 })).rejects.toBeInstanceOf(DataDirLockedError);
    expect(holderOf(first.file).pid).toBe(process.pid);
  } finally {
    await first.release();
  }
});

it("lets only one of two concurrent lockDataDir calls in one process win", async () => {
  const results = await Promise.allSettled([lockDataDir(dir), lockDataDir(dir), lockDataDir(dir)]);
  const won = results.filter((r) => r.status === "fulfilled");
  expect(won).toHaveLength(1);
  for (const r of results) if (r.status === "rejected") expect(r.reason).toBeInstanceOf(DataDirLockedError);
  await won[0]!.value.release();
});

it("takes over from a reused pid (another process started since)", async () => {
  const other = liveChild();
  try {
    await plant({ pid: other.pid, procStart: "1" });
    const lock = await lockDataDir(dir);
    await lock.release();
  } finally {
    other.kill();
  }
});

it("waits for the heartbeat to go stale when the holder is on another host", async () => {
  await plant({ pid: 1, hostname: "elsewhere" }, 1_000);
  await expect(lockDataDir(dir, { staleMs: 5_000 })).rejects.toThrow(/pid 1 on host elsewhere/);
  await plant({ pid: 1, hostname: "elsewhere" }, 6_000);
  const lock = await lockDataDir(dir, { staleMs: 5_000 });
  await lock.release();
});

it("counts an unreadable lock as held until it goes stale", async () => {
  await writeFile(join(dir, LOCK_FILE), "");
  await expect(lockDataDir(dir, { staleMs: 5_000 })).rejects.toThrow(/holder unknown/);
  const old = new Date(Date.now() - 10_000);
  await utimes(join(dir, LOCK_FILE), old, old);
  await (await lockDataDir(dir, { staleMs: 5_000 })).release();
});

it("tells the holder when another server took its lock over, and release leaves the new lock alone", async () => {
  let lost: Error | undefined;
  const lock = await lockDataDir(dir, { staleMs: 3_000, heartbeatMs: 50, onLost: (e) => (lost = e) });
  const other = liveChild();
  try {
    await plant({ pid: other.pid, nonce: "newer" });
    // the holder's next heartbeat finds the new holder
    await until(async () => lost);
    expect(lost?.message).toMatch(new RegExp(`taken over by pid ${other.pid}`));
    await lock.release();
    expect((JSON.parse(await readFile(join(dir, LOCK_FILE), "utf8")) as LockHolder).nonce).toBe("newer");
  } finally {
    other.kill();
  }
});

it("keeps the lock fresh while held and frees it on release", async () => {
  const lock = await lockDataDir(dir, { staleMs: 3_000, heartbeatMs: 50 });
  // made to look stale (as after a long pause): the heartbeat freshens it again
  const old = new Date(Date.now() - 10_000);
  await utimes(lock.file, old, old);
  await until(async () => ((await stat(lock.file)).mtimeMs > old.getTime() + 5_000 ? true : undefined));
  expect(holderOf(lock.file).pid).toBe(process.pid);
  await lock.release();
  await expect(stat(lock.file)).rejects.toMatchObject({ code: "ENOENT" });
});
