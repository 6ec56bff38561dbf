// The generated QueryRequest reader (bin/protoc-gen-fastcodec.js) reads exactly what fromBinary reads,
// and leaves whatever it does not expect to fromBinary.
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { QueryRequestSchema, QueryResponseSchema, StatementResultSchema } from "../../../gen/pulsebase/platform/v1/database_pb.js";
import { response } from "../../../src/capabilities/database/platform-service.js";
import { jsonToValue, rowToListValue } from "../../../src/capabilities/database/proto-values.js";
import { decodeQueryRequest } from "../../../gen/fastcodec/pulsebase/platform/v1/database.js";

function random(seed: number) {
  let x = seed;
  return () => ((x = (x * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
}

function json(r: () => number, depth = 0): unknown {
  switch (Math.floor(r() * (depth > 2 ? 4 : 6))) {
    case 0: return null;
    case 1: return r() < 0.5 ? Math.floor(r() * 2 ** 52) - 2 ** 51 : r() * 1e9;
    case 2: return r() < 0.5 ? `plain ${Math.floor(r() * 1000)}` : "héllo ✓ \u{1F600}";
    case 3: return r() < 0.5;
    case 4: return Array.from({ length: Math.floor(r() * 4) }, () => json(r, depth + 1));
    default: return Object.fromEntries(Array.from({ length: Math.floor(r() * 4) }, (_, i) => [`k${i}`, json(r, depth + 1)]));
  }
}

describe("decodeQueryRequest", () => {
  it("reads what fromBinary reads, for many shapes of parameters", () => {
    for (let seed = 1; seed < 400; seed++) {
      const r = random(seed);
      const msg = create(QueryRequestSchema, { sql: seed % 5 === 0 ? "" : `SELECT * FROM t WHERE id = ? -- ${seed} ✓`, ...(seed % 7 === 0 ? {} : { params: jsonToValue(json(r)) }) });
      const bytes = toBinary(QueryRequestSchema, msg);
      const got = decodeQueryRequest(bytes);
      expect(got, `seed ${seed}`).toEqual(fromBinary(QueryRequestSchema, bytes));
      expect(got).toBeDefined();
    }
  });

  it("leaves unknown fields, a field given twice, truncated bytes and invalid UTF-8 to fromBinary", () => {
    const ok = toBinary(QueryRequestSchema, create(QueryRequestSchema, { sql: "SELECT 1", params: jsonToValue([1]) }));
    // an unknown field 9 (fromBinary keeps it in $unknown)
    expect(decodeQueryRequest(Buffer.concat([ok, Buffer.from([0x48, 0x01])]))).toBeUndefined();
    // the params message given twice (fromBinary merges them)
    expect(decodeQueryRequest(Buffer.concat([ok, ok]))).toBeUndefined();
    // cut short
    expect(decodeQueryRequest(ok.subarray(0, ok.length - 2))).toBeUndefined();
    // invalid UTF-8, which fromBinary refuses
    const bad = Buffer.from([0x0a, 0x02, 0xc3, 0x28]);
    expect(decodeQueryRequest(bad)).toBeUndefined();
    expect(() => fromBinary(QueryRequestSchema, bad)).toThrow(/utf-8/);
  });
});

describe("response", () => {
  it("builds the message create() builds", () => {
    const results = [
      { columns: ["id", "v"], rows: [[1, "a"], [null, "b"]], rowsRead: 2, rowsWritten: 0 },
      { columns: [], rows: [], rowsRead: 0, rowsWritten: 0, error: "no such table: t" },
    ];
    const want = create(QueryResponseSchema, {
      requestId: "r",
      results: results.map((r) => create(StatementResultSchema, { columns: r.columns, rows: r.rows.map(rowToListValue), rowsRead: r.rowsRead, rowsWritten: r.rowsWritten, ...(r.error !== undefined ? { error: r.error } : {}) })),
    });
    const got = response(results, "r");
    expect(got).toEqual(want);
    expect(Buffer.from(toBinary(QueryResponseSchema, got)).equals(Buffer.from(toBinary(QueryResponseSchema, want)))).toBe(true);
  });
});
