// Sign-in attempts (Login, CompleteSetup, AcceptInvitation) are limited per
// client address and failed attempts per account, in memory per process
// (src/infra/rate-limit/local-limiter.ts): a password cannot be guessed at line rate, and
// one address cannot lock everyone out by failing for them only slowly.
import { localLimiter, type LocalLimiter } from "../../infra/rate-limit/local-limiter.js";
import { enforce } from "../../infra/rate-limit/leased-limiter.js";
import { isIPv6 } from "node:net";

/**
 * The key an address is limited under: an IPv6 client's /64 (one site gets
 * a whole /64 and may pick any address in it, so per address would be no
 * limit), an IPv4-mapped IPv6 address as the IPv4 one, others as they are.
 */
export function addressGroup(address: string): string {
  let a = address.trim().toLowerCase();
  const zone = a.indexOf("%");
  if (zone >= 0) a = a.slice(0, zone);
  if (!isIPv6(a)) return a;
  const mapped = /^(?:0{0,4}:){0,5}(?:0{0,4}:)?ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(a);
  if (mapped) return mapped[1]!;
  const [head = "", tail = ""] = a.split("::");
  const left = head ? head.split(":") : [];
  const right = a.includes("::") ? (tail ? tail.split(":") : []) : [];
  // An embedded IPv4 tail counts as two groups (only the first four matter).
  const width = (g: string[]) => g.reduce((n, x) => n + (x.includes(".") ? 2 : 1), 0);
  const groups = [...left, ...Array<string>(Math.max(0, 8 - width(left) - width(right))).fill("0"), ...right];
  return groups.slice(0, 4).map((g) => (parseInt(g, 16) || 0).toString(16)).join(":") + "::/64";
}

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
    enforce(await this.byAddress.take(addressGroup(address) || "unknown"), "rate_limited", MESSAGE);
    enforce(await this.failures.peek(account), "rate_limited", MESSAGE);
  }

  failed(account: string): Promise<void> {
    return this.failures.charge(account);
  }

  succeeded(account: string): Promise<void> {
    return this.failures.reset(account);
  }
}
