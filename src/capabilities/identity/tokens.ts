// Consumer Bearer tokens: HS256 JWTs (jose) carrying the consumer id (sub)
// and the application key (app_key claim). A token is valid only while its
// consumer exists and its app_key is the application's current key, so
// deleting a consumer or rotating the app key revokes at once.
import { randomUUID } from "node:crypto";
import { SignJWT, jwtVerify, errors as joseErrors } from "jose";
import { appError } from "../../kernel/errors.js";
import type { SigningKey } from "./token-keys.js";
import { TtlCache } from "../../kernel/ttl-cache.js";

const ISSUER = "pulsebase";

export interface TokenClaims {
  consumerId: bigint;
  appKey: string;
}

export class TokenService {
  private readonly byKid: Map<string, Uint8Array>;
  // A token verified once is not verified again for a minute (the key is the
  // whole signed string, so only that exact token hits). WebCrypto HMAC is
  // the largest per-request cost of the device API otherwise.
  private readonly verified = new TtlCache<string, TokenClaims & { expMs: number }>(60_000, 100_000);
  constructor(private readonly keys: SigningKey[], private readonly ttlSeconds: number) {
    this.byKid = new Map(keys.map((k) => [k.kid, k.secret]));
  }

  async issue(consumerId: bigint, appKey: string): Promise<string> {
    const key = this.keys[0]!;
    return new SignJWT({ app_key: appKey })
      .setProtectedHeader({ alg: "HS256", kid: key.kid, typ: "JWT" })
      .setSubject(consumerId.toString())
      .setIssuer(ISSUER)
      .setJti(randomUUID())
      .setIssuedAt()
      .setExpirationTime(Math.floor(Date.now() / 1000) + this.ttlSeconds)
      .sign(key.secret);
  }

  /** The claims of a token verified before and not expired since, without waiting; else undefined. */
  verifiedBefore(token: string): TokenClaims | undefined {
    const hit = this.verified.get(token);
    return hit && hit.expMs > Date.now() ? hit : undefined;
  }

  /** Verifies signature and expiry; 401 on any problem. */
  async verify(token: string): Promise<TokenClaims> {
    const hit = this.verifiedBefore(token);
    if (hit) return hit;
    try {
      const { payload } = await jwtVerify(
        token,
        (header) => {
          const secret = header.kid ? this.byKid.get(header.kid) : undefined;
          if (!secret) throw new joseErrors.JWKSNoMatchingKey();
          return secret;
        },
        { algorithms: ["HS256"], issuer: ISSUER },
      );
      const sub = payload.sub;
      const appKey = payload.app_key;
      if (!sub || !/^\d+$/.test(sub) || typeof appKey !== "string") throw new Error("claims");
      const claims = { consumerId: BigInt(sub), appKey, expMs: (payload.exp ?? 0) * 1000 };
      this.verified.set(token, claims);
      return claims;
    } catch (err) {
      const expired = err instanceof joseErrors.JWTExpired;
      throw appError("unauthenticated", expired ? "The token has expired." : "Invalid token.", { cause: err });
    }
  }
}
