// The OpenAPI 3.1 document of the REST surface, generated from the same
// route table (google.api.http annotations) and message descriptors.
import { getOption, ScalarType, type DescField, type DescMessage, type DescMethod } from "@bufbuild/protobuf";
import { Auth, rest_null } from "../../../gen/pulsebase/common/v1/options_pb.js";
import { restName } from "./rest-json.js";
import type { RestRoute, RouteTable } from "./route-table.js";

type Schema = Record<string, unknown>;

export function buildOpenApi(table: RouteTable, info: { title: string; version: string }): Record<string, unknown> {
  const components: Record<string, Schema> = {};
  const ref = (m: DescMessage): Schema => {
    if (m.typeName === "google.protobuf.Timestamp") return { type: "string", format: "date-time" };
    if (m.typeName === "google.protobuf.Struct") return { type: "object", additionalProperties: true };
    if (m.typeName === "google.protobuf.Value") return {};
    if (m.typeName === "google.protobuf.ListValue") return { type: "array", items: {} };
    if (m.typeName === "pulsebase.common.v1.File") return { type: "string", format: "binary" };
    if (!components[m.typeName]) {
      components[m.typeName] = {};
      components[m.typeName] = messageSchema(m, ref);
    }
    return { $ref: `#/components/schemas/${m.typeName}` };
  };
  const paths: Record<string, Record<string, unknown>> = {};
  // A method with several bindings (additional_bindings) gets one operation
  // per binding: its verb makes the operationId unique.
  const bindings = new Map<DescMethod, number>();
  for (const r of table.routes) bindings.set(r.method, (bindings.get(r.method) ?? 0) + 1);
  const usedIds = new Set<string>();
  const operationId = (r: RestRoute): string => {
    const base = `${r.service.name}_${r.method.name}${bindings.get(r.method)! > 1 ? `_${r.verb.toLowerCase()}` : ""}`;
    let id = base;
    for (let n = 2; usedIds.has(id); n++) id = `${base}_${n}`;
    usedIds.add(id);
    return id;
  };
  for (const r of table.routes) {
    const errorRef = { $ref: r.iface === "cms" ? "#/components/schemas/CmsError" : "#/components/schemas/PlatformError" };
    const errorResponse = (description: string) => ({ description, content: { "application/json": { schema: errorRef } } });
    const op: Record<string, unknown> = {
      operationId: operationId(r),
      summary: r.method.name,
      tags: [r.service.name],
      parameters: r.pathParams.map((p) => ({ name: p, in: "path", required: true, schema: { type: "string" } })),
      responses: r.passthrough ? passthroughResponses(errorResponse) : {
        [String(r.status)]: {
          description: "OK",
          content: { "application/json": { schema: r.responseBody ? fieldSchema(r.method.output.fields.find((f) => f.name === r.responseBody)!, ref) : ref(r.method.output) } },
        },
        ...(r.iface === "cms" && r.verb === "GET" ? { "304": { description: "Not modified: the ETag sent in If-None-Match still matches" } } : {}),
        default: errorResponse(r.iface === "cms" ? "Error: the CMS error envelope" : "Error: the platform error envelope ({ error, message }; 422: { message, errors })"),
      },
    };
    if (r.passthrough) {
      op.description = "Runs the function behind this HTTP trigger. The request (method, query, headers, body of any content type) is handed to the function as is; " +
        "the response is whatever the function returns: a returned value is sent as JSON with 200, a returned { status, headers, body } with that status, those headers and that body (any content type). " +
        "Errors raised by the platform (authentication, plan, missing trigger, rate limit, failure, timeout) use the platform error envelope.";
    }
    if (r.auth === Auth.CONSUMER_UNSPECIFIED) op.security = [{ bearer: [] }];
    else if (r.auth === Auth.APP_KEY) op.security = [{ appKey: [] }];
    else op.security = [];
    if (r.passthrough) {
      if (r.verb !== "GET" && r.verb !== "DELETE") op.requestBody = { required: false, content: { "*/*": { schema: {} } } };
      op.parameters = [...(op.parameters as unknown[]), { name: "query", in: "query", style: "form", explode: true, schema: { type: "object", additionalProperties: { type: "string" } }, description: "Passed to the function as req.query" }];
    } else if (r.body) {
      const content: Record<string, unknown> = { "application/json": { schema: r.body === "*" ? ref(r.method.input) : fieldSchema(r.method.input.fields.find((f) => f.name === r.body)!, ref) } };
      let description: string | undefined;
      if (r.multipart) {
        // Object-valued fields (context, metadata) travel as JSON text parts.
        const encoding: Record<string, unknown> = {};
        for (const f of r.method.input.fields) {
          if (f.fieldKind === "message" && f.message.typeName === "google.protobuf.Struct") encoding[restName(f)] = { contentType: "application/json" };
        }
        content["multipart/form-data"] = { schema: ref(r.method.input), ...(Object.keys(encoding).length ? { encoding } : {}) };
        description = "JSON, or multipart/form-data: files as file parts, nested fields as bracket keys (events[0][name], logs[1][file]), object fields as JSON text or bracket keys.";
      }
      op.requestBody = { required: false, ...(description ? { description } : {}), content };
    } else if (r.rawQueryField) {
      op.parameters = [...(op.parameters as unknown[]), { name: "query", in: "query", style: "form", explode: true, schema: { type: "object", additionalProperties: { type: "string" } } }];
    }
    if (r.verb === "GET" && !r.passthrough && !r.rawQueryField && r.iface !== "cms") {
      // The gateway reads a GET's request fields (other than path variables) from the query string.
      for (const f of r.method.input.fields) {
        if (r.pathParams.includes(f.name) || f.fieldKind === "message" || f.fieldKind === "map") continue;
        (op.parameters as unknown[]).push({ name: restName(f), in: "query", required: false, schema: fieldSchema(f, ref) });
      }
    }
    (paths[r.template] ??= {})[r.verb.toLowerCase()] = op;
  }
  components.PlatformError = {
    type: "object",
    description: "The platform error envelope: { error, message }, or for 422 { message, errors } with the messages per field path (and error when the code is not validation_failed, e.g. idempotency_key_reused)",
    required: ["message"],
    properties: {
      error: { type: "string", description: "Machine-readable code, e.g. not_found" },
      message: { type: "string" },
      errors: { type: "object", additionalProperties: { type: "array", items: { type: "string" } } },
    },
    additionalProperties: false,
  };
  components.CmsError = {
    type: "object",
    description: "The CMS error envelope (the 429 has no code)",
    required: ["error"],
    properties: {
      error: {
        type: "object",
        required: ["status", "message"],
        properties: { status: { type: "integer" }, code: { type: "string" }, message: { type: "string" } },
        additionalProperties: false,
      },
    },
    additionalProperties: false,
  };
  return {
    openapi: "3.1.0",
    info,
    paths,
    components: {
      schemas: components,
      securitySchemes: {
        bearer: { type: "http", scheme: "bearer", bearerFormat: "JWT" },
        appKey: { type: "apiKey", in: "header", name: "X-App-Key" },
      },
    },
  };
}

/** /api/fn/{slug}: the function decides the status, headers and body; the platform's own errors use its envelope. */
function passthroughResponses(errorResponse: (description: string) => unknown): Record<string, unknown> {
  return {
    "200": {
      description: "The function's answer: its returned value as JSON, or the body and content type of a returned { status, headers, body }",
      content: { "application/json": { schema: {} }, "*/*": { schema: {} } },
    },
    "401": errorResponse("Missing or invalid consumer token"),
    "402": errorResponse("plan_required: the application's plan does not include functions"),
    "404": errorResponse("not_found: no enabled HTTP trigger with this slug (a function may also answer 404 itself)"),
    "429": errorResponse("rate_limited: invocation rate exceeded (Retry-After)"),
    "500": errorResponse("function_error: the function threw (the message is not shown; see the request id)"),
    "503": errorResponse("no_active_version: the function has no active version"),
    "504": errorResponse("function_timeout: the function ran past its time limit"),
    default: { description: "Any other status the function chose, with its headers and body (any content type)", content: { "*/*": { schema: {} } } },
  };
}

function messageSchema(m: DescMessage, ref: (m: DescMessage) => Schema): Schema {
  const properties: Record<string, Schema> = {};
  for (const f of m.fields) {
    const s = fieldSchema(f, ref);
    // rest_null fields are written as null when unset (OpenAPI 3.1: a "null" type).
    properties[restName(f)] = getOption(f, rest_null) ? nullable(s) : s;
  }
  return { type: "object", properties, additionalProperties: false };
}

function nullable(s: Schema): Schema {
  if (Object.keys(s).length === 0) return s; // any JSON value, null included
  if (typeof s.type === "string" && !s.$ref) {
    const out: Schema = { ...s, type: [s.type, "null"] };
    if (Array.isArray(s.enum)) out.enum = [...(s.enum as unknown[]), null];
    return out;
  }
  return { anyOf: [s, { type: "null" }] };
}

function fieldSchema(f: DescField, ref: (m: DescMessage) => Schema): Schema {
  switch (f.fieldKind) {
    case "scalar": return scalarSchema(f.scalar);
    case "enum": return { type: "string", enum: f.enum.values.map((v) => v.name) };
    case "message": return ref(f.message);
    case "list": return { type: "array", items: f.listKind === "message" ? ref(f.message) : f.listKind === "enum" ? { type: "string" } : scalarSchema(f.scalar) };
    case "map": return { type: "object", additionalProperties: f.mapKind === "message" ? ref(f.message) : f.mapKind === "enum" ? { type: "string" } : scalarSchema(f.scalar) };
  }
}

function scalarSchema(t: ScalarType): Schema {
  switch (t) {
    case ScalarType.STRING: return { type: "string" };
    case ScalarType.BOOL: return { type: "boolean" };
    case ScalarType.BYTES: return { type: "string", contentEncoding: "base64" };
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT: return { type: "number" };
    case ScalarType.INT32:
    case ScalarType.SINT32:
    case ScalarType.SFIXED32: return { type: "integer", format: "int32" };
    case ScalarType.UINT32:
    case ScalarType.FIXED32: return { type: "integer", minimum: 0 };
    // The gateway writes int64 as a number when it is a safe integer (every id
    // and counter is); a larger one would be a decimal string.
    default: return { type: "integer", format: "int64" };
  }
}
