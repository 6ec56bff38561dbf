// Connect interceptors: consumer authentication for the device services
// (per method, from the `auth` option), and the admin listener's access
// policy (src/kernel/call-policy.ts) for what connect-node's router serves
// there: the same function the dispatcher runs for unary calls.
import { getOption, type Message } from "@bufbuild/protobuf";
import type { Interceptor } from "@connectrpc/connect";
import { auth as authOption, Auth } from "../../../gen/pulsebase/common/v1/options_pb.js";
import { appError } from "../../kernel/errors.js";
import type { CallPolicy } from "../../kernel/call-policy.js";
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

/** The operator token alone: the admin listener's policy when the console's is not configured. */
export function operatorTokenPolicy(operatorToken: string): CallPolicy {
  return async ({ header }) => {
    const token = bearerToken(header.get("authorization"));
    if (!token || !sameToken(token, operatorToken)) throw appError("unauthenticated", "A valid operator token is required.");
    return undefined;
  };
}

/**
 * A call policy as a Connect interceptor. A server-streaming call's one
 * request message is read here (and replayed to the handler), so its fields
 * are checked like a unary call's; other streams reach the policy without one.
 */
export function policyInterceptor(policy: CallPolicy): Interceptor {
  return (next) => async (req) => {
    let message: Message | undefined;
    if (!req.stream) message = req.message as Message;
    else if (req.method.methodKind === "server_streaming") {
      const first = await req.message[Symbol.asyncIterator]().next();
      message = first.done ? undefined : (first.value as Message);
      const replay = message;
      req = { ...req, message: (async function* () { if (replay) yield replay; })() };
    }
    const settle = await policy({ method: req.method, header: req.header, message, values: req.contextValues });
    if (!settle) return next(req);
    let res: Awaited<ReturnType<typeof next>>;
    try {
      res = await next(req);
    } catch (e) {
      await settle(e, undefined);
      throw e;
    }
    await settle(undefined, res.stream ? undefined : res.message);
    return res;
  };
}
