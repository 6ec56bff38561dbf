// The Connect routes' side of the body gate (see gateway.ts bodyGate): a
// method that needs a consumer token has it checked before a byte of the
// body is read, then the body is admitted into the process's budget. Connect
// reads the body itself, so a refusal is handed to it as the body: a stream
// that fails with the error at its first read. Connect then answers in the
// call's own protocol (Connect, gRPC, gRPC-Web) without reading anything,
// and never runs the method or its interceptors.
import { Code, ConnectError } from "@connectrpc/connect";
import type { FastifyInstance, FastifyReply, FastifyRequest, preHandlerHookHandler } from "fastify";
import { appError } from "../../kernel/errors.js";
import type { ConsumerPrincipal } from "../../kernel/principal.js";
import { ANONYMOUS, hasBody, type BodyBudget } from "../call/body-budget.js";

export interface ConnectBodyGateOptions {
  budget: BodyBudget;
  authenticate(authorization: string | undefined): ConsumerPrincipal | Promise<ConsumerPrincipal>;
  /** Whether the procedure at this path needs a consumer token. */
  needsConsumer(path: string): boolean;
  bodyLimitBytes: number;
  anonymousBodyLimitBytes: number;
}

/** Adds the gate to every Connect route registered in this scope (call it before registering the plugin). */
export function connectBodyGate(scope: FastifyInstance, opts: ConnectBodyGateOptions): void {
  scope.addHook("onRoute", (route) => {
    const gate = opts.needsConsumer(route.url) ? consumerGate(opts) : anonymousGate(opts);
    const prior = route.preHandler;
    route.preHandler = prior === undefined ? [gate] : [gate, ...(Array.isArray(prior) ? prior : [prior])];
  });
}

function consumerGate(opts: ConnectBodyGateOptions): preHandlerHookHandler {
  const admitted = (req: FastifyRequest, reply: FastifyReply, done: () => void, p: ConsumerPrincipal) => {
    req.pulsebaseConsumer = p;
    const refused = opts.budget.admit(req.raw, reply.raw, p.appId, opts.bodyLimitBytes);
    if (refused) req.body = failing(refused);
    done();
  };
  const refuse = (req: FastifyRequest, reply: FastifyReply, done: () => void, err: unknown) => {
    opts.budget.drain(req.raw, reply.raw);
    req.body = failing(err);
    done();
  };
  return function connectConsumerGate(req, reply, done) {
    // A Connect GET carries its message in the URL: the interceptor authenticates it.
    if (!hasBody(req.raw)) return done();
    let c: ConsumerPrincipal | Promise<ConsumerPrincipal>;
    try {
      c = opts.authenticate(req.headers.authorization);
    } catch (err) {
      return refuse(req, reply, done, err);
    }
    if (c instanceof Promise) c.then((p) => admitted(req, reply, done, p), (err: unknown) => refuse(req, reply, done, err));
    else admitted(req, reply, done, c);
  };
}

function anonymousGate(opts: ConnectBodyGateOptions): preHandlerHookHandler {
  const limit = opts.anonymousBodyLimitBytes;
  return function connectAnonymousGate(req, reply, done) {
    if (!hasBody(req.raw)) return done();
    const refused = opts.budget.admit(req.raw, reply.raw, ANONYMOUS, limit);
    // A body of undeclared length is counted as Connect reads it.
    req.body = refused ? failing(refused) : req.headers["content-length"] === undefined ? limited(req.raw, limit) : undefined;
    done();
  };
}

/** A request body that fails at its first read. */
function failing(err: unknown): AsyncIterable<Uint8Array> {
  return {
    [Symbol.asyncIterator]: () => ({ next: () => Promise.reject(err) }),
  };
}

/** The request's bytes, failing with 413 past `limit`. */
async function* limited(raw: AsyncIterable<Uint8Array>, limit: number): AsyncIterable<Uint8Array> {
  let n = 0;
  try {
    for await (const chunk of raw) {
      n += chunk.byteLength;
      if (n > limit) throw appError("payload_too_large");
      yield chunk;
    }
  } catch (err) {
    // A client that went away is not a server fault (as Connect's own reader says).
    throw err instanceof ConnectError ? err : new ConnectError("the request was aborted", Code.Aborted, undefined, undefined, err);
  }
}
