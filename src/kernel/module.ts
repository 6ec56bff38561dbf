// What a capability contributes to the server, in one definition: Connect
// services for the device (public) and operator (admin) listeners with their
// REST fast paths, raw GET routes, gauges, and background work that starts
// and stops with the process. Protocol-free: the transport (src/transport)
// turns fast paths, raw routes and kNotModified into HTTP.
import { getOption, hasOption, type DescMessage, type DescMethod, type DescService, type Message, type MessageShape } from "@bufbuild/protobuf";
import { createContextKey, type ConnectRouter, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import { http } from "../../gen/google/api/annotations_pb.js";
import type { HttpRule } from "../../gen/google/api/http_pb.js";
import { answers_at_once } from "../../gen/pulsebase/common/v1/options_pb.js";
import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import type { HostCapability } from "./host-capability.js";

export type RequestHeaders = Readonly<Record<string, string | string[] | undefined>>;

/** A REST GET request as a fast path sees it. */
export interface FastRequest {
  /** path variables, by proto field name */
  params: Readonly<Record<string, string>>;
  /** The raw query (routes with rest_raw_query: what the generic path puts in that field), else empty. */
  query: Readonly<Record<string, string>>;
  headers: RequestHeaders;
}

export interface FastAnswer {
  /** The response message; the very same object for the same cached response (the transport keeps its encoding with it). */
  message: object;
  /** Response headers, as the service would set them on ctx.responseHeader (lower-case names). */
  headers: readonly (readonly [string, string])[];
  /** If-None-Match matched the ETag: 304 without a body. */
  notModified: boolean;
}

/**
 * Answers a REST GET from memory, synchronously, or returns undefined and the
 * generic path runs as if it had not been asked: no side effect unless it
 * answers, and exactly what the generic path would answer.
 */
export type RestFastPath = (req: FastRequest) => FastAnswer | undefined;

export interface JsonRequest {
  /** The parsed JSON body: a plain object. */
  body: Record<string, unknown>;
  appId: number;
  /** The token's consumer (access rules see it). */
  consumerId: number;
  userId: string;
  requestId: string;
}

/**
 * Answers a token-authenticated REST POST with a JSON body as its REST JSON
 * text, byte for byte what the generic path would; undefined (or a promise
 * of it) sends the request down the generic path. What it throws is written
 * like the generic path's errors.
 */
export type RestJsonPath = (req: JsonRequest) => string | undefined | Promise<string | undefined>;

/**
 * Set by a handler whose answer's ETag matched If-None-Match: REST answers
 * 304 without a body; Connect and gRPC answer the message as usual.
 */
export const kNotModified = createContextKey(false, { description: "pulsebase.notModified" });

/** The local names of a service's unary methods (the calls the dispatcher and REST serve). */
export type UnaryMethodName<S extends DescService> = {
  [K in keyof S["method"] & string]: S["method"][K]["methodKind"] extends "unary" ? K : never;
}[keyof S["method"] & string];

/**
 * What a service adds to one unary method beyond its implementation, typed
 * by the method's own request (I) and response (O) messages: a codec of
 * another message does not compile.
 */
export interface MethodPaths<I extends DescMessage, O extends DescMessage> {
  /**
   * Reads the request message from the protobuf binary format: what
   * fromBinary would read, faster; undefined leaves the bytes to fromBinary
   * (anything unusual: unknown fields, a malformed message). The RPC codecs
   * use it for binary calls (Connect, gRPC, gRPC-Web).
   */
  readonly decode?: (bytes: Uint8Array) => MessageShape<I> | undefined;
  /** Writes the response message in the protobuf binary format, byte for byte what toBinary would write, faster. */
  readonly encode?: (message: MessageShape<O>) => Uint8Array;
  /** The REST GET fast path (routes without a consumer token). */
  readonly rest?: RestFastPath;
  /** The REST POST JSON path (token-authenticated routes with a JSON body). */
  readonly json?: RestJsonPath;
}

/** A service's method paths, by method local name: only its unary methods, each typed by its messages. */
export type ServicePaths<S extends DescService> = {
  readonly [K in UnaryMethodName<S>]?: MethodPaths<S["method"][K]["input"], S["method"][K]["output"]>;
};

/**
 * One unary method as a binding serves it, built from its descriptor once
 * binding() has checked the types: the transport reads nothing else.
 */
export interface BoundMethod {
  readonly desc: DescMethod;
  /** The implementation's method, bound to it; undefined when the implementation lacks it. */
  readonly call: ((req: Message, ctx: HandlerContext) => unknown) | undefined;
  readonly decode: ((bytes: Uint8Array) => Message | undefined) | undefined;
  readonly encode: ((message: Message) => Uint8Array) | undefined;
  readonly rest: RestFastPath | undefined;
  readonly json: RestJsonPath | undefined;
  /**
   * The method's `answers_at_once` proto option: the service can answer it
   * without waiting (from memory, or a warm function), so its calls are
   * batched per loop turn on every protocol.
   */
  readonly answersAtOnce: boolean;
  /** The method's REST binding: its google.api.http rule and the rule's additional bindings (none: no REST route). */
  readonly httpRules: readonly HttpRule[];
}

export interface ServiceBinding {
  readonly service: DescService;
  /** The implementation, as given to binding(). */
  readonly impl: object;
  /** Every unary method of the service, by local name. */
  readonly methods: ReadonlyMap<string, BoundMethod>;
  /** Adds the service to connect-es's router (Connect GETs, streaming calls, the connect-node pipeline). */
  mount(router: ConnectRouter): void;
}

/** A method's paths with the message types erased (binding() checked them against the method). */
interface ErasedPaths {
  readonly decode?: (bytes: Uint8Array) => Message | undefined;
  readonly encode?: (message: never) => Uint8Array;
  readonly rest?: RestFastPath;
  readonly json?: RestJsonPath;
}

/**
 * Binds an implementation to its service: connect-es's ServiceImpl type
 * checks that it is one of that service, and `paths` may name only the
 * service's unary methods, with codecs of their own messages. A method with
 * a REST fast path or JSON path answers at once, so it must declare the
 * `answers_at_once` option.
 */
export function binding<S extends DescService>(service: S, impl: ServiceImpl<S>, paths: ServicePaths<S> = {}): ServiceBinding {
  const byName: Readonly<Record<string, ErasedPaths | undefined>> = paths;
  const fns: Readonly<Record<string, unknown>> = impl;
  const methods = new Map<string, BoundMethod>();
  for (const desc of service.methods) {
    if (desc.methodKind !== "unary") {
      if (hasOption(desc, http)) throw new Error(`${service.typeName}.${desc.name}: only unary methods can have REST routes`);
      continue;
    }
    const p = byName[desc.localName];
    const rule = hasOption(desc, http) ? getOption(desc, http) : undefined;
    const answersAtOnce = getOption(desc, answers_at_once);
    if ((p?.rest || p?.json) && !answersAtOnce) throw new Error(`${service.typeName}.${desc.name} has a fast path: its proto must declare answers_at_once`);
    const fn = fns[desc.localName];
    methods.set(desc.localName, {
      desc,
      call: typeof fn === "function" ? (fn.bind(impl) as BoundMethod["call"]) : undefined,
      decode: p?.decode,
      // Called only with this method's response message (the dispatcher's encodeBinary).
      encode: p?.encode as BoundMethod["encode"],
      rest: p?.rest,
      json: p?.json,
      answersAtOnce,
      httpRules: rule ? [rule, ...rule.additionalBindings] : [],
    });
  }
  return { service, impl, methods, mount: (router) => void router.service(service, impl) };
}

/** A raw answer (files), written as is. */
export interface RawAnswer {
  status: number;
  headers: Readonly<Record<string, string>>;
  body?: NodeJS.ReadableStream | Uint8Array | string;
}

/** A route of the public listener outside the services (media files); what it throws is written in `iface`'s envelope. */
export interface RawRoute {
  method: "GET" | "POST";
  /** With :params, e.g. /media/:appKey/cms/media/:fileId */
  path: string;
  iface: "platform" | "cms";
  handle(req: { params: Readonly<Record<string, string>>; query?: Readonly<Record<string, string | string[] | undefined>>; headers: RequestHeaders }): Promise<RawAnswer>;
}

/**
 * An HTTP/1.1 Upgrade on the public listener (WebSocket), taken off the
 * server's 'upgrade' event before Fastify: the route owns the socket from
 * then on (it answers or destroys it).
 */
export interface UpgradeRoute {
  /** The exact path (the query is ignored). */
  path: string;
  handle(req: IncomingMessage, socket: Duplex, head: Buffer): void;
}

/** The realtime gateway's state at a scrape (pulsebase_realtime_*). */
export interface RealtimeStats {
  /** Open connections by transport (websocket, sse, stream). */
  connections: Record<string, number>;
  subscriptions: number;
  channels: number;
  /** Presence members of channels with a subscriber here (all processes' members). */
  presenceMembers: number;
  /** Messages written to connections since start. */
  delivered: number;
  /** Messages not delivered since start, by reason (slow_consumer, rate_limited, too_large, ...). */
  dropped: Record<string, number>;
  /** Connections refused or closed by the server since start, by reason. */
  closed: Record<string, number>;
  /** Table changes delivered since start (also counted in delivered). */
  changes?: number;
  /** Capture (commit) to delivery of the last table change delivered, seconds. */
  changeLagSeconds?: number;
}

/** A durable queue's gauges (pulsebase_queue_*). */
export interface QueueStatsSource {
  readonly backend: string;
  stats(): Promise<{ lag: number; inFlight: number; deadLetters: number }>;
}

export interface IsolateStats {
  total: number;
  idle: number;
  keys: number;
  waiting: number;
  heapBytes: number;
  /** Per application holding isolates or waiting for one (docs/functions-operator.md, "Sharing the isolates"). */
  apps?: Array<{ app: number; busy: number; isolates: number; heapBytes: number; waiting: number }>;
  /** Isolates disposed after a run for keeping more heap than the threshold, since start. */
  disposedOverHeap?: number;
}

/** The engine pool's and the remote executor's scheduling state (pulsebase_engine_*, pulsebase_remote_db_*). */
export interface EngineMetricsSource {
  engines(): {
    processes: number;
    busy: number;
    starting: number;
    queued: number;
    running: number;
    owners: Array<{ owner: number | string; queued: number; running: number }>;
    refused: Record<string, number>;
    restarts: Record<string, number>;
  };
  remote(): { queued: number; running: number; refused: Record<string, number> };
}

/** What the server reads at each scrape (src/server/metrics.ts). */
export interface ModuleGauges {
  /** By queue label (analytics, function-events). */
  queues?: Record<string, QueueStatsSource>;
  isolates?: () => IsolateStats;
  engines?: EngineMetricsSource;
  realtime?: () => RealtimeStats;
}

export interface PulsebaseModule {
  name: string;
  device?: ServiceBinding[];
  admin?: ServiceBinding[];
  /** Raw routes on the public listener (media files, ...). */
  routes?: RawRoute[];
  /** HTTP/1.1 Upgrade routes of the public listener (the realtime WebSocket). */
  upgrades?: UpgradeRoute[];
  /**
   * The public listener starts closing: end long-lived answers (WebSockets,
   * event streams) now, or its close would wait for them.
   */
  closing?(): void;
  gauges?: ModuleGauges;
  /** Host APIs functions reach as ctx.<name> (docs/functions-internals.md, "Host capabilities"); the server hands every module's to the functions module. */
  hostCapabilities?: HostCapability[];
  start?(): Promise<void>;
  stop?(): Promise<void>;
}
