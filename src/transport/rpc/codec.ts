// What the RPC codecs (connect-codec.ts, grpc-codec.ts, grpc-web-codec.ts)
// share: the shape of a codec, the call's negotiated format, and message
// (de)serialisation with connect-es's own rules and error texts, so the
// project's codecs answer what connect-node's router answers
// (docs/architecture.md, "One request through each protocol").
import { create, fromBinary, fromJsonString, isMessage, toBinary, toJsonString, type Message } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Compression } from "@connectrpc/connect/protocol";
import { compressionBrotli, compressionGzip } from "@connectrpc/connect-node";
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http";
import type { CallContext } from "../call/call-context.js";
import type { UnaryMethod } from "../call/dispatcher.js";

/** The encodings connect-node's Fastify plugin accepts, in its order. */
export const ACCEPT_COMPRESSION: Compression[] = [compressionGzip, compressionBrotli];
/** Smaller answers are sent uncompressed (connect-es's compressMinBytes default). */
export const COMPRESS_MIN_BYTES = 1024;

/** What a codec writes to: Node's HTTP/1.1 or HTTP/2 compatibility response. */
export interface RpcResponse {
  writeHead(status: number, headers: OutgoingHttpHeaders): unknown;
  addTrailers(trailers: OutgoingHttpHeaders): void;
  end(body?: Uint8Array): unknown;
}

/** A call's format, decided from its headers before its body is read. */
export interface Negotiated {
  binary: boolean;
  /** How the request (or its frames) is compressed, if at all. */
  request: Compression | null;
  /** How the answer is compressed, if the client accepts an encoding we have. */
  response: Compression | null;
  /** A bad compression or timeout header: the answer, given before the body is read. */
  error: ConnectError | undefined;
  /** Date.now() at which the call's deadline passes. */
  deadlineAt: number | undefined;
}

export interface RpcCodec {
  /** The protocol name a service sees (HandlerContext.protocolName). */
  readonly protocol: "connect" | "grpc" | "grpc_web";
  /** The call's format, or undefined when the content type is not this protocol's. */
  negotiate(contentType: string, headers: IncomingHttpHeaders): Negotiated | undefined;
  /** The request message from the whole body. */
  read(m: UnaryMethod, n: Negotiated, body: Uint8Array, readMaxBytes: number): Message | Promise<Message>;
  /** Writes the method's answer; a promise when compressing. */
  answer(res: RpcResponse, head: OutgoingHttpHeaders, m: UnaryMethod, n: Negotiated, ctx: CallContext, output: unknown): void | Promise<void>;
  /** Writes a failure in the protocol's error form; a promise when compressing. */
  fail(res: RpcResponse, head: OutgoingHttpHeaders, n: Negotiated, ctx: CallContext | undefined, err: unknown): void | Promise<void>;
}

/** A request header as the Fetch API's Headers.get reads it (repeated values joined), or null. */
export function header(h: IncomingHttpHeaders, name: string): string | null {
  const v = h[name];
  if (v === undefined) return null;
  return Array.isArray(v) ? v.join(", ") : v;
}

export function deadlineOf(timeout: { timeoutMs?: number }): number | undefined {
  return timeout.timeoutMs === undefined ? undefined : Date.now() + timeout.timeoutMs;
}

const jsonOptions = { ignoreUnknownFields: true };

/** A request message, with connect-es's limit and error texts (protocol/serialization.js). */
export function parseMessage(m: UnaryMethod, binary: boolean, bytes: Uint8Array, readMaxBytes: number): Message {
  const desc = m.method.input;
  if (bytes.byteLength > readMaxBytes) {
    throw new ConnectError(`message size ${bytes.byteLength} is larger than configured readMaxBytes ${readMaxBytes}`, Code.ResourceExhausted);
  }
  if (binary) {
    // The service's own reader where it has one; what it leaves, fromBinary reads (with its errors).
    const fast = m.decodeBinary?.(bytes);
    if (fast !== undefined) return fast;
    try {
      return fromBinary(desc, bytes);
    } catch (e) {
      throw new ConnectError(`parse binary: ${e instanceof Error ? e.message : String(e)}`, Code.Internal);
    }
  }
  try {
    return fromJsonString(desc, Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8"), jsonOptions);
  } catch (e) {
    throw ConnectError.from(e, Code.InvalidArgument);
  }
}

const serializers = new WeakMap<UnaryMethod, ReturnType<typeof serializer>>();

/** The answer's bytes of a method, one serializer per method for every codec. */
export function serializerOf(m: UnaryMethod): ReturnType<typeof serializer> {
  let s = serializers.get(m);
  if (!s) serializers.set(m, (s = serializer(m)));
  return s;
}

/**
 * The answer's bytes. A service that answers with the very same message
 * object again (a response cache) gets its binary encoding reused: such
 * messages are never mutated once handed out.
 */
export function serializer(m: UnaryMethod): (binary: boolean, output: unknown) => Uint8Array {
  const desc = m.method.output;
  const encode = m.encodeBinary;
  const cache = new WeakMap<object, Uint8Array>();
  return (binary, output) => {
    if (binary) {
      const hit = cache.get(output as object);
      if (hit !== undefined) return hit;
    }
    const msg = isMessage(output, desc) ? output : create(desc, output as never);
    try {
      if (!binary) return Buffer.from(toJsonString(desc, msg), "utf8");
      const bytes = encode ? encode(msg) : toBinary(desc, msg);
      if (msg === output) cache.set(output as object, bytes);
      return bytes;
    } catch (e) {
      throw new ConnectError(`serialize ${binary ? "binary" : "json"}: ${e instanceof Error ? e.message : String(e)}`, Code.Internal);
    }
  };
}

/** What a codec answers for anything thrown: a ConnectError as is, else connect-es's "internal error". */
export function connectErrorOf(err: unknown): ConnectError {
  return err instanceof ConnectError ? err : new ConnectError("internal error", Code.Internal, undefined, undefined, err);
}

/**
 * Fetch Headers onto Node's outgoing header object, replacing what the reply
 * had under the same name; a name Headers gives more than once (Set-Cookie:
 * the console's Login and Logout) becomes a list, as connect-node writes it.
 */
export function putHeaders(into: OutgoingHttpHeaders, h: Headers | undefined, prefix = ""): void {
  if (!h) return;
  let last = "";
  h.forEach((value, key) => {
    const k = prefix + key;
    const prev = into[k];
    // Headers yields a repeated name's values one after another (sorted by name).
    if (k === last && prev !== undefined) into[k] = Array.isArray(prev) ? [...prev, value] : [String(prev), value];
    else into[k] = value;
    last = k;
  });
}
