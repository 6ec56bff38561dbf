// Wires consumers, sessions and the operator identity API.
import { IdentityService } from "../../../gen/pulsebase/admin/v1/identity_pb.js";
import { ConsumerService } from "../../../gen/pulsebase/platform/v1/consumer_pb.js";
import { SessionService } from "../../../gen/pulsebase/platform/v1/session_pb.js";
import type { Shared } from "../../server/build.js";
import { binding, type PulsebaseModule } from "../../kernel/module.js";
import { createAdminIdentityServiceImpl } from "./admin-identity-service.js";
import { createConsumerServiceImpl } from "./consumer-service.js";
import { createSessionServiceImpl } from "./session-service.js";
import { TokenIssueLimiter } from "./token-issue-limiter.js";

export function createIdentityModule(s: Shared): PulsebaseModule {
  return {
    name: "identity",
    device: [
      binding(ConsumerService, createConsumerServiceImpl({ store: s.identity, tokens: s.tokens, auth: s.auth, limiter: new TokenIssueLimiter() })),
      binding(SessionService, createSessionServiceImpl({ store: s.identity })),
    ],
    admin: [binding(IdentityService, createAdminIdentityServiceImpl({ store: s.identity, auth: s.auth, changes: s.changes }))],
  };
}
