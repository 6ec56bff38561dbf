// grpc-message as the gRPC spec writes it (PROTOCOL-HTTP2.md, "Status-Message
// -> Percent-Encoded"): only bytes outside printable ASCII (0x20-0x7E) and "%"
// are percent-encoded. connect-node encodes with encodeURIComponent, so grpc-js
// and grpcurl would show "%3A" and "%2C" in error messages; the responses of
// gRPC and gRPC-Web calls are re-encoded on their way out.
import type { FastifyInstance } from "fastify";

const GRPC_MESSAGE = "grpc-message";
const TRAILER_FLAG = 0x80;
const GRPC_TYPE = /^\s*application\/grpc/i;
const GRPC_WEB_TYPE = /^\s*application\/grpc-web/i;

/** Percent-encodes the UTF-8 bytes of `message` outside 0x20-0x7E, and "%". */
export function encodeGrpcMessage(message: string): string {
  if (/^[\x20-\x24\x26-\x7e]*$/.test(message)) return message;
  let out = "";
  for (const byte of Buffer.from(message, "utf8")) {
    out += byte >= 0x20 && byte <= 0x7e && byte !== 0x25 ? String.fromCharCode(byte) : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

/** connect-node's encodeURIComponent form -> the spec's. */
function reencode(value: string): string {
  try {
    return encodeGrpcMessage(decodeURIComponent(value));
  } catch {
    return value;
  }
}

function fixHeaders<T>(headers: T): T {
  if (headers && typeof headers === "object" && !Array.isArray(headers)) {
    const h = headers as Record<string, unknown>;
    if (typeof h[GRPC_MESSAGE] === "string") h[GRPC_MESSAGE] = reencode(h[GRPC_MESSAGE]);
  }
  return headers;
}

/** A gRPC-Web trailer frame (flag 0x80, length, "key: value\r\n" lines) with grpc-message re-encoded. */
function fixTrailerFrame(chunk: Uint8Array): Uint8Array {
  if (chunk.length < 5 || chunk[0] !== TRAILER_FLAG) return chunk;
  const buf = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  if (buf.readUInt32BE(1) !== buf.length - 5) return chunk;
  const text = buf.toString("latin1", 5);
  const fixed = text.replace(/^(grpc-message:\s*)(.*)$/im, (_m, key: string, value: string) => key + reencode(value));
  if (fixed === text) return chunk;
  const body = Buffer.from(fixed, "latin1");
  const head = Buffer.alloc(5);
  head[0] = TRAILER_FLAG;
  head.writeUInt32BE(body.length, 1);
  return Buffer.concat([head, body]);
}

/**
 * Re-encodes grpc-message in the headers (trailers-only answers), trailers
 * (gRPC) and trailer frames (gRPC-Web) of the app's gRPC responses. Other
 * requests are left alone after one content-type check.
 */
export function grpcMessageEncoding(app: FastifyInstance): void {
  app.addHook("onRequest", (req, reply, done) => {
    const type = req.headers["content-type"];
    // (media types are case-insensitive: "APPLICATION/GRPC-WEB" is gRPC-Web too)
    if (typeof type === "string" && GRPC_TYPE.test(type)) {
      const res = reply.raw as unknown as {
        writeHead(status: number, ...rest: unknown[]): unknown;
        addTrailers(t: unknown): void;
        write(chunk: unknown, ...rest: unknown[]): boolean;
      };
      const { writeHead, addTrailers, write } = res;
      res.writeHead = (status: number, ...rest: unknown[]) => writeHead.call(res, status, ...rest.map(fixHeaders));
      res.addTrailers = (t: unknown) => addTrailers.call(res, fixHeaders(t));
      if (GRPC_WEB_TYPE.test(type)) {
        res.write = (chunk: unknown, ...rest: unknown[]) => write.call(res, chunk instanceof Uint8Array ? fixTrailerFrame(chunk) : chunk, ...rest);
      }
    }
    done();
  });
}
