// The protobuf binary wire format, for the codecs that bin/protoc-gen-fastcodec.js
// generates (gen/**/*_fastcodec.ts) for the messages carrying the
// `pulsebase.common.v1.fast_codec` option: the bytes @bufbuild/protobuf's
// toBinary writes and what its fromBinary reads, without its reflection,
// which costs more than the rest of a small call's encoding
// (docs/benchmarks.md). Readers give up on anything unusual by throwing
// NOT_SIMPLE, and their callers leave those bytes to fromBinary (with its
// own result or error); writers size a message first, then write it into
// one buffer. Tags are written by the generated code; these helpers write
// what follows a tag.
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import type { ListValue, Struct, Value } from "@bufbuild/protobuf/wkt";

/** Thrown by WireReader: the bytes are not the simple case; fromBinary reads them. */
export const NOT_SIMPLE = Symbol("not the simple case");

/** fromBinary's recursion limit: a message nested deeper is its error to report. */
export const MAX_DEPTH = 100;

/** The default of a bytes field; never written to (zero length). */
export const EMPTY_BYTES = new Uint8Array(0);

// fromBinary refuses invalid UTF-8: such bytes are left to it (and its error).
// A leading U+FEFF is text, not a byte-order mark: fromBinary keeps it, and
// a decoder that dropped it would run "\uFEFFSELECT 1" as "SELECT 1".
const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/**
 * `obj[key] = value` for a key read from the wire, as fromBinary sets map
 * and Struct entries (its setOwn): "__proto__" becomes an own data property
 * instead of replacing the object's prototype; other keys are assigned.
 */
export function setOwn<T>(obj: Record<string, T>, key: string, value: T): void {
  if (key === "__proto__") Object.defineProperty(obj, key, { value, writable: true, enumerable: true, configurable: true });
  else obj[key] = value;
}

export class WireReader {
  pos = 0;
  private readonly view: DataView;
  private readonly buf: Buffer;
  constructor(readonly b: Uint8Array) {
    this.view = new DataView(b.buffer, b.byteOffset, b.byteLength);
    this.buf = Buffer.from(b.buffer, b.byteOffset, b.byteLength);
  }

  get done(): boolean {
    return this.pos >= this.b.length;
  }

  /** A varint of at most 28 significant bits (tags, lengths, bools); longer ones are left to fromBinary. */
  varint(): number {
    let x = 0;
    for (let shift = 0; shift < 28; shift += 7) {
      if (this.pos >= this.b.length) throw NOT_SIMPLE;
      const byte = this.b[this.pos++]!;
      x |= (byte & 0x7f) << shift;
      if (byte < 0x80) return x >>> 0;
    }
    throw NOT_SIMPLE;
  }

  /** An int32 or open enum: the low 32 bits of a varint of up to ten bytes, as fromBinary's int32(). */
  int32(): number {
    const b = this.b;
    let x = 0;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= b.length) throw NOT_SIMPLE;
      const byte = b[this.pos++]!;
      // (the fifth byte gives its low four bits; the rest are beyond 32 bits)
      if (i < 4) x |= (byte & 0x7f) << (7 * i);
      else if (i === 4) x |= (byte & 0x0f) << 28;
      if (byte < 0x80) return x | 0;
    }
    throw NOT_SIMPLE;
  }

  /** An int64: the low 64 bits of a varint of up to ten bytes, as a bigint (fromBinary's int64()). */
  int64(): bigint {
    const b = this.b;
    let x = 0n;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= b.length) throw NOT_SIMPLE;
      const byte = b[this.pos++]!;
      x |= BigInt(byte & 0x7f) << BigInt(7 * i);
      if (byte < 0x80) return BigInt.asIntN(64, x);
    }
    throw NOT_SIMPLE;
  }

  /** The end of a length-delimited field whose length comes next. */
  end(): number {
    const len = this.varint();
    const e = this.pos + len;
    if (e > this.b.length) throw NOT_SIMPLE;
    return e;
  }

  string(): string {
    const e = this.end();
    const start = this.pos;
    this.pos = e;
    // ASCII as is; anything else through the strict decoder (invalid UTF-8 throws: fromBinary's case).
    for (let i = start; i < e; i++) if (this.b[i]! >= 0x80) return utf8.decode(this.b.subarray(start, e));
    return this.buf.toString("latin1", start, e);
  }

  /** A bytes field: a view of the input, as fromBinary gives it. */
  bytes(): Uint8Array {
    const e = this.end();
    const out = this.b.subarray(this.pos, e);
    this.pos = e;
    return out;
  }

  double(): number {
    if (this.pos + 8 > this.b.length) throw NOT_SIMPLE;
    const d = this.view.getFloat64(this.pos, true);
    this.pos += 8;
    return d;
  }
}

/** The encoded size of an int32 varint; a negative one is sign-extended to ten bytes. */
export function varintSize(n: number): number {
  if (n < 0) return 10;
  let s = 1;
  while (n >= 0x80) {
    n = Math.floor(n / 128);
    s++;
  }
  return s;
}

/** The two's complement of an int64 field's value (bigint, or the number or string create() may leave). */
function int64Bits(v: bigint | number | string): bigint {
  return BigInt.asUintN(64, BigInt(v));
}

/** An int64 field is written unless zero (toBinary's `value != 0`, for any of its representations). */
export function isZero64(v: bigint | number | string): boolean {
  return BigInt(v) === 0n;
}

export function int64Size(v: bigint | number | string): number {
  let x = int64Bits(v);
  let s = 1;
  while (x >= 0x80n) {
    x >>= 7n;
    s++;
  }
  return s;
}

/** A length prefix and the `n` bytes after it. */
export function lenSize(n: number): number {
  return varintSize(n) + n;
}

/** A string's length prefix and UTF-8 bytes. */
export function strSize(s: string): number {
  return lenSize(Buffer.byteLength(s, "utf8"));
}

export function writeVarint(b: Buffer, o: number, n: number): number {
  if (n < 0) {
    // A negative int32 is sign-extended to 64 bits: ten bytes.
    let x = BigInt.asUintN(64, BigInt(n));
    for (let i = 0; i < 9; i++) {
      b[o++] = Number(x & 0x7fn) | 0x80;
      x >>= 7n;
    }
    b[o++] = Number(x);
    return o;
  }
  while (n >= 0x80) {
    b[o++] = (n % 128) | 0x80;
    n = Math.floor(n / 128);
  }
  b[o++] = n;
  return o;
}

export function writeInt64(b: Buffer, o: number, v: bigint | number | string): number {
  let x = int64Bits(v);
  while (x >= 0x80n) {
    b[o++] = Number(x & 0x7fn) | 0x80;
    x >>= 7n;
  }
  b[o++] = Number(x);
  return o;
}

export function writeStr(b: Buffer, o: number, s: string): number {
  const n = Buffer.byteLength(s, "utf8");
  o = writeVarint(b, o, n);
  return o + b.write(s, o, n, "utf8");
}

export function writeBytes(b: Buffer, o: number, bytes: Uint8Array): number {
  o = writeVarint(b, o, bytes.byteLength);
  b.set(bytes, o);
  return o + bytes.byteLength;
}

export function writeDouble(b: Buffer, o: number, d: number): number {
  b.writeDoubleLE(d, o);
  return o + 8;
}

/** Fields fromBinary kept in `$unknown` (a message it read), written after the known ones as toBinary does. */
export interface UnknownFields {
  readonly no: number;
  readonly wireType: number;
  readonly data: Uint8Array;
}

export function unknownSize(u: readonly UnknownFields[]): number {
  let s = 0;
  for (const f of u) s += varintSize(((f.no << 3) | f.wireType) >>> 0) + f.data.byteLength;
  return s;
}

export function writeUnknown(b: Buffer, o: number, u: readonly UnknownFields[]): number {
  for (const f of u) {
    o = writeVarint(b, o, ((f.no << 3) | f.wireType) >>> 0);
    b.set(f.data, o);
    o += f.data.byteLength;
  }
  return o;
}

// A google.protobuf.Struct field outside Value is a JsonObject in protobuf-es
// (not a message): these convert as its wktStructToLocal and
// wktStructToReflect do, so the generated codecs read and write such a field
// through the generated Struct codec.

export function structToJson(st: Struct): JsonObject {
  const json: JsonObject = {};
  for (const k of Object.keys(st.fields)) setOwn(json, k, valueToJson(st.fields[k]!));
  return json;
}

function valueToJson(v: Value): JsonValue {
  switch (v.kind.case) {
    case "structValue":
      return structToJson(v.kind.value);
    case "listValue":
      return v.kind.value.values.map(valueToJson);
    case "nullValue":
    case undefined:
      return null;
    default:
      return v.kind.value;
  }
}

export function structFromJson(json: JsonObject): Struct {
  const st: Struct = { $typeName: "google.protobuf.Struct", fields: {} };
  if (typeof json === "object" && json !== null && !Array.isArray(json)) {
    for (const k of Object.keys(json)) setOwn(st.fields, k, valueFromJson(json[k]));
  }
  return st;
}

function valueFromJson(json: JsonValue | undefined): Value {
  const v: Value = { $typeName: "google.protobuf.Value", kind: { case: undefined } };
  switch (typeof json) {
    case "number":
      v.kind = { case: "numberValue", value: json };
      break;
    case "string":
      v.kind = { case: "stringValue", value: json };
      break;
    case "boolean":
      v.kind = { case: "boolValue", value: json };
      break;
    case "object":
      if (json === null) v.kind = { case: "nullValue", value: 0 };
      else if (Array.isArray(json)) {
        const list: ListValue = { $typeName: "google.protobuf.ListValue", values: json.map(valueFromJson) };
        v.kind = { case: "listValue", value: list };
      } else v.kind = { case: "structValue", value: structFromJson(json) };
      break;
  }
  return v;
}
