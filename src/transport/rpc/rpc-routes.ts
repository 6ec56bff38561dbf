// The Connect, gRPC and gRPC-Web side of the public listener
// (PULSEBASE_RPC_PIPELINE=fast, docs/architecture.md "One request through
// each protocol"): one POST route per unary method, in a scope whose only
// body parser hands the raw bytes over. Before the body is read the codec is
// chosen from the content type (415 in the platform envelope otherwise) and
// the dispatcher's gate checks the token and admits the body; then the codec
// decodes the message, the dispatcher calls the method, and the codec writes
// the answer straight to the response. No connect-es router, universal
// request or Headers object per call. Methods the service can answer at once
// (the database's point read) are answered at the end of the event-loop
// turn, batched like the REST gateway's (turn-batch.ts).
import { Code, ConnectError } from "@connectrpc/connect";
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { OutgoingHttpHeaders } from "node:http";
import type { Message } from "@bufbuild/protobuf";
import { appError, catalogue } from "../../kernel/errors.js";
import type { ConsumerPrincipal } from "../../kernel/principal.js";
import type { CallContext } from "./call-context.js";
import type { Negotiated, RpcCodec, RpcResponse } from "./codec.js";
import { connectCodec } from "./connect-codec.js";
import type { Dispatcher, UnaryMethod } from "./dispatcher.js";
import { grpcCodec } from "./grpc-codec.js";
import { grpcWebCodec } from "./grpc-web-codec.js";
import { turnBatch, type TurnBatch } from "./turn-batch.js";

const CODECS: readonly RpcCodec[] = [connectCodec, grpcCodec, grpcWebCodec];
const EMPTY = new Uint8Array(0);

interface CallState {
  codec: RpcCodec;
  n: Negotiated;
  consumer: ConsumerPrincipal | undefined;
}

declare module "fastify" {
  interface FastifyRequest {
    /** The codec and negotiated format of a Connect/gRPC/gRPC-Web call (rpc-routes.ts). */
    pulsebaseRpc: CallState | null;
  }
}

export interface RpcRoutesOptions {
  dispatcher: Dispatcher;
  /** Largest message after decompression (connect-node's readMaxBytes). */
  readMaxBytes: number;
}

/** Registers the unary methods' routes; returns their paths. */
export async function registerRpcRoutes(app: FastifyInstance, opts: RpcRoutesOptions): Promise<Set<string>> {
  if (!app.hasRequestDecorator("pulsebaseRpc")) app.decorateRequest("pulsebaseRpc", null);
  const later = turnBatch((err) => app.log.error({ err }, "rpc: a batched answer failed"));
  const paths = new Set<string>();
  await app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser("*", { parseAs: "buffer" }, (_req, body, done) => done(null, body));
    // What Fastify itself refuses while reading the body (past the limit, a
    // broken length), answered in the call's protocol.
    scope.setErrorHandler((err: FastifyError, req: FastifyRequest, reply: FastifyReply) => {
      if (reply.raw.headersSent) return;
      if (!req.pulsebaseRpc) return void reply.code(500).send();
      failCall(req, reply, fastifyError(err), undefined);
    });
    for (const m of opts.dispatcher.methods) {
      paths.add(m.path);
      scope.route({ method: "POST", url: m.path, bodyLimit: m.bodyLimit, onRequest: gate(m, opts.dispatcher), handler: handler(m, opts, later) });
    }
  });
  return paths;
}

function fastifyError(err: FastifyError): ConnectError {
  if ((err as unknown) instanceof ConnectError) return err as unknown as ConnectError;
  if (err.code === "FST_ERR_CTP_BODY_TOO_LARGE" || err.statusCode === 413) return appError("payload_too_large");
  if (err.statusCode !== undefined && err.statusCode >= 400 && err.statusCode < 500) return appError("bad_request", err.message);
  // A client that went away mid-body is not a server fault (as connect-node's body reader says).
  return new ConnectError("the request was aborted", Code.Aborted, undefined, undefined, err);
}

const UNSUPPORTED_MEDIA_TYPE = JSON.stringify({ error: "unsupported_media_type", message: catalogue.unsupported_media_type.message });

/**
 * Before the body is read: the codec (415 when no protocol
 * takes the content type), a bad compression or timeout header answered at
 * once, then the dispatcher's gate (token, budget).
 */
function gate(m: UnaryMethod, dispatcher: Dispatcher) {
  return function rpcGate(req: FastifyRequest, reply: FastifyReply, done: () => void): void {
    const type = req.headers["content-type"] ?? "";
    let codec: RpcCodec | undefined;
    let n: Negotiated | undefined;
    for (const c of CODECS) {
      n = c.negotiate(type, req.headers);
      if (n) {
        codec = c;
        break;
      }
    }
    if (!codec || !n) {
      dispatcher.drain(req.raw, reply.raw);
      // A variant of an RPC protocol this route does not serve (streaming,
      // gRPC-Web text) or no type at all: 415 without a body, as connect-es
      // answers. Anything else (a form, plain text) is no RPC at all: the
      // platform's 415 envelope, as every other route of the listener
      // answers it (docs/devices.md, "Errors and what to retry").
      if (type === "" || type.startsWith("application/connect") || type.startsWith("application/grpc")) {
        reply.raw.writeHead(415, reply.getHeaders() as OutgoingHttpHeaders);
        reply.raw.end();
      } else {
        reply.raw.writeHead(415, { ...(reply.getHeaders() as OutgoingHttpHeaders), "content-type": "application/json; charset=utf-8", "content-length": UNSUPPORTED_MEDIA_TYPE.length });
        reply.raw.end(UNSUPPORTED_MEDIA_TYPE);
      }
      return;
    }
    const state: CallState = { codec, n, consumer: undefined };
    req.pulsebaseRpc = state;
    if (n.error) {
      dispatcher.drain(req.raw, reply.raw);
      return failCall(req, reply, n.error, undefined);
    }
    dispatcher.admit(m, req.headers.authorization, req.raw, reply.raw, (refused, consumer) => {
      if (refused) return failCall(req, reply, refused, undefined);
      state.consumer = consumer;
      done();
    });
  };
}

function handler(m: UnaryMethod, opts: RpcRoutesOptions, later: TurnBatch) {
  const { dispatcher, readMaxBytes } = opts;
  const call = (req: FastifyRequest, reply: FastifyReply, state: CallState, input: Message) => {
    const at = state.n.deadlineAt;
    const ctx = dispatcher.context(m, state.codec.protocol, req, state.consumer, at === undefined ? undefined : at - Date.now());
    let out: unknown;
    try {
      out = dispatcher.invoke(m, input, ctx);
    } catch (err) {
      return failCall(req, reply, err, ctx);
    }
    if (!(out instanceof Promise)) return answer(req, reply, state, ctx, out);
    // A client that goes away before the answer aborts the handler's signal, as connect-node does.
    const gone = () => {
      if (!reply.raw.writableEnded) ctx.abort(new ConnectError("the client closed the call", Code.Canceled));
    };
    reply.raw.once("close", gone);
    out.then(
      (o: unknown) => {
        reply.raw.off("close", gone);
        answer(req, reply, state, ctx, o);
      },
      (err: unknown) => {
        reply.raw.off("close", gone);
        failCall(req, reply, err, ctx);
      },
    );
  };
  const answer = (req: FastifyRequest, reply: FastifyReply, state: CallState, ctx: CallContext, out: unknown) => {
    try {
      const w = state.codec.answer(reply.raw as unknown as RpcResponse, reply.getHeaders() as OutgoingHttpHeaders, m, state.n, ctx, out);
      if (w) w.catch((err: unknown) => failCall(req, reply, err, ctx));
    } catch (err) {
      failCall(req, reply, err, ctx);
    }
  };
  const run = (req: FastifyRequest, reply: FastifyReply) => {
    const state = req.pulsebaseRpc!;
    const body = req.body as Uint8Array | undefined;
    let input: Message | Promise<Message>;
    try {
      input = state.codec.read(m, state.n, body ?? EMPTY, readMaxBytes);
    } catch (err) {
      return failCall(req, reply, err, undefined);
    }
    if (input instanceof Promise) input.then((i) => call(req, reply, state, i), (err: unknown) => failCall(req, reply, err, undefined));
    else call(req, reply, state, input);
  };
  // Batched per loop turn only where the service may answer at once (as the
  // REST gateway batches its JSON and fast paths); a call that waits anyway
  // starts when it arrives.
  if (!m.answersAtOnce) {
    return function rpcHandler(req: FastifyRequest, reply: FastifyReply): void {
      run(req, reply);
    };
  }
  return function rpcBatchedHandler(req: FastifyRequest, reply: FastifyReply): void {
    later(() => run(req, reply));
  };
}

/** The call's failure in its protocol; a response that cannot even carry that is cut. */
function failCall(req: FastifyRequest, reply: FastifyReply, err: unknown, ctx: CallContext | undefined): void {
  const state = req.pulsebaseRpc!;
  const broken = (e: unknown) => {
    req.log.error({ err: e }, "rpc: could not write the answer");
    if (!reply.raw.headersSent) {
      reply.raw.writeHead(500);
      reply.raw.end();
    } else reply.raw.destroy();
  };
  if (reply.raw.headersSent) return broken(err);
  try {
    const head = reply.getHeaders() as OutgoingHttpHeaders;
    const w = state.codec.fail(reply.raw as unknown as RpcResponse, head, state.n, ctx, err);
    if (w) w.catch(broken);
  } catch (e) {
    broken(e);
  }
}
