// The generated QueryResponse encoder (bin/protoc-gen-fastcodec.js) writes exactly what toBinary writes.
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { QueryResponseSchema } from "../../../gen/pulsebase/platform/v1/database_pb.js";
import { jsonToValue } from "../../../src/capabilities/database/proto-values.js";
import { encodeQueryResponse } from "../../../gen/fastcodec/pulsebase/platform/v1/database.js";

function random(seed: number) {
  let x = seed;
  return () => ((x = (x * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
}

function cell(r: () => number, depth = 0): unknown {
  const k = Math.floor(r() * (depth > 1 ? 5 : 7));
  switch (k) {
    case 0: return null;
    case 1: return Math.floor(r() * 2 ** 40) - 2 ** 39;
    case 2: return r() * 1e6;
    case 3: return "héllo ✓ ".repeat(Math.floor(r() * 30));
    case 4: return r() < 0.5;
    case 5: return [cell(r, depth + 1), cell(r, depth + 1)];
    default: return { a: cell(r, depth + 1), "ключ": cell(r, depth + 1) };
  }
}

describe("encodeQueryResponse", () => {
  it("writes the bytes toBinary writes, for many shapes of results", () => {
    for (let seed = 1; seed < 300; seed++) {
      const r = random(seed);
      const msg = create(QueryResponseSchema, {
        requestId: seed % 7 === 0 ? "" : `req-${seed}`,
        results: Array.from({ length: Math.floor(r() * 3) }, () => ({
          columns: Array.from({ length: Math.floor(r() * 4) }, (_, i) => (i === 1 ? "" : `c${i}`)),
          rows: Array.from({ length: Math.floor(r() * 40) }, () => ({ values: Array.from({ length: Math.floor(r() * 4) }, () => jsonToValue(cell(r))) })),
          rowsRead: r() < 0.2 ? 0 : r() < 0.1 ? -5 : Math.floor(r() * 2 ** 31),
          rowsWritten: Math.floor(r() * 3),
          ...(r() < 0.3 ? { error: r() < 0.5 ? "" : "no such table: kv" } : {}),
        })),
      });
      const want = toBinary(QueryResponseSchema, msg);
      const got = encodeQueryResponse(msg);
      expect(Buffer.from(got).equals(Buffer.from(want)), `seed ${seed}`).toBe(true);
      expect(fromBinary(QueryResponseSchema, got)).toEqual(msg);
    }
  });
});
