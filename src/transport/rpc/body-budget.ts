// What request bodies may cost the process. Every request with a body is
// admitted here before a byte of it is read (after its token is checked, on
// the routes that take one): its declared length is reserved from a budget
// shared by all connections, of which one owner (an application, or all
// clients without a token together) holds at most a share. Past it the
// request is answered 503 at once. Bytes of a body without a declared length
// are reserved as they arrive; one that runs past the budget is cut (its
// readers see the 503). The reservation is returned when the response closes.
//
// The same watch cuts slow bodies: a body must arrive within `timeoutMs`
// plus one second per `minBytesPerSecond` received, so a client trickling
// bytes cannot hold a stream (or a connection) for ever; and an HTTP/2 stream
// answered before its body arrived is reset with NO_ERROR (within a second).
//
// Bytes are counted where the HTTP layer hands them to the request stream
// (its push()), whoever reads them: Fastify's parsers, busboy, Connect.
import type { IncomingMessage, ServerResponse } from "node:http";
import { constants as h2, type Http2ServerRequest, type Http2ServerResponse, type IncomingHttpHeaders, type ServerHttp2Stream } from "node:http2";
import type { ConnectError } from "@connectrpc/connect";
import { appError } from "../../kernel/errors.js";
import { clientClosed } from "./call-context.js";

/**
 * A request body read straight off an HTTP/2 stream (stream-lane.ts): the
 * stream's data is pushed through `push` (null at its end) as Node pushes
 * it into a compatibility request, so the budget counts it the same way.
 */
export interface StreamBody {
  readonly headers: IncomingHttpHeaders;
  readonly stream: ServerHttp2Stream;
  readonly complete: boolean;
  push(chunk: Buffer | null): boolean;
  destroy(err?: Error): void;
  readonly socket?: undefined;
}

export type RawRequest = IncomingMessage | Http2ServerRequest | StreamBody;
export type RawResponse = ServerResponse | Http2ServerResponse | ServerHttp2Stream;

export interface BodyBudgetOptions {
  /** All bodies together. */
  limitBytes: number;
  /** One owner's bodies together. */
  shareBytes: number;
  /** Time every body gets, whatever its size. */
  timeoutMs: number;
  /** Each further second needs this many bytes received. */
  minBytesPerSecond: number;
  /** How often slow bodies are looked for (default 1 s). */
  sweepMs?: number;
}

/** Owner of the bodies of requests without a consumer token. */
export const ANONYMOUS = 0;

const kAdmitted = Symbol("pulsebase.bodyAdmitted");

interface Watch {
  raw: RawRequest;
  owner: number;
  reserved: number;
  received: number;
  start: number;
  /** The response closed: nothing is reserved any more, whatever still arrives. */
  closed: boolean;
  /** The whole body arrived. */
  ended: boolean;
  /** Refused mid-body: the rest is read and dropped. */
  dropping: boolean;
}

/** Whether a request carries a body: a length above 0, chunked, or an HTTP/2 stream its headers did not end. */
export function hasBody(raw: RawRequest): boolean {
  const h = raw.headers;
  const len = h["content-length"];
  if (len !== undefined) return len !== "0";
  if (h["transfer-encoding"] !== undefined) return true;
  const stream = (raw as Http2ServerRequest).stream as { endAfterHeaders?: boolean } | undefined;
  return stream !== undefined && stream.endAfterHeaders === false;
}

export class BodyBudget {
  private used = 0;
  private readonly byOwner = new Map<number, number>();
  /** Bodies still arriving. */
  private readonly arriving = new Set<Watch>();
  private sweeper: NodeJS.Timeout | undefined;

  constructor(private readonly opts: BodyBudgetOptions) {}

  /** Bytes reserved now, in all and by one owner (for tests and metrics). */
  inUse(owner?: number): number {
    return owner === undefined ? this.used : (this.byOwner.get(owner) ?? 0);
  }

  /**
   * Admits a request's body before it is read: undefined when it may be read,
   * else the error to answer with (nothing was read or reserved). Requests
   * without a body, or admitted already, pass without cost. `maxBytes` is
   * the route's body limit: a declared length above it is 413 at once.
   */
  admit(raw: RawRequest, res: RawResponse, owner: number, maxBytes: number): ConnectError | undefined {
    if ((raw as unknown as Record<symbol, boolean>)[kAdmitted] || !hasBody(raw)) return undefined;
    // Gone while its token was checked: nothing may be reserved (the
    // response's 'close', which returns a reservation, has already fired).
    if (isClosed(res)) return clientClosed();
    const declared = Number(raw.headers["content-length"] ?? 0) || 0;
    if (declared > maxBytes) return appError("payload_too_large");
    if (!this.reserve(owner, declared)) return busy();
    (raw as unknown as Record<symbol, boolean>)[kAdmitted] = true;
    const w: Watch = { raw, owner, reserved: declared, received: 0, start: Date.now(), closed: false, ended: false, dropping: false };
    this.count(w);
    this.watch(w, res);
    return undefined;
  }

  private watch(w: Watch, res: RawResponse): void {
    this.arriving.add(w);
    this.sweeper ??= setInterval(() => this.sweep(), this.opts.sweepMs ?? 1000).unref();
    res.once("close", () => {
      w.closed = true;
      // An HTTP/1.1 body still arriving after the answer (Node reads and
      // drops it to keep the connection) stays on the clock.
      if (w.raw.complete) this.arriving.delete(w);
      this.release(w.owner, w.reserved);
      w.reserved = 0;
    });
  }

  /**
   * Puts a body the server will not read on the clock (nothing reserved):
   * after an early answer (a refusal) Node reads and drops an HTTP/1.1 body
   * to keep the connection, and a client trickling it would hold the
   * connection. (An HTTP/2 stream whose body was never read is reset once
   * its answer is out: Node does that itself.)
   */
  drain(raw: RawRequest, res: RawResponse): void {
    if ((raw as Http2ServerRequest).stream !== undefined || (raw as unknown as Record<symbol, boolean>)[kAdmitted] || !hasBody(raw)) return;
    (raw as unknown as Record<symbol, boolean>)[kAdmitted] = true;
    const w: Watch = { raw, owner: ANONYMOUS, reserved: 0, received: 0, start: Date.now(), closed: true, ended: false, dropping: false };
    this.count(w);
    this.watch(w, res);
  }

  /** Stops the sweep (server close). */
  close(): void {
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = undefined;
  }

  private reserve(owner: number, n: number): boolean {
    const mine = this.byOwner.get(owner) ?? 0;
    if (n > 0 && (this.used + n > this.opts.limitBytes || mine + n > this.opts.shareBytes)) return false;
    this.used += n;
    this.byOwner.set(owner, mine + n);
    return true;
  }

  private release(owner: number, n: number): void {
    this.used -= n;
    const left = (this.byOwner.get(owner) ?? 0) - n;
    if (left > 0) this.byOwner.set(owner, left);
    else this.byOwner.delete(owner);
  }

  /** Counts the bytes the HTTP layer pushes into the request stream; reserves what goes past the declared length. */
  private count(w: Watch): void {
    const raw = w.raw as RawRequest & { push(chunk: unknown, encoding?: BufferEncoding): boolean };
    const push = raw.push;
    raw.push = (chunk: unknown, encoding?: BufferEncoding) => {
      if (chunk === null) {
        w.ended = true;
        this.arriving.delete(w);
      } else if (!w.closed && chunk && typeof (chunk as Buffer).length === "number") {
        w.received += (chunk as Buffer).length;
        const more = w.received - w.reserved;
        if (more > 0 && !w.dropping) {
          if (!this.reserve(w.owner, more)) {
            // HTTP/2: the request stream fails (its reader answers 503, the
            // response stays writable) and what still arrives is dropped;
            // a paused stream would stop its whole connection from being
            // read. HTTP/1.1: the connection is closed.
            w.dropping = true;
            raw.destroy(busy());
          } else {
            w.reserved += more;
          }
        }
      }
      if (w.dropping) return true;
      return push.call(raw, chunk, encoding);
    };
  }

  private sweep(): void {
    const now = Date.now();
    for (const w of this.arriving) {
      const stream = (w.raw as Http2ServerRequest).stream;
      if (stream?.writableFinished) {
        // Answered before its body ended (an error, a refusal): the client
        // is told to stop sending (RFC 9113 8.1) instead of the stream
        // staying half open until the client gives up.
        this.arriving.delete(w);
        if (!stream.destroyed) stream.close(h2.NGHTTP2_NO_ERROR);
        continue;
      }
      const allowed = this.opts.timeoutMs + (w.received / this.opts.minBytesPerSecond) * 1000;
      if (now - w.start <= allowed) continue;
      this.arriving.delete(w);
      cut(w.raw);
    }
  }
}

/** The response (HTTP/1.1, HTTP/2 compatibility, or the stream itself) has closed. */
function isClosed(res: RawResponse): boolean {
  const r = res as { destroyed?: boolean; closed?: boolean; stream?: { closed: boolean; destroyed: boolean } };
  return r.destroyed === true || r.closed === true || r.stream?.closed === true || r.stream?.destroyed === true;
}

function busy(): ConnectError {
  return appError("unavailable", "The server is receiving too many request bodies at the moment; retry shortly.", { retryAfterSeconds: 1 });
}

/** Ends a request whose body is too slow: HTTP/2 resets the stream, HTTP/1.1 closes the connection. */
function cut(raw: RawRequest): void {
  const stream = (raw as Http2ServerRequest).stream;
  if (stream) {
    if (!stream.destroyed) stream.close(h2.NGHTTP2_CANCEL);
  } else {
    raw.socket?.destroy();
  }
}
