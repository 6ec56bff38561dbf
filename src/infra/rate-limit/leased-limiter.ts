// The one rate limiter shared by every server process. The shared state is a
// row per key in PostgreSQL (or PGlite), kept by a policy (a fixed window or a
// token bucket, ./window-policy.ts and ./bucket-policy.ts). A process does not
// write per request: it claims a batch of tokens in one statement under the
// row's lock (never more than the policy has left) and spends them locally,
// so the servers together never spend more than the limit (overrun 0). The
// cost is on the other side: tokens a process holds unspent are refused
// elsewhere until its lease ends (then they go back, or lapse where the
// policy cannot take them back). A lease is bound to the limit and the window
// it was claimed under: tokens are never spent under another limit, also
// when their claim was in flight at the change (docs/functions-operator.md, "Rate
// limits"; docs/cms.md).
import { appError } from "../../kernel/errors.js";

/** One limit to take a token from; `limit` is per period of the policy, 0 or less = unlimited. */
export type Limit = { key: string; limit: number };

export type Verdict = { allowed: true } | { allowed: false; key: string; retryAfterSeconds: number };

/** Throws the 429 of a refusal (`rate_limited`, the CMS's `RATE_LIMITED`), with its Retry-After. */
export function enforce(v: Verdict, code: "rate_limited" | "RATE_LIMITED", message?: string): void {
  if (!v.allowed) throw appError(code, message, { retryAfterSeconds: v.retryAfterSeconds });
}

/** The shared state of one policy. */
export interface Policy {
  /** The slot a take at `now` belongs to (the window's start; 0 for a bucket). */
  slot(now: number): number;
  /** Moves up to a batch of tokens from the shared state to this process; `retryMs` (none granted): until one may be. */
  claim(key: string, limit: number, slot: number, now: number): Promise<{ granted: number; retryMs: number }>;
  /** Returns unspent tokens of a slot; without it they lapse. */
  giveBack?(key: string, slot: number, n: number): Promise<void>;
}

export interface RateLimiter {
  /** One token of every limit, or none of them (the refusal names the key that waits longest). */
  take(...limits: Limit[]): Promise<Verdict>;
  /**
   * take() without a promise when the leases held here decide it: allowed
   * (a token of every limit spent) when each has one; undefined leaves the
   * decision to take() (which may ask the policy). The hot path of a call
   * whose tokens are leased (a warm function) then has no await.
   */
  takeNow(...limits: Limit[]): Verdict | undefined;
  /** Synchronous: true (a token spent) when unlimited or a token is leased here; false leaves the decision to take(). */
  tryTake(key: string, limit: number): boolean;
  /** The key's limit changed: its unspent lease goes back now. */
  forget(key: string): void;
  /** Every `leaseMs / 2`: gives back leases left unspent for `leaseMs` (policies that take tokens back) and forgets idle keys. */
  start(): void;
  /** Gives every unspent lease back. */
  stop(): Promise<void>;
}

export interface LeaseOptions {
  /** Unspent tokens go back (or lapse) this long after their claim. */
  leaseMs: number;
  /** After a claim found nothing left, takes are refused without asking for at most this long. */
  recheckMs?: number;
  now?: () => number;
  onError?: (err: unknown) => void;
}

/** Tokens of one key claimed under one limit and slot; a refusal is remembered until emptyUntil. */
interface Lease { limit: number; slot: number; tokens: number; expiresAt: number; emptyUntil: number; retryAt: number; claiming?: Promise<boolean> }

const ALLOWED: Verdict = { allowed: true };

/** The limits that count (above 0), each key once (the first limit named for it): a key named twice spends one token. */
function distinct(limits: readonly Limit[]): Limit[] {
  const out: Limit[] = [];
  for (const l of limits) if (l.limit > 0 && !out.some((o) => o.key === l.key)) out.push(l);
  return out;
}

export function createLeasedLimiter(policy: Policy, opts: LeaseOptions): RateLimiter {
  const { leaseMs, recheckMs = 1000, now = Date.now, onError } = opts;
  const leases = new Map<string, Lease>();
  const returning = new Set<Promise<void>>();
  let timer: NodeJS.Timeout | undefined;

  function giveBack(key: string, slot: number, n: number): void {
    if (!policy.giveBack || n <= 0 || slot !== policy.slot(now())) return;
    // Lost on failure: other servers may refuse that many early.
    const p = policy.giveBack(key, slot, n).catch((err: unknown) => onError?.(err)).finally(() => returning.delete(p));
    returning.add(p);
  }

  function retire(key: string, l: Lease): void {
    if (leases.get(key) === l) leases.delete(key);
    giveBack(key, l.slot, l.tokens);
    l.tokens = 0;
  }

  /** The key's lease under this limit and slot, a new one if the old was claimed under another or ran out its time. */
  function current(key: string, limit: number, t: number): Lease {
    const slot = policy.slot(t);
    let l = leases.get(key);
    if (l && (l.limit !== limit || l.slot !== slot || (l.tokens > 0 && l.expiresAt <= t))) {
      retire(key, l);
      l = undefined;
    }
    if (!l) {
      l = { limit, slot, tokens: 0, expiresAt: 0, emptyUntil: 0, retryAt: 0 };
      leases.set(key, l);
    }
    return l;
  }

  /** True when the policy refused: nothing left for this key now. */
  async function claim(key: string, l: Lease): Promise<boolean> {
    const r = await policy.claim(key, l.limit, l.slot, now());
    const t = now();
    if (leases.get(key) !== l) {
      giveBack(key, l.slot, r.granted); // retired meanwhile
      return false;
    }
    if (r.granted > 0) {
      l.tokens += r.granted;
      l.expiresAt = t + leaseMs;
      return false;
    }
    l.retryAt = t + r.retryMs;
    l.emptyUntil = t + Math.min(r.retryMs, recheckMs);
    return true;
  }

  const refusal = (key: string, l: Lease, t: number): Verdict => ({
    allowed: false,
    key,
    retryAfterSeconds: Math.max(1, Math.ceil((l.retryAt - t) / 1000)),
  });

  /** Undefined once the key's lease holds a token; the refusal when the policy has none left. */
  async function ready(key: string, limit: number): Promise<Verdict | undefined> {
    for (;;) {
      const t = now();
      const l = current(key, limit, t);
      if (l.tokens >= 1) return undefined;
      if (l.emptyUntil > t) return refusal(key, l, t);
      // Concurrent callers share a claim; one that finds the claimed tokens
      // taken by the others claims again, and a refused claim answers at once
      // (whatever recheckMs says about later calls).
      l.claiming ??= claim(key, l).finally(() => {
        l.claiming = undefined;
      });
      if (await l.claiming) return refusal(key, l, now());
    }
  }

  return {
    async take(...limits) {
      const active = distinct(limits).sort((a, b) => (a.key < b.key ? -1 : 1));
      if (active.length === 0) return ALLOWED;
      for (;;) {
        // Spend only when every lease has a token now (no await since the check).
        const t = now();
        const held = active.map(({ key, limit }) => current(key, limit, t));
        if (held.every((l) => l.tokens >= 1)) {
          for (const l of held) l.tokens--;
          return ALLOWED;
        }
        let worst: Verdict | undefined;
        for (const { key, limit } of active) {
          const v = await ready(key, limit);
          if (v && !v.allowed && (!worst || worst.allowed || v.retryAfterSeconds > worst.retryAfterSeconds)) worst = v;
        }
        if (worst) return worst;
      }
    },

    takeNow(...limits) {
      const t = now();
      const active = limits.length > 1 ? distinct(limits) : limits.filter((l) => l.limit > 0);
      for (const { key, limit } of active) {
        if (current(key, limit, t).tokens < 1) return undefined;
      }
      for (const { key } of active) leases.get(key)!.tokens--;
      return ALLOWED;
    },

    tryTake(key, limit) {
      if (!(limit > 0)) return true;
      const l = leases.get(key);
      if (!l || l.tokens < 1 || l.limit !== limit) return false;
      const t = now();
      if (l.slot !== policy.slot(t) || l.expiresAt <= t) return false;
      l.tokens--;
      return true;
    },

    forget(key) {
      const l = leases.get(key);
      if (l) retire(key, l);
    },

    start() {
      if (timer) return;
      timer = setInterval(() => {
        const t = now();
        // Also forgets idle keys, so many keys (consumers) do not pile up here.
        for (const [key, l] of leases) if (l.expiresAt <= t && l.emptyUntil <= t && !l.claiming) retire(key, l);
      }, leaseMs / 2);
      timer.unref();
    },

    async stop() {
      clearInterval(timer);
      timer = undefined;
      for (const [key, l] of leases) retire(key, l);
      await Promise.all(returning);
    },
  };
}
