// One coarse timer for many short deadlines (function runs, requests waiting
// for an engine), instead of a setTimeout each (the per-call timer showed up
// in the functions' warm path). Deadlines fire within TICK_MS after they
// pass; where exactness matters (CPU-bound isolate code) V8's own timeout
// cuts first.
const TICK_MS = 10;

interface Entry {
  at: number;
  fire: () => void;
}

const entries = new Set<Entry>();
let ticker: NodeJS.Timeout | undefined;

function tick(): void {
  const now = performance.now();
  for (const e of entries) {
    if (e.at <= now) {
      entries.delete(e);
      e.fire();
    }
  }
  if (entries.size === 0 && ticker) {
    clearInterval(ticker);
    ticker = undefined;
  }
}

/** Calls `fire` once `ms` have passed, unless the returned cancel runs first. */
export function deadline(ms: number, fire: () => void): () => void {
  const e: Entry = { at: performance.now() + ms, fire };
  entries.add(e);
  if (!ticker) {
    ticker = setInterval(tick, TICK_MS);
    ticker.unref();
  }
  return () => entries.delete(e);
}

/** `p`, or the error `onTimeout` makes once `ms` have passed first (the timer is cleared either way). */
export function withTimeout<T>(p: Promise<T>, ms: number, onTimeout: () => unknown): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(onTimeout()), ms);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}
