// Length-prefixed frames of gRPC and gRPC-Web (a flags byte, a 4-byte
// big-endian length, the data): the one request message of a unary call
// read out of the whole body, with connect-es's checks and error texts
// (protocol/envelope.js, async-iterable.js, invoke-implementation.js), and
// the answer's frames.
import { Code, ConnectError } from "@connectrpc/connect";
import type { Message } from "@bufbuild/protobuf";
import { parseMessage, type Negotiated } from "./codec.js";
import type { UnaryMethod } from "../call/dispatcher.js";

/** Set on a frame whose data is compressed. */
export const COMPRESSED_FLAG = 0b00000001;

/**
 * The single message of a unary request body. A frame flagged `endFlag`
 * (gRPC-Web's trailers) carries no message: as connect-es's
 * transformParseEnvelope, it is decompressed like any frame and then
 * skipped, so a body of such frames alone has no message (unimplemented)
 * and one after the message changes nothing. A promise only when a frame
 * is compressed.
 */
export function readUnaryEnvelope(
  m: UnaryMethod,
  n: Negotiated,
  body: Uint8Array,
  readMaxBytes: number,
  endFlag?: number,
): Message | Promise<Message> {
  const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  let off = 0;
  // The next complete frame, read as connect-es's envelope reader yields them.
  const next = (): { flags: number; data: Uint8Array } | undefined => {
    if (off >= body.byteLength) return undefined;
    if (body.byteLength - off < 5) throw incomplete();
    const flags = view.getUint8(off);
    const length = view.getUint32(off + 1);
    if (length > readMaxBytes) throw new ConnectError(`message size ${length} is larger than configured readMaxBytes ${readMaxBytes}`, Code.ResourceExhausted);
    if (body.byteLength - off - 5 < length) throw incomplete();
    const data = body.subarray(off + 5, off + 5 + length);
    off += 5 + length;
    return { flags, data };
  };
  // The next message (parsed), or undefined when the body has no more.
  const pull = (): Message | undefined | Promise<Message | undefined> => {
    for (;;) {
      const f = next();
      if (!f) return undefined;
      const end = endFlag !== undefined && (f.flags & endFlag) === endFlag;
      if ((f.flags & COMPRESSED_FLAG) !== 0) {
        if (!n.request) throw new ConnectError("received compressed envelope, but do not know how to decompress", Code.Internal);
        return n.request.decompress(f.data, readMaxBytes).then((d) => (end ? pull() : parseMessage(m, n.binary, d, readMaxBytes)));
      }
      if (!end) return parseMessage(m, n.binary, f.data, readMaxBytes);
    }
  };
  // A second message is read (and parsed) before it is refused, as connect-es does.
  const rest = (first: Message | undefined): Message | Promise<Message> => {
    if (!first) throw new ConnectError("protocol error: missing input message for unary method", Code.Unimplemented);
    const second = pull();
    if (second instanceof Promise) return second.then((s) => (s ? extra() : first));
    return second ? extra() : first;
  };
  const first = pull();
  return first instanceof Promise ? first.then(rest) : rest(first);
}

function extra(): never {
  throw new ConnectError("protocol error: received extra input message for unary method", Code.Unimplemented);
}

function incomplete(): ConnectError {
  return new ConnectError("protocol error: incomplete envelope", Code.InvalidArgument);
}

/** One frame, compressed when the answer is compressed and the data is large enough. */
export function frame(flags: number, data: Uint8Array, n: Negotiated, minBytes: number): Uint8Array | Promise<Uint8Array> {
  if (n.response && data.byteLength >= minBytes) return n.response.compress(data).then((z) => encode(flags | COMPRESSED_FLAG, z));
  return encode(flags, data);
}

function encode(flags: number, data: Uint8Array): Uint8Array {
  const out = Buffer.allocUnsafe(data.byteLength + 5);
  out[0] = flags;
  out.writeUInt32BE(data.byteLength, 1);
  out.set(data, 5);
  return out;
}
