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
// Limits are per process (src/infra/rate-limit/local-limiter.ts): the bound
// across N processes is N times the figures below.
import { localLimiter, type LocalLimiter } from "../../infra/rate-limit/local-limiter.js";
import { enforce } from "../../infra/rate-limit/leased-limiter.js";

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
  private readonly byAddress: LocalLimiter;
  private readonly byConsumer: LocalLimiter;
  /** Lenient mode: distinct consumers per (application, address). */
  private readonly consumersByAddress: LocalLimiter;
  /** (application, address, consumer) triples seen within the hour. */
  private readonly seen = localLimiter(1, HOUR);

  constructor(limits: Partial<TokenIssueLimits> = {}) {
    const l = { ...DEFAULT_TOKEN_ISSUE_LIMITS, ...limits };
    this.byAddress = localLimiter(l.perAddressPerMinute, MINUTE);
    this.byConsumer = localLimiter(l.perConsumerPerMinute, MINUTE);
    this.consumersByAddress = localLimiter(l.consumersPerAddressPerHour, HOUR);
  }

  /** Every attempt, before anything is looked up: charged to the caller's address. */
  async attempt(address: string): Promise<void> {
    enforce(await this.byAddress.take(address || "unknown"), "rate_limited", "Too many token requests from this address; retry later.");
  }

  /**
   * A token about to be minted for a consumer the request proved it may
   * name: its own bucket, and (lenient mode) one of the address's different
   * consumers unless it minted for this one within the hour.
   */
  async mint(address: string, appId: number, consumerId: number, lenient: boolean): Promise<void> {
    if (lenient) {
      const triple = `${appId}:${address || "unknown"}:${consumerId}`;
      if ((await this.seen.peek(triple)).allowed) {
        enforce(
          await this.consumersByAddress.take(`${appId}:${address || "unknown"}`),
          "rate_limited",
          "Too many different consumers from this address; retry later (an application in strict token mode is not limited this way).",
        );
        await this.seen.charge(triple);
      }
    }
    enforce(await this.byConsumer.take(`${appId}:${consumerId}`), "rate_limited", "Too many token requests for this consumer; retry later.");
  }
}
