// One access-log line and one metrics sample per request, on every
// listener. Both hang off Fastify's LogController.requestCompleted, which
// Fastify already calls from the response's 'finish' listener it sets up for
// every routed request (404s included): no hook, no promise per request. It
// also covers answers written outside the handler's own flow (the gateway's
// turn-batched fast paths, Connect handlers), body parser rejections and
// error envelopes, since they all end in a finish.
//
// A request whose client goes away first is recorded too, once, as status
// 499 (nginx's convention) with its duration until the abort. On HTTP/2 the
// compatibility layer emits 'finish' when the stream closes, aborted or not,
// so requestCompleted sees it (request.raw.aborted). On HTTP/1 an aborted
// response never finishes: one 'close' listener per request (a shared
// function, no closure) catches it. Fastify's onRequestAbort hook is not
// enough there: it keys on the request stream's 'close', which has already
// fired once a body was read (every POST), so an aborted PK read was missed.
import { ServerResponse } from "node:http";
import { createRequire } from "node:module";
import { LogController, type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import pino, { type Logger } from "pino";
import { UNMATCHED_ROUTE, type HttpMetrics, type ListenerHttpMetrics } from "./metrics.js";

// Fastify internals, pinned with its exact version in package.json: the
// route context holds the matched route template (request.routeOptions
// builds a fresh 13-field object per call), and setupResponseListeners is
// what Fastify runs for routed requests (see observeUnrouted).
const require = createRequire(import.meta.url);
const { kRouteContext } = require("fastify/lib/symbols.js") as { kRouteContext: unknown };
const { setupResponseListeners } = require("fastify/lib/reply.js") as { setupResponseListeners: unknown };
// A Fastify upgrade that moves them must fail at start-up, not label every
// request "(unmatched)" or turn malformed URLs into TypeErrors.
if (typeof kRouteContext !== "symbol" || typeof setupResponseListeners !== "function") {
  throw new Error("pulsebase: unsupported Fastify version (src/server/access-log.ts needs fastify/lib/symbols.js kRouteContext and fastify/lib/reply.js setupResponseListeners)");
}
const routeContextKey: symbol = kRouteContext;
const setupListeners = setupResponseListeners as (reply: FastifyReply) => void;

/** On an HTTP/1 response: its reply until recorded, then DONE. */
const kPending = Symbol("pulsebase.accessLog.pending");
const DONE = 0;
type Http1Response = ServerResponse & { [kPending]?: FastifyReply | typeof DONE };

/** Status recorded for a request whose client went away before the answer was complete. */
export const CLIENT_CLOSED_STATUS = 499;

interface RouteContext {
  config?: { url?: string };
}

export interface ObservedLogControllerOptions {
  /** Listener label: public, admin or http. */
  listener: string;
  metrics: HttpMetrics;
  /** The access log's logger; undefined turns the access log off (metrics stay). */
  accessLog?: Logger;
}

/**
 * A LogController with Fastify's own per-request lines off (the public
 * listener must not pay for them, and they would duplicate ours) whose
 * requestCompleted records the request instead.
 */
export class ObservedLogController extends LogController {
  private readonly http: ListenerHttpMetrics;
  private readonly log: AccessLogWriter | undefined;
  /** Set during selfCheck: takes the recorded route instead of recording. */
  private probe: ((route: string) => void) | undefined;
  /** The 'close' listener of HTTP/1 responses (one function for all of them). */
  private readonly onHttp1Close: (this: Http1Response) => void;

  constructor(opts: ObservedLogControllerOptions) {
    super({ disableRequestLogging: true });
    this.http = opts.metrics.forListener(opts.listener);
    this.log = opts.accessLog ? new AccessLogWriter(opts.accessLog) : undefined;
    // One listener function for every response, `this` being the response:
    // the controller is reached through a closure made once, here.
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const self = this;
    this.onHttp1Close = function (this: Http1Response) {
      const reply = this[kPending];
      if (reply === undefined || reply === DONE) return;
      // Closed before 'finish': the client went away (or the socket broke).
      this[kPending] = DONE;
      self.record(reply.request, reply, CLIENT_CLOSED_STATUS, undefined);
    };
  }

  override incomingRequest(_request: FastifyRequest, reply: FastifyReply): void {
    const res = reply.raw as Http1Response;
    if (res instanceof ServerResponse) {
      res[kPending] = reply;
      res.on("close", this.onHttp1Close);
    }
  }

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    const res = reply.raw as Http1Response;
    const pending = res[kPending];
    if (pending !== undefined) {
      if (pending === DONE) return; // recorded at its abort
      res[kPending] = DONE;
    }
    // HTTP/2: the stream was reset before the answer ended ('finish' comes anyway).
    const aborted = (request.raw as { aborted?: boolean }).aborted === true && !res.writableEnded;
    this.record(request, reply, aborted ? CLIENT_CLOSED_STATUS : reply.statusCode, error ?? undefined);
  }

  /**
   * A call answered outside Fastify (the HTTP/2 stream lane,
   * src/transport/rpc/stream-lane.ts): the same metrics sample and access
   * line as a routed request; `route` is the method's path, its route; no
   * status when the client went away first (499).
   */
  recordCall(reqId: string, method: string, route: string, status: number | undefined, ms: number, bytes: number | undefined): void {
    if (this.probe !== undefined) return this.probe(route);
    if (status === undefined) status = CLIENT_CLOSED_STATUS;
    this.http.observe(method, route, status, ms);
    this.log?.write(reqId, method, route, status, ms, bytes, undefined, undefined);
  }

  private record(request: FastifyRequest, reply: FastifyReply, status: number, error: Error | undefined): void {
    const template = ((request as unknown as Record<symbol, RouteContext | undefined>)[routeContextKey])?.config?.url;
    const route = template ?? UNMATCHED_ROUTE;
    if (this.probe !== undefined) return this.probe(route);
    const ms = reply.elapsedTime;
    const method = request.method;
    this.http.observe(method, route, status, ms);
    const log = this.log;
    if (log === undefined) return;
    let bytes: number | undefined;
    if (status !== CLIENT_CLOSED_STATUS) {
      const len = reply.getHeader("content-length");
      bytes = typeof len === "number" ? len : typeof len === "string" ? Number(len) : undefined;
    }
    // The path of an unmatched request is what tells an operator what was
    // asked for (the query string is left out: it may carry secrets).
    log.write(String(request.id), method, route, status, ms, bytes, template === undefined ? pathOf(request.url) : undefined, error);
  }

  /**
   * Start-up check that the Fastify internals read here still work: one
   * request to `url` (a route whose template is `url`) must be recorded
   * under that template. Recorded nowhere; throws when it is not.
   */
  async selfCheck(app: FastifyInstance, url: string): Promise<void> {
    let seen: string | undefined;
    this.probe = (route) => {
      seen = route;
    };
    try {
      await app.inject({ method: "GET", url });
      // 'finish' may be emitted just after the injected response resolves.
      for (let i = 0; i < 10 && seen === undefined; i++) await new Promise((r) => setImmediate(r));
    } finally {
      this.probe = undefined;
    }
    if (seen !== url) {
      throw new Error(`pulsebase: access log self-check failed: GET ${url} was recorded as ${seen === undefined ? "nothing" : JSON.stringify(seen)} (unsupported Fastify version?)`);
    }
  }

  /**
   * Fastify's default error handler (listeners without their own: admin,
   * plain) logs through here; with request logging off it would log nothing
   * at all. A 5xx is a server fault: logged with its cause chain.
   */
  override defaultErrorLog(error: Error, request: FastifyRequest, reply: FastifyReply): void {
    if (reply.statusCode >= 500) request.log.error({ err: error, status: reply.statusCode }, "request failed");
  }
}

/**
 * Writes access lines in pino's own JSON layout ({"level":30,"time":..,
 * <bindings>,"reqId":..,"method":..,"route":..,"status":..,"ms":..,
 * "bytes":..,"msg":"request"}) without going through pino's generic
 * serialisation, and hands the lines of FLUSH_MS to the destination in one
 * write. Measured on this machine: pino's info(obj) costs several times the
 * string built here; a synchronous write per line is a system call per
 * request; and one write per event-loop turn (a handful of lines at a few
 * thousand requests/s) still cost 20-30 µs of CPU per request with pino's
 * default asynchronous destination (each write is a round trip through
 * libuv's thread pool), against no measurable cost when lines are batched
 * over FLUSH_MS. A line waits at most FLUSH_MS (and is flushed at process
 * exit). Loggers whose destination
 * needs pino's metadata (multistream) or with a non-default layout get
 * ordinary logger.info calls.
 */
class AccessLogWriter {
  private readonly fast: boolean;
  private pending = "";
  private scheduled = false;
  private readonly routeFields = new Map<string, string>();
  private readonly flushNow = () => this.flush();

  constructor(private readonly logger: Logger) {
    const l = logger as unknown as Record<symbol, unknown>;
    const stream = l[pino.symbols.streamSym] as { write?: unknown; [k: symbol]: unknown } | undefined;
    this.fast = typeof stream?.write === "function"
      && !stream[pino.symbols.needsMetadataGsym]
      && typeof l[pino.symbols.chindingsSym] === "string"
      && typeof l[pino.symbols.timeSym] === "function"
      && l[pino.symbols.messageKeySym] === "msg"
      && (l[pino.symbols.formattersSym] as Formatters | undefined)?.level === DEFAULT_FORMATTERS.level
      && (l[pino.symbols.formattersSym] as Formatters | undefined)?.log === undefined
      && !l[pino.symbols.mixinSym];
  }

  write(reqId: string, method: string, route: string, status: number, ms: number, bytes: number | undefined, path: string | undefined, err: Error | undefined): void {
    const logger = this.logger;
    if (!logger.isLevelEnabled("info")) return;
    if (!this.fast || err !== undefined) {
      logger.info({ reqId, method, route, status, ms: round3(ms), bytes, path, err }, "request");
      return;
    }
    const l = logger as unknown as Record<symbol, unknown>;
    // The method is a token (Fastify routes only methods it knows); the
    // rest is escaped (the path and, should genReqId ever change, the id
    // come from the client).
    let line = `{"level":30${(l[pino.symbols.timeSym] as () => string)()}${l[pino.symbols.chindingsSym] as string},"reqId":${JSON.stringify(reqId)},"method":"${method}"${this.routeField(route)},"status":${status},"ms":${round3(ms)}`;
    if (bytes !== undefined && Number.isFinite(bytes)) line += `,"bytes":${bytes}`;
    if (path !== undefined) line += `,"path":${JSON.stringify(path)}`;
    this.pending += line + `,"msg":"request"}\n`;
    if (this.pending.length >= FLUSH_BYTES) this.flush();
    else if (!this.scheduled) {
      this.scheduled = true;
      if (!exitHooked) {
        exitHooked = true;
        process.once("exit", flushAll);
      }
      writers.add(this);
      setTimeout(this.flushNow, FLUSH_MS).unref();
    }
  }

  /** `,"route":"<escaped>"`, escaped once per template (routes are a bounded set). */
  private routeField(route: string): string {
    let f = this.routeFields.get(route);
    if (f === undefined) {
      f = `,"route":${JSON.stringify(route)}`;
      this.routeFields.set(route, f);
    }
    return f;
  }

  flush(atExit = false): void {
    this.scheduled = false;
    writers.delete(this);
    const text = this.pending;
    if (text === "") return;
    this.pending = "";
    const stream = (this.logger as unknown as Record<symbol, { write(s: string): void; flushSync?(): void }>)[pino.symbols.streamSym]!;
    stream.write(text);
    if (atExit) {
      // pino's own exit hook (registered first) has already flushed its
      // asynchronous destination: an asynchronous write now would be lost.
      try {
        stream.flushSync?.();
      } catch {
        // not flushable now (e.g. still opening): nothing more can be done at exit
      }
    }
  }
}

interface Formatters {
  level?: unknown;
  log?: unknown;
}
/** pino's default formatters (shared by every logger that sets none): the layout the fast path writes. */
const DEFAULT_FORMATTERS = (pino({}, { write() {} }) as unknown as Record<symbol, Formatters>)[pino.symbols.formattersSym]!;

/** Lines wait at most this long for the write that carries them. */
const FLUSH_MS = 20;
/** A buffer this large is written at once (a burst of lines). */
const FLUSH_BYTES = 64 * 1024;

/** Writers holding lines not yet written, flushed should the process exit first. */
const writers = new Set<AccessLogWriter>();
let exitHooked = false;
function flushAll(): void {
  for (const w of [...writers]) w.flush(true);
}

function round3(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}

function pathOf(url: string): string {
  const q = url.indexOf("?");
  return (q < 0 ? url : url.slice(0, q)).slice(0, 512);
}

/**
 * For answers Fastify gives before routing (frameworkErrors: malformed URL
 * encoding, an over-long path segment): Fastify does not watch those
 * responses, so they would be neither logged nor counted. Call it from the
 * frameworkErrors handler before sending.
 */
export function observeUnrouted(reply: FastifyReply): void {
  setupListeners(reply);
}
