// The one dispatcher behind every protocol codec of the public listener
// (docs/architecture.md, "One request through each protocol"): REST
// (src/transport/http/gateway.ts), Connect, gRPC and gRPC-Web
// (rpc-routes.ts) all look the method up here, check its consumer token
// before a byte of the body is read, admit the body into the process's
// budget, build the handler context, enforce the call's deadline, call the
// ServiceImpl method directly and log server faults in one place. The codecs
// only turn bytes into the request message and the answer into bytes.
import { getOption, type DescMethod, type DescService, type Message } from "@bufbuild/protobuf";
import { ConnectError, createContextValues, type ContextValues } from "@connectrpc/connect";
import type { IncomingHttpHeaders } from "node:http";
import type { Logger } from "pino";
import { auth as authOption, Auth } from "../../../gen/pulsebase/common/v1/options_pb.js";
import type { CallPolicy } from "../../kernel/call-policy.js";
import { deadline } from "../../kernel/deadlines.js";
import { appError, isServerFault, restStatusOf, toAppError } from "../../kernel/errors.js";
import type { RestFastPath, RestJsonPath, ServiceBinding } from "../../kernel/module.js";
import { kClientAddress, kConsumer, kRequestId, type ConsumerPrincipal } from "../../kernel/principal.js";
import { ANONYMOUS, type BodyBudget, type RawRequest, type RawResponse } from "./body-budget.js";
import { CallContext } from "./call-context.js";

export type Authenticate = (authorization: string | undefined) => ConsumerPrincipal | Promise<ConsumerPrincipal>;

/** A unary method as the dispatcher serves it, resolved once at start-up. */
export interface UnaryMethod {
  readonly service: DescService;
  readonly method: DescMethod;
  /** "/<package>.<Service>/<Method>", the Connect and gRPC path. */
  readonly path: string;
  /** "<package>.<Service>/<Method>", as the error log names it. */
  readonly procedure: string;
  /** The method's `auth` option asks for a consumer token. */
  readonly needsConsumer: boolean;
  /** Largest body: the listener's limit with a token, the small anonymous one without. */
  readonly bodyLimit: number;
  readonly call: (req: Message, ctx: CallContext) => unknown;
  /** The service's own binary writer of the response message, if it has one (MethodPaths.encode, src/kernel/module.ts). */
  readonly encodeBinary: ((msg: Message) => Uint8Array) | undefined;
  /** The service's own binary reader of the request message, if it has one (MethodPaths.decode). */
  readonly decodeBinary: ((bytes: Uint8Array) => Message | undefined) | undefined;
  /** The service's REST GET fast path, if it has one (MethodPaths.rest). */
  readonly restFast: RestFastPath | undefined;
  /** The service's REST POST JSON path, if it has one (MethodPaths.json). */
  readonly restJson: RestJsonPath | undefined;
  /**
   * The method's `answers_at_once` proto option: the service can answer it
   * without waiting, from memory (a REST JSON or fast path) or a warm
   * function (a passthrough method). Its calls are batched per loop turn
   * (turn-batch.ts), on every protocol alike; the others start when they
   * arrive.
   */
  readonly answersAtOnce: boolean;
}

export interface DispatcherOptions {
  services: ServiceBinding[];
  /** Checks the consumer token of methods whose `auth` option asks for one; without it (the admin listener) no method takes one. */
  authenticate?: Authenticate;
  /** The process's budget of request bodies; without it (the admin listener) Fastify's body limit alone. */
  budget?: BodyBudget;
  bodyLimitBytes: number;
  anonymousBodyLimitBytes: number;
  logger: Logger;
  /**
   * The listener's access policy (the admin listener's operator token or
   * console roles), run on the request message before the method and told
   * how the call settled; its refusal is the call's answer.
   */
  policy?: CallPolicy;
  /** Context values of the listener's own (the admin listener's user agent, for the audit log). */
  contextValues?: (req: CallSource, values: ContextValues) => void;
}

/** The request a call came in as: a Fastify request, or the HTTP/2 stream lane's call (stream-lane.ts). */
export interface CallSource {
  readonly id: string;
  /** The client's address (the trusted proxy's client, behind one). */
  readonly ip: string;
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
}

/** What the gate decided: the consumer (methods that need one), or the refusal. */
export type Admission = (refused: ConnectError | undefined, consumer: ConsumerPrincipal | undefined) => void;

export class Dispatcher {
  private readonly byPath = new Map<string, UnaryMethod>();

  constructor(private readonly opts: DispatcherOptions) {
    for (const b of opts.services) {
      for (const m of b.service.methods) {
        if (m.methodKind !== "unary") continue;
        const bm = b.methods.get(m.localName);
        if (!bm?.call) throw new Error(`no implementation for ${b.service.typeName}.${m.name}`);
        const needsConsumer = opts.authenticate !== undefined && getOption(m, authOption) === Auth.CONSUMER_UNSPECIFIED;
        const bound: UnaryMethod["call"] = bm.call;
        this.byPath.set(`/${b.service.typeName}/${m.name}`, {
          service: b.service,
          method: m,
          path: `/${b.service.typeName}/${m.name}`,
          procedure: `${b.service.typeName}/${m.name}`,
          needsConsumer,
          bodyLimit: needsConsumer || !opts.authenticate ? opts.bodyLimitBytes : opts.anonymousBodyLimitBytes,
          call: opts.policy ? guarded(opts.policy, m, bound) : bound,
          encodeBinary: bm.encode,
          decodeBinary: bm.decode,
          restFast: bm.rest,
          restJson: bm.json,
          answersAtOnce: bm.answersAtOnce,
        });
      }
    }
  }

  /** Every unary method, in the services' order. */
  get methods(): Iterable<UnaryMethod> {
    return this.byPath.values();
  }

  /** The method at a Connect/gRPC path, or of a service's method. */
  lookup(path: string): UnaryMethod | undefined {
    return this.byPath.get(path);
  }

  methodOf(service: DescService, method: DescMethod): UnaryMethod {
    const m = this.byPath.get(`/${service.typeName}/${method.name}`);
    if (!m) throw new Error(`no unary method ${service.typeName}/${method.name}`);
    return m;
  }

  /**
   * The body gate, before a byte of the body is read. A method that needs a
   * consumer token has it checked first: without a valid one the refusal is
   * final and the body is never read (an HTTP/1.1 one is put on the clock
   * while Node drops it). Then the body is admitted into the budget, charged
   * to the token's application, or to the anonymous owner with the small
   * limit. `done` runs once, synchronously when the token is cached.
   */
  admit(m: UnaryMethod, authorization: string | undefined, raw: RawRequest, res: RawResponse, done: Admission): void {
    const budget = this.opts.budget;
    if (!budget) return done(undefined, undefined);
    if (!m.needsConsumer) return done(budget.admit(raw, res, ANONYMOUS, m.bodyLimit), undefined);
    const admitted = (p: ConsumerPrincipal) => done(budget.admit(raw, res, p.appId, m.bodyLimit), p);
    const refuse = (err: unknown) => {
      budget.drain(raw, res);
      done(toAppError(err), undefined);
    };
    let c: ConsumerPrincipal | Promise<ConsumerPrincipal>;
    try {
      c = this.opts.authenticate!(authorization);
    } catch (err) {
      return refuse(err);
    }
    if (c instanceof Promise) c.then(admitted, refuse);
    else admitted(c);
  }

  /** The handler context of a call: request id, client address, consumer, deadline. */
  context(m: UnaryMethod, protocol: string, req: CallSource, consumer: ConsumerPrincipal | null | undefined, timeoutMs?: number): CallContext {
    const values = createContextValues();
    values.set(kRequestId, req.id);
    values.set(kClientAddress, req.ip);
    if (consumer) values.set(kConsumer, consumer);
    this.opts.contextValues?.(req, values);
    return new CallContext(m.service, m.method, protocol, req.method, req.url, req.headers, values, timeoutMs);
  }

  /**
   * Calls the method. A service that answers synchronously (the database's
   * point read) gets its answer back as a value, without a promise; else a
   * promise, cut at the call's deadline with deadline_exceeded (the
   * context's signal aborts with it). What it throws or rejects with is
   * passed on after fault() has seen it.
   */
  invoke(m: UnaryMethod, input: Message, ctx: CallContext): unknown {
    let r: unknown;
    try {
      if (ctx.deadlineAt !== undefined && ctx.deadlineAt <= Date.now()) throw expire(ctx);
      r = m.call(input, ctx);
    } catch (err) {
      throw this.fault(m, ctx.protocolName, ctx.values.get(kRequestId), err);
    }
    if (!(r instanceof Promise)) return r;
    const p = ctx.deadlineAt === undefined ? r : withDeadline(r, ctx);
    return p.then(undefined, (err: unknown) => {
      throw this.fault(m, ctx.protocolName, ctx.values.get(kRequestId), err);
    });
  }

  /**
   * The one error log of the listener's calls: a server fault (5xx, not the
   * user's function failing) is logged at error level with its cause chain;
   * client errors are the access log's business. Returns the error.
   */
  fault(m: UnaryMethod, protocol: string, reqId: string, err: unknown): unknown {
    const e = toAppError(err);
    const status = restStatusOf(e);
    if (isServerFault(e, status)) {
      // REST logs the translated error, the RPC protocols the original (its cause chain reaches the driver either way).
      const rest = protocol === "rest";
      this.opts.logger.error({ err: rest ? e : err, reqId, procedure: m.procedure, status }, rest ? "request failed" : "rpc failed");
    }
    return err;
  }

  /** Puts a body the server will not read on the clock (body-budget.ts). */
  drain(raw: RawRequest, res: RawResponse): void {
    this.opts.budget?.drain(raw, res);
  }
}

/**
 * The method behind the listener's policy: refused before it runs, and the
 * policy told its error or answer once it has settled (inside the call, so
 * the deadline and fault() cover the policy too).
 */
function guarded(policy: CallPolicy, method: DescMethod, call: UnaryMethod["call"]): UnaryMethod["call"] {
  return async (req, ctx) => {
    const settle = await policy({ method, header: ctx.requestHeader, message: req, values: ctx.values });
    if (!settle) return call(req, ctx);
    let out: unknown;
    try {
      out = await call(req, ctx);
    } catch (e) {
      await settle(e, undefined);
      throw e;
    }
    await settle(undefined, out);
    return out;
  };
}

function expire(ctx: CallContext): ConnectError {
  const e = appError("timeout");
  ctx.abort(e);
  return e;
}

/** The service's promise, or deadline_exceeded once the deadline passes (kernel/deadlines.ts: one coarse timer). */
function withDeadline(p: Promise<unknown>, ctx: CallContext): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const cancel = deadline(Math.max(0, ctx.deadlineAt! - Date.now()), () => reject(expire(ctx)));
    p.then(
      (v) => {
        cancel();
        resolve(v);
      },
      (err: unknown) => {
        cancel();
        reject(err);
      },
    );
  });
}
