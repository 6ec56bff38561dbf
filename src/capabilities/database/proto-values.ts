// google.protobuf.Value / ListValue <-> plain JSON, written out by hand: the
// result rows are built for every row of every response, so this avoids the
// reflective JSON path.
import { create } from "@bufbuild/protobuf";
import { ListValueSchema, NullValue, ValueSchema, type ListValue, type Value } from "@bufbuild/protobuf/wkt";
import type { EngineValue } from "../../infra/libsql/engine-protocol.js";
import { setOwn } from "../../kernel/proto-wire.js";

export function valueToJson(v: Value | undefined): unknown {
  if (!v) return undefined;
  const k = v.kind;
  switch (k.case) {
    case "nullValue":
      return null;
    case "numberValue":
    case "stringValue":
    case "boolValue":
      return k.value;
    case "listValue":
      return k.value.values.map(valueToJson);
    case "structValue": {
      const out: Record<string, unknown> = {};
      // A parameter named "__proto__" stays a parameter (the prototype is not replaced).
      for (const [key, x] of Object.entries(k.value.fields)) setOwn(out, key, valueToJson(x));
      return out;
    }
    default:
      return undefined;
  }
}

// Built as the plain objects create() returns, without its reflection (every cell of every answer).
function cell(v: EngineValue): Value {
  if (v === null) return { $typeName: "google.protobuf.Value", kind: { case: "nullValue", value: NullValue.NULL_VALUE } };
  if (typeof v === "number") return { $typeName: "google.protobuf.Value", kind: { case: "numberValue", value: v } };
  return { $typeName: "google.protobuf.Value", kind: { case: "stringValue", value: v } };
}

export function rowToListValue(row: readonly EngineValue[]): ListValue {
  return { $typeName: "google.protobuf.ListValue", values: row.map(cell) };
}

/** Plain JSON -> Value (tests and clients building requests). */
export function jsonToValue(x: unknown): Value {
  if (x === null || x === undefined) return create(ValueSchema, { kind: { case: "nullValue", value: NullValue.NULL_VALUE } });
  if (typeof x === "number") return create(ValueSchema, { kind: { case: "numberValue", value: x } });
  if (typeof x === "string") return create(ValueSchema, { kind: { case: "stringValue", value: x } });
  if (typeof x === "boolean") return create(ValueSchema, { kind: { case: "boolValue", value: x } });
  if (Array.isArray(x)) {
    return create(ValueSchema, { kind: { case: "listValue", value: create(ListValueSchema, { values: x.map(jsonToValue) }) } });
  }
  const fields: Record<string, Value> = {};
  for (const [k, v] of Object.entries(x as Record<string, unknown>)) fields[k] = jsonToValue(v);
  return create(ValueSchema, { kind: { case: "structValue", value: { $typeName: "google.protobuf.Struct", fields } } });
}
