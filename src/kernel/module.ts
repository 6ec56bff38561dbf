// What a capability contributes to the server, in one definition: Connect
// services for the device (public) and operator (admin) listeners with their
// REST fast paths, raw GET routes, gauges, and background work that starts
// and stops with the process. Protocol-free: the transport (src/transport)
// turns fast paths, raw routes and kNotModified into HTTP.
import type { DescService } from "@bufbuild/protobuf";
import { createContextKey, type ServiceImpl } from "@connectrpc/connect";
import type { HostCapability } from "./host-capability.js";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyImpl = Record<string, (req: any, ctx: any) => any>;

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

/**
 * Writes a method's response message in the protobuf binary format, byte for
 * byte what toBinary would write, faster (the RPC codecs use it for binary
 * answers: Connect, gRPC, gRPC-Web).
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type BinaryEncoder = (message: any) => Uint8Array;

/**
 * Reads a method's request message from the protobuf binary format: what
 * fromBinary would read, faster; undefined leaves the bytes to fromBinary
 * (anything unusual: unknown fields, a malformed message).
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type BinaryDecoder = (bytes: Uint8Array) => any;

export interface ServiceBinding {
  service: DescService;
  impl: AnyImpl;
  /** REST GET fast paths, by method local name. */
  fastPaths?: Readonly<Record<string, RestFastPath>>;
  /** REST POST JSON paths, by method local name. */
  jsonPaths?: Readonly<Record<string, RestJsonPath>>;
  /** Binary encoders of response messages, by method local name. */
  binaryEncoders?: Readonly<Record<string, BinaryEncoder>>;
  /** Binary decoders of request messages, by method local name. */
  binaryDecoders?: Readonly<Record<string, BinaryDecoder>>;
}

/** Binds an implementation to its service; connect-es checks that it is one of that service. */
export function binding<S extends DescService>(
  service: S,
  impl: ServiceImpl<S>,
  paths?: {
    fastPaths?: Partial<Record<keyof ServiceImpl<S>, RestFastPath>>;
    jsonPaths?: Partial<Record<keyof ServiceImpl<S>, RestJsonPath>>;
    binaryEncoders?: Partial<Record<keyof ServiceImpl<S>, BinaryEncoder>>;
    binaryDecoders?: Partial<Record<keyof ServiceImpl<S>, BinaryDecoder>>;
  },
): ServiceBinding {
  return { service, impl: impl as unknown as AnyImpl, ...(paths as Pick<ServiceBinding, "fastPaths" | "jsonPaths" | "binaryEncoders" | "binaryDecoders">) };
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
  handle(req: { params: Readonly<Record<string, string>>; headers: RequestHeaders }): Promise<RawAnswer>;
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
}

export interface PulsebaseModule {
  name: string;
  device?: ServiceBinding[];
  admin?: ServiceBinding[];
  /** Raw routes on the public listener (media files, ...). */
  routes?: RawRoute[];
  gauges?: ModuleGauges;
  /** Host APIs functions reach as ctx.<name> (docs/functions-internals.md, "Host capabilities"); the server hands every module's to the functions module. */
  hostCapabilities?: HostCapability[];
  start?(): Promise<void>;
  stop?(): Promise<void>;
}
