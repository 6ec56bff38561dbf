// The protobuf binary wire format, for the services' hand-written codecs of
// their hottest messages (the database's QueryRequest and QueryResponse, the
// functions' HttpRequest and HttpResponse): the bytes @bufbuild/protobuf's
// toBinary writes and what its fromBinary reads, without its reflection,
// which costs more than the rest of a small call's encoding
// (docs/benchmarks.md). Readers give up on anything unusual by throwing
// NOT_SIMPLE, and their callers leave those bytes to fromBinary (with its
// own result or error); writers size a message first, then write it into
// one buffer.

/** Thrown by WireReader: the bytes are not the simple case; fromBinary reads them. */
export const NOT_SIMPLE = Symbol("not the simple case");

// Wire types.
export const VARINT = 0;
export const I64 = 1;
export const LEN = 2;

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

  /** A varint of at most 28 significant bits (tags, lengths, enums, bools); longer ones are left to fromBinary. */
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

/** The encoded size of a varint; a negative int32 is sign-extended to ten bytes. */
export function varintSize(n: number): number {
  if (n < 0) return 10;
  let s = 1;
  while (n >= 0x80) {
    n = Math.floor(n / 128);
    s++;
  }
  return s;
}

/** A length-delimited field of `n` bytes, tag included (tags below 16: one byte). */
export function lenSize(n: number): number {
  return 1 + varintSize(n) + n;
}

/** A string field, tag included. */
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

/** The tag and length of a length-delimited field whose `size` bytes follow. */
export function writeHead(b: Buffer, o: number, field: number, size: number): number {
  b[o++] = (field << 3) | LEN;
  return writeVarint(b, o, size);
}

export function writeStr(b: Buffer, o: number, field: number, s: string): number {
  const n = Buffer.byteLength(s, "utf8");
  o = writeHead(b, o, field, n);
  return o + b.write(s, o, n, "utf8");
}

export function writeBytes(b: Buffer, o: number, field: number, bytes: Uint8Array): number {
  o = writeHead(b, o, field, bytes.byteLength);
  b.set(bytes, o);
  return o + bytes.byteLength;
}
