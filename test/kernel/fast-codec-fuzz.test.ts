// The generated codecs (bin/protoc-gen-fastcodec.js, gen/fastcodec/) against
// @bufbuild/protobuf on the same input, for every message with the
// fast_codec option:
// - readers: 20,000 mutated encodings per message (bit flips, truncations,
//   inserted varints, unknown fields, wrong wire types, groups, duplicated
//   and spliced bytes, U+FEFF-led strings, "__proto__" map and Struct keys);
//   whatever the generated reader reads, fromBinary reads alike (and does not
//   refuse); the rest it leaves to fromBinary;
// - writers: random valid messages built with create(); the bytes are
//   toBinary's (both write fields in number order), and fromBinary reads
//   them back to an equal message.
// Seeded and replayable: PROTO_FUZZ_SEED=<n> runs seed n first (the failing
// seed and input are in the assertion's message).
import { create, fromBinary, toBinary, type DescField, type DescMessage, type JsonObject, type JsonValue, type Message } from "@bufbuild/protobuf";
import { ScalarType } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import * as optionsCodec from "../../gen/fastcodec/pulsebase/common/v1/options.js";
import * as analyticsCodec from "../../gen/fastcodec/pulsebase/platform/v1/analytics.js";
import * as databaseCodec from "../../gen/fastcodec/pulsebase/platform/v1/database.js";
import { HttpRequestSchema, HttpResponseSchema } from "../../gen/pulsebase/common/v1/options_pb.js";
import { EventSchema, RecordEventRequestSchema } from "../../gen/pulsebase/platform/v1/analytics_pb.js";
import { QueryRequestSchema, QueryResponseSchema } from "../../gen/pulsebase/platform/v1/database_pb.js";
import { differences, random, record, str, key, BOM, HOSTILE_KEYS } from "./proto-fuzz.js";

const SEED = Number(process.env.PROTO_FUZZ_SEED ?? 1);
const MUTATED = 20_000;
const WRITES = 4_000;

type Codec = { schema: DescMessage; decode: (b: Uint8Array) => Message | undefined; encode: (m: never) => Uint8Array };
const CODECS: Codec[] = [
  { schema: QueryRequestSchema, decode: databaseCodec.decodeQueryRequest, encode: databaseCodec.encodeQueryRequest },
  { schema: QueryResponseSchema, decode: databaseCodec.decodeQueryResponse, encode: databaseCodec.encodeQueryResponse },
  { schema: HttpRequestSchema, decode: optionsCodec.decodeHttpRequest, encode: optionsCodec.encodeHttpRequest },
  { schema: HttpResponseSchema, decode: optionsCodec.decodeHttpResponse, encode: optionsCodec.encodeHttpResponse },
  { schema: RecordEventRequestSchema, decode: analyticsCodec.decodeRecordEventRequest, encode: analyticsCodec.encodeRecordEventRequest },
  { schema: EventSchema, decode: analyticsCodec.decodeEvent, encode: analyticsCodec.encodeEvent },
];

const INT32 = [0, 1, 127, 128, 300, 16_384, 2 ** 28, 2 ** 31 - 1, -1, -128, -(2 ** 31)];
const INT64 = [0n, 1n, 127n, 128n, 2n ** 32n, 2n ** 53n + 1n, 2n ** 63n - 1n, -1n, -(2n ** 63n)];
const DOUBLES = [0, -0, 1, -1.5, 0.1, 1e300, -1e-300, Number.MAX_SAFE_INTEGER, Infinity, -Infinity, NaN];

const pick = <T>(r: () => number, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;

function json(r: () => number, depth: number): JsonValue {
  switch (Math.floor(r() * (depth > 2 ? 4 : 6))) {
    case 0: return null;
    case 1: return pick(r, DOUBLES.filter((d) => Number.isFinite(d)));
    case 2: return str(r);
    case 3: return r() < 0.5;
    case 4: return Array.from({ length: Math.floor(r() * 3) }, () => json(r, depth + 1));
    default: return jsonObject(r, depth + 1);
  }
}

function jsonObject(r: () => number, depth: number): JsonObject {
  return record(Array.from({ length: Math.floor(r() * 4) }, () => [key(r), json(r, depth)])) as JsonObject;
}

function scalar(field: DescField, r: () => number, t: ScalarType | undefined): unknown {
  if (t === undefined) return r() < 0.7 ? 0 : pick(r, INT32); // an open enum: any int32
  switch (t) {
    case ScalarType.STRING: return str(r);
    case ScalarType.BYTES: return Uint8Array.from({ length: Math.floor(r() * (r() < 0.05 ? 300 : 8)) }, () => Math.floor(r() * 256));
    case ScalarType.BOOL: return r() < 0.5;
    case ScalarType.INT32: return r() < 0.3 ? 0 : pick(r, INT32);
    case ScalarType.INT64: return r() < 0.3 ? 0n : pick(r, INT64);
    case ScalarType.DOUBLE: return pick(r, DOUBLES);
  }
  throw new Error(`no generator for ${field}`);
}

/** A random valid message of any opted-in shape, from its descriptor (create(), then its fields). */
function randomMessage(desc: DescMessage, r: () => number, depth = 0): Message {
  const m = create(desc) as unknown as Record<string, unknown>;
  const deep = depth > 3;
  for (const oneof of desc.oneofs) {
    if (r() < 0.1) continue;
    // (deep down, a scalar member: the nesting ends)
    const members = deep ? oneof.fields.filter((f) => f.fieldKind !== "message") : oneof.fields;
    const f = pick(r, members);
    m[oneof.localName] = { case: f.localName, value: value(f, r, depth) };
  }
  for (const f of desc.fields) {
    if (f.oneof) continue;
    switch (f.fieldKind) {
      case "list":
        m[f.localName] = deep ? [] : Array.from({ length: Math.floor(r() * 4) }, () => (f.listKind === "message" ? randomMessage(f.message, r, depth + 1) : scalar(f, r, f.scalar)));
        break;
      case "map": {
        const entries: [string, unknown][] = deep ? [] : Array.from({ length: Math.floor(r() * 4) }, () => [key(r), f.mapKind === "message" ? randomMessage(f.message, r, depth + 1) : scalar(f, r, f.mapKind === "enum" ? undefined : f.scalar)]);
        // Entries as own properties, "__proto__" included (as fromBinary makes them).
        for (const [k, v] of entries) Object.defineProperty(m[f.localName] as object, k, { value: v, writable: true, enumerable: true, configurable: true });
        break;
      }
      default:
        if (f.fieldKind === "message" && (deep || r() < 0.2)) break;
        if (f.presence !== 2 && f.fieldKind !== "message" && r() < 0.5) break; // an optional scalar left unset
        m[f.localName] = value(f, r, depth);
    }
  }
  return m as unknown as Message;
}

function value(f: DescField, r: () => number, depth: number): unknown {
  if (f.fieldKind === "message") return f.message.typeName === "google.protobuf.Struct" && f.parent.typeName !== "google.protobuf.Value" ? jsonObject(r, depth + 1) : randomMessage(f.message, r, depth + 1);
  return scalar(f, r, f.fieldKind === "enum" ? undefined : f.scalar);
}

function varint(n: bigint): number[] {
  const out: number[] = [];
  let x = BigInt.asUintN(64, n);
  while (x >= 0x80n) {
    out.push(Number(x & 0x7fn) | 0x80);
    x >>= 7n;
  }
  out.push(Number(x));
  return out;
}

function splice(b: Uint8Array, at: number, drop: number, insert: readonly number[] | Uint8Array): Uint8Array {
  const out = new Uint8Array(b.length - drop + insert.length);
  out.set(b.subarray(0, at));
  out.set(insert, at);
  out.set(b.subarray(at + drop), at + insert.length);
  return out;
}

/** One to three mutations of a valid encoding; each kind is what some reader once got wrong somewhere. */
function mutate(b: Uint8Array, r: () => number, other: Uint8Array): Uint8Array {
  for (let n = 1 + Math.floor(r() * 3); n > 0; n--) {
    const at = Math.floor(r() * (b.length + 1));
    switch (Math.floor(r() * 11)) {
      case 0: // a bit flip
        if (b.length > 0) {
          const i = Math.min(at, b.length - 1);
          b = splice(b, i, 1, [b[i]! ^ (1 << Math.floor(r() * 8))]);
        }
        break;
      case 1: // cut short
        b = b.subarray(0, Math.floor(r() * b.length));
        break;
      case 2: // a varint inserted anywhere, up to ten bytes (sometimes eleven: invalid)
        b = splice(b, at, 0, r() < 0.1 ? [...Array(10).fill(0xff), 1] : varint(pick(r, [0n, 1n, 300n, 2n ** 28n, 2n ** 35n, -1n])));
        break;
      case 3: { // an unknown field, any wire type
        const no = pick(r, [7, 15, 16, 99, 2047, 536_870_911, 0]);
        const wt = Math.floor(r() * 6);
        const payload = wt === 0 ? [1] : wt === 1 ? Array(8).fill(7) : wt === 2 ? [2, 0x41, 0x42] : wt === 5 ? Array(4).fill(9) : [];
        b = splice(b, r() < 0.5 ? b.length : at, 0, [...varint(BigInt(no) * 8n + BigInt(wt)), ...payload]);
        break;
      }
      case 4: { // a known field number with another wire type
        const no = 1 + Math.floor(r() * 7);
        const wt = Math.floor(r() * 6);
        b = splice(b, r() < 0.5 ? 0 : b.length, 0, [no * 8 + wt, ...(wt === 0 ? [5] : wt === 1 ? Array(8).fill(0) : wt === 2 ? [1, 0x30] : wt === 5 ? Array(4).fill(0) : [])]);
        break;
      }
      case 5: // a group: start and end tags (fromBinary skips them when unknown, refuses mismatched ones)
        b = splice(b, at, 0, r() < 0.5 ? [0x0b, 0x0c] : [0x13, 0x08, 0x01, 0x14]);
        break;
      case 6: // the message twice (repeated fields append, messages merge)
        b = splice(b, b.length, 0, b);
        break;
      case 7: // another message's bytes spliced in
        b = splice(b, at, 0, other.subarray(0, Math.floor(r() * other.length)));
        break;
      case 8: { // a U+FEFF-led string in field 1..4 (a string, a map entry, a message or an int for the schemas here)
        const s = Buffer.from(BOM + pick(r, ["", "SELECT 1", BOM, "é"]), "utf8");
        b = splice(b, r() < 0.7 ? b.length : at, 0, [(1 + Math.floor(r() * 4)) * 8 + 2, s.length, ...s]);
        break;
      }
      case 9: { // a map or Struct entry whose key is "__proto__" (or another inherited name)
        const k = Buffer.from(pick(r, HOSTILE_KEYS), "utf8");
        const v = r() < 0.5 ? [0x12, 1, 0x76] : [0x12, 2, 0x20, 1]; // a string "v", or a Value {bool_value: true}
        const entry = [0x0a, k.length, ...k, ...v];
        b = splice(b, r() < 0.7 ? b.length : at, 0, [(1 + Math.floor(r() * 4)) * 8 + 2, entry.length, ...entry]);
        break;
      }
      default: // a byte replaced
        if (b.length > 0) b = splice(b, Math.min(at, b.length - 1), 1, [Math.floor(r() * 256)]);
    }
  }
  return b;
}

const hex = (b: Uint8Array) => Buffer.from(b).toString("hex");

describe.each(CODECS.map((c) => [c.schema.typeName, c] as const))("%s: the generated codec against protobuf-es", (_name, c) => {
  it(`reads what fromBinary reads: ${MUTATED} mutated encodings (PROTO_FUZZ_SEED=${SEED})`, () => {
    const r = random(SEED * 7919 + c.schema.typeName.length);
    // Small inputs (a mutation's effect is not buried in kilobytes of rows), of every shape.
    const bases: Uint8Array[] = [];
    while (bases.length < 48) {
      const b = toBinary(c.schema, randomMessage(c.schema, r));
      if (b.length <= 400) bases.push(b);
    }
    // Unmutated: read by the generated reader, not left to fromBinary.
    for (const b of bases) expect(differences(c.decode(b), fromBinary(c.schema, b)), hex(b)).toEqual([]);
    let fast = 0;
    let refused = 0;
    for (let i = 0; i < MUTATED; i++) {
      const bytes = mutate(pick(r, bases), r, pick(r, bases));
      const got = c.decode(bytes);
      let want: Message | undefined;
      try {
        want = fromBinary(c.schema, bytes);
      } catch {
        refused++;
      }
      if (got === undefined) continue;
      fast++;
      // (what it reads, fromBinary reads alike: same prototypes, own keys, strings, bytes)
      if (want === undefined) expect.fail(`PROTO_FUZZ_SEED=${SEED} input ${i}: read ${hex(bytes)}, which fromBinary refuses`);
      const diff = differences(got, want);
      if (diff.length > 0) expect(diff, `PROTO_FUZZ_SEED=${SEED} input ${i}: ${hex(bytes)}`).toEqual([]);
    }
    // Both sides exercised: inputs read fast, and inputs fromBinary refuses.
    expect(fast).toBeGreaterThan(MUTATED / 20);
    expect(refused).toBeGreaterThan(MUTATED / 20);
  });

  it(`writes the bytes toBinary writes: ${WRITES} random messages (PROTO_FUZZ_SEED=${SEED})`, () => {
    const r = random(SEED * 104_729 + c.schema.typeName.length);
    for (let i = 0; i < WRITES; i++) {
      const msg = randomMessage(c.schema, r);
      // Sometimes fields fromBinary kept as unknown: toBinary writes them after the known ones.
      if (r() < 0.1) msg.$unknown = [{ no: 99, wireType: 0, data: Uint8Array.of(1) }, { no: 100, wireType: 2, data: Uint8Array.of(1, 0x41) }];
      const got = c.encode(msg as never);
      const want = toBinary(c.schema, msg);
      if (hex(got) !== hex(want)) expect(hex(got), `PROTO_FUZZ_SEED=${SEED} message ${i}`).toBe(hex(want));
      // (read from a plain Uint8Array: from a Buffer, fromBinary's bytes would be Buffers)
      const back = fromBinary(c.schema, new Uint8Array(got));
      const diff = differences(back, fromBinary(c.schema, want));
      if (diff.length > 0) expect(diff).toEqual([]);
      // (deep equality with what was built: toEqual only where the cheaper comparisons passed)
      if (differences(back, msg).length > 0) expect(back).toEqual(msg);
    }
  });
});

describe("int64 fields", () => {
  it("are written as toBinary writes them whether create() left a bigint, a number or a string", () => {
    for (const id of [0, 1, -1, 2 ** 53 - 1, "0", "-9223372036854775808", 5n] as const) {
      const msg = create(EventSchema, { id: id as bigint, name: "e" });
      expect(hex(analyticsCodec.encodeEvent(msg)), String(id)).toBe(hex(toBinary(EventSchema, msg)));
    }
  });

  it("are read as fromBinary reads them, ten-byte and overlong varints included", () => {
    for (const v of [[0x08, ...Array(9).fill(0xff), 0x01], [0x08, ...Array(9).fill(0xff), 0x7f], [0x08, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00]]) {
      const b = Uint8Array.from(v);
      expect(analyticsCodec.decodeEvent(b)).toEqual(fromBinary(EventSchema, b));
    }
  });
});

describe("depth", () => {
  it("leaves a message nested beyond fromBinary's recursion limit to fromBinary (and its error)", () => {
    // A Value holding a list holding a Value ... 60 times: 121 messages deep.
    let b = Uint8Array.of(0x20, 0x01);
    for (let i = 0; i < 60; i++) {
      const list = Uint8Array.from([0x0a, ...varint(BigInt(b.length)), ...b]);
      b = Uint8Array.from([0x32, ...varint(BigInt(list.length)), ...list]);
    }
    const req = Uint8Array.from([0x12, ...varint(BigInt(b.length)), ...b]);
    expect(databaseCodec.decodeQueryRequest(req)).toBeUndefined();
    expect(() => fromBinary(QueryRequestSchema, req)).toThrow(/recursion/);
  });
});
