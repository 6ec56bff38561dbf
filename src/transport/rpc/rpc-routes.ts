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
import { contentTypeRegExp as connectTypes } from "@connectrpc/connect/protocol-connect";
import { contentTypeRegExp as grpcTypes } from "@connectrpc/connect/protocol-grpc";
import { contentTypeRegExp as grpcWebTypes } from "@connectrpc/connect/protocol-grpc-web";
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { OutgoingHttpHeaders } from "node:http";
import { catalogue } from "../../kernel/errors.js";
import { fromFastify } from "../edge/fastify-errors.js";
import type { RpcResponse } from "./codec.js";
import type { Dispatcher, UnaryMethod } from "../call/dispatcher.js";
import { turnBatch, type TurnBatch } from "../call/turn-batch.js";
import { failCall, negotiate, runCall, type CallState, type Exchange } from "./unary-call.js";

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
      failRouted(req, reply, fromFastify(err));
    });
    for (const m of opts.dispatcher.methods) {
      paths.add(m.path);
      scope.route({ method: "POST", url: m.path, bodyLimit: m.bodyLimit, onRequest: gate(m, opts.dispatcher), handler: handler(m, opts, later) });
    }
  });
  return paths;
}

/**
 * Whether a call no codec takes would reach connect-es's router with
 * PULSEBASE_RPC_PIPELINE=connect-node (which answers 415 without a body):
 * a type its protocols' patterns match (the body parsers connect-fastify
 * registers), or none on a call without a body (Fastify parses no body
 * then). Fastify refuses every other type first, with the envelope.
 */
function routerWouldSee(type: string, headers: FastifyRequest["headers"]): boolean {
  if (type === "") return headers["transfer-encoding"] === undefined && (headers["content-length"] === undefined || headers["content-length"] === "0");
  // Fastify matches its parsers' names by media type (parameters aside), and
  // their patterns against the type it rewrites, which they never match once
  // it has parameters (it quotes their values).
  const semi = type.indexOf(";");
  if (semi !== -1) return ROUTER_MEDIA_TYPES.has(type.slice(0, semi).trim().toLowerCase());
  const media = type.trim().toLowerCase();
  return ROUTER_MEDIA_TYPES.has(media) || connectTypes.test(media) || grpcTypes.test(media) || grpcWebTypes.test(media);
}

/** The media types connect-fastify registers body parsers for by name (besides its patterns). */
const ROUTER_MEDIA_TYPES = new Set(["application/json", "application/connect+json", "application/grpc-web+proto", "application/grpc-web+json", "application/grpc+proto", "application/grpc+json"]);

const UNSUPPORTED_MEDIA_TYPE = JSON.stringify({ error: "unsupported_media_type", message: catalogue.unsupported_media_type.message });

/**
 * Before the body is read: the codec (415 when no protocol
 * takes the content type), a bad compression or timeout header answered at
 * once, then the dispatcher's gate (token, budget).
 */
function gate(m: UnaryMethod, dispatcher: Dispatcher) {
  return function rpcGate(req: FastifyRequest, reply: FastifyReply, done: () => void): void {
    const type = req.headers["content-type"] ?? "";
    const state = negotiate(type, req.headers);
    if (!state) {
      dispatcher.drain(req.raw, reply.raw);
      // A variant of an RPC protocol this route does not serve (streaming,
      // gRPC-Web text) or no type and no body: 415 without a body, as
      // connect-es's router answers. Anything else (a form, plain text,
      // "application/grpc-webby") is no RPC at all: the platform's 415
      // envelope, as every other route of the listener answers it
      // (docs/devices.md, "Errors and what to retry").
      if (routerWouldSee(type, req.headers)) {
        reply.raw.writeHead(415, reply.getHeaders() as OutgoingHttpHeaders);
        reply.raw.end();
      } else {
        reply.raw.writeHead(415, { ...(reply.getHeaders() as OutgoingHttpHeaders), "content-type": "application/json; charset=utf-8", "content-length": UNSUPPORTED_MEDIA_TYPE.length });
        reply.raw.end(UNSUPPORTED_MEDIA_TYPE);
      }
      return;
    }
    req.pulsebaseRpc = state;
    if (state.n.error) {
      dispatcher.drain(req.raw, reply.raw);
      return failRouted(req, reply, state.n.error);
    }
    dispatcher.admit(m, req.headers.authorization, req.raw, reply.raw, (refused, consumer) => {
      if (refused) return failRouted(req, reply, refused);
      state.consumer = consumer;
      done();
    });
  };
}

function handler(m: UnaryMethod, opts: RpcRoutesOptions, later: TurnBatch) {
  const { dispatcher, readMaxBytes } = opts;
  const run = (req: FastifyRequest, reply: FastifyReply) => runCall(dispatcher, m, req.pulsebaseRpc!, req.body as Uint8Array | undefined, readMaxBytes, exchange(req, reply));
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

/** A routed call's exchange: Fastify's request and reply. */
function exchange(req: FastifyRequest, reply: FastifyReply): Exchange {
  const raw = reply.raw;
  return {
    source: req,
    res: raw as unknown as RpcResponse,
    head: () => reply.getHeaders() as OutgoingHttpHeaders,
    get headersSent() {
      return raw.headersSent;
    },
    onGone(fn) {
      const gone = () => {
        if (!raw.writableEnded) fn();
      };
      raw.once("close", gone);
      return () => raw.off("close", gone);
    },
    cut() {
      if (!raw.headersSent) {
        raw.writeHead(500);
        raw.end();
      } else raw.destroy();
    },
    logBroken(err) {
      req.log.error({ err }, "rpc: could not write the answer");
    },
  };
}

/** The call's failure in its protocol, before a codec took the body. */
function failRouted(req: FastifyRequest, reply: FastifyReply, err: unknown): void {
  failCall(req.pulsebaseRpc!, exchange(req, reply), err, undefined);
}
