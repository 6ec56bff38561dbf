// Polls `fn` until it returns something other than undefined (asynchronous
// effects: event deliveries, dead letters, captured changes).
export async function until<T>(fn: () => Promise<T | undefined>, ms = 10_000, pollMs = 50): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error("timed out waiting");
    await new Promise((r) => setTimeout(r, pollMs));
  }
}

/** Waits, if needed, until the current epoch-aligned window (a minute, an hour) has `needMs` left, so a test's takes share one window. */
export async function withinOneWindow(windowMs: number, needMs = 3000): Promise<void> {
  const left = windowMs - (Date.now() % windowMs);
  if (left < needMs) await new Promise((r) => setTimeout(r, left + 5));
}
