// A listener's access policy, protocol-free: who may call a method with this
// request, decided once the request message is read, and what to do once the
// call has settled (the console's audit log). The admin listener's
// dispatcher runs it for every unary call it serves; connect-node's router
// runs the same function through a thin interceptor
// (src/transport/connect-node/interceptors.ts) for what it still serves
// (docs/architecture.md, "One request through each protocol").
import type { DescMethod, Message } from "@bufbuild/protobuf";
import type { ContextValues } from "@connectrpc/connect";

export interface PolicyCall {
  readonly method: DescMethod;
  /** The request headers, as the Fetch API's Headers.get reads them. */
  readonly header: { get(name: string): string | null };
  /** The request message (a server-streaming call's one message); undefined when there is none. */
  readonly message: Message | undefined;
  /** The call's context values: the policy may add to them (the caller, for the service). */
  readonly values: ContextValues;
}

/** Runs once the admitted call has settled: its error, or its answer. */
export type PolicySettle = (error: unknown, response: unknown) => Promise<void>;

/** Resolves when the call may go ahead (with what to run once it settles), rejects with the refusal. */
export type CallPolicy = (call: PolicyCall) => Promise<PolicySettle | undefined>;
