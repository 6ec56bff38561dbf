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
