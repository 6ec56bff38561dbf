// GET /api/consumer/token mints a token from the public app key (as the spec
// says), so it is rate-limited per client address and per consumer id
// (DECISIONS 36). Limits are per process (rate-limiter-flexible, in memory):
// the bound across N processes is N times the figure below.
import { RateLimiterMemory, RateLimiterRes } from "rate-limiter-flexible";
import { appError } from "../internal/errors.js";

export interface TokenIssueLimits {
  perAddressPerMinute: number;
  perConsumerPerMinute: number;
}

export const DEFAULT_TOKEN_ISSUE_LIMITS: TokenIssueLimits = { perAddressPerMinute: 60, perConsumerPerMinute: 20 };

export class TokenIssueLimiter {
  private readonly byAddress: RateLimiterMemory;
  private readonly byConsumer: RateLimiterMemory;

  constructor(limits: TokenIssueLimits = DEFAULT_TOKEN_ISSUE_LIMITS) {
    this.byAddress = new RateLimiterMemory({ keyPrefix: "tok-ip", points: limits.perAddressPerMinute, duration: 60 });
    this.byConsumer = new RateLimiterMemory({ keyPrefix: "tok-c", points: limits.perConsumerPerMinute, duration: 60 });
  }

  async take(address: string, consumerId: string): Promise<void> {
    try {
      await this.byAddress.consume(address || "unknown");
      if (consumerId) await this.byConsumer.consume(consumerId);
    } catch (err) {
      if (err instanceof RateLimiterRes) {
        throw appError("rate_limited", "Too many token requests; retry later.", { retryAfterSeconds: Math.max(1, Math.ceil(err.msBeforeNext / 1000)) });
      }
      throw err;
    }
  }
}
