// A cleartext server speaking HTTP/1.1 and HTTP/2 with prior knowledge (h2c)
// on one port, for the admin listener: the CLI and browsers use HTTP/1.1,
// gRPC clients (grpcurl, buf curl, grpc-js) need HTTP/2. Without TLS there
// is no ALPN, so each connection's first bytes decide: the HTTP/2 client
// preface goes to an http2 server, anything else to an http server, both
// with the same request handler (Fastify's, through `serverFactory`).
import http, { type IncomingMessage, type ServerResponse } from "node:http";
import http2, { type Http2ServerRequest, type Http2ServerResponse, type Http2Session } from "node:http2";
import { Server, type Socket } from "node:net";
import { Duplex } from "node:stream";
import type { FastifyServerFactory } from "fastify";

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");

type Handler = (req: IncomingMessage | Http2ServerRequest, res: ServerResponse | Http2ServerResponse) => void;

export interface H2cServerOptions {
  /** Keep-alive of idle HTTP/1.1 connections (Fastify's keepAliveTimeout). */
  keepAliveTimeout?: number;
  /** Whole-request limit on HTTP/1.1, 0 for none (Fastify's requestTimeout). */
  requestTimeout?: number;
  /** An HTTP/2 session idle this long is closed (Fastify's http2SessionTimeout). */
  http2SessionTimeout?: number;
  /** A connection that sends nothing this long is dropped. */
  firstBytesTimeout?: number;
}

/**
 * The listening server Fastify sees (listen, address, close). close() stops
 * accepting, sends GOAWAY to HTTP/2 sessions (their open streams finish) and
 * ends idle HTTP/1.1 connections; its callback runs once every connection
 * accepted here has closed.
 */
export class H2cServer extends Server {
  readonly h1: http.Server;
  readonly h2: http2.Http2Server;
  private readonly sessions = new Set<Http2Session>();
  private readonly undecided = new Set<Socket>();
  /** HTTP/1.1 responses under way, with their connection. */
  private readonly inflight = new Map<ServerResponse, Socket>();
  private closing = false;
  /** The socket whose session http2 is creating (it does so synchronously). */
  private nextPeer: Socket | undefined;

  constructor(handler: Handler, opts: H2cServerOptions = {}) {
    super();
    this.h1 = http.createServer(handler as (req: IncomingMessage, res: ServerResponse) => void);
    this.h1.keepAliveTimeout = opts.keepAliveTimeout ?? 72_000;
    this.h1.requestTimeout = opts.requestTimeout ?? 0;
    this.h1.on("request", (req: IncomingMessage, res: ServerResponse) => {
      this.inflight.set(res, req.socket);
      res.once("close", () => this.inflight.delete(res));
      if (this.closing) endAfter(res, req.socket);
    });
    // Fastify listens for malformed HTTP/1.1 requests on the server it was
    // given (its clientErrorHandler answers them).
    this.h1.on("clientError", (err: Error, socket: Socket) => {
      if (this.listenerCount("clientError") > 0) this.emit("clientError", err, socket);
      else socket.destroy(err);
    });
    this.h2 = http2.createServer(handler as (req: Http2ServerRequest, res: Http2ServerResponse) => void);
    const sessionTimeout = opts.http2SessionTimeout ?? 72_000;
    this.h2.on("session", (session) => {
      if (this.nextPeer) giveAddresses(session, this.nextPeer);
      this.sessions.add(session);
      session.once("close", () => this.sessions.delete(session));
      if (sessionTimeout > 0) session.setTimeout(sessionTimeout, () => session.close());
      if (this.closing) session.close();
    });
    // The http server only tracks its connections (header timeout, idle
    // reaping) once it has seen 'listening'; it never listens itself.
    this.on("listening", () => this.h1.emit("listening"));
    const firstBytesTimeout = opts.firstBytesTimeout ?? this.h1.headersTimeout;
    this.on("connection", (socket: Socket) => this.route(socket, firstBytesTimeout));
  }

  private route(socket: Socket, timeoutMs: number): void {
    this.undecided.add(socket);
    let head: Buffer = Buffer.alloc(0);
    const timer = setTimeout(() => socket.destroy(), timeoutMs).unref();
    const done = () => {
      clearTimeout(timer);
      this.undecided.delete(socket);
      socket.off("data", onData);
      socket.off("close", done);
      socket.off("error", done);
    };
    const onData = (chunk: Buffer) => {
      head = head.length ? Buffer.concat([head, chunk]) : chunk;
      const n = Math.min(head.length, PREFACE.length);
      const isPrefix = head.subarray(0, n).equals(PREFACE.subarray(0, n));
      // A partial preface: wait for the rest before deciding.
      if (isPrefix && head.length < PREFACE.length) return;
      done();
      socket.pause();
      if (isPrefix) {
        this.nextPeer = socket;
        try {
          this.h2.emit("connection", prefixed(socket, head));
        } finally {
          this.nextPeer = undefined;
        }
      } else {
        // The http server reads the unshifted bytes through its 'data'
        // listener before anything the socket receives next.
        socket.unshift(head);
        this.h1.emit("connection", socket);
        socket.resume();
      }
    };
    socket.on("data", onData);
    socket.once("close", done);
    socket.once("error", done);
  }

  /** Fastify calls this first when it closes (forceCloseConnections "idle"). */
  closeIdleConnections(): void {
    this.closing = true;
    this.h1.closeIdleConnections();
    // A keep-alive connection busy at close time would otherwise stay open
    // until the client's idle timeout once its response is sent.
    for (const [res, socket] of this.inflight) endAfter(res, socket);
    for (const s of this.undecided) s.destroy();
    for (const s of this.sessions) s.close();
  }

  override close(callback?: (err?: Error) => void): this {
    this.closeIdleConnections();
    this.h1.close();
    super.close(callback);
    return this;
  }
}

/** The connection ends with this response (Connection: close when still possible). */
function endAfter(res: ServerResponse, socket: Socket): void {
  if (!res.headersSent) res.setHeader("connection", "close");
  else res.once("finish", () => socket.end());
}

/**
 * Fastify's `serverFactory` for an H2cServer, with Fastify's timeouts. Typed
 * as Fastify's HTTP/1.1 default: the request handler is the same one, and it
 * handles HTTP/2 requests by their httpVersion.
 */
export const h2cServerFactory = ((handler: Handler, o: H2cServerOptions) =>
  new H2cServer(handler, {
    keepAliveTimeout: o.keepAliveTimeout,
    requestTimeout: o.requestTimeout,
    http2SessionTimeout: o.http2SessionTimeout,
  })) as unknown as FastifyServerFactory;

/**
 * The socket as a stream that first yields the bytes already read from it.
 * http2 reads a real socket natively, skipping bytes read in JavaScript, so
 * the session gets this wrapper instead (it wraps any non-native stream).
 */
function prefixed(socket: Socket, head: Buffer): Duplex {
  const stream = new Duplex({
    read() {
      socket.resume();
    },
    write(chunk: Buffer, _enc, cb) {
      socket.write(chunk, cb);
    },
    final(cb) {
      socket.end(cb);
    },
    destroy(err, cb) {
      socket.destroy(err ?? undefined);
      cb(err);
    },
  });
  stream.push(head);
  socket.on("data", (d: Buffer) => {
    if (!stream.push(d)) socket.pause();
  });
  socket.once("end", () => stream.push(null));
  socket.once("close", () => stream.destroy());
  socket.on("error", (err) => stream.destroy(err));
  return stream;
}

/**
 * Fastify's req.ip (and the access log) read the peer through http2's socket
 * proxy, which reaches the wrapper http2 made around our stream: it has no
 * address of its own, so net.Socket's peer-address cache is filled from the
 * real socket.
 */
function giveAddresses(session: Http2Session, socket: Socket): void {
  const target = session.socket as unknown as Record<string, unknown>;
  try {
    target._peername = { address: socket.remoteAddress, family: socket.remoteFamily, port: socket.remotePort };
  } catch {
    /* a Node.js without these caches: the addresses stay unknown */
  }
}
