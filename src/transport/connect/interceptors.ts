// Connect interceptors: consumer authentication for the device services
// (per method, from the `auth` option) and the operator token for the admin
// services.
import { getOption } from "@bufbuild/protobuf";
import type { Interceptor } from "@connectrpc/connect";
import { auth as authOption, Auth } from "../../../gen/pulsebase/common/v1/options_pb.js";
import { appError } from "../../kernel/errors.js";
import { bearerToken, kConsumer, sameToken, type ConsumerPrincipal } from "../../kernel/principal.js";

export function consumerAuthInterceptor(authenticate: (h: string | undefined) => ConsumerPrincipal | Promise<ConsumerPrincipal>): Interceptor {
  return (next) => async (req) => {
    // (Set already when the token was checked before the body was read: connect-body-gate.ts.)
    if (getOption(req.method, authOption) === Auth.CONSUMER_UNSPECIFIED && !req.contextValues.get(kConsumer)) {
      req.contextValues.set(kConsumer, await authenticate(req.header.get("authorization") ?? undefined));
    }
    return next(req);
  };
}

export function operatorAuthInterceptor(operatorToken: string): Interceptor {
  return (next) => async (req) => {
    const token = bearerToken(req.header.get("authorization"));
    if (!token || !sameToken(token, operatorToken)) throw appError("unauthenticated", "A valid operator token is required.");
    return next(req);
  };
}
