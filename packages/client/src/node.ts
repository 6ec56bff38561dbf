// Node-only parts: a file storage adapter and process crash capture.
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Analytics } from "./analytics.js";
import type { StorageAdapter } from "./storage.js";

export * from "./index.js";

/**
 * One file per key in `dir`, written synchronously (a temporary file renamed
 * into place, so a crash never leaves half a file): what the SDK stores in an
 * `exit` or crash handler is on disk before the process goes.
 */
export function fileStorage(dir: string): StorageAdapter {
  mkdirSync(dir, { recursive: true });
  const path = (k: string) => join(dir, `${encodeURIComponent(k)}.json`);
  return {
    get(k) {
      try {
        return readFileSync(path(k), "utf8");
      } catch {
        return null;
      }
    },
    set(k, v) {
      const tmp = `${path(k)}.${process.pid}.tmp`;
      writeFileSync(tmp, v);
      renameSync(tmp, path(k));
    },
    remove(k) {
      rmSync(path(k), { force: true });
    },
  };
}

export interface NodeCrashOptions {
  /** How long to try sending the crash before the process exits (default 2,000 ms). */
  flushTimeoutMs?: number;
}

/**
 * Records `uncaughtException` and `unhandledRejection` as crash logs (stored
 * synchronously with a synchronous storage such as fileStorage). When no other
 * listener handles them, the process then behaves as Node does without one:
 * the error is printed and the process exits with status 1, after trying to
 * send the crash for up to `flushTimeoutMs`. Returns a function that removes the listeners.
 */
export function captureNodeCrashes(analytics: Analytics, o: NodeCrashOptions = {}): () => void {
  const handle = (event: string, err: unknown) => {
    analytics.captureError(err, { type: "crash", context: event === "unhandledRejection" ? { unhandledRejection: true } : undefined });
    if (process.listenerCount(event) > 1) return; // the app handles it
    console.error(err);
    process.exitCode = 1;
    const t = setTimeout(() => process.exit(1), o.flushTimeoutMs ?? 2000);
    analytics.flush().catch(() => undefined).finally(() => {
      clearTimeout(t);
      process.exit(1);
    });
  };
  const onException = (err: unknown) => handle("uncaughtException", err);
  const onRejection = (err: unknown) => handle("unhandledRejection", err);
  process.on("uncaughtException", onException);
  process.on("unhandledRejection", onRejection);
  return () => {
    process.off("uncaughtException", onException);
    process.off("unhandledRejection", onRejection);
  };
}
