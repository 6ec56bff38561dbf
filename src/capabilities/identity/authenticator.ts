// Turns a Bearer token into a ConsumerPrincipal: signature and expiry
// (TokenService), then the consumer's current state (cached briefly, so the
// hot path does not query per request). Deleting a consumer or rotating an
// app key invalidates the cache here at once, and in every other process
// through the change bus (cluster/change-bus.ts) within its bound; the TTL
// is only the safety net.
import { appError } from "../../kernel/errors.js";
import { bearerToken, type ConsumerPrincipal } from "../../kernel/principal.js";
import { TtlCache } from "../../kernel/ttl-cache.js";
import type { IdentityStore } from "./identity-store.js";
import type { TokenService } from "./tokens.js";

export class Authenticator {
  private readonly cache: TtlCache<number, ConsumerPrincipal | null>;
  // A lookup that started before a forget of its consumer (or of its app)
  // may have read the revoked state: it answers its own request but is not
  // cached. Forgets are numbered; per consumer they are remembered only while
  // lookups are in flight.
  private generation = 0;
  private appForgotAt = 0;
  private readonly consumerForgotAt = new Map<number, number>();
  private lookups = 0;

  constructor(private readonly store: IdentityStore, private readonly tokens: TokenService, cacheTtlMs = 5000) {
    this.cache = new TtlCache(cacheTtlMs, 50_000);
  }

  /**
   * The principal when the token was verified before and its consumer is
   * cached and still valid: no promise, no await (the hot path of every
   * device request). Undefined otherwise, problems included: then
   * fromAuthorization decides, and reports them.
   */
  known(header: string | null | undefined): ConsumerPrincipal | undefined {
    // Only tokens that passed bearerToken() and verification are cached, so
    // the plain "Bearer <token>" form needs no regular expression here; any
    // other spelling misses and goes through fromAuthorization.
    const token = header?.startsWith("Bearer ") ? header.slice(7) : undefined;
    const claims = token && this.tokens.verifiedBefore(token);
    if (!claims) return undefined;
    const p = this.cache.get(Number(claims.consumerId));
    return p && p.appKey === claims.appKey ? p : undefined;
  }

  async fromAuthorization(header: string | null | undefined): Promise<ConsumerPrincipal> {
    const token = bearerToken(header);
    if (!token) throw appError("unauthenticated", header ? "Malformed Authorization header." : "Missing Bearer token.");
    const claims = await this.tokens.verify(token);
    const id = Number(claims.consumerId);
    let p = this.cache.get(id);
    if (p === undefined) {
      const started = this.generation;
      this.lookups++;
      let row;
      try {
        row = await this.store.consumerAuth(id);
      } finally {
        if (--this.lookups === 0) this.consumerForgotAt.clear();
      }
      p = row
        ? { consumerId: row.consumer_id, appId: row.app_id, appKey: row.app_key, userId: row.user_id, deviceId: row.device_id }
        : null;
      if (started >= this.appForgotAt && started >= (this.consumerForgotAt.get(id) ?? 0)) this.cache.set(id, p);
    }
    if (!p) throw appError("unauthenticated", "The consumer no longer exists.");
    if (p.appKey !== claims.appKey) throw appError("unauthenticated", "The application key of this token was rotated.");
    return p;
  }

  forgetConsumer(id: number): void {
    if (this.lookups > 0) this.consumerForgotAt.set(id, ++this.generation);
    this.cache.delete(id);
  }

  forgetApp(appId: number): void {
    this.appForgotAt = ++this.generation;
    this.cache.deleteWhere((p) => p?.appId === appId);
  }
}
