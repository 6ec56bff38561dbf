// Who is calling. The transports (REST gateway, Connect interceptors)
// authenticate the request and put the principal into the handler context;
// service implementations only read it.
import { timingSafeEqual } from "node:crypto";
import { createContextKey, type HandlerContext } from "@connectrpc/connect";
import { appError } from "./errors.js";

export interface ConsumerPrincipal {
  consumerId: number;
  appId: number;
  appKey: string;
  /** The consumer's user_id now (the "user" of unique_users counts). */
  userId: string;
  deviceId: string;
}

export const kConsumer = createContextKey<ConsumerPrincipal | undefined>(undefined, {
  description: "authenticated consumer",
});

/** The request id (X-Request-Id) of the call, also a UUID. */
export const kRequestId = createContextKey<string>("", { description: "request id" });

/** The authenticated consumer of the call; 401 when there is none. */
export function consumerOf(ctx: HandlerContext): ConsumerPrincipal {
  const p = ctx.values.get(kConsumer);
  if (!p) throw appError("unauthenticated");
  return p;
}

export function requestIdOf(ctx: HandlerContext): string {
  return ctx.values.get(kRequestId);
}

/** The client's address (after trusted-proxy resolution), for per-address limits. */
export const kClientAddress = createContextKey<string>("", { description: "client address" });

/** Compares a presented secret (token, CSRF value) in constant time. */
export function sameToken(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** Extracts the token of an `Authorization: Bearer <token>` header. */
export function bearerToken(header: string | null | undefined): string | undefined {
  if (!header) return undefined;
  const m = /^Bearer\s+([A-Za-z0-9._~+/=-]+)\s*$/i.exec(header);
  return m?.[1];
}
