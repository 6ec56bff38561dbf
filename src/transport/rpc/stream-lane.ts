// Unary Connect, gRPC and gRPC-Web calls over HTTP/2, answered on the
// stream itself: in front of Node's compatibility layer and Fastify, a
// 'stream' listener takes a POST to a unary method's path whose content
// type a codec takes, and hands everything else to the compatibility
// listener as if the lane were not there (REST, Connect GETs, 415s,
// health and reflection, HTTP/1.1, which never reaches 'stream').
//
// Why: the binary protocol is the path internal services and load tests
// use, and it must cost the server no more than REST JSON (issue 18). A PK
// read over Connect binary h2 went through the same request and response
// objects, route lookup, hooks and body parser as REST, then saved only the
// JSON step, which is small; measured turn about on this machine it cost
// 1.0-1.2x REST. Without the compatibility objects and Fastify's per-request
// work it costs less (docs/benchmarks.md, "Connect binary beside REST").
//
// Nothing of the pipeline is skipped (docs/architecture.md, "One request
// through each protocol"): the same X-Request-Id, CORS headers, dispatcher
// gate (token, body budget, body limit), codecs, dispatcher call, turn
// batching, error log, access log line and metrics sample. The listener
// decides which calls the lane may take (`takes`): it leaves those whose
// answer depends on what only Fastify knows (a trusted proxy's forwarded
// client, a closing server's 503), and the lane leaves those with a CORS
// origin to check. The request id and CORS headers come from the functions
// the Fastify routes use (transport/edge/response-head.ts), and a body past
// the limit or not of its declared length is refused with the error
// Fastify's body reader raises, translated by the routes' translator
// (transport/edge/fastify-errors.ts). A client that goes away is recorded
// with no status (the access log writes its 499).
import { performance } from "node:perf_hooks";
import type { OutgoingHttpHeaders } from "node:http";
import { constants as h2, type Http2SecureServer, type Http2Server, type IncomingHttpHeaders, type ServerHttp2Stream } from "node:http2";
import type { Logger } from "pino";
import { appError } from "../../kernel/errors.js";
import { bodyTooLarge, contentLengthMismatch } from "../edge/fastify-errors.js";
import { requestIdOf, type CorsPolicy } from "../edge/response-head.js";
import type { StreamBody } from "../call/body-budget.js";
import type { RpcResponse } from "./codec.js";
import type { CallSource, Dispatcher, UnaryMethod } from "../call/dispatcher.js";
import { turnBatch, type TurnBatch } from "../call/turn-batch.js";
import { failCall, negotiate, runCall, type CallState, type Exchange } from "./unary-call.js";

export interface StreamLaneOptions {
  dispatcher: Dispatcher;
  /** Largest message after decompression (as the Fastify routes). */
  readMaxBytes: number;
  /** The listener's CORS (the lane takes only calls whose CORS headers need no origin check). */
  cors: CorsPolicy;
  /** Whether the lane may take this call; if not, the compatibility layer and Fastify serve it. */
  takes(stream: ServerHttp2Stream, headers: IncomingHttpHeaders): boolean;
  /** Records a finished call: the access log line and the metrics sample; no status when the client went away first. */
  observe?(reqId: string, method: string, route: string, status: number | undefined, ms: number, bytes: number | undefined): void;
  logger: Logger;
}

type StreamListener = (this: unknown, stream: ServerHttp2Stream, headers: IncomingHttpHeaders, flags: number, rawHeaders: string[]) => void;

interface Lane extends StreamLaneOptions {
  later: TurnBatch;
}

/**
 * Puts the lane in front of the server's 'stream' listeners (Node's
 * compatibility layer, which Fastify's request handler set up).
 */
export function installStreamLane(server: Http2SecureServer | Http2Server, opts: StreamLaneOptions): void {
  const compat = server.listeners("stream") as StreamListener[];
  // Node adds it with the first 'request' listener: without it there is no request handler to fall back to.
  if (compat.length === 0) throw new Error("pulsebase: the HTTP/2 server has no 'stream' listener to stand in front of (src/transport/rpc/stream-lane.ts)");
  server.removeAllListeners("stream");
  const lane: Lane = { ...opts, later: turnBatch((err) => opts.logger.error({ err }, "rpc: a batched answer failed")) };
  server.on("stream", function laneOrCompat(this: unknown, stream: ServerHttp2Stream, headers: IncomingHttpHeaders, flags: number, rawHeaders: string[]) {
    if (headers[":method"] === "POST") {
      const m = opts.dispatcher.lookup(headers[":path"] ?? "");
      const cors = m === undefined ? undefined : opts.cors.headFor(headers.origin);
      if (cors !== undefined && opts.takes(stream, headers)) {
        // A content type no codec takes, or a bad compression or timeout
        // header, is answered by the routes as before (415s, the early error).
        const state = negotiate(headers["content-type"] ?? "", headers);
        if (state !== undefined && state.n.error === undefined) return new LaneCall(lane, stream, headers, m!, state, cors).start();
      }
    }
    for (const l of compat) l.call(this, stream, headers, flags, rawHeaders);
  });
}

/** The call on a stream, from the stream's listeners (one function each for every call, no closure). */
const kCall = Symbol("pulsebase.laneCall");
type LaneStream = ServerHttp2Stream & { [kCall]: LaneCall };

function onData(this: LaneStream, chunk: Buffer): void {
  this[kCall].push(chunk);
}
function onEnd(this: LaneStream): void {
  this[kCall].push(null);
}
function onClose(this: LaneStream): void {
  this[kCall].closed();
}
// A reset stream emits its error before 'close', which records the call; unhandled it would throw.
function onError(): void {}

/**
 * Answered before the request's body ended (a refusal, a body past the
 * limit): once the answer is out, the client is asked to stop sending with
 * RST_STREAM NO_ERROR (RFC 9113 8.1), as Node does for a compatibility
 * request nobody read; a body that already ended needs nothing.
 */
function askToStopSending(this: ServerHttp2Stream): void {
  setImmediate(() => {
    if (!this.destroyed && !this.closed && !this.readableEnded) this.close(h2.NGHTTP2_NO_ERROR);
  });
}

/**
 * One call: the request the dispatcher sees (CallSource), the body the
 * budget counts (StreamBody), the response the codec writes (RpcResponse)
 * and the exchange the call runs on (Exchange), in one object.
 */
class LaneCall implements CallSource, StreamBody, RpcResponse, Exchange {
  readonly method = "POST";
  readonly url: string;
  readonly id: string;
  readonly source = this;
  readonly res = this;
  complete = false;
  headersSent = false;
  ended = false;
  private readonly started = performance.now();
  /** The body is being read (false before admission and once it has ended or failed). */
  private reading = false;
  private chunks: Buffer[] = [];
  private received = 0;
  private status = 0;
  private bytes: number | undefined;
  private pendingHead: OutgoingHttpHeaders | undefined;
  private trailers: OutgoingHttpHeaders | undefined;
  private gone: (() => void) | undefined;

  constructor(
    private readonly lane: Lane,
    readonly stream: ServerHttp2Stream,
    readonly headers: IncomingHttpHeaders,
    private readonly m: UnaryMethod,
    private readonly state: CallState,
    private readonly cors: Readonly<OutgoingHttpHeaders>,
  ) {
    this.url = m.path;
    this.id = requestIdOf(headers["x-request-id"]);
  }

  get ip(): string {
    return this.stream.session?.socket?.remoteAddress ?? "";
  }

  start(): void {
    const s = this.stream as LaneStream;
    s[kCall] = this;
    s.on("error", onError);
    s.once("close", onClose);
    // Paused until admitted: a server stream nobody reads when its body has
    // all arrived is drained by Node (its data dropped) unless it was paused.
    // A body already ended meanwhile was empty: paused, nothing was emitted.
    if (!s.endAfterHeaders) s.pause();
    this.lane.dispatcher.admit(this.m, this.headers.authorization, this, s, (refused, consumer) => {
      if (refused) {
        // Never read: what arrived (or arrives) is dropped, so a body the
        // client finished lets the stream close once the answer is out.
        s.resume();
        return failCall(this.state, this, refused, undefined);
      }
      this.state.consumer = consumer;
      this.reading = true;
      if (s.endAfterHeaders || s.readableEnded) return void this.push(null);
      s.on("data", onData);
      s.once("end", onEnd);
      s.resume();
    });
  }

  /** A chunk of the body, or null at its end (the body budget may wrap this, as it wraps a request's push). */
  push(chunk: Buffer | null): boolean {
    if (!this.reading) return true;
    if (chunk === null) {
      this.complete = true;
      this.bodyEnded();
      return false;
    }
    this.received += chunk.length;
    // As Fastify's body reader: past the route's limit the call is refused (413 on REST).
    if (this.received > this.m.bodyLimit) this.refuse(bodyTooLarge());
    else this.chunks.push(chunk);
    return true;
  }

  /** The body budget refused the rest of the body. */
  destroy(err?: Error): void {
    this.refuse(err ?? appError("unavailable"));
  }

  private refuse(err: unknown): void {
    if (!this.reading) return;
    this.reading = false;
    this.chunks = [];
    failCall(this.state, this, err, undefined);
  }

  private bodyEnded(): void {
    this.reading = false;
    const declared = this.headers["content-length"];
    if (declared !== undefined && Number(declared) !== this.received) {
      // Fastify's FST_ERR_CTP_INVALID_CONTENT_LENGTH, as the routes answer it.
      return failCall(this.state, this, contentLengthMismatch(), undefined);
    }
    const body = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.received);
    this.chunks = [];
    const { lane, m } = this;
    if (m.answersAtOnce) lane.later(() => runCall(lane.dispatcher, m, this.state, body, lane.readMaxBytes, this));
    else runCall(lane.dispatcher, m, this.state, body, lane.readMaxBytes, this);
  }

  closed(): void {
    const answered = this.ended;
    if (!answered) {
      this.reading = false;
      this.chunks = [];
      const gone = this.gone;
      this.gone = undefined;
      gone?.();
    }
    this.lane.observe?.(this.id, "POST", this.m.path, answered ? this.status : undefined, performance.now() - this.started, answered ? this.bytes : undefined);
  }

  // Exchange

  head(): OutgoingHttpHeaders {
    return { "x-request-id": this.id, ...this.cors };
  }

  onGone(fn: () => void): () => void {
    this.gone = fn;
    return () => {
      this.gone = undefined;
    };
  }

  cut(): void {
    const s = this.stream;
    if (s.destroyed) return;
    if (!this.headersSent) {
      this.ended = true;
      this.status = 500;
      s.respond({ ":status": 500 }, { endStream: true });
      if (!this.complete) s.once("finish", askToStopSending);
    } else s.close(h2.NGHTTP2_INTERNAL_ERROR);
  }

  logBroken(err: unknown): void {
    this.lane.logger.error({ err, reqId: this.id }, "rpc: could not write the answer");
  }

  // RpcResponse: the codecs write the head, the trailers (gRPC) and the body once.

  writeHead(status: number, headers: OutgoingHttpHeaders): void {
    this.status = status;
    this.pendingHead = headers;
  }

  addTrailers(trailers: OutgoingHttpHeaders): void {
    this.trailers = trailers;
  }

  end(body?: Uint8Array): void {
    const s = this.stream;
    // The client went away: closed() records it.
    if (s.destroyed || s.closed) return;
    const head = this.pendingHead ?? {};
    head[":status"] = this.status;
    const len = head["content-length"];
    this.bytes = typeof len === "number" ? len : typeof len === "string" ? Number(len) : undefined;
    // Always with trailers, as the compatibility layer answers: a body
    // whose DATA frame carries END_STREAM closes the stream before its write
    // completes, and Node then builds an ERR_STREAM_DESTROYED nobody sees
    // (Writable's errorBuffer), a stack capture per call that measured about
    // a seventh of a PK read's CPU (docs/benchmarks.md, 2026-11-28). Without
    // a 'wantTrailers' listener Node sends the empty trailers itself.
    s.respond(head, { waitForTrailers: true });
    const trailers = this.trailers;
    if (trailers || !this.complete) {
      s.once("wantTrailers", () => {
        try {
          s.sendTrailers(trailers ?? {});
          // Answered before the body ended: asked to stop once the answer is out.
          if (!this.complete) askToStopSending.call(s);
        } catch (err) {
          // A trailer HTTP/2 refuses (a connection header): the call is cut, the process goes on.
          this.logBroken(err);
          if (!s.destroyed) s.close(h2.NGHTTP2_INTERNAL_ERROR);
        }
      });
    }
    this.headersSent = true;
    this.ended = true;
    if (body) s.end(body);
    else s.end();
  }
}
