// What request bodies may cost the process. Every request with a body is
// admitted here before a byte of it is read (after its token is checked, on
// the routes that take one), then its bytes are reserved from a budget
// shared by all connections AS THEY ARRIVE: a declared length alone reserves
// at most `upfrontBytes` (a request with a token) or nothing (without one),
// so idle streams declaring large bodies hold (almost) nothing. Owners hold
// at most a share each: an application; all clients without a token
// together; and one client address without a token (an IPv6 /64). A request
// whose owner is already at its share is answered 503 at once; a body that
// runs past a share or the budget mid-way is cut (its readers see the 503).
// The reservation is returned when the response closes.
//
// The same watch cuts slow bodies: a body gets `timeoutMs`, and each byte
// received buys 1/`minBytesPerSecond` s more, but never more than
// `timeoutMs` ahead: so a body must keep the minimum rate on average and
// may not stall longer than `timeoutMs`, even after sending most of a large
// declared length quickly. An HTTP/2 stream answered before its body
// arrived is reset with NO_ERROR (within a second).
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
  /** One application's bodies together. */
  shareBytes: number;
  /** The bodies of all clients without a token together (default `shareBytes`). */
  anonymousShareBytes?: number;
  /** The bodies of one client address without a token (default `anonymousShareBytes`). */
  addressShareBytes?: number;
  /** What a declared length reserves before its bytes arrive, on a request with a token (default 16 KiB). */
  upfrontBytes?: number;
  /** The client address of a request without a token, from its peer (e.g. a trusted proxy's forwarded one); default the peer. */
  clientAddress?(peer: string | undefined, headers: IncomingHttpHeaders): string | undefined;
  /** Time every body gets, whatever its size. */
  timeoutMs: number;
  /** Each further second needs this many bytes received. */
  minBytesPerSecond: number;
  /** How often slow bodies are looked for (default 1 s). */
  sweepMs?: number;
}

/** Owner of the bodies of requests without a consumer token. */
export const ANONYMOUS = 0;

/** A declared length reserves this much before its bytes arrive (a request with a token): a small body is never cut mid-way. */
export const UPFRONT_BYTES = 16 * 1024;

/**
 * Bytes of a body still read after its answer went out (a refusal: Node
 * reads and drops an HTTP/1.1 body to keep the connection, so the client
 * that sends it all before reading gets the answer); past it the connection
 * is closed. Above the largest body limit (50 MiB by default), so a client
 * that sends a body over the limit, as most do before reading, still reads
 * its 413; the pace rule holds while it drains.
 */
export const DRAIN_MAX_BYTES = 64 * 1024 * 1024;

const ALL_ANONYMOUS = "anon";

const kAdmitted = Symbol("pulsebase.bodyAdmitted");

interface Watch {
  raw: RawRequest;
  /** The shares it is charged to (an application; or all anonymous and its address). */
  owners: readonly string[];
  reserved: number;
  received: number;
  /** HTTP/1.1 after its answer: Node drops the rest of the body without pushing it, so the socket's bytes are counted; stops that. */
  stopSocketCount?: () => void;
  /** Bytes received when its answer went out. */
  receivedAtClose: number;
  /** Bytes already turned into time (the sweep's). */
  credited: number;
  /** When it is cut unless more bytes come. */
  deadline: number;
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
  private readonly byOwner = new Map<string, number>();
  /** Bodies still arriving. */
  private readonly arriving = new Set<Watch>();
  private sweeper: NodeJS.Timeout | undefined;
  private readonly anonymousShare: number;
  private readonly addressShare: number;
  private readonly upfront: number;

  constructor(private readonly opts: BodyBudgetOptions) {
    this.anonymousShare = opts.anonymousShareBytes ?? opts.shareBytes;
    this.addressShare = opts.addressShareBytes ?? this.anonymousShare;
    this.upfront = opts.upfrontBytes ?? UPFRONT_BYTES;
  }

  /** Bytes reserved now, in all, by one application, or by all clients without a token (ANONYMOUS) (for tests and metrics). */
  inUse(owner?: number): number {
    return owner === undefined ? this.used : (this.byOwner.get(owner === ANONYMOUS ? ALL_ANONYMOUS : app(owner)) ?? 0);
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
    const owners = owner === ANONYMOUS ? [ALL_ANONYMOUS, `ip ${addressKey(this.addressOf(raw))}`] : [app(owner)];
    const upfront = owner === ANONYMOUS ? 0 : Math.min(declared, this.upfront);
    // An owner at its share (or a full budget) is refused before anything is read.
    if (!this.reserve(owners, upfront, Math.max(upfront, 1))) return busy();
    (raw as unknown as Record<symbol, boolean>)[kAdmitted] = true;
    const w: Watch = { raw, owners, reserved: upfront, received: 0, receivedAtClose: 0, credited: 0, deadline: Date.now() + this.opts.timeoutMs, closed: false, ended: false, dropping: false };
    this.count(w);
    this.watch(w, res);
    return undefined;
  }

  private watch(w: Watch, res: RawResponse): void {
    this.arriving.add(w);
    this.sweeper ??= setInterval(() => this.sweep(), this.opts.sweepMs ?? 1000).unref();
    res.once("close", () => {
      if (!w.closed) w.receivedAtClose = w.received;
      w.closed = true;
      if (!w.raw.complete && !w.ended) this.countSocket(w);
      // An HTTP/1.1 body still arriving after the answer (Node reads and
      // drops it to keep the connection) stays on the clock.
      if (w.raw.complete) this.arriving.delete(w);
      this.release(w.owners, w.reserved);
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
    const w: Watch = { raw, owners: [], reserved: 0, received: 0, receivedAtClose: 0, credited: 0, deadline: Date.now() + this.opts.timeoutMs, closed: true, ended: false, dropping: false };
    this.count(w);
    this.watch(w, res);
  }

  /** Stops the sweep (server close). */
  close(): void {
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = undefined;
  }

  private addressOf(raw: RawRequest): string | undefined {
    const peer = (raw as { socket?: { remoteAddress?: string } }).socket?.remoteAddress
      ?? (raw as StreamBody).stream?.session?.socket?.remoteAddress;
    return this.opts.clientAddress ? this.opts.clientAddress(peer, raw.headers) : peer;
  }

  private capOf(owner: string): number {
    return owner === ALL_ANONYMOUS ? this.anonymousShare : owner.startsWith("ip ") ? this.addressShare : this.opts.shareBytes;
  }

  /** Reserves `n` bytes for all `owners` when `room` (at least n) fits in the budget and each owner's share. */
  private reserve(owners: readonly string[], n: number, room = n): boolean {
    if (room > 0) {
      if (this.used + room > this.opts.limitBytes) return false;
      for (const o of owners) if ((this.byOwner.get(o) ?? 0) + room > this.capOf(o)) return false;
    }
    if (n === 0) return true;
    this.used += n;
    for (const o of owners) this.byOwner.set(o, (this.byOwner.get(o) ?? 0) + n);
    return true;
  }

  private release(owners: readonly string[], n: number): void {
    if (n === 0) return;
    this.used -= n;
    for (const o of owners) {
      const left = (this.byOwner.get(o) ?? 0) - n;
      if (left > 0) this.byOwner.set(o, left);
      else this.byOwner.delete(o);
    }
  }

  /**
   * An HTTP/1.1 body still arriving after its answer: Node reads and drops
   * it (a dumped request is not pushed to), so the socket's bytes are what
   * is counted, for the pace and the drain's bound, until the body ends.
   */
  private countSocket(w: Watch): void {
    const socket = (w.raw as IncomingMessage).socket as IncomingMessage["socket"] | undefined;
    if ((w.raw as Http2ServerRequest).stream !== undefined || !socket || w.stopSocketCount) return;
    const onData = (d: Buffer) => {
      w.received += d.length;
      if (w.received - w.receivedAtClose > DRAIN_MAX_BYTES) {
        w.stopSocketCount?.();
        this.arriving.delete(w);
        cut(w.raw);
      }
    };
    socket.on("data", onData);
    w.stopSocketCount = () => socket.off("data", onData);
    socket.once("close", w.stopSocketCount);
  }

  /** Counts the bytes the HTTP layer pushes into the request stream; reserves what goes past the reservation. */
  private count(w: Watch): void {
    const raw = w.raw as RawRequest & { push(chunk: unknown, encoding?: BufferEncoding): boolean };
    const push = raw.push;
    raw.push = (chunk: unknown, encoding?: BufferEncoding) => {
      if (chunk === null) {
        w.ended = true;
        w.stopSocketCount?.();
        this.arriving.delete(w);
      } else if (!w.stopSocketCount && chunk && typeof (chunk as Buffer).length === "number") {
        w.received += (chunk as Buffer).length;
        if (w.closed && w.received - w.receivedAtClose > DRAIN_MAX_BYTES) {
          this.arriving.delete(w);
          cut(w.raw);
          return true;
        }
        const more = w.received - w.reserved;
        if (!w.closed && more > 0 && !w.dropping) {
          if (!this.reserve(w.owners, more)) {
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
    const { timeoutMs, minBytesPerSecond } = this.opts;
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
      // Bytes buy time at the minimum rate, at most timeoutMs ahead: time
      // banked by a fast start cannot pay for a long stall later.
      const gained = w.received - w.credited;
      w.credited = w.received;
      w.deadline = Math.min(w.deadline + (gained / minBytesPerSecond) * 1000, now + timeoutMs);
      if (now <= w.deadline) continue;
      this.arriving.delete(w);
      cut(w.raw);
    }
  }
}

function app(id: number): string {
  return `app ${id}`;
}

/** The share key of a client address: IPv4 (also ::ffff:-mapped) as is, IPv6 by its /64 (one subscriber's prefix). */
export function addressKey(address: string | undefined): string {
  if (!address) return "?";
  const a = address.toLowerCase();
  if (a.startsWith("::ffff:") && a.includes(".")) return a.slice(7);
  if (!a.includes(":")) return a;
  const [head = "", tail] = a.split("::");
  const left = head ? head.split(":") : [];
  const right = tail ? tail.split(":") : [];
  const groups = tail === undefined ? left : [...left, ...Array<string>(Math.max(0, 8 - left.length - right.length)).fill("0"), ...right];
  return groups.slice(0, 4).map((g) => g.replace(/^0+(?=.)/, "")).join(":") + "::/64";
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
