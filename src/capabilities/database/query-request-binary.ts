// QueryRequest read from the protobuf binary format directly: the message
// @bufbuild/protobuf's fromBinary reads from the same bytes, at a fraction
// of its cost (its reflection walks every Value of the parameters). Anything
// it does not expect (an unknown field, a oneof or field given twice, a
// truncated message) makes it return undefined, and fromBinary reads the
// bytes instead, with its own result or error (docs/database.md). The RPC
// codecs use it through the binding's binaryDecoders (src/kernel/module.ts).
import type { ListValue, Struct, Value } from "@bufbuild/protobuf/wkt";
import type { QueryRequest } from "../../../gen/pulsebase/platform/v1/database_pb.js";

/** Thrown inside: the bytes are left to fromBinary. */
const OTHER = Symbol("not the simple case");
// fromBinary refuses invalid UTF-8: such bytes are left to it (and its error).
const utf8 = new TextDecoder("utf-8", { fatal: true });

// Wire types.
const VARINT = 0;
const I64 = 1;
const LEN = 2;

class Reader {
  pos = 0;
  private readonly view: DataView;
  private readonly buf: Buffer;
  constructor(readonly b: Uint8Array) {
    this.view = new DataView(b.buffer, b.byteOffset, b.byteLength);
    this.buf = Buffer.from(b.buffer, b.byteOffset, b.byteLength);
  }

  /** A varint of at most 32 significant bits (tags, lengths, enums, bools); longer ones are left to fromBinary. */
  varint(): number {
    let x = 0;
    for (let shift = 0; shift < 28; shift += 7) {
      if (this.pos >= this.b.length) throw OTHER;
      const byte = this.b[this.pos++]!;
      x |= (byte & 0x7f) << shift;
      if (byte < 0x80) return x >>> 0;
    }
    throw OTHER;
  }

  /** The end of a length-delimited field whose length comes next. */
  end(): number {
    const len = this.varint();
    const e = this.pos + len;
    if (e > this.b.length) throw OTHER;
    return e;
  }

  string(): string {
    const e = this.end();
    const start = this.pos;
    this.pos = e;
    // ASCII as is; anything else through the strict decoder.
    for (let i = start; i < e; i++) if (this.b[i]! >= 0x80) return utf8.decode(this.b.subarray(start, e));
    return this.buf.toString("latin1", start, e);
  }

  double(): number {
    if (this.pos + 8 > this.b.length) throw OTHER;
    const d = this.view.getFloat64(this.pos, true);
    this.pos += 8;
    return d;
  }
}

export function decodeQueryRequest(bytes: Uint8Array): QueryRequest | undefined {
  try {
    const r = new Reader(bytes);
    let sql = "";
    let params: Value | undefined;
    while (r.pos < bytes.length) {
      const tag = r.varint();
      if (tag === ((1 << 3) | LEN)) sql = r.string();
      else if (tag === ((2 << 3) | LEN) && params === undefined) params = value(r, r.end());
      else throw OTHER;
    }
    return params ? { $typeName: "pulsebase.platform.v1.QueryRequest", sql, params } : ({ $typeName: "pulsebase.platform.v1.QueryRequest", sql } as QueryRequest);
  } catch {
    // OTHER, or invalid UTF-8
    return undefined;
  }
}

function value(r: Reader, stop: number): Value {
  let kind: Value["kind"] = { case: undefined };
  while (r.pos < stop) {
    const tag = r.varint();
    if (kind.case !== undefined) throw OTHER;
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
        throw OTHER;
    }
  }
  if (r.pos !== stop) throw OTHER;
  return { $typeName: "google.protobuf.Value", kind };
}

function list(r: Reader, stop: number): ListValue {
  const values: Value[] = [];
  while (r.pos < stop) {
    if (r.varint() !== ((1 << 3) | LEN)) throw OTHER;
    values.push(value(r, r.end()));
  }
  if (r.pos !== stop) throw OTHER;
  return { $typeName: "google.protobuf.ListValue", values };
}

function struct(r: Reader, stop: number): Struct {
  const fields: Record<string, Value> = {};
  while (r.pos < stop) {
    if (r.varint() !== ((1 << 3) | LEN)) throw OTHER;
    const entryEnd = r.end();
    let key: string | undefined;
    let v: Value | undefined;
    while (r.pos < entryEnd) {
      const tag = r.varint();
      if (tag === ((1 << 3) | LEN) && key === undefined) key = r.string();
      else if (tag === ((2 << 3) | LEN) && v === undefined) v = value(r, r.end());
      else throw OTHER;
    }
    if (r.pos !== entryEnd || key === undefined || v === undefined) throw OTHER;
    fields[key] = v;
  }
  if (r.pos !== stop) throw OTHER;
  return { $typeName: "google.protobuf.Struct", fields };
}
