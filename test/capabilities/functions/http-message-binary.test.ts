// The generated HttpRequest reader and HttpResponse writer (bin/protoc-gen-fastcodec.js): the message
// fromBinary reads and the bytes toBinary writes, and whatever the reader
// does not expect is left to fromBinary.
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { HttpRequestSchema, HttpResponseSchema } from "../../../gen/pulsebase/common/v1/options_pb.js";
import { decodeHttpRequest, encodeHttpResponse } from "../../../gen/fastcodec/pulsebase/common/v1/options.js";

function random(seed: number) {
  let x = seed;
  return () => ((x = (x * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
}

const WORDS = ["", "n", "content-type", "x-hook-signature", "héllo ✓", "\u{1F600}", "1", "42", "a b=c&d"];

function map(r: () => number): Record<string, string> {
  const out: Record<string, string> = {};
  const n = Math.floor(r() * 5);
  for (let i = 0; i < n; i++) out[WORDS[Math.floor(r() * WORDS.length)]!] = WORDS[Math.floor(r() * WORDS.length)]! + (r() < 0.3 ? "x".repeat(200) : "");
  return out;
}

function bytes(r: () => number): Uint8Array {
  const n = r() < 0.3 ? 0 : Math.floor(r() * (r() < 0.1 ? 70_000 : 64));
  return Uint8Array.from({ length: n }, () => Math.floor(r() * 256));
}

describe("decodeHttpRequest", () => {
  it("reads what fromBinary reads, for many requests", () => {
    for (let seed = 1; seed < 300; seed++) {
      const r = random(seed);
      const msg = create(HttpRequestSchema, {
        method: ["", "GET", "POST", "PATCH"][seed % 4]!,
        pathParams: map(r),
        query: map(r),
        headers: map(r),
        body: bytes(r),
        contentType: seed % 3 === 0 ? "" : "application/json; charset=utf-8",
      });
      const wire = toBinary(HttpRequestSchema, msg);
      const got = decodeHttpRequest(wire);
      expect(got, `seed ${seed}`).toBeDefined();
      expect(got, `seed ${seed}`).toEqual(fromBinary(HttpRequestSchema, wire));
    }
  });

  it("takes map entries as fromBinary does: a missing key or value is empty, a later entry wins", () => {
    // query: an entry with only a value, then two entries for key "k"
    const wire = Buffer.from([
      0x1a, 0x03, 0x12, 0x01, 0x76, // {value: "v"}
      0x1a, 0x06, 0x0a, 0x01, 0x6b, 0x12, 0x01, 0x31, // {k: "1"}
      0x1a, 0x03, 0x0a, 0x01, 0x6b, // {k} (no value)
    ]);
    expect(decodeHttpRequest(wire)).toEqual(fromBinary(HttpRequestSchema, wire));
    expect(decodeHttpRequest(wire)!.query).toEqual({ "": "v", k: "" });
  });

  it("leaves unknown fields, truncated bytes and invalid UTF-8 to fromBinary", () => {
    const ok = toBinary(HttpRequestSchema, create(HttpRequestSchema, { method: "GET", pathParams: { slug: "hello" } }));
    expect(decodeHttpRequest(Buffer.concat([ok, Buffer.from([0x48, 0x01])]))).toBeUndefined();
    expect(decodeHttpRequest(ok.subarray(0, ok.length - 2))).toBeUndefined();
    const bad = Buffer.from([0x0a, 0x02, 0xc3, 0x28]);
    expect(decodeHttpRequest(bad)).toBeUndefined();
    expect(() => fromBinary(HttpRequestSchema, bad)).toThrow(/utf-8/);
  });
});

describe("encodeHttpResponse", () => {
  it("writes the bytes toBinary writes, for many responses", () => {
    for (let seed = 1; seed < 300; seed++) {
      const r = random(seed);
      const msg = create(HttpResponseSchema, {
        status: [0, 200, 204, 404, 500, -1, 2 ** 31 - 1][seed % 7]!,
        headers: map(r),
        body: bytes(r),
      });
      expect(Buffer.from(encodeHttpResponse(msg)), `seed ${seed}`).toEqual(Buffer.from(toBinary(HttpResponseSchema, msg)));
    }
  });
});
