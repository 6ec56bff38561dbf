// Builds the `req` object a function sees from the raw HTTP request the
// gateway passes through: method, slug, query, headers (without credentials
// and the internal namespace), body parsed by content type,
// and the raw body.
import { isUtf8 } from "node:buffer";
import { validationError } from "../../kernel/errors.js";

export interface FunctionRequest {
  method: string;
  slug: string;
  query: Record<string, string>;
  headers: Record<string, string>;
  body: unknown;
  /** The body exactly as sent (for the function's own signature checks): UTF-8 text, or base64 when it is not valid UTF-8. */
  rawBody: string;
  rawBodyEncoding: "utf8" | "base64";
}

const NO_RAW_BODY = Object.freeze({ rawBody: "", rawBodyEncoding: "utf8" as const });

/** req.rawBody and req.rawBodyEncoding of a body. */
export function rawBodyOf(body: Uint8Array): { rawBody: string; rawBodyEncoding: "utf8" | "base64" } {
  if (body.length === 0) return NO_RAW_BODY;
  const b = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  return isUtf8(b) ? { rawBody: b.toString("utf8"), rawBodyEncoding: "utf8" } : { rawBody: b.toString("base64"), rawBodyEncoding: "base64" };
}

const STRIPPED = new Set(["cookie", "authorization", "proxy-authorization"]);

export function isStrippedHeader(name: string): boolean {
  const n = name.toLowerCase();
  return STRIPPED.has(n) || n.startsWith("x-pulsebase-");
}

/** Lower-cased headers without cookie, authorization, proxy-authorization and x-pulsebase-*. */
export function functionHeaders(headers: Record<string, string>): Record<string, string> {
  // No prototype: a header named __proto__ is an own key like any other.
  const out: Record<string, string> = Object.create(null) as Record<string, string>;
  for (const k in headers) {
    if (isStrippedHeader(k)) continue;
    out[k.toLowerCase()] = headers[k]!;
  }
  return out;
}

/**
 * The body as the function receives it: JSON parsed; form fields
 * (urlencoded or multipart) as an object, a repeated field as an array,
 * a file part as { filename, content_type, size, data_base64 }; any other
 * content type as text; an empty body as null. Synchronous except for
 * multipart bodies (a promise then): most calls have no body, and the
 * invocation path stays free of promise hops (docs/benchmarks.md).
 */
export function parseBody(body: Uint8Array, contentType: string): unknown {
  if (body.length === 0) return null;
  const mime = (contentType.split(";")[0] ?? "").trim().toLowerCase();
  const text = () => Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString("utf8");
  if (mime === "application/json" || mime.endsWith("+json")) {
    let value: unknown;
    try {
      value = JSON.parse(text()) as unknown;
    } catch {
      throw validationError({ body: ["The body is not valid JSON."] });
    }
    // Copying a few thousand levels into the isolate fails, which would
    // show as the function failing (500): refuse it as the caller's input.
    if (depthOver(value, MAX_JSON_DEPTH)) {
      throw validationError({ body: [`The body is nested more than ${MAX_JSON_DEPTH} levels deep.`] });
    }
    return value;
  }
  if (mime === "application/x-www-form-urlencoded") {
    const fields: Record<string, string | string[]> = {};
    for (const [k, v] of new URLSearchParams(text())) addField(fields, k, v);
    return fields;
  }
  if (mime === "multipart/form-data") return parseMultipart(body, contentType);
  return text();
}

async function parseMultipart(body: Uint8Array, contentType: string): Promise<Record<string, unknown>> {
  let form: FormData;
  try {
    form = await new Response(body, { headers: { "content-type": contentType } }).formData();
  } catch {
    throw validationError({ body: ["The multipart body could not be parsed."] });
  }
  const fields: Record<string, unknown> = {};
  for (const [k, v] of form) {
    if (typeof v === "string") addField(fields, k, v);
    else {
      const data = Buffer.from(await v.arrayBuffer());
      addField(fields, k, { filename: v.name, content_type: v.type, size: data.length, data_base64: data.toString("base64") });
    }
  }
  return fields;
}

export const MAX_JSON_DEPTH = 1000;

/** Whether arrays/objects nest deeper than `max` (iterative: no stack overflow). */
function depthOver(root: unknown, max: number): boolean {
  const stack: Array<[unknown, number]> = [[root, 0]];
  while (stack.length) {
    const [v, d] = stack.pop()!;
    if (typeof v !== "object" || v === null) continue;
    if (d >= max) return true;
    for (const x of Array.isArray(v) ? v : Object.values(v)) stack.push([x, d + 1]);
  }
  return false;
}

// defineProperty, so a field named "__proto__" is a field like any other.
function addField(fields: Record<string, unknown>, k: string, v: unknown): void {
  const value = Object.hasOwn(fields, k) ? (Array.isArray(fields[k]) ? [...(fields[k] as unknown[]), v] : [fields[k], v]) : v;
  Object.defineProperty(fields, k, { value, enumerable: true, writable: true, configurable: true });
}
