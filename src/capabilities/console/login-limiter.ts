// Sign-in attempts (Login, CompleteSetup, AcceptInvitation) are limited per
// client address and failed attempts per account, in memory per process
// (src/infra/rate-limit/local-limiter.ts): a password cannot be guessed at line rate, and
// one address cannot lock everyone out by failing for them only slowly.
import { localLimiter, type LocalLimiter } from "../../infra/rate-limit/local-limiter.js";
import { enforce } from "../../infra/rate-limit/leased-limiter.js";

export interface LoginLimits {
  /** Attempts per address per minute. */
  perAddressPerMinute: number;
  /** Failed attempts per account per 15 minutes. */
  failuresPerAccount: number;
}

export const DEFAULT_LOGIN_LIMITS: LoginLimits = { perAddressPerMinute: 20, failuresPerAccount: 10 };

const MESSAGE = "Too many sign-in attempts; try again later.";

export class LoginLimiter {
  private readonly byAddress: LocalLimiter;
  private readonly failures: LocalLimiter;

  constructor(limits: LoginLimits = DEFAULT_LOGIN_LIMITS) {
    this.byAddress = localLimiter(limits.perAddressPerMinute, 60_000);
    this.failures = localLimiter(limits.failuresPerAccount, 15 * 60_000);
  }

  /** Before checking a password: throws rate_limited when the address or the account is over its limit. */
  async attempt(address: string, account: string): Promise<void> {
    enforce(await this.byAddress.take(address || "unknown"), "rate_limited", MESSAGE);
    enforce(await this.failures.peek(account), "rate_limited", MESSAGE);
  }

  failed(account: string): Promise<void> {
    return this.failures.charge(account);
  }

  succeeded(account: string): Promise<void> {
    return this.failures.reset(account);
  }
}
