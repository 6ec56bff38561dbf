// Group commit for the synchronous endpoints: calls that arrive while the
// previous transactions are running are written together in one transaction
// (the hot aggregate rows are locked and the commit paid once per group).
// Each caller still gets its own result; if a group fails, its items are
// retried one by one so each caller sees its own outcome.
/**
 * Thrown by a write whose transaction committed but whose follow-up failed:
 * the items must not be written again, every caller gets `cause`.
 */
export class CommittedError extends Error {
  constructor(override readonly cause: unknown) {
    super("written, but the result could not be read");
  }
}

export interface Coalescer<T, R> {
  add(item: T): Promise<R>;
}

export interface CoalescerOptions {
  /** Items per transaction (default 64). */
  maxItems?: number;
  /** Transactions running at once (default 2). */
  maxParallel?: number;
}

export function createCoalescer<T, R>(write: (items: T[]) => Promise<R[]>, opts: CoalescerOptions = {}): Coalescer<T, R> {
  const maxItems = opts.maxItems ?? 64;
  const maxParallel = opts.maxParallel ?? 2;
  const queue: Array<{ item: T; resolve(r: R): void; reject(e: unknown): void }> = [];
  let running = 0;

  const run = async (group: typeof queue) => {
    running++;
    try {
      const out = await write(group.map((g) => g.item));
      group.forEach((g, i) => g.resolve(out[i]!));
    } catch (err) {
      if (err instanceof CommittedError) for (const g of group) g.reject(err.cause);
      else if (group.length === 1) group[0]!.reject(err);
      else {
        for (const g of group) {
          try {
            g.resolve((await write([g.item]))[0]!);
          } catch (e) {
            g.reject(e instanceof CommittedError ? e.cause : e);
          }
        }
      }
    } finally {
      running--;
      pump();
    }
  };

  function pump() {
    while (queue.length > 0 && running < maxParallel) void run(queue.splice(0, maxItems));
  }

  return {
    add(item) {
      return new Promise<R>((resolve, reject) => {
        queue.push({ item, resolve, reject });
        pump();
      });
    },
  };
}
