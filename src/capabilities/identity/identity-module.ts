// The identity capability's module definition: consumers and sessions on the
// public listener, the operator identity API, and the authenticator every
// token-taking route uses, whose caches follow consumer and app changes.
import { IdentityService } from "../../../gen/pulsebase/admin/v1/identity_pb.js";
import { ConsumerService } from "../../../gen/pulsebase/platform/v1/consumer_pb.js";
import { SessionService } from "../../../gen/pulsebase/platform/v1/session_pb.js";
import type { ChangeBus } from "../../infra/cluster/change-bus.js";
import type { Sql } from "../../infra/storage/sql.js";
import { binding, type PulsebaseModule } from "../../kernel/module.js";
import type { ConsumerPrincipal } from "../../kernel/principal.js";
import { createAdminIdentityServiceImpl } from "./admin-identity-service.js";
import { Authenticator } from "./authenticator.js";
import { createConsumerServiceImpl } from "./consumer-service.js";
import { IdentityStore } from "./identity-store.js";
import { createSessionServiceImpl } from "./session-service.js";
import { TokenIssueLimiter } from "./token-issue-limiter.js";
import type { SigningKey } from "./token-keys.js";
import { TokenService } from "./tokens.js";

export interface IdentityModule extends PulsebaseModule {
  /** The consumer of an Authorization header: at once when cached, else a promise. */
  authenticate(authorization: string | undefined): ConsumerPrincipal | Promise<ConsumerPrincipal>;
}

export function createIdentityModule(deps: {
  sql: Sql;
  signingKeys: SigningKey[];
  tokenTtlSeconds: number;
  changes: ChangeBus;
  /** The token-check cache's TTL (default: the Authenticator's own, 5 s). */
  cacheTtlMs?: number;
}): IdentityModule {
  const store = new IdentityStore(deps.sql);
  const tokens = new TokenService(deps.signingKeys, deps.tokenTtlSeconds);
  const auth = new Authenticator(store, tokens, deps.cacheTtlMs);
  // Revoked tokens: a deleted consumer, or every consumer of an app whose key
  // changed (or of which a change may have been missed).
  deps.changes.subscribe("consumer", (c) => (c.itemId === undefined ? auth.forgetApp(c.appId) : auth.forgetConsumer(c.itemId)));
  deps.changes.subscribe("app", (c) => auth.forgetApp(c.appId));
  const limiter = new TokenIssueLimiter(deps.sql);
  return {
    name: "identity",
    authenticate: (h) => auth.known(h) ?? auth.fromAuthorization(h),
    device: [
      binding(ConsumerService, createConsumerServiceImpl({ store, tokens, auth, limiter })),
      binding(SessionService, createSessionServiceImpl({ store })),
    ],
    admin: [binding(IdentityService, createAdminIdentityServiceImpl({ store, auth, changes: deps.changes }))],
    start: async () => limiter.start(),
    stop: () => limiter.stop(),
  };
}
