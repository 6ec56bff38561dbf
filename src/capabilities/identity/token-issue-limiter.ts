// GET /api/consumer/token mints a token from the public app key (as the spec
// says), so it is rate-limited:
// - per client address, every attempt (failed ones included): what a caller
//   probing keys or ids can do is charged to the caller only;
// - per consumer, keyed on (application, normalised consumer id) and charged
//   only once the key and consumer were found (and, in strict mode, the
//   device_id matched): requests with a wrong key cannot lock a consumer's
//   token refresh, and `0123` is the bucket of `123`;
// - in lenient mode (no device_id required), how many different consumers
//   one address may mint tokens for in an hour, per application: with only
//   the public key, a caller cannot walk the consumer ids.
// Limits are per process (rate-limiter-flexible, in memory, as before): the
// bound across N processes is N times the figures below.
import { RateLimiterMemory, RateLimiterRes } from "rate-limiter-flexible";
import { appError } from "../../kernel/errors.js";

export interface TokenIssueLimits {
  perAddressPerMinute: number;
  perConsumerPerMinute: number;
  /** Lenient mode: different consumers one address may mint for, per application. */
  consumersPerAddressPerHour: number;
}

export const DEFAULT_TOKEN_ISSUE_LIMITS: TokenIssueLimits = { perAddressPerMinute: 60, perConsumerPerMinute: 20, consumersPerAddressPerHour: 20 };

const HOUR = 3600;

export class TokenIssueLimiter {
  private readonly byAddress: RateLimiterMemory;
  private readonly byConsumer: RateLimiterMemory;
  /** Lenient mode: distinct consumers per (application, address). */
  private readonly consumersByAddress: RateLimiterMemory;
  /** (application, address, consumer) triples seen within the hour. */
  private readonly seen: RateLimiterMemory;

  constructor(limits: Partial<TokenIssueLimits> = {}) {
    const l = { ...DEFAULT_TOKEN_ISSUE_LIMITS, ...limits };
    this.byAddress = new RateLimiterMemory({ keyPrefix: "tok-ip", points: l.perAddressPerMinute, duration: 60 });
    this.byConsumer = new RateLimiterMemory({ keyPrefix: "tok-c", points: l.perConsumerPerMinute, duration: 60 });
    this.consumersByAddress = new RateLimiterMemory({ keyPrefix: "tok-ipc", points: l.consumersPerAddressPerHour, duration: HOUR });
    this.seen = new RateLimiterMemory({ keyPrefix: "tok-seen", points: 1, duration: HOUR });
  }

  /** Every attempt, before anything is looked up: charged to the caller's address. */
  async attempt(address: string): Promise<void> {
    await limited(() => this.byAddress.consume(address || "unknown"), "Too many token requests from this address; retry later.");
  }

  /**
   * A token about to be minted for a consumer the request proved it may
   * name: its own bucket, and (lenient mode) one of the address's different
   * consumers unless it minted for this one within the hour.
   */
  async mint(address: string, appId: number, consumerId: number, lenient: boolean): Promise<void> {
    if (lenient) {
      const triple = `${appId}:${address || "unknown"}:${consumerId}`;
      if (!(await this.seen.get(triple))) {
        await limited(
          () => this.consumersByAddress.consume(`${appId}:${address || "unknown"}`),
          "Too many different consumers from this address; retry later (an application in strict token mode is not limited this way).",
        );
        await this.seen.set(triple, 1, HOUR);
      }
    }
    await limited(() => this.byConsumer.consume(`${appId}:${consumerId}`), "Too many token requests for this consumer; retry later.");
  }
}

async function limited(take: () => Promise<unknown>, message: string): Promise<void> {
  try {
    await take();
  } catch (err) {
    if (err instanceof RateLimiterRes) {
      throw appError("rate_limited", message, { retryAfterSeconds: Math.max(1, Math.ceil(err.msBeforeNext / 1000)) });
    }
    throw err;
  }
}
