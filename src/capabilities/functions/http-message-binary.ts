// An HTTP trigger's messages in the protobuf binary format, for
// FunctionService.Invoke and InvokePublic over Connect, gRPC and gRPC-Web:
// HttpRequest read and HttpResponse written directly, the same message and
// bytes as fromBinary and toBinary, without their reflection (4 % of a warm
// invocation's server CPU over Connect binary, docs/benchmarks.md). Bytes
// with anything unexpected (an unknown field, a truncated message, invalid
// UTF-8) are left to fromBinary. The RPC codecs use them through the
// binding's binaryDecoders and binaryEncoders (src/kernel/module.ts).
import type { HttpRequest, HttpResponse } from "../../../gen/pulsebase/common/v1/options_pb.js";
import { lenSize, LEN, NOT_SIMPLE, setOwn, strSize, VARINT, varintSize, WireReader, writeBytes, writeHead, writeStr, writeVarint } from "../../kernel/proto-wire.js";

const EMPTY = new Uint8Array(0);

export function decodeHttpRequest(bytes: Uint8Array): HttpRequest | undefined {
  try {
    const r = new WireReader(bytes);
    const msg: HttpRequest = { $typeName: "pulsebase.common.v1.HttpRequest", method: "", pathParams: {}, query: {}, headers: {}, body: EMPTY, contentType: "" };
    while (!r.done) {
      switch (r.varint()) {
        case (1 << 3) | LEN:
          msg.method = r.string();
          break;
        case (2 << 3) | LEN:
          mapEntry(r, msg.pathParams);
          break;
        case (3 << 3) | LEN:
          mapEntry(r, msg.query);
          break;
        case (4 << 3) | LEN:
          mapEntry(r, msg.headers);
          break;
        case (5 << 3) | LEN:
          msg.body = r.bytes();
          break;
        case (6 << 3) | LEN:
          msg.contentType = r.string();
          break;
        default:
          throw NOT_SIMPLE;
      }
    }
    return msg;
  } catch {
    // NOT_SIMPLE, or invalid UTF-8
    return undefined;
  }
}

/** One map<string, string> entry: a missing key or value is "", a later entry for a key replaces it (as fromBinary). */
function mapEntry(r: WireReader, into: Record<string, string>): void {
  const stop = r.end();
  let key = "";
  let value = "";
  while (r.pos < stop) {
    const tag = r.varint();
    if (tag === ((1 << 3) | LEN)) key = r.string();
    else if (tag === ((2 << 3) | LEN)) value = r.string();
    else throw NOT_SIMPLE;
  }
  if (r.pos !== stop) throw NOT_SIMPLE;
  // A header named "__proto__" is an entry, not the map's prototype (as fromBinary).
  setOwn(into, key, value);
}

export function encodeHttpResponse(msg: HttpResponse): Uint8Array {
  const headers = msg.headers ?? {};
  const body = msg.body ?? EMPTY;
  let size = 0;
  if (msg.status) size += 1 + varintSize(msg.status);
  for (const k in headers) size += lenSize(strSize(k) + strSize(headers[k]!));
  if (body.byteLength > 0) size += lenSize(body.byteLength);
  const b = Buffer.allocUnsafe(size);
  let o = 0;
  if (msg.status) {
    b[o++] = (1 << 3) | VARINT;
    o = writeVarint(b, o, msg.status);
  }
  for (const k in headers) {
    const v = headers[k]!;
    o = writeHead(b, o, 2, strSize(k) + strSize(v));
    o = writeStr(b, o, 1, k);
    o = writeStr(b, o, 2, v);
  }
  if (body.byteLength > 0) o = writeBytes(b, o, 3, body);
  return o === b.length ? b : b.subarray(0, o);
}
