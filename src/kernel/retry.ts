// Retry timing shared by every loop that waits and tries again: exponential
// backoff capped at a maximum, optional jitter, and one sleep that an abort
// signal cuts short.

export interface Backoff {
  /** The wait after the first failure; it doubles per attempt up to maxBackoffMs. */
  baseBackoffMs: number;
  maxBackoffMs: number;
  /** The share of each wait drawn at random (0..1), so peers retrying together spread out. */
  jitter?: number;
}

export function backoffMs(b: Backoff, attempt: number): number {
  const ms = Math.min(b.maxBackoffMs, b.baseBackoffMs * 2 ** Math.min(30, Math.max(0, attempt - 1)));
  return b.jitter ? ms * (1 - b.jitter * Math.random()) : ms;
}

/** Resolves after `ms`, or as soon as `signal` aborts (it never rejects). */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(t);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const t = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}
