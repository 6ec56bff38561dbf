// The generated protobuf readers (gen/fastcodec/, on src/kernel/proto-wire.ts:
// the database's QueryRequest, the functions' HttpRequest)
// against @bufbuild/protobuf's fromBinary on the same bytes (issue #28):
// strings that start with U+FEFF keep it, map and Struct keys such as
// "__proto__", "constructor" and "hasOwnProperty" are entries like any
// other, and no object's prototype changes. Random cases are seeded and
// replayable: PROTO_DIFF_SEED=<n> starts at seed n (the failing seed is in
// the assertion's message).
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import type { Struct, Value } from "@bufbuild/protobuf/wkt";
import { describe, expect, it } from "vitest";
import { HttpRequestSchema } from "../../gen/pulsebase/common/v1/options_pb.js";
import { QueryRequestSchema } from "../../gen/pulsebase/platform/v1/database_pb.js";
import { valueToJson } from "../../src/capabilities/database/proto-values.js";
import { decodeHttpRequest } from "../../gen/fastcodec/pulsebase/common/v1/options.js";
import { decodeQueryRequest } from "../../gen/fastcodec/pulsebase/platform/v1/database.js";
import { BOM, differences, HOSTILE_KEYS, random, record, str } from "./proto-fuzz.js";

const FIRST_SEED = Number(process.env.PROTO_DIFF_SEED ?? 1);
const RUNS = 400;

/** Half the time a key objects inherit or that sets their prototype, else a string. */
function key(r: () => number): string {
  return r() < 0.5 ? HOSTILE_KEYS[Math.floor(r() * HOSTILE_KEYS.length)]! : str(r);
}

function value(r: () => number, depth = 0): Value {
  const kind = ((): Value["kind"] => {
    switch (Math.floor(r() * (depth > 2 ? 4 : 6))) {
      case 0: return { case: "nullValue", value: 0 };
      case 1: return { case: "numberValue", value: r() * 1e6 };
      case 2: return { case: "stringValue", value: str(r) };
      case 3: return { case: "boolValue", value: r() < 0.5 };
      case 4: return { case: "listValue", value: { $typeName: "google.protobuf.ListValue", values: Array.from({ length: Math.floor(r() * 3) }, () => value(r, depth + 1)) } };
      default: return { case: "structValue", value: struct(r, depth + 1) };
    }
  })();
  return { $typeName: "google.protobuf.Value", kind };
}

function struct(r: () => number, depth: number): Struct {
  return { $typeName: "google.protobuf.Struct", fields: record(Array.from({ length: Math.floor(r() * 4) }, () => [key(r), value(r, depth)])) };
}

function map(r: () => number): Record<string, string> {
  return record(Array.from({ length: Math.floor(r() * 4) }, () => [key(r), str(r)]));
}

describe("the reference: fromBinary", () => {
  it("keeps a leading U+FEFF and reads a map or Struct key __proto__ as an own entry, prototypes untouched", () => {
    const req = create(HttpRequestSchema, { method: BOM + "DELETE", headers: record([["__proto__", "x"]]) });
    const http = fromBinary(HttpRequestSchema, toBinary(HttpRequestSchema, req));
    expect(http.method).toBe(BOM + "DELETE");
    expect(Object.getPrototypeOf(http.headers)).toBe(Object.prototype);
    expect(Object.getOwnPropertyDescriptor(http.headers, "__proto__")).toEqual({ value: "x", writable: true, enumerable: true, configurable: true });

    const params: Value = { $typeName: "google.protobuf.Value", kind: { case: "structValue", value: { $typeName: "google.protobuf.Struct", fields: record([["__proto__", { $typeName: "google.protobuf.Value", kind: { case: "stringValue", value: "v" } }]]) } } };
    const q = fromBinary(QueryRequestSchema, toBinary(QueryRequestSchema, create(QueryRequestSchema, { sql: BOM + "SELECT 1", params })));
    expect(q.sql).toBe(BOM + "SELECT 1");
    const fields = (q.params!.kind.value as Struct).fields;
    expect(Object.getPrototypeOf(fields)).toBe(Object.prototype);
    expect(Object.keys(fields)).toEqual(["__proto__"]);
  });
});

describe("decodeQueryRequest against fromBinary", () => {
  it("targeted: U+FEFF-led SQL and string parameters, Struct keys that objects inherit", () => {
    const v = (s: string): Value => ({ $typeName: "google.protobuf.Value", kind: { case: "stringValue", value: s } });
    const nested: Struct = { $typeName: "google.protobuf.Struct", fields: record(HOSTILE_KEYS.map((k) => [k, v(BOM + k)])) };
    const params: Value = { $typeName: "google.protobuf.Value", kind: { case: "structValue", value: { $typeName: "google.protobuf.Struct", fields: record([["__proto__", { $typeName: "google.protobuf.Value", kind: { case: "structValue", value: nested } }], [BOM + "bin", v(BOM)], ["constructor", v("c")]]) } } };
    const bytes = toBinary(QueryRequestSchema, create(QueryRequestSchema, { sql: BOM + "SELECT 1", params }));
    const got = decodeQueryRequest(bytes);
    const want = fromBinary(QueryRequestSchema, bytes);
    expect(got, "read by hand").toBeDefined();
    expect(differences(got, want)).toEqual([]);
    // (not toStrictEqual: it compares the two "constructor" entries by identity, as if they were classes)
    expect(got).toEqual(want);
    expect(got!.sql).toBe(BOM + "SELECT 1");
    // Object.prototype itself is untouched (nothing was assigned through __proto__).
    expect(Object.getPrototypeOf({})).toBe(Object.prototype);
    expect(({} as Record<string, unknown>).bin).toBeUndefined();
  });

  it(`random (seeds ${FIRST_SEED}..${FIRST_SEED + RUNS - 1})`, () => {
    for (let seed = FIRST_SEED; seed < FIRST_SEED + RUNS; seed++) {
      const r = random(seed);
      const msg = create(QueryRequestSchema, { sql: str(r), ...(r() < 0.15 ? {} : { params: value(r) }) });
      const bytes = toBinary(QueryRequestSchema, msg);
      const want = fromBinary(QueryRequestSchema, bytes);
      const got = decodeQueryRequest(bytes);
      // (the reader may leave bytes to fromBinary; those it reads it must read alike)
      if (got !== undefined) expect(differences(got, want), `PROTO_DIFF_SEED=${seed}`).toEqual([]);
      expect(got, `PROTO_DIFF_SEED=${seed}: read by hand`).toBeDefined();
    }
  });

  it("valueToJson keeps a parameter named __proto__ as a parameter", () => {
    const structOf = (fields: Record<string, Value>): Value => ({ $typeName: "google.protobuf.Value", kind: { case: "structValue", value: { $typeName: "google.protobuf.Struct", fields } } });
    const polluting = structOf({ polluted: { $typeName: "google.protobuf.Value", kind: { case: "boolValue", value: true } } });
    const bytes = toBinary(QueryRequestSchema, create(QueryRequestSchema, { sql: "SELECT :x", params: structOf(record([["__proto__", polluting]])) }));
    const params = valueToJson(decodeQueryRequest(bytes)!.params) as Record<string, unknown>;
    expect(Object.getPrototypeOf(params)).toBe(Object.prototype);
    expect(Object.keys(params)).toEqual(["__proto__"]);
    expect(params.polluted).toBeUndefined();
  });
});

describe("decodeHttpRequest against fromBinary", () => {
  it("targeted: a U+FEFF-led method, map keys that objects inherit", () => {
    const bytes = toBinary(HttpRequestSchema, create(HttpRequestSchema, {
      method: BOM + "DELETE",
      pathParams: record([["slug", BOM + "echo"], ["__proto__", "p"]]),
      query: record(HOSTILE_KEYS.map((k) => [k, BOM + k])),
      headers: record([["__proto__", "h"], ["constructor", "c"], ["hasOwnProperty", "o"], [BOM + "x", BOM]]),
      contentType: BOM + "application/json",
    }));
    const got = decodeHttpRequest(bytes);
    const want = fromBinary(HttpRequestSchema, bytes);
    expect(got, "read by hand").toBeDefined();
    expect(differences(got, want)).toEqual([]);
    expect(got).toStrictEqual(want);
    expect(got!.method).toBe(BOM + "DELETE");
    expect(Object.hasOwn(got!.headers, "__proto__")).toBe(true);
  });

  it(`random (seeds ${FIRST_SEED}..${FIRST_SEED + RUNS - 1})`, () => {
    for (let seed = FIRST_SEED; seed < FIRST_SEED + RUNS; seed++) {
      const r = random(seed);
      const msg = create(HttpRequestSchema, { method: str(r), pathParams: map(r), query: map(r), headers: map(r), body: Uint8Array.from({ length: Math.floor(r() * 8) }, () => Math.floor(r() * 256)), contentType: str(r) });
      const bytes = toBinary(HttpRequestSchema, msg);
      const got = decodeHttpRequest(bytes);
      expect(got, `PROTO_DIFF_SEED=${seed}: read by hand`).toBeDefined();
      expect(differences(got, fromBinary(HttpRequestSchema, bytes)), `PROTO_DIFF_SEED=${seed}`).toEqual([]);
    }
  });
});
