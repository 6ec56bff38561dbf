// /api/db/* answers plain JSON bodies without proto messages. Its bytes must
// be exactly what the gateway's generic encoding of the same results gives.
import { describe, expect, it } from "vitest";
import { QueryResponseSchema } from "../../../gen/pulsebase/platform/v1/database_pb.js";
import type { EngineResult } from "../../../src/infra/libsql/engine-protocol.js";
import { response, restResultsJson } from "../../../src/capabilities/database/platform-service.js";
import { encodeRest } from "../../../src/transport/http/rest-json.js";

const generic = (results: EngineResult[], id: string) => JSON.stringify(encodeRest(QueryResponseSchema, response(results, id)));

describe("the JSON path's response", () => {
  it.each<[string, EngineResult[]]>([
    ["no results", []],
    ["rows of every value kind", [{ columns: ["i", "big", "f", "t", "b", "n"], rows: [[1, "9007199254740993", 1.75, "text", "AP8Q", null], [-3, "-1", 0, "", "", null]], rowsRead: 2, rowsWritten: 0 }]],
    ["a write and a failing statement", [
      { columns: [], rows: [], rowsRead: 0, rowsWritten: 3 },
      { columns: [], rows: [], rowsRead: 0, rowsWritten: 0, error: "SQLITE_CONSTRAINT: UNIQUE constraint failed: t.id" },
    ]],
    ["infinite reals and unicode", [{ columns: ["x", "é"], rows: [["Infinity", "-Infinity"], ["ünï \u2028 \"q\"", 1e300]], rowsRead: 2, rowsWritten: 0 }]],
  ])("equals the generic encoding: %s", (_, results) => {
    const id = "6f1c7a2e-0b1d-4c8e-9a3f-000000000001";
    expect(restResultsJson(results, id)).toBe(generic(results, id));
  });
});
