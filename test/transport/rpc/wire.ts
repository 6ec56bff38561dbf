// The conformance test's own client side of the unary RPC protocols, built
// byte for byte (so two servers get identical bytes) and read back into a
// comparable observation: Connect unary (JSON and binary), gRPC and gRPC-Web,
// over HTTP/1.1 (node:http, node:https) and HTTP/2 (node:http2), with gzip
// either way. Nothing from connect-es is used to frame or parse, so the test
// sees what a third-party client sees.
import http from "node:http";
import http2 from "node:http2";
import https from "node:https";
import { gunzipSync, gzipSync } from "node:zlib";
import { fromBinary, fromJson, toBinary, toJson, type DescMessage, type JsonValue } from "@bufbuild/protobuf";
import { BinaryReader } from "@bufbuild/protobuf/wire";
import { ErrorDetailSchema } from "../../../gen/pulsebase/common/v1/error_pb.js";

export const PROTOCOLS = ["connect-json", "connect-proto", "grpc", "grpc-web"] as const;
export type Protocol = (typeof PROTOCOLS)[number];
export type HttpVersion = "h1" | "h2";

/** How the request is varied from the plain one. */
export type Variant =
  | "plain"
  | "gzip-request"
  | "gzip-response"
  | "unknown-field"
  /** A deadline (connect-timeout-ms / grpc-timeout) of `timeoutMs`. */
  | "deadline"
  /** A deadline header that is not a valid value. */
  | "bad-deadline"
  /** No credentials (the case's own headers are dropped). */
  | "no-auth"
  /** A body that does not parse: truncated JSON, a truncated field, a frame shorter than its length prefix. */
  | "malformed";

export interface WireRequest {
  path: string;
  protocol: Protocol;
  http: HttpVersion;
  variant: Variant;
  /** The request message as proto3 JSON. */
  json: JsonValue;
  input: DescMessage;
  output: DescMessage;
  headers: Record<string, string>;
  timeoutMs?: number;
}

export interface Built {
  headers: Record<string, string>;
  body: Buffer;
}

/** An unknown field for binary bodies: field 4095, varint 1 (no message here has it). */
const UNKNOWN_TAG = Buffer.from([0xf8, 0xff, 0x01, 0x01]);

function frame(payload: Buffer, compressed: boolean, flags = 0): Buffer {
  const head = Buffer.alloc(5);
  head[0] = flags | (compressed ? 1 : 0);
  head.writeUInt32BE(payload.length, 1);
  return Buffer.concat([head, payload]);
}

/** Deterministic gzip (level and header fixed), so both servers get the same bytes. */
const gzip = (b: Buffer) => gzipSync(b, { level: 6 });
/** A length-delimited field 1 that says 5 bytes and has 2. */
const TRUNCATED_FIELD = Buffer.from([0x0a, 0x05, 0x61, 0x62]);

export function build(r: WireRequest): Built {
  const msg = fromJson(r.input, r.json);
  const binary = Buffer.from(toBinary(r.input, msg));
  const headers: Record<string, string> = { "user-agent": "pulsebase-conformance/1", ...(r.variant === "no-auth" ? {} : r.headers) };
  let body: Buffer;
  if (r.protocol === "connect-json" || r.protocol === "connect-proto") {
    if (r.protocol === "connect-json") {
      // The JSON the way clients write it (camelCase names), with an extra key for "unknown-field".
      const text = toJson(r.input, msg) as Record<string, JsonValue>;
      body = Buffer.from(JSON.stringify(r.variant === "unknown-field" ? { ...text, conformanceUnknownField: 1 } : text));
      if (r.variant === "malformed") body = body.subarray(0, Math.max(1, body.length - 1));
      headers["content-type"] = "application/json";
    } else {
      body = r.variant === "unknown-field" ? Buffer.concat([binary, UNKNOWN_TAG]) : r.variant === "malformed" ? TRUNCATED_FIELD : binary;
      headers["content-type"] = "application/proto";
    }
    headers["connect-protocol-version"] = "1";
    if (r.variant === "gzip-request") {
      body = gzip(body);
      headers["content-encoding"] = "gzip";
    }
    if (r.variant === "gzip-response") headers["accept-encoding"] = "gzip";
    if (r.variant === "deadline") headers["connect-timeout-ms"] = String(r.timeoutMs ?? 100);
    if (r.variant === "bad-deadline") headers["connect-timeout-ms"] = "soon";
  } else {
    const payload = r.variant === "unknown-field" ? Buffer.concat([binary, UNKNOWN_TAG]) : r.variant === "malformed" ? TRUNCATED_FIELD : binary;
    const compressed = r.variant === "gzip-request";
    body = frame(compressed ? gzip(payload) : payload, compressed);
    // gRPC-Web: the frame's length prefix promises more than the body carries
    // (gRPC: a whole frame around the truncated field).
    if (r.variant === "malformed" && r.protocol === "grpc-web") body = Buffer.concat([Buffer.from([0, 0, 0, 0, 100]), payload]);
    if (r.protocol === "grpc") {
      headers["content-type"] = "application/grpc+proto";
      headers.te = "trailers";
    } else {
      headers["content-type"] = "application/grpc-web+proto";
      headers["x-grpc-web"] = "1";
    }
    if (compressed) headers["grpc-encoding"] = "gzip";
    if (r.variant === "gzip-response") headers["grpc-accept-encoding"] = "gzip";
    if (r.variant === "deadline") headers["grpc-timeout"] = `${r.timeoutMs ?? 100}m`;
    if (r.variant === "bad-deadline") headers["grpc-timeout"] = "soon";
  }
  return { headers, body };
}

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  trailers: Record<string, string>;
  body: Buffer;
}

/** One endpoint: reused HTTP/1.1 keep-alive sockets and one HTTP/2 session. */
export class Endpoint {
  private session?: http2.ClientHttp2Session;
  private readonly agent: http.Agent;
  private readonly secure: boolean;

  constructor(readonly origin: string) {
    this.secure = origin.startsWith("https:");
    this.agent = this.secure
      ? new https.Agent({ keepAlive: true, maxSockets: 8, rejectUnauthorized: false })
      : new http.Agent({ keepAlive: true, maxSockets: 8 });
  }

  private h2(): http2.ClientHttp2Session {
    if (!this.session || this.session.closed || this.session.destroyed) {
      this.session = http2.connect(this.origin, this.secure ? { rejectUnauthorized: false } : {});
      this.session.on("error", () => undefined);
    }
    return this.session;
  }

  send(http: HttpVersion, path: string, b: Built): Promise<RawResponse> {
    return http === "h2" ? this.sendH2(path, b) : this.sendH1(path, b);
  }

  private sendH1(path: string, b: Built): Promise<RawResponse> {
    const mod = this.secure ? https : http;
    return new Promise((resolve, reject) => {
      const req = mod.request(this.origin + path, { method: "POST", agent: this.agent, headers: { ...b.headers, "content-length": String(b.body.length) } }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: flat(res.headers), trailers: flat(res.trailers), body: Buffer.concat(chunks) }));
        res.on("error", reject);
      });
      req.on("error", reject);
      req.end(b.body);
    });
  }

  private sendH2(path: string, b: Built): Promise<RawResponse> {
    return new Promise((resolve, reject) => {
      const stream = this.h2().request({ ":method": "POST", ":path": path, ...b.headers });
      let status = 0;
      let headers: Record<string, string> = {};
      let trailers: Record<string, string> = {};
      const chunks: Buffer[] = [];
      stream.on("response", (h) => {
        status = Number(h[":status"]);
        headers = flat(h);
      });
      stream.on("trailers", (t) => {
        trailers = flat(t);
      });
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("end", () => resolve({ status, headers, trailers, body: Buffer.concat(chunks) }));
      stream.on("error", reject);
      stream.end(b.body);
    });
  }

  close(): void {
    this.session?.close();
    this.agent.destroy();
  }
}

function flat(h: Record<string, string | string[] | number | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(h)) {
    if (k.startsWith(":") || v === undefined) continue;
    out[k.toLowerCase()] = Array.isArray(v) ? v.join(", ") : String(v);
  }
  return out;
}

/** What is compared: everything a client acts on, dynamic values left to the caller's normalizer. */
export interface Observation {
  status: number;
  headers: Record<string, string>;
  trailers: Record<string, string>;
  /** The response message as proto3 JSON. */
  message?: JsonValue;
  /** The error as the protocol carries it, details decoded. */
  error?: { code: string | number; message: string; details: JsonValue[] };
  /** gRPC and gRPC-Web message frames, in order, and whether each was compressed. */
  frames?: string[];
  problem?: string;
}

/** Headers that say nothing about the protocol, or vary run to run. */
const IGNORED_HEADERS = new Set(["date", "x-request-id", "content-length", "connection", "keep-alive", "transfer-encoding", "ratelimit-reset", "ratelimit-remaining"]);

function meaningful(h: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of Object.keys(h).sort()) {
    if (IGNORED_HEADERS.has(k)) continue;
    // Token lists (vary, accept-encoding) in any order.
    out[k] = k === "vary" || k.endsWith("accept-encoding") ? h[k]!.split(/,\s*/).sort().join(", ") : h[k]!;
  }
  return out;
}

function decodeDetail(type: string, value: Buffer): JsonValue {
  if (type === ErrorDetailSchema.typeName) return { type, value: toJson(ErrorDetailSchema, fromBinary(ErrorDetailSchema, value)) };
  return { type, value: value.toString("base64") };
}

/** google.rpc.Status, read by hand (no generated code for it here). */
function decodeStatus(bin: Buffer): { code: number; message: string; details: JsonValue[] } {
  const r = new BinaryReader(bin);
  const out = { code: 0, message: "", details: [] as JsonValue[] };
  while (r.pos < r.len) {
    const [no, wt] = r.tag();
    if (no === 1) out.code = r.int32();
    else if (no === 2) out.message = r.string();
    else if (no === 3) {
      const any = new BinaryReader(r.bytes());
      let type = "";
      let value = Buffer.alloc(0);
      while (any.pos < any.len) {
        const [n, w] = any.tag();
        if (n === 1) type = any.string().replace(/^type\.googleapis\.com\//, "");
        else if (n === 2) value = Buffer.from(any.bytes());
        else any.skip(w);
      }
      out.details.push(decodeDetail(type, value));
    } else r.skip(wt);
  }
  return out;
}

const STATUS_KEYS = new Set(["grpc-status", "grpc-message", "grpc-status-details-bin"]);

function parseGrpcWebTrailers(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split("\r\n")) {
    const i = line.indexOf(":");
    if (i > 0) out[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
  }
  return out;
}

function grpcError(t: Record<string, string>): Observation["error"] {
  const code = t["grpc-status"];
  if (code === undefined || code === "0") return undefined;
  const details = t["grpc-status-details-bin"] ? decodeStatus(Buffer.from(t["grpc-status-details-bin"], "base64")) : undefined;
  return { code: Number(code), message: decodeURIComponent(t["grpc-message"] ?? ""), details: details?.details ?? [] };
}

export function observe(r: WireRequest, res: RawResponse): Observation {
  const obs: Observation = { status: res.status, headers: meaningful(res.headers), trailers: meaningful(res.trailers) };
  try {
    if (r.protocol === "connect-json" || r.protocol === "connect-proto") {
      const body = res.headers["content-encoding"] === "gzip" ? gunzipSync(res.body) : res.body;
      if (res.status === 200) {
        obs.message = r.protocol === "connect-json"
          ? toJson(r.output, fromJson(r.output, JSON.parse(body.toString("utf8"))))
          : toJson(r.output, fromBinary(r.output, body));
      } else {
        const e = JSON.parse(body.toString("utf8")) as { code: string; message?: string; details?: { type: string; value: string; debug?: JsonValue }[] };
        obs.error = {
          code: e.code,
          message: e.message ?? "",
          // "debug": connect-es's JSON rendering of the detail, which `buf curl` shows.
          details: (e.details ?? []).map((d) => ({ ...(decodeDetail(d.type, Buffer.from(d.value, "base64")) as object), ...(d.debug === undefined ? {} : { debug: d.debug }) })),
        };
      }
      return obs;
    }
    // gRPC, gRPC-Web: length-prefixed frames; gRPC-Web's trailers are the last frame.
    const frames: string[] = [];
    let trailers = r.protocol === "grpc" ? { ...res.headers, ...res.trailers } : { ...res.headers };
    for (let at = 0; at < res.body.length;) {
      if (res.body.length - at < 5) throw new Error(`truncated frame header at ${at}`);
      const flags = res.body[at]!;
      const len = res.body.readUInt32BE(at + 1);
      let payload = res.body.subarray(at + 5, at + 5 + len);
      if (payload.length !== len) throw new Error(`truncated frame at ${at}`);
      at += 5 + len;
      if (flags & 1) payload = gunzipSync(payload);
      // (Lengths vary with the ids inside; the decoded message is compared.)
      if (flags & 0x80) {
        trailers = { ...trailers, ...parseGrpcWebTrailers(payload.toString("latin1")) };
      } else {
        obs.message = toJson(r.output, fromBinary(r.output, payload));
        frames.push(`message${flags & 1 ? " (gzip)" : ""}`);
      }
    }
    // A status may travel in the response headers alone ("Trailers-Only") or
    // after the message (h2 trailers, gRPC-Web's trailer frame): the gRPC
    // HTTP/2 and gRPC-Web specs allow both for an error and every client
    // reads both, so the status is compared wherever it came, as trailers.
    obs.frames = frames;
    const status: Record<string, string> = {};
    for (const [k, v] of Object.entries(trailers)) if (STATUS_KEYS.has(k) || res.headers[k] === undefined) status[k] = v;
    for (const k of STATUS_KEYS) delete obs.headers[k];
    obs.trailers = meaningful(status);
    obs.error = grpcError(trailers);
    if (obs.error) delete obs.message;
  } catch (e) {
    obs.problem = `unreadable response: ${(e as Error).message}`;
  }
  return obs;
}

/** The status a client sees: a Connect code name, or a gRPC code number as its name. */
export function outcome(o: Observation): string {
  if (o.problem) return "unreadable";
  if (!o.error) return o.status === 200 ? "ok" : `http ${o.status}`;
  return typeof o.error.code === "number" ? (GRPC_CODES[o.error.code] ?? String(o.error.code)) : o.error.code;
}

const GRPC_CODES = ["ok", "canceled", "unknown", "invalid_argument", "deadline_exceeded", "not_found", "already_exists", "permission_denied",
  "resource_exhausted", "failed_precondition", "aborted", "out_of_range", "unimplemented", "internal", "unavailable", "data_loss", "unauthenticated"];
