// Limits kept in memory per process (rate-limiter-flexible), for keys a crowd
// of callers could multiply (client addresses, accounts): a shared row per key
// would let them grow the table without bound, so the bound across N
// processes is N times the figure (README, "Limits"). A window starts at a
// key's first take. Answers are the leased limiter's verdicts.
import { RateLimiterMemory, RateLimiterRes } from "rate-limiter-flexible";
import type { Verdict } from "./leased-limiter.js";

export interface LocalLimiter {
  /** One point, refused past the limit. */
  take(key: string): Promise<Verdict>;
  /** Refused when the key's points are used up; spends nothing. */
  peek(key: string): Promise<Verdict>;
  /** One point, whatever is left (a failure being counted). */
  charge(key: string): Promise<void>;
  reset(key: string): Promise<void>;
}

export function localLimiter(points: number, windowMs: number): LocalLimiter {
  const rl = new RateLimiterMemory({ points, duration: windowMs / 1000 });
  const refused = (key: string, r: RateLimiterRes): Verdict => ({ allowed: false, key, retryAfterSeconds: Math.max(1, Math.ceil(r.msBeforeNext / 1000)) });
  return {
    async take(key) {
      try {
        await rl.consume(key);
        return { allowed: true };
      } catch (r) {
        if (r instanceof RateLimiterRes) return refused(key, r);
        throw r;
      }
    },
    async peek(key) {
      const r = await rl.get(key);
      return r && r.remainingPoints <= 0 ? refused(key, r) : { allowed: true };
    },
    async charge(key) {
      await rl.penalty(key, 1).catch(() => {});
    },
    async reset(key) {
      await rl.delete(key).catch(() => {});
    },
  };
}
