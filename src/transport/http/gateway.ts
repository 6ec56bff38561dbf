// The REST codec in front of the dispatcher (src/transport/call/dispatcher.ts,
// docs/architecture.md "One request through each protocol"): registers one
// Fastify route per entry of the route table, has the dispatcher check the
// token and admit the body before it is read, turns path, query and body
// (JSON or multipart) into the request message, has the dispatcher call the
// service implementation, and writes the response message as the documented
// JSON (or the interface's error envelope).
import { create, type DescMessage, type Message } from "@bufbuild/protobuf";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { OutgoingHttpHeaders } from "node:http";
import multipart from "@fastify/multipart";
import { Auth } from "../../../gen/pulsebase/common/v1/options_pb.js";
import { appError, Violations } from "../../kernel/errors.js";
import { setOwn } from "../../kernel/proto-wire.js";
import type { ConsumerPrincipal } from "../../kernel/principal.js";
import { ANONYMOUS, type BodyBudget } from "../call/body-budget.js";
import type { CallContext } from "../call/call-context.js";
import type { Dispatcher, UnaryMethod } from "../call/dispatcher.js";
import { sendError } from "./envelopes.js";
import { readMultipart } from "./multipart-body.js";
import { turnBatch, type TurnBatch } from "../call/turn-batch.js";
import { decodeRest, encodeRest, isPlainObject } from "./rest-json.js";
import type { RestRoute, RouteTable } from "./route-table.js";
import { kNotModified, type RawRoute, type RestFastPath, type RestJsonPath } from "../../kernel/module.js";

export interface GatewayOptions {
  table: RouteTable;
  /** Authentication, body admission, the call (with the method's fast paths) and its error log (src/transport/call/dispatcher.ts). */
  dispatcher: Dispatcher;
  /** Largest file part (4 MiB, docs/devices.md). */
  maxFileBytes: number;
  /** Largest request (all parts together). */
  bodyLimitBytes: number;
  /** Largest request body of a route that takes no consumer token. */
  anonymousBodyLimitBytes: number;
  /** Admits request bodies before they are read (body-budget.ts). */
  budget: BodyBudget;
}

declare module "fastify" {
  interface FastifyRequest {
    /** The consumer of a route that needs a token, set before its body is read. */
    pulsebaseConsumer: ConsumerPrincipal | null;
  }
}

export async function registerGateway(app: FastifyInstance, opts: GatewayOptions): Promise<void> {
  if (!app.hasRequestDecorator("pulsebaseConsumer")) app.decorateRequest("pulsebaseConsumer", null);
  // The synchronous answers run batched at the end of each poll phase (turn-batch.ts).
  const later = turnBatch((err) => app.log.error({ err }, "gateway: a batched answer failed"));
  const passthrough: RestRoute[] = [];
  const multipartRoutes: RestRoute[] = [];
  for (const route of opts.table.routes) {
    opts.dispatcher.methodOf(route.service, route.method); // (throws when it has no implementation)
    if (route.passthrough) {
      passthrough.push(route);
      continue;
    }
    if (route.multipart) {
      multipartRoutes.push(route);
      continue;
    }
    addRoute(app, route, opts, later);
  }
  // @fastify/multipart adds two async hooks (and a 'close' listener) to every
  // request of the scope it is registered in: only the routes that take
  // multipart bodies get it (about 8 % of a small request's CPU elsewhere).
  // A multipart body sent to another route is refused with 415 by Fastify.
  if (multipartRoutes.length > 0) {
    await app.register(async (scope) => {
      await scope.register(multipart, { throwFileSizeLimit: false });
      for (const route of multipartRoutes) addRoute(scope, route, opts, later);
    });
  }
  if (passthrough.length === 0) return;
  // Passthrough routes see the raw body of any content type.
  await app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser("*", { parseAs: "buffer", bodyLimit: opts.bodyLimitBytes }, (_req, body, done) => done(null, body));
    for (const route of passthrough) {
      scope.route({ method: route.verb, url: route.path, ...bodyGate(route, opts), handler: passthroughHandler(route, opts.dispatcher, later) });
    }
  });
}

/** Registers a transcoded route (its implementation was checked by registerGateway). */
function addRoute(app: FastifyInstance, route: RestRoute, opts: GatewayOptions, later: TurnBatch): void {
  const m = opts.dispatcher.methodOf(route.service, route.method);
  const generic = messageHandler(route, opts);
  // A fast path skips the gateway's consumer authentication: only for routes without it.
  const fast = route.verb === "GET" && route.auth !== Auth.CONSUMER_UNSPECIFIED ? m.restFast : undefined;
  const json = route.verb === "POST" && route.auth === Auth.CONSUMER_UNSPECIFIED && route.body === "*" ? m.restJson : undefined;
  const handler = fast ? fastHandler(route, m, fast, generic, later, opts.dispatcher) : json ? jsonHandler(route, m, json, generic, later, opts.dispatcher) : generic.handler;
  app.route({ method: route.verb, url: route.path, ...bodyGate(route, opts), handler });
}

/**
 * What runs before a route's body is read. A route that needs a consumer
 * token checks it first: without a valid one the answer is 401 and not a
 * byte of the body is read (nor buffered). Then the body is admitted into
 * the process's budget (503 past it), charged to the token's application.
 * Routes without a token take small bodies only; GET bodies are admitted
 * where they are read (readGetBody), so a GET without one costs nothing.
 */
function bodyGate(route: RestRoute, opts: GatewayOptions) {
  if (route.auth !== Auth.CONSUMER_UNSPECIFIED && route.verb === "GET") return { bodyLimit: opts.anonymousBodyLimitBytes };
  const bodyLimit = route.auth !== Auth.CONSUMER_UNSPECIFIED ? opts.anonymousBodyLimitBytes : undefined;
  const m = opts.dispatcher.methodOf(route.service, route.method);
  return {
    ...(bodyLimit !== undefined && { bodyLimit }),
    onRequest: function authenticateFirst(req: FastifyRequest, reply: FastifyReply, done: () => void) {
      opts.dispatcher.admit(m, req.headers.authorization, req.raw, reply.raw, (refused, consumer) => {
        if (refused) return void sendError(reply, route.iface, refused);
        req.pulsebaseConsumer = consumer ?? null;
        done();
      });
    },
  };
}

/** The call's context, with the consumer the route's onRequest hook authenticated (bodyGate). */
function contextFor(dispatcher: Dispatcher, m: UnaryMethod, req: FastifyRequest): CallContext {
  return dispatcher.context(m, "rest", req, req.pulsebaseConsumer);
}

/**
 * The error answer of a dispatched call: the dispatcher logged it already
 * when it was a server fault (its one error log).
 */
function sendCallError(reply: FastifyReply, route: RestRoute, err: unknown): FastifyReply {
  return sendError(reply, route.iface, err, { logged: true });
}

/**
 * The REST bytes of a response message. A service that answers with the very
 * same message object again (a response cache) gets its REST encoding reused
 * too, as a Buffer (no UTF-8 encoding or length scan per request); messages
 * handed out that way are never mutated.
 */
function responseEncoder(route: RestRoute) {
  const output = route.method.output;
  const encoded = new WeakMap<object, Buffer>();
  return (res: object): string | Buffer => {
    const hit = encoded.get(res);
    if (hit !== undefined) return hit;
    const resMsg = create(output, res as never);
    let json: unknown = encodeRest(output, resMsg);
    if (route.responseBody) json = (json as Record<string, unknown>)[route.responseBody] ?? [];
    const body = JSON.stringify(json);
    if (resMsg !== res) return body;
    const bytes = Buffer.from(body, "utf8");
    encoded.set(res, bytes);
    return bytes;
  };
}

function messageHandler(route: RestRoute, opts: GatewayOptions) {
  const input = route.method.input;
  const encode = responseEncoder(route);
  const m = opts.dispatcher.methodOf(route.service, route.method);
  return {
    encode,
    handler: async function restHandler(req: FastifyRequest, reply: FastifyReply) {
      let msg: Message;
      try {
        msg = await requestMessage(route, input, req, reply, opts);
      } catch (err) {
        return sendError(reply, route.iface, err);
      }
      const ctx = contextFor(opts.dispatcher, m, req);
      try {
        const res = (await opts.dispatcher.invoke(m, msg, ctx)) as object;
        const body = encode(res);
        const set = ctx.setHeaders;
        if (set) copyHeaders(reply, set);
        if (ctx.values.get(kNotModified)) return reply.code(304).send();
        return reply.code(route.status).type("application/json; charset=utf-8").send(body);
      } catch (err) {
        return sendCallError(reply, route, err);
      }
    },
  };
}

/**
 * A GET route whose service has a synchronous fast path (RestFastPath, src/kernel/module.ts):
 * asked first, for requests without a body (a GET body or a multipart
 * content type is the generic path's business); the generic handler runs
 * when it does not answer. Writes what the generic path would write for the
 * same answer: the service's headers (Vary merged), then 304 or the body.
 */
function fastHandler(route: RestRoute, m: UnaryMethod, fast: RestFastPath, generic: ReturnType<typeof messageHandler>, later: TurnBatch, dispatcher: Dispatcher) {
  const noQuery: Record<string, string> = {};
  return batched(route, m, later, dispatcher, function fastAnswer(req, reply) {
    const h = req.headers;
    if (h["content-type"] === undefined && h["transfer-encoding"] === undefined && !Number(h["content-length"] ?? 0)) {
      const query = route.rawQueryField ? rawQuery(req) : noQuery;
      const answer = query && fast({ params: req.params as Record<string, string>, query, headers: h });
      if (answer) {
        const body = generic.encode(answer.message);
        for (const [k, v] of answer.headers) setHeader(reply, k, v);
        if (answer.notModified) return reply.code(304).send();
        return reply.code(route.status).type("application/json; charset=utf-8").send(body);
      }
    }
    return generic.handler(req, reply);
  });
}

/**
 * A POST route whose service answers plain JSON bodies without proto
 * messages (RestJsonPath, src/kernel/module.ts): authenticated like the generic path, then
 * asked; the generic handler runs when it does not answer.
 */
function jsonHandler(route: RestRoute, m: UnaryMethod, json: RestJsonPath, generic: ReturnType<typeof messageHandler>, later: TurnBatch, dispatcher: Dispatcher) {
  const send = (reply: FastifyReply, text: string) => reply.code(route.status).type("application/json; charset=utf-8").send(text);
  // Without a promise when the answer needs none (a point read): a PK read
  // then runs start to end in one call. (The token was checked before the
  // body was read: bodyGate.)
  return batched(route, m, later, dispatcher, function jsonAnswer(req, reply) {
    const body = req.body;
    const consumer = req.pulsebaseConsumer;
    if (!isPlainObject(body) || !consumer) return generic.handler(req, reply);
    const answer = json({ body, appId: consumer.appId, consumerId: consumer.consumerId, userId: consumer.userId, requestId: String(req.id) });
    if (typeof answer === "string") return send(reply, answer);
    if (answer === undefined) return generic.handler(req, reply);
    return answer.then((text) => (text !== undefined ? send(reply, text) : generic.handler(req, reply)));
  });
}

/**
 * A handler that answers at the end of the loop turn (turn-batch.ts). What
 * the answer throws or rejects with is written by fail(): Fastify's own net
 * for returned promises does not reach work done after the handler returned.
 * A service's synchronous answer is part of the call: its failure goes to
 * the dispatcher's error log like any other.
 */
function batched(route: RestRoute, m: UnaryMethod, later: TurnBatch, dispatcher: Dispatcher, answer: (req: FastifyRequest, reply: FastifyReply) => unknown) {
  const failed = (req: FastifyRequest, reply: FastifyReply, err: unknown) => fail(reply, route, dispatcher.fault(m, "rest", req.id, err));
  const run = (req: FastifyRequest, reply: FastifyReply) => {
    try {
      const r = answer(req, reply);
      if (r instanceof Promise) r.catch((err: unknown) => failed(req, reply, err));
    } catch (err) {
      failed(req, reply, err);
    }
  };
  return function batchedHandler(req: FastifyRequest, reply: FastifyReply): void {
    later(() => run(req, reply));
  };
}

/** The error answer of a batched task: the interface's envelope, a bare 500 if even that fails, else the response cut; never throws. */
function fail(reply: FastifyReply, route: RestRoute, err: unknown): void {
  if (reply.sent) {
    reply.log.error({ err }, "gateway: failure after the answer was sent");
    return;
  }
  try {
    sendCallError(reply, route, err);
  } catch (e) {
    reply.log.error({ err: e }, "gateway: could not send the error envelope");
    try {
      if (!reply.sent) reply.code(500).send();
    } catch {
      // Not even a bare 500 could be written: the client sees the
      // connection (HTTP/1.1) or the stream (HTTP/2) end instead of waiting.
      reply.raw.destroy();
    }
  }
}

/** The rest_raw_query field as the generic path builds it; undefined (not fast) for repeated keys. */
function rawQuery(req: FastifyRequest): Record<string, string> | undefined {
  const q = req.query as Record<string, string | string[]>;
  const raw: Record<string, string> = {};
  for (const k of Object.keys(q)) {
    const v = q[k];
    if (typeof v !== "string") return undefined;
    setOwn(raw, k, v);
  }
  return raw;
}

/** Service response headers onto the reply; Vary is merged (CORS sets Origin). */
function copyHeaders(reply: FastifyReply, headers: Headers): void {
  for (const [k, v] of headers) setHeader(reply, k, v);
}

function setHeader(reply: FastifyReply, k: string, v: string): void {
  if (k === "vary") {
    const prior = reply.getHeader("vary");
    reply.header("vary", prior ? `${String(prior)}, ${v}` : v);
  } else reply.header(k, v);
}

async function requestMessage(route: RestRoute, schema: DescMessage, req: FastifyRequest, reply: FastifyReply, opts: GatewayOptions): Promise<Message> {
  const v = new Violations();
  const fields: Record<string, unknown> = {};
  let body: unknown = req.body;
  if (route.verb === "GET" && body === undefined) body = await readGetBody(req, reply, opts);
  // Only the multipart routes' scope parses multipart (isMultipart exists
  // there); elsewhere Fastify refuses such a body with 415, and a GET body
  // that is not JSON is refused by readGetBody.
  if (route.multipart && req.isMultipart()) body = await readMultipart(req, v, opts);
  if (route.body === "*" || route.verb === "GET") {
    if (body !== undefined && body !== null && !isPlainObject(body)) {
      throw appError("validation_failed", "The request body must be a JSON object.", { fields: { body: ["The request body must be a JSON object."] } });
    }
    // GET: the query string, and a JSON body where a client sends one (body wins).
    // The CMS schema endpoints take no parameters: like the other CMS reads they
    // ignore unknown ones (a browser's cache buster) instead of refusing them.
    if (route.verb === "GET" && !route.rawQueryField && route.iface !== "cms") Object.assign(fields, req.query);
    if (body) Object.assign(fields, body);
  } else if (route.body) {
    fields[route.body] = body;
  }
  if (route.rawQueryField) {
    const raw: Record<string, string> = {};
    for (const [k, val] of Object.entries(req.query as Record<string, string | string[]>)) {
      setOwn(raw, k, Array.isArray(val) ? val.join(",") : val);
    }
    fields[route.rawQueryField] = raw;
  }
  const params = req.params as Record<string, string>;
  for (const p of route.pathParams) fields[p] = params[p];
  const msg = decodeRest(schema, fields, v);
  if (!v.empty) {
    // A malformed path id names nothing that exists (404).
    if (route.pathParams.some((p) => p in v.fields)) throw appError("not_found");
    v.throwIfAny();
  }
  return msg;
}

/**
 * Fastify does not parse GET bodies; the documented GET /api/consumer/token (docs/devices.md) sends
 * JSON in one, so read it here.
 */
async function readGetBody(req: FastifyRequest, reply: FastifyReply, opts: GatewayOptions): Promise<unknown> {
  // (an HTTP/2 GET without a declared length has no body worth reading)
  const len = Number(req.headers["content-length"] ?? 0);
  if (!len && !req.headers["transfer-encoding"]) return undefined;
  const ct = String(req.headers["content-type"] ?? "");
  if (!ct.startsWith("application/json")) throw appError("unsupported_media_type", "A GET body must be application/json.");
  const consumer = req.pulsebaseConsumer;
  const limit = consumer ? opts.bodyLimitBytes : opts.anonymousBodyLimitBytes;
  const refused = opts.budget.admit(req.raw, reply.raw, consumer?.appId ?? ANONYMOUS, limit);
  if (refused) throw refused;
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req.raw) {
    size += (chunk as Buffer).length;
    if (size > limit) throw appError("payload_too_large");
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString("utf8");
  if (!text.trim()) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    throw appError("bad_request", "Malformed JSON body.");
  }
}

const EMPTY = new Uint8Array(0);

function passthroughHandler(route: RestRoute, dispatcher: Dispatcher, later: TurnBatch) {
  const input = route.method.input;
  const m = dispatcher.methodOf(route.service, route.method);
  type Raw = { status?: number; headers?: Record<string, string>; body?: Uint8Array };
  // Written straight to the response, as the RPC codecs write theirs
  // (rpc-routes.ts): the listener's headers (CORS, request id) and the
  // function's, which response-shaping.ts validated; Fastify's send path
  // (header checks again, hooks, a write and an end) was a tenth of a
  // warm invocation's CPU.
  const answer = (reply: FastifyReply, ctx: CallContext, res: Raw): void => {
    const set = ctx.setHeaders;
    if (set) copyHeaders(reply, set);
    const head = reply.getHeaders() as OutgoingHttpHeaders;
    const fn = res.headers;
    if (fn) for (const k in fn) head[k] = fn[k];
    const status = res.status || 200;
    const b = res.body ?? EMPTY;
    // A 204 carries neither a body nor its headers (RFC 9110 8.6), as Fastify's send left it.
    if (status === 204) delete head["content-type"];
    else head["content-length"] = b.byteLength;
    reply.raw.writeHead(status, head);
    if (b.byteLength === 0) reply.raw.end();
    else reply.raw.end(b);
  };
  // Not async: a service that answers at once (a warm function,
  // function-runtime.ts) is answered in this call, without a promise.
  const run = (req: FastifyRequest, reply: FastifyReply): void => {
    const ctx = contextFor(dispatcher, m, req);
    let out: unknown;
    try {
      const headers: Record<string, string> = {};
      for (const [k, val] of Object.entries(req.headers)) {
        if (val === undefined || k.startsWith(":")) continue;
        setOwn(headers, k, Array.isArray(val) ? val.join(", ") : val);
      }
      const query: Record<string, string> = {};
      for (const [k, val] of Object.entries(req.query as Record<string, string | string[]>)) {
        setOwn(query, k, Array.isArray(val) ? val.join(",") : val);
      }
      const body = req.body;
      const msg = create(input, {
        method: req.method,
        pathParams: req.params as Record<string, string>,
        query,
        headers,
        body: Buffer.isBuffer(body) ? new Uint8Array(body.buffer, body.byteOffset, body.byteLength) : new Uint8Array(),
        contentType: req.headers["content-type"] ?? "",
      } as never);
      out = dispatcher.invoke(m, msg, ctx);
    } catch (err) {
      return fail(reply, route, err);
    }
    // Neither throws (fail() never does): nothing escapes into the turn
    // batch, and the promise's chain cannot end in an unhandled rejection.
    if (out instanceof Promise) {
      out.then(
        (res: Raw) => answerOrFail(req, reply, ctx, res),
        (err: unknown) => fail(reply, route, err),
      );
    } else answerOrFail(req, reply, ctx, out as Raw);
  };
  // An answer Node refuses to write (writeHead throws) is a server fault: logged by the dispatcher, then the envelope.
  const answerOrFail = (req: FastifyRequest, reply: FastifyReply, ctx: CallContext, res: Raw): void => {
    try {
      answer(reply, ctx, res);
    } catch (err) {
      fail(reply, route, dispatcher.fault(m, "rest", req.id, err));
    }
  };
  // A method that may answer at once (a warm function: the dispatcher's
  // answersAtOnce, which the RPC codecs follow too) starts at the end of the
  // loop turn with the others that arrived in it (turn-batch.ts): warm runs
  // back to back, their answers leaving together.
  if (!m.answersAtOnce) return run;
  return function passthrough(req: FastifyRequest, reply: FastifyReply): void {
    later(() => run(req, reply));
  };
}

/** A module's raw route (src/kernel/module.ts): its answer as is, what it throws in its interface's envelope. */
export function registerRawRoute(app: FastifyInstance, route: RawRoute): void {
  app.route({
    method: route.method,
    url: route.path,
    handler: async function rawRoute(req, reply) {
      try {
        const res = await route.handle({ params: req.params as Record<string, string>, query: (req.query ?? {}) as Record<string, string | string[] | undefined>, headers: req.headers });
        reply.headers(res.headers).code(res.status);
        return res.body !== undefined ? reply.send(res.body) : reply.send();
      } catch (err) {
        return sendError(reply, route.iface, err);
      }
    },
  });
}
