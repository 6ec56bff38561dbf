// Converts between the documented REST JSON (README.md) and protobuf messages, driven by
// the message descriptors. Differences from canonical proto3 JSON, on purpose:
// field names are the proto names (snake_case, as the API documents them) unless
// a json_name was set explicitly; int64 is a JSON number when safe; unset
// message fields are left out unless marked rest_null; decoding collects
// per-field errors with dotted paths ("sessions.0.started_at") for the 422.
import {
  create,
  fromJson,
  getOption,
  ScalarType,
  toJson,
  type DescField,
  type DescMessage,
  type JsonValue,
  type Message,
} from "@bufbuild/protobuf";
import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import { rest_null } from "../../../gen/pulsebase/common/v1/options_pb.js";
import type { Violations } from "../../kernel/errors.js";
import { setOwn } from "../../kernel/proto-wire.js";
import { MAX_FORM_DEPTH } from "./form-fields.js";

/** A file part of a multipart request, as the gateway hands it over. */
export interface UploadedFile {
  readonly __file: true;
  filename: string;
  contentType: string;
  data: Buffer;
}

export function isUploadedFile(v: unknown): v is UploadedFile {
  return typeof v === "object" && v !== null && (v as UploadedFile).__file === true;
}

const camel = (name: string) => name.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());

/** The REST name of a field: an explicit json_name, else the proto name. */
export function restName(field: DescField): string {
  return field.jsonName !== camel(field.name) ? field.jsonName : field.name;
}

const WKT_TIMESTAMP = "google.protobuf.Timestamp";
const WKT_JSON = new Set(["google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"]);
const FILE_MESSAGE = "pulsebase.common.v1.File";

// ---------------------------------------------------------------- encode

interface FieldPlan {
  field: DescField;
  name: string;
  restNull: boolean;
}

// Per message type, computed once: REST names and options are not looked up
// per request (getOption builds an extension container on every call).
const plans = new WeakMap<DescMessage, FieldPlan[]>();
function planOf(schema: DescMessage): FieldPlan[] {
  let p = plans.get(schema);
  if (!p) {
    p = schema.fields.map((field) => ({ field, name: restName(field), restNull: getOption(field, rest_null) }));
    plans.set(schema, p);
  }
  return p;
}

export function encodeRest(schema: DescMessage, msg: Message): Record<string, JsonValue> {
  const out: Record<string, JsonValue> = {};
  const m = msg as unknown as Record<string, unknown>;
  for (const { field, name, restNull } of planOf(schema)) {
    let value: unknown;
    let set: boolean;
    if (field.oneof) {
      const o = m[field.oneof.localName] as { case?: string; value?: unknown };
      set = o?.case === field.localName;
      value = set ? o.value : undefined;
    } else {
      value = m[field.localName];
      set = isSet(field, value);
    }
    if (!set) {
      if (restNull) out[name] = null;
      continue;
    }
    out[name] = encodeField(field, value);
  }
  return out;
}

function isSet(field: DescField, value: unknown): boolean {
  if (value === undefined || value === null) return false;
  if (field.fieldKind === "message") return true;
  if (field.fieldKind === "scalar" || field.fieldKind === "enum") {
    // proto3 `optional`: undefined means unset; implicit presence: always written.
    return true;
  }
  return true;
}

function encodeField(field: DescField, value: unknown): JsonValue {
  switch (field.fieldKind) {
    case "scalar":
      return encodeScalar(field.scalar, value);
    case "enum":
      return field.enum.values.find((v) => v.number === value)?.name ?? (value as number);
    case "message":
      // protobuf-es represents a singular google.protobuf.Struct field as a
      // plain JsonObject.
      if (field.message.typeName === "google.protobuf.Struct" && !isStructMessage(value)) return value as JsonValue;
      return encodeMessage(field.message, value as Message);
    case "list":
      return (value as unknown[]).map((v) =>
        field.listKind === "scalar" ? encodeScalar(field.scalar, v)
        : field.listKind === "enum" ? (field.enum.values.find((e) => e.number === v)?.name ?? (v as number))
        : encodeMessage(field.message, v as Message),
      );
    case "map": {
      const o: Record<string, JsonValue> = {};
      for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
        setOwn(o, k, field.mapKind === "scalar" ? encodeScalar(field.scalar, v)
          : field.mapKind === "enum" ? (field.enum.values.find((e) => e.number === v)?.name ?? (v as number))
          : encodeMessage(field.message, v as Message));
      }
      return o;
    }
  }
}

function isStructMessage(v: unknown): boolean {
  return typeof v === "object" && v !== null && (v as { $typeName?: string }).$typeName === "google.protobuf.Struct";
}

function encodeMessage(desc: DescMessage, value: Message): JsonValue {
  if (desc.typeName === WKT_TIMESTAMP) {
    return timestampDate(value as Parameters<typeof timestampDate>[0]).toISOString();
  }
  if (WKT_JSON.has(desc.typeName)) return toJson(desc, value);
  return encodeRest(desc, value);
}

function encodeScalar(type: ScalarType, v: unknown): JsonValue {
  if (typeof v === "bigint") {
    return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v.toString();
  }
  if (type === ScalarType.BYTES) return Buffer.from(v as Uint8Array).toString("base64");
  if ((type === ScalarType.DOUBLE || type === ScalarType.FLOAT) && typeof v === "number" && !Number.isFinite(v)) {
    return String(v);
  }
  return v as JsonValue;
}

// ---------------------------------------------------------------- decode

/**
 * Builds a request message from REST input (JSON body, path and query values,
 * multipart fields). Problems are added to `violations` with field paths; the
 * returned message is only meaningful when none were added.
 */
export function decodeRest<Desc extends DescMessage>(
  schema: Desc,
  input: Record<string, unknown>,
  violations: Violations,
  path = "",
): Message {
  const init: Record<string, unknown> = {};
  const byName = fieldsByRestName(schema);
  for (const [key, raw] of Object.entries(input)) {
    const field = byName.get(key);
    const p = path ? `${path}.${key}` : key;
    if (!field) {
      violations.add(p, `The ${key} field is not allowed.`);
      continue;
    }
    if (raw === null || raw === undefined) continue;
    const v = decodeField(field, raw, violations, p);
    if (v === undefined) continue;
    if (field.oneof) init[field.oneof.localName] = { case: field.localName, value: v };
    else init[field.localName] = v;
  }
  return create(schema, init as never);
}

const restNameCache = new WeakMap<DescMessage, Map<string, DescField>>();
function fieldsByRestName(schema: DescMessage): Map<string, DescField> {
  let m = restNameCache.get(schema);
  if (!m) {
    m = new Map(schema.fields.map((f) => [restName(f), f]));
    restNameCache.set(schema, m);
  }
  return m;
}

function decodeField(field: DescField, raw: unknown, v: Violations, p: string): unknown {
  switch (field.fieldKind) {
    case "scalar":
      return decodeScalar(field.scalar, raw, v, p);
    case "enum": {
      const e = field.enum.values.find((x) => x.name === raw || x.number === raw);
      if (!e) v.add(p, `The ${lastSegment(p)} field has an unknown value.`);
      return e?.number;
    }
    case "message":
      if (field.message.typeName === "google.protobuf.Struct") return decodeStructField(raw, v, p);
      return decodeMessageValue(field.message, raw, v, p);
    case "list": {
      const arr = asArray(raw);
      if (!arr) {
        v.add(p, `The ${lastSegment(p)} field must be an array.`);
        return undefined;
      }
      return arr.map((item, i) =>
        field.listKind === "scalar" ? decodeScalar(field.scalar, item, v, `${p}.${i}`)
        : field.listKind === "enum" ? field.enum.values.find((x) => x.name === item || x.number === item)?.number
        : decodeMessageValue(field.message, item, v, `${p}.${i}`),
      );
    }
    case "map": {
      if (!isPlainObject(raw)) {
        v.add(p, `The ${lastSegment(p)} field must be an object.`);
        return undefined;
      }
      const o: Record<string, unknown> = {};
      for (const [k, item] of Object.entries(raw)) {
        // a key "__proto__" is an own entry, as fromJson makes it
        setOwn(o, k, field.mapKind === "scalar" ? decodeScalar(field.scalar, item, v, `${p}.${k}`)
          : field.mapKind === "enum" ? field.enum.values.find((x) => x.name === item || x.number === item)?.number
          : decodeMessageValue(field.message, item, v, `${p}.${k}`));
      }
      return o;
    }
  }
}

/**
 * Whether a multipart file part sits in `raw`. Files only come from form
 * fields, which nest at most MAX_FORM_DEPTH levels: deeper JSON is not
 * walked (it could be nested deeply enough to overflow the stack).
 */
function holdsFile(raw: unknown, depth = 0): boolean {
  if (isUploadedFile(raw)) return true;
  if (depth > MAX_FORM_DEPTH) return false;
  if (Array.isArray(raw)) return raw.some((x) => holdsFile(x, depth + 1));
  return isPlainObject(raw) && Object.values(raw).some((x) => holdsFile(x, depth + 1));
}

/**
 * A singular Struct field is a plain JSON object in protobuf-es. A form
 * field may carry it as JSON text (context={"screen":"home"}).
 */
function decodeStructField(raw: unknown, v: Violations, p: string): unknown {
  let value = raw;
  if (typeof raw === "string" && raw.trim().startsWith("{")) {
    try {
      value = JSON.parse(raw);
    } catch {
      /* reported below */
    }
  }
  if (!isPlainObject(value)) {
    v.add(p, `The ${lastSegment(p)} field must be an object.`);
    return undefined;
  }
  if (holdsFile(value)) {
    v.add(p, `The ${lastSegment(p)} field must not hold a file.`);
    return undefined;
  }
  return value;
}

function decodeMessageValue(desc: DescMessage, raw: unknown, v: Violations, p: string): unknown {
  if (desc.typeName === WKT_TIMESTAMP) {
    const d = typeof raw === "string" ? new Date(raw) : undefined;
    if (!d || Number.isNaN(d.getTime())) {
      v.add(p, `The ${lastSegment(p)} field must be an ISO 8601 date-time.`);
      return undefined;
    }
    return timestampFromDate(d);
  }
  if (desc.typeName === "google.protobuf.Struct" && !isPlainObject(raw)) {
    v.add(p, `The ${lastSegment(p)} field must be an object.`);
    return undefined;
  }
  if (WKT_JSON.has(desc.typeName)) {
    // A file part is not JSON: its bytes would become an object of numbers.
    if (holdsFile(raw)) {
      v.add(p, `The ${lastSegment(p)} field must not be a file.`);
      return undefined;
    }
    try {
      return fromJson(desc, raw as JsonValue);
    } catch {
      v.add(p, `The ${lastSegment(p)} field has an invalid value.`);
      return undefined;
    }
  }
  if (desc.typeName === FILE_MESSAGE) {
    if (!isUploadedFile(raw)) {
      v.add(p, `The ${lastSegment(p)} field must be a file.`);
      return undefined;
    }
    return { filename: raw.filename, contentType: raw.contentType, data: raw.data };
  }
  if (!isPlainObject(raw)) {
    v.add(p, `The ${lastSegment(p)} field must be an object.`);
    return undefined;
  }
  return decodeRest(desc, raw, v, p);
}

const INT_RE = /^-?\d+$/;
const NUM_RE = /^-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/;

function decodeScalar(type: ScalarType, raw: unknown, v: Violations, p: string): unknown {
  const name = lastSegment(p);
  switch (type) {
    case ScalarType.STRING:
      if (typeof raw === "string") return raw;
      // Ids travel as numbers or strings in practice; accept plain numbers.
      if (typeof raw === "number" && Number.isFinite(raw)) return String(raw);
      v.add(p, `The ${name} field must be a string.`);
      return undefined;
    case ScalarType.BOOL:
      if (typeof raw === "boolean") return raw;
      if (raw === "true" || raw === "1") return true;
      if (raw === "false" || raw === "0") return false;
      v.add(p, `The ${name} field must be true or false.`);
      return undefined;
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      if (typeof raw === "number") return raw;
      if (typeof raw === "string" && NUM_RE.test(raw.trim())) return Number(raw);
      v.add(p, `The ${name} field must be a number.`);
      return undefined;
    case ScalarType.BYTES:
      if (typeof raw === "string") return new Uint8Array(Buffer.from(raw, "base64"));
      if (isUploadedFile(raw)) return new Uint8Array(raw.data);
      v.add(p, `The ${name} field must be a base64 string.`);
      return undefined;
    default: {
      // integer types (32 and 64 bit)
      const is64 = type === ScalarType.INT64 || type === ScalarType.UINT64 || type === ScalarType.SINT64 ||
        type === ScalarType.FIXED64 || type === ScalarType.SFIXED64;
      let n: bigint | undefined;
      if (typeof raw === "number" && Number.isInteger(raw)) n = BigInt(raw);
      else if (typeof raw === "string" && INT_RE.test(raw.trim())) n = BigInt(raw.trim());
      if (n === undefined) {
        v.add(p, `The ${name} field must be an integer.`);
        return undefined;
      }
      const unsigned = type === ScalarType.UINT32 || type === ScalarType.UINT64 || type === ScalarType.FIXED32 || type === ScalarType.FIXED64;
      const min = unsigned ? 0n : is64 ? -(2n ** 63n) : -(2n ** 31n);
      const max = is64 ? (unsigned ? 2n ** 64n - 1n : 2n ** 63n - 1n) : (unsigned ? 2n ** 32n - 1n : 2n ** 31n - 1n);
      if (n < min || n > max) {
        v.add(p, `The ${name} field is out of range.`);
        return undefined;
      }
      return is64 ? n : Number(n);
    }
  }
}

/** Arrays, or objects with keys 0..n-1 (from form fields), as arrays. */
function asArray(raw: unknown): unknown[] | undefined {
  if (Array.isArray(raw)) return raw;
  return undefined;
}

export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v) && !isUploadedFile(v) && !(v instanceof Uint8Array);
}

function lastSegment(p: string): string {
  const parts = p.split(".");
  for (let i = parts.length - 1; i >= 0; i--) {
    if (!/^\d+$/.test(parts[i]!)) return parts[i]!;
  }
  return p;
}
