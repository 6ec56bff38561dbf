// Sign-in attempts (Login, CompleteSetup, AcceptInvitation) are limited per
// client address and failed attempts per account, in memory per process
// (rate-limiter-flexible): a password cannot be guessed at line rate, and
// one address cannot lock everyone out by failing for them only slowly.
import { RateLimiterMemory, RateLimiterRes } from "rate-limiter-flexible";
import { appError } from "../../kernel/errors.js";

export interface LoginLimits {
  /** Attempts per address per minute. */
  perAddressPerMinute: number;
  /** Failed attempts per account per 15 minutes. */
  failuresPerAccount: number;
}

export const DEFAULT_LOGIN_LIMITS: LoginLimits = { perAddressPerMinute: 20, failuresPerAccount: 10 };

export class LoginLimiter {
  private readonly byAddress: RateLimiterMemory;
  private readonly failures: RateLimiterMemory;

  constructor(limits: LoginLimits = DEFAULT_LOGIN_LIMITS) {
    this.byAddress = new RateLimiterMemory({ keyPrefix: "login-ip", points: limits.perAddressPerMinute, duration: 60 });
    this.failures = new RateLimiterMemory({ keyPrefix: "login-acct", points: limits.failuresPerAccount, duration: 15 * 60 });
  }

  /** Before checking a password: throws rate_limited when the address or the account is over its limit. */
  async attempt(address: string, account: string): Promise<void> {
    try {
      await this.byAddress.consume(address || "unknown");
    } catch (e) {
      throw limited(e);
    }
    const used = await this.failures.get(account);
    if (used && used.remainingPoints <= 0) throw limited(used);
  }

  async failed(account: string): Promise<void> {
    await this.failures.penalty(account, 1).catch(() => {});
  }

  async succeeded(account: string): Promise<void> {
    await this.failures.delete(account).catch(() => {});
  }
}

function limited(e: unknown): Error {
  if (!(e instanceof RateLimiterRes)) return e as Error;
  const retry = Math.max(1, Math.ceil(e.msBeforeNext / 1000));
  return appError("rate_limited", "Too many sign-in attempts; try again later.", { retryAfterSeconds: retry });
}
