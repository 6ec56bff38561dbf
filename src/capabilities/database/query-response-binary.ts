// QueryResponse in the protobuf binary format, written directly: the bytes
// @bufbuild/protobuf's toBinary writes for the same message (fields in
// number order, implicit-presence defaults left out, a set Value oneof
// always written), at a fraction of its cost. toBinary walks every row cell
// through its reflection API; for a point read that was most of the server
// CPU of a Connect or gRPC binary answer (docs/database.md). Sizes are
// computed first, then everything is written into one buffer. The RPC
// codecs use it through the binding's binaryEncoders (src/kernel/module.ts);
// the wire helpers are src/kernel/proto-wire.ts.
import type { ListValue, Struct, Value } from "@bufbuild/protobuf/wkt";
import type { QueryResponse, StatementResult } from "../../../gen/pulsebase/platform/v1/database_pb.js";
import { I64, lenSize, strSize, VARINT, varintSize, writeHead, writeStr, writeVarint } from "../../kernel/proto-wire.js";

export function encodeQueryResponse(msg: QueryResponse): Uint8Array {
  const out = Buffer.allocUnsafe(sizeResponse(msg));
  const end = writeResponse(out, 0, msg);
  return end === out.length ? out : out.subarray(0, end);
}

function sizeResponse(m: QueryResponse): number {
  let s = 0;
  for (const r of m.results) s += lenSize(sizeResult(r));
  if (m.requestId !== "") s += strSize(m.requestId);
  return s;
}

function sizeResult(r: StatementResult): number {
  let s = 0;
  for (const c of r.columns) s += strSize(c);
  for (const row of r.rows) s += lenSize(sizeList(row));
  if (r.rowsRead !== 0) s += 1 + varintSize(r.rowsRead);
  if (r.rowsWritten !== 0) s += 1 + varintSize(r.rowsWritten);
  if (r.error !== undefined) s += strSize(r.error);
  return s;
}

function sizeList(l: ListValue): number {
  let s = 0;
  for (const v of l.values) s += lenSize(sizeValue(v));
  return s;
}

function sizeStruct(st: Struct): number {
  let s = 0;
  for (const key of Object.keys(st.fields)) s += lenSize(strSize(key) + lenSize(sizeValue(st.fields[key]!)));
  return s;
}

function sizeValue(v: Value): number {
  const k = v.kind;
  switch (k.case) {
    case "nullValue":
      return 1 + varintSize(k.value);
    case "numberValue":
      return 9;
    case "stringValue":
      return strSize(k.value);
    case "boolValue":
      return 2;
    case "structValue":
      return lenSize(sizeStruct(k.value));
    case "listValue":
      return lenSize(sizeList(k.value));
    default:
      return 0;
  }
}

function writeResponse(b: Buffer, o: number, m: QueryResponse): number {
  for (const r of m.results) o = writeResult(b, writeHead(b, o, 1, sizeResult(r)), r);
  if (m.requestId !== "") o = writeStr(b, o, 2, m.requestId);
  return o;
}

function writeResult(b: Buffer, o: number, r: StatementResult): number {
  for (const c of r.columns) o = writeStr(b, o, 1, c);
  for (const row of r.rows) o = writeList(b, writeHead(b, o, 2, sizeList(row)), row);
  if (r.rowsRead !== 0) {
    b[o++] = (3 << 3) | VARINT;
    o = writeVarint(b, o, r.rowsRead);
  }
  if (r.rowsWritten !== 0) {
    b[o++] = (4 << 3) | VARINT;
    o = writeVarint(b, o, r.rowsWritten);
  }
  if (r.error !== undefined) o = writeStr(b, o, 5, r.error);
  return o;
}

function writeList(b: Buffer, o: number, l: ListValue): number {
  for (const v of l.values) o = writeValue(b, writeHead(b, o, 1, sizeValue(v)), v);
  return o;
}

function writeStruct(b: Buffer, o: number, st: Struct): number {
  for (const key of Object.keys(st.fields)) {
    const v = st.fields[key]!;
    const vs = sizeValue(v);
    o = writeHead(b, o, 1, strSize(key) + lenSize(vs));
    o = writeStr(b, o, 1, key);
    o = writeValue(b, writeHead(b, o, 2, vs), v);
  }
  return o;
}

function writeValue(b: Buffer, o: number, v: Value): number {
  const k = v.kind;
  switch (k.case) {
    case "nullValue":
      b[o++] = (1 << 3) | VARINT;
      return writeVarint(b, o, k.value);
    case "numberValue":
      b[o++] = (2 << 3) | I64;
      b.writeDoubleLE(k.value, o);
      return o + 8;
    case "stringValue":
      return writeStr(b, o, 3, k.value);
    case "boolValue":
      b[o++] = (4 << 3) | VARINT;
      b[o++] = k.value ? 1 : 0;
      return o;
    case "structValue":
      return writeStruct(b, writeHead(b, o, 5, sizeStruct(k.value)), k.value);
    case "listValue":
      return writeList(b, writeHead(b, o, 6, sizeList(k.value)), k.value);
    default:
      return o;
  }
}
