// One unary Connect, gRPC or gRPC-Web call once its codec is chosen and its
// body admitted, whichever front end received it: the Fastify routes
// (rpc-routes.ts) or the HTTP/2 stream lane (stream-lane.ts). The codec
// decodes the message, the dispatcher calls the method, the codec writes
// the answer or the failure; what cannot even carry a failure is cut
// (docs/architecture.md, "One request through each protocol").
import type { Message } from "@bufbuild/protobuf";
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http";
import type { ConsumerPrincipal } from "../../kernel/principal.js";
import { clientClosed, type CallContext } from "../call/call-context.js";
import type { Negotiated, RpcCodec, RpcResponse } from "./codec.js";
import { connectCodec } from "./connect-codec.js";
import type { CallSource, Dispatcher, UnaryMethod } from "../call/dispatcher.js";
import { grpcCodec } from "./grpc-codec.js";
import { grpcWebCodec } from "./grpc-web-codec.js";

const EMPTY = new Uint8Array(0);
const CODECS: readonly RpcCodec[] = [connectCodec, grpcCodec, grpcWebCodec];

/** The call's codec and format, chosen from its headers, and the consumer its gate admitted. */
export interface CallState {
  codec: RpcCodec;
  n: Negotiated;
  consumer: ConsumerPrincipal | undefined;
}

/** The call's codec and format from its content type (the protocols asked in turn), or undefined when none takes it. */
export function negotiate(contentType: string, headers: IncomingHttpHeaders): CallState | undefined {
  for (const codec of CODECS) {
    const n = codec.negotiate(contentType, headers);
    if (n) return { codec, n, consumer: undefined };
  }
  return undefined;
}

/** What a front end gives a call: the request, where the answer goes, and how to notice or end a broken exchange. */
export interface Exchange {
  readonly source: CallSource;
  readonly res: RpcResponse;
  /** The headers every answer starts with (request id, CORS); a fresh object the codec may add to. */
  head(): OutgoingHttpHeaders;
  readonly headersSent: boolean;
  /** Calls `fn` once should the client go away before the answer ends; returns its undo. */
  onGone(fn: () => void): () => void;
  /** A response that cannot even carry the failure: a bare 500, or the stream or connection cut. */
  cut(): void;
  /** Logs a failure to write the answer (nothing else is logged here: the dispatcher's fault() is the error log). */
  logBroken(err: unknown): void;
}

/** The decoded body's call, answered on the exchange. */
export function runCall(dispatcher: Dispatcher, m: UnaryMethod, state: CallState, body: Uint8Array | undefined, readMaxBytes: number, ex: Exchange): void {
  let input: Message | Promise<Message>;
  try {
    input = state.codec.read(m, state.n, body ?? EMPTY, readMaxBytes);
  } catch (err) {
    return failCall(state, ex, err, undefined);
  }
  if (input instanceof Promise) input.then((i) => call(dispatcher, m, state, ex, i), (err: unknown) => failCall(state, ex, err, undefined));
  else call(dispatcher, m, state, ex, input);
}

function call(dispatcher: Dispatcher, m: UnaryMethod, state: CallState, ex: Exchange, input: Message): void {
  const at = state.n.deadlineAt;
  const ctx = dispatcher.context(m, state.codec.protocol, ex.source, state.consumer, at === undefined ? undefined : at - Date.now());
  let out: unknown;
  try {
    out = dispatcher.invoke(m, input, ctx);
  } catch (err) {
    return failCall(state, ex, err, ctx);
  }
  if (!(out instanceof Promise)) return answer(m, state, ex, ctx, out);
  // A client that goes away before the answer aborts the handler's signal, as connect-node does.
  const undo = ex.onGone(() => ctx.abort(clientClosed()));
  out.then(
    (o: unknown) => {
      undo();
      answer(m, state, ex, ctx, o);
    },
    (err: unknown) => {
      undo();
      failCall(state, ex, err, ctx);
    },
  );
}

function answer(m: UnaryMethod, state: CallState, ex: Exchange, ctx: CallContext, out: unknown): void {
  try {
    const w = state.codec.answer(ex.res, ex.head(), m, state.n, ctx, out);
    if (w) w.catch((err: unknown) => failCall(state, ex, err, ctx));
  } catch (err) {
    failCall(state, ex, err, ctx);
  }
}

/** The call's failure in its protocol; a response that cannot even carry that is cut. */
export function failCall(state: CallState, ex: Exchange, err: unknown, ctx: CallContext | undefined): void {
  const broken = (e: unknown) => {
    ex.logBroken(e);
    ex.cut();
  };
  if (ex.headersSent) return broken(err);
  try {
    const w = state.codec.fail(ex.res, ex.head(), state.n, ctx, err);
    if (w) w.catch(broken);
  } catch (e) {
    broken(e);
  }
}
