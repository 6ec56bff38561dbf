// Crash capture in a page: uncaught errors and unhandled rejections become
// crash logs (class, message, stack, file, line, the last breadcrumbs),
// stored at once and sent at once; what cannot be sent goes on the next start.
import type { Analytics } from "./analytics.js";

interface ErrorEventLike { error?: unknown; message?: string; filename?: string; lineno?: number; reason?: unknown }
interface Target {
  addEventListener?(t: string, f: (e: ErrorEventLike) => void): void;
  removeEventListener?(t: string, f: (e: ErrorEventLike) => void): void;
}

/** Installs `error` and `unhandledrejection` listeners on the page; returns a function that removes them. */
export function captureCrashes(analytics: Analytics, target: Target = globalThis as Target): () => void {
  const onError = (e: ErrorEventLike) =>
    analytics.captureError(e.error ?? e.message, { type: "crash", fileName: e.filename, lineNumber: e.lineno || undefined });
  const onRejection = (e: ErrorEventLike) => analytics.captureError(e.reason, { type: "crash", context: { unhandledRejection: true } });
  target.addEventListener?.("error", onError);
  target.addEventListener?.("unhandledrejection", onRejection);
  return () => {
    target.removeEventListener?.("error", onError);
    target.removeEventListener?.("unhandledrejection", onRejection);
  };
}
