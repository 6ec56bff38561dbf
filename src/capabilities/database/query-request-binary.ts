// QueryRequest read from the protobuf binary format directly: the message
// @bufbuild/protobuf's fromBinary reads from the same bytes, at a fraction
// of its cost (its reflection walks every Value of the parameters). Anything
// it does not expect (an unknown field, a oneof or field given twice, a
// truncated message) makes it return undefined, and fromBinary reads the
// bytes instead, with its own result or error (docs/database.md). The RPC
// codecs use it through the binding's binaryDecoders (src/kernel/module.ts);
// the wire reader is src/kernel/proto-wire.ts.
import type { ListValue, Struct, Value } from "@bufbuild/protobuf/wkt";
import type { QueryRequest } from "../../../gen/pulsebase/platform/v1/database_pb.js";
import { I64, LEN, NOT_SIMPLE, setOwn, VARINT, WireReader } from "../../kernel/proto-wire.js";

export function decodeQueryRequest(bytes: Uint8Array): QueryRequest | undefined {
  try {
    const r = new WireReader(bytes);
    let sql = "";
    let params: Value | undefined;
    while (r.pos < bytes.length) {
      const tag = r.varint();
      if (tag === ((1 << 3) | LEN)) sql = r.string();
      else if (tag === ((2 << 3) | LEN) && params === undefined) params = value(r, r.end());
      else throw NOT_SIMPLE;
    }
    return params ? { $typeName: "pulsebase.platform.v1.QueryRequest", sql, params } : ({ $typeName: "pulsebase.platform.v1.QueryRequest", sql } as QueryRequest);
  } catch {
    // NOT_SIMPLE, or invalid UTF-8
    return undefined;
  }
}

function value(r: WireReader, stop: number): Value {
  let kind: Value["kind"] = { case: undefined };
  while (r.pos < stop) {
    const tag = r.varint();
    if (kind.case !== undefined) throw NOT_SIMPLE;
    switch (tag) {
      case (1 << 3) | VARINT: {
        const n = r.varint();
        // (a negative enum number is ten bytes long: not this case)
        kind = { case: "nullValue", value: n };
        break;
      }
      case (2 << 3) | I64:
        kind = { case: "numberValue", value: r.double() };
        break;
      case (3 << 3) | LEN:
        kind = { case: "stringValue", value: r.string() };
        break;
      case (4 << 3) | VARINT:
        kind = { case: "boolValue", value: r.varint() !== 0 };
        break;
      case (5 << 3) | LEN:
        kind = { case: "structValue", value: struct(r, r.end()) };
        break;
      case (6 << 3) | LEN:
        kind = { case: "listValue", value: list(r, r.end()) };
        break;
      default:
        throw NOT_SIMPLE;
    }
  }
  if (r.pos !== stop) throw NOT_SIMPLE;
  return { $typeName: "google.protobuf.Value", kind };
}

function list(r: WireReader, stop: number): ListValue {
  const values: Value[] = [];
  while (r.pos < stop) {
    if (r.varint() !== ((1 << 3) | LEN)) throw NOT_SIMPLE;
    values.push(value(r, r.end()));
  }
  if (r.pos !== stop) throw NOT_SIMPLE;
  return { $typeName: "google.protobuf.ListValue", values };
}

function struct(r: WireReader, stop: number): Struct {
  const fields: Record<string, Value> = {};
  while (r.pos < stop) {
    if (r.varint() !== ((1 << 3) | LEN)) throw NOT_SIMPLE;
    const entryEnd = r.end();
    let key: string | undefined;
    let v: Value | undefined;
    while (r.pos < entryEnd) {
      const tag = r.varint();
      if (tag === ((1 << 3) | LEN) && key === undefined) key = r.string();
      else if (tag === ((2 << 3) | LEN) && v === undefined) v = value(r, r.end());
      else throw NOT_SIMPLE;
    }
    if (r.pos !== entryEnd || key === undefined || v === undefined) throw NOT_SIMPLE;
    // (fromBinary keeps the last entry of a key; "__proto__" is a key like any other)
    setOwn(fields, key, v);
  }
  if (r.pos !== stop) throw NOT_SIMPLE;
  return { $typeName: "google.protobuf.Struct", fields };
}
