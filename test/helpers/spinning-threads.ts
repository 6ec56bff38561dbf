// Whether a process has a thread spinning: one that was running (or waiting
// for a core: state R in /proc) at every look. A thread spinning for ever is
// always runnable, however busy the machine; an idle one is asleep at almost
// every look. Unlike CPU seconds per wall second, this does not depend on
// how loaded the machine is.
import { readdirSync, readFileSync, readlinkSync } from "node:fs";

/**
 * The threads of `pid` (this process by default, the calling thread left
 * out: it is the one looking) that were in state R at each of `samples` looks,
 * 10 ms apart.
 */
export async function spinningThreads(pid: number = process.pid, samples = 10): Promise<string[]> {
  // The thread looking (a worker thread's, when tests run in threads) is
  // running while it looks; it reads synchronously, so that no thread of
  // libuv's pool is caught running its reads.
  const skip = pid === process.pid ? readlinkSync("/proc/thread-self").split("/").pop() : undefined;
  let always: Set<string> | undefined;
  for (let i = 0; i < samples; i++) {
    if (i > 0) await new Promise((r) => setTimeout(r, 10));
    const running = new Set<string>();
    for (const tid of tasks(pid)) {
      if (tid === skip) continue;
      const stat = statOf(pid, tid);
      const at = stat.lastIndexOf(")");
      if (at >= 0 && stat[at + 2] === "R") running.add(tid);
    }
    always = always === undefined ? running : new Set([...always].filter((t) => running.has(t)));
    if (always.size === 0) return [];
  }
  return [...(always ?? [])];
}

function tasks(pid: number): string[] {
  try {
    return readdirSync(`/proc/${pid}/task`);
  } catch {
    return [];
  }
}

function statOf(pid: number, tid: string): string {
  try {
    return readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8");
  } catch {
    return ""; // the thread has ended
  }
}
