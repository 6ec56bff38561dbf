// GET /api/consumer/token mints a token from the public app key (as the spec
// says), so it is rate-limited:
// - per client address, every attempt (failed ones included): what a caller
//   probing keys or ids can do is charged to the caller only. Per process, in
//   memory: the attempt is unauthenticated, and a shared row per address
//   would grow the table without bound;
// - per consumer, keyed on (application, normalised consumer id) and charged
//   only once the key and consumer were found (and, in strict mode, the
//   device_id matched): requests with a wrong key cannot lock a consumer's
//   token refresh, and `0123` is the bucket of `123`;
// - in lenient mode (no device_id required), how many different consumers
//   one address may mint tokens for in an hour, per application: with only
//   the public key, a caller cannot walk the consumer ids.
// The last two hold across all servers (the leased limiter; clock-aligned
// windows, claims of one token): rows exist only for real consumers, and old
// windows are deleted (window-policy.ts). README, "Limits".
import type { Sql } from "../../infra/storage/sql.js";
import { localLimiter, type LocalLimiter } from "../../infra/rate-limit/local-limiter.js";
import { createLeasedLimiter, enforce, type Policy, type RateLimiter } from "../../infra/rate-limit/leased-limiter.js";
import { windowPolicy } from "../../infra/rate-limit/window-policy.js";

export interface TokenIssueLimits {
  perAddressPerMinute: number;
  perConsumerPerMinute: number;
  /** Lenient mode: different consumers one address may mint for, per application. */
  consumersPerAddressPerHour: number;
}

export const DEFAULT_TOKEN_ISSUE_LIMITS: TokenIssueLimits = { perAddressPerMinute: 60, perConsumerPerMinute: 20, consumersPerAddressPerHour: 20 };

const MINUTE = 60_000;
const HOUR = 3_600_000;

export class TokenIssueLimiter {
  private readonly limits: TokenIssueLimits;
  private readonly byAddress: LocalLimiter;
  private readonly byConsumer: RateLimiter;
  /** Lenient mode: distinct consumers per (application, address). */
  private readonly consumersByAddress: RateLimiter;
  /** (application, address, consumer) triples minted for within the hour: a claim is granted once per window. */
  private readonly seen: Policy;

  constructor(sql: Sql, limits: Partial<TokenIssueLimits> = {}) {
    this.limits = { ...DEFAULT_TOKEN_ISSUE_LIMITS, ...limits };
    this.byAddress = localLimiter(this.limits.perAddressPerMinute, MINUTE);
    this.byConsumer = createLeasedLimiter(windowPolicy(sql, { name: "token-consumer", windowMs: MINUTE, batch: () => 1 }), { leaseMs: MINUTE });
    this.consumersByAddress = createLeasedLimiter(windowPolicy(sql, { name: "token-address-consumers", windowMs: HOUR, batch: () => 1 }), { leaseMs: MINUTE });
    this.seen = windowPolicy(sql, { name: "token-seen", windowMs: HOUR, batch: () => 1 });
  }

  /** Every attempt, before anything is looked up: charged to the caller's address. */
  async attempt(address: string): Promise<void> {
    enforce(await this.byAddress.take(address || "unknown"), "rate_limited", "Too many token requests from this address; retry later.");
  }

  /**
   * A token about to be minted for a consumer the request proved it may
   * name: its own limit, and (lenient mode) one of the address's different
   * consumers unless it minted for this one within the hour.
   */
  async mint(address: string, appId: number, consumerId: number, lenient: boolean): Promise<void> {
    if (lenient) {
      const triple = `${appId}:${address || "unknown"}:${consumerId}`;
      const now = Date.now();
      const slot = this.seen.slot(now);
      if ((await this.seen.claim(triple, 1, slot, now)).granted > 0) {
        const v = await this.consumersByAddress.take({ key: `${appId}:${address || "unknown"}`, limit: this.limits.consumersPerAddressPerHour });
        // Refused: not minted for, so not seen.
        if (!v.allowed) await this.seen.giveBack?.(triple, slot, 1);
        enforce(v, "rate_limited", "Too many different consumers from this address; retry later (an application in strict token mode is not limited this way).");
      }
    }
    const v = await this.byConsumer.take({ key: `${appId}:${consumerId}`, limit: this.limits.perConsumerPerMinute });
    enforce(v, "rate_limited", "Too many token requests for this consumer; retry later.");
  }

  /** Forgets idle keys of the shared limits (their leases are in memory). */
  start(): void {
    this.byConsumer.start();
    this.consumersByAddress.start();
  }

  async stop(): Promise<void> {
    await Promise.all([this.byConsumer.stop(), this.consumersByAddress.stop()]);
  }
}
