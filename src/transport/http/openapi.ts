// The OpenAPI 3.1 document of the REST surface, generated from the same
// route table (google.api.http annotations), the message descriptors and the
// .proto comments (gen/pulsebase/descriptions.ts). Written for client
// generators: multipart first where a file travels, query parameters by
// name, every documented 4xx per operation.
import { getOption, ScalarType, type DescField, type DescMessage, type DescMethod } from "@bufbuild/protobuf";
import { Auth, rest_error, rest_null, rest_query_params } from "../../../gen/pulsebase/common/v1/options_pb.js";
import { descriptions } from "../../../gen/pulsebase/descriptions.js";
import { restName } from "./rest-json.js";
import type { RestRoute, RouteTable } from "./route-table.js";

type Schema = Record<string, unknown>;

export interface OpenApiOptions {
  /** Where clients reach the public listener (PULSEBASE_PUBLIC_URL); default "/", the origin serving the document. */
  publicUrl?: string;
  /** {media_base_url}: when set and the CMS is mounted, the media path is documented under it. */
  mediaBaseUrl?: string;
}

const FILE_MESSAGE = "pulsebase.common.v1.File";

export function buildOpenApi(table: RouteTable, info: { title: string; version: string }, opts: OpenApiOptions = {}): Record<string, unknown> {
  const components: Record<string, Schema> = {};
  const ref = (m: DescMessage): Schema => {
    if (m.typeName === "google.protobuf.Timestamp") return { type: "string", format: "date-time" };
    if (m.typeName === "google.protobuf.Struct") return { type: "object", additionalProperties: true };
    if (m.typeName === "google.protobuf.Value") return {};
    if (m.typeName === "google.protobuf.ListValue") return { type: "array", items: {} };
    if (m.typeName === FILE_MESSAGE) return { type: "string", format: "binary", contentMediaType: "application/octet-stream" };
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
  const tags = new Map<string, string | undefined>();
  for (const r of table.routes) {
    const errorRef = { $ref: r.iface === "cms" ? "#/components/schemas/CmsError" : "#/components/schemas/PlatformError" };
    const errorResponse = (description: string) => ({ description, content: { "application/json": { schema: errorRef } } });
    tags.set(r.service.name, descriptions[r.service.typeName]);
    const methodName = `${r.service.typeName}.${r.method.name}`;
    const op: Record<string, unknown> = {
      operationId: operationId(r),
      summary: r.method.name,
      ...(descriptions[methodName] ? { description: descriptions[methodName] } : {}),
      tags: [r.service.name],
      parameters: r.pathParams.map((p) => {
        const f = r.method.input.fields.find((x) => x.name === p);
        const description = f && descriptions[`${r.method.input.typeName}.${f.name}`];
        return { name: p, in: "path", required: true, ...(description ? { description } : {}), schema: { type: "string" } };
      }),
      responses: r.passthrough ? passthroughResponses(errorResponse) : {
        [String(r.status)]: {
          description: descriptions[r.method.output.typeName] ?? "OK",
          content: { "application/json": { schema: r.responseBody ? fieldSchema(r.method.output.fields.find((f) => f.name === r.responseBody)!, ref) : ref(r.method.output) } },
        },
        ...(r.iface === "cms" && r.verb === "GET" ? { "304": { description: "Not modified: the ETag sent in If-None-Match still matches" } } : {}),
        ...errorResponses(r, errorResponse),
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
      const json = { schema: r.body === "*" ? ref(r.method.input) : fieldSchema(r.method.input.fields.find((f) => f.name === r.body)!, ref) };
      let content: Record<string, unknown> = { "application/json": json };
      let description: string | undefined;
      if (r.multipart) {
        // Object-valued fields (context, metadata) travel as JSON text parts.
        const encoding: Record<string, unknown> = {};
        for (const f of r.method.input.fields) {
          if (f.fieldKind === "message" && (f.message.typeName === "google.protobuf.Struct" || f.message.typeName === "google.protobuf.Value")) encoding[restName(f)] = { contentType: "application/json" };
        }
        const multipart = { schema: ref(r.method.input), ...(Object.keys(encoding).length ? { encoding } : {}) };
        // Generators send JSON whenever it is listed, and JSON cannot carry a
        // file: a top-level file field (RecordLog.file) makes the operation
        // multipart only. Files inside list items (BatchLogs.logs[].file)
        // need bracket keys no generator writes, so multipart comes first
        // and JSON (without files) second.
        const files = r.method.input.fields.some((f) => f.message?.typeName === FILE_MESSAGE);
        content = files ? { "multipart/form-data": multipart } : holdsFile(r.method.input) ? { "multipart/form-data": multipart, ...content } : { ...content, "multipart/form-data": multipart };
        description = "multipart/form-data: files as file parts, nested fields as bracket keys (events[0][name], logs[1][file]), object fields as JSON text or bracket keys. " +
          (files ? "The same fields as a JSON body (without files) are also accepted." : "Or JSON, without files.");
      }
      op.requestBody = { required: false, ...(description ? { description } : {}), content };
    } else if (r.rawQueryField) {
      // The raw map's parameters are documented by the rest_query_params message.
      const named = getOption(r.method, rest_query_params);
      const doc = r.method.parent.file.messages.find((t) => t.typeName === named);
      if (!doc) throw new Error(`${methodName}: rest_raw_query needs rest_query_params naming a message of its file`);
      op.parameters = [...(op.parameters as unknown[]), ...doc.fields.map((f) => queryParameter(r, f, ref))];
    }
    if (r.verb === "GET" && !r.passthrough && !r.rawQueryField && r.iface !== "cms") {
      // The gateway reads a GET's request fields (other than path variables) from the query string.
      for (const f of r.method.input.fields) {
        if (r.pathParams.includes(f.name) || f.fieldKind === "message" || f.fieldKind === "map") continue;
        (op.parameters as unknown[]).push(queryParameter(r, f, ref));
      }
    }
    (paths[r.template] ??= {})[r.verb.toLowerCase()] = op;
  }
  if (opts.mediaBaseUrl && table.routes.some((r) => r.service.typeName === "pulsebase.cms.v1.ContentService")) {
    paths["/{app_key}/cms/media/{file_id}"] = mediaPath(opts.mediaBaseUrl);
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
    info: {
      ...info,
      description: "The device API (/api: consumers, sessions, analytics, database, function triggers; a consumer Bearer token) and the read-only content API (/api/v1: an X-App-Key header). " +
        "The same methods are served over Connect, gRPC and gRPC-Web at /<package>.<Service>/<Method> (the README's \"Calling Pulsebase from your language\").",
    },
    servers: [{ url: opts.publicUrl ?? "/", description: "The public listener" }],
    tags: [...tags].map(([name, description]) => ({ name, ...(description ? { description } : {}) })),
    paths,
    components: {
      schemas: components,
      securitySchemes: {
        bearer: { type: "http", scheme: "bearer", bearerFormat: "JWT", description: "A consumer token from POST /api/consumer or GET /api/consumer/token" },
        appKey: { type: "apiKey", in: "header", name: "X-App-Key", description: "The application key (content API)" },
      },
    },
  };
}

/** Whether a File can sit anywhere in the message (RecordLog.file, BatchLogs.logs[].file). */
function holdsFile(m: DescMessage, seen = new Set<string>()): boolean {
  if (seen.has(m.typeName)) return false;
  seen.add(m.typeName);
  return m.fields.some((f) => f.message !== undefined && (f.message.typeName === FILE_MESSAGE || holdsFile(f.message, seen)));
}

/** A query parameter for a field; a map is a deepObject (filter[field]=value). */
function queryParameter(r: RestRoute, f: DescField, ref: (m: DescMessage) => Schema): Schema {
  const description = descriptions[`${f.parent.typeName}.${f.name}`];
  // In a rest_query_params message, a singular field without `optional` is required.
  const required = r.rawQueryField !== "" && f.fieldKind === "scalar" && !f.proto.proto3Optional;
  return {
    name: restName(f),
    in: "query",
    required,
    ...(description ? { description } : {}),
    ...(f.fieldKind === "map" ? { style: "deepObject", explode: true } : {}),
    schema: fieldSchema(f, ref),
  };
}

/**
 * The 4xx and 5xx answers an operation documents: the gateway's own (by the
 * route's authentication and body) and the method's rest_error options.
 */
function errorResponses(r: RestRoute, errorResponse: (description: string) => unknown): Record<string, unknown> {
  const byStatus = new Map<string, string[]>();
  const add = (status: string, text: string) => byStatus.set(status, [...(byStatus.get(status) ?? []), text]);
  if (r.auth === Auth.CONSUMER_UNSPECIFIED) add("401", "unauthenticated: missing, invalid or expired Bearer token");
  if (r.iface === "platform") {
    if (r.body) {
      add("400", "bad_request: malformed JSON or multipart body");
      add("413", "payload_too_large: the body is larger than the limit");
      add("415", "unsupported_media_type: the body is neither JSON" + (r.multipart ? " nor multipart/form-data" : ""));
    }
    if (r.body || r.method.input.fields.length > 0) add("422", "validation_failed: { message, errors } with the messages per field path");
  }
  for (const entry of getOption(r.method, rest_error)) {
    const m = /^(\d{3})\s*(.*)$/.exec(entry);
    if (!m) throw new Error(`${r.service.typeName}.${r.method.name}: rest_error "${entry}" does not start with a status`);
    add(m[1]!, m[2]!.replace(/^:\s*/, ""));
  }
  const out: Record<string, unknown> = {};
  for (const status of [...byStatus.keys()].sort()) out[status] = errorResponse(byStatus.get(status)!.join("; "));
  return out;
}

/** GET {media_base_url}/<APP_KEY>/cms/media/<file_id> (docs/cms.md: clients use the <field>_url values). */
function mediaPath(mediaBaseUrl: string): Record<string, unknown> {
  const cmsError = (description: string) => ({ description, content: { "application/json": { schema: { $ref: "#/components/schemas/CmsError" } } } });
  return {
    servers: [{ url: mediaBaseUrl.replace(/\/+$/, ""), description: "{media_base_url}" }],
    get: {
      operationId: "ContentService_GetMedia",
      summary: "GetMedia",
      description: "A CMS media file. Entries carry its address in <field>_url ({media_base_url}/<APP_KEY>/cms/media/<file_id>); use that value rather than building it.",
      tags: ["ContentService"],
      security: [],
      parameters: [
        { name: "app_key", in: "path", required: true, description: "The application key", schema: { type: "string" } },
        { name: "file_id", in: "path", required: true, description: "The media field's value: <uuid>.<ext>", schema: { type: "string" } },
        { name: "If-None-Match", in: "header", required: false, description: "An ETag from an earlier answer", schema: { type: "string" } },
      ],
      responses: {
        "200": { description: "The file, with its content type, ETag and Cache-Control", content: { "*/*": { schema: { type: "string", contentMediaType: "application/octet-stream" } } } },
        "304": { description: "Not modified: the ETag sent in If-None-Match still matches" },
        "404": cmsError("NOT_FOUND: no such file for this application key"),
        default: cmsError("Error: the CMS error envelope"),
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
    let s = fieldSchema(f, ref);
    // rest_null fields are written as null when unset (OpenAPI 3.1: a "null" type).
    if (getOption(f, rest_null)) s = nullable(s);
    const description = descriptions[`${m.typeName}.${f.name}`];
    properties[restName(f)] = description ? { ...s, description } : s;
  }
  const description = descriptions[m.typeName];
  return { type: "object", ...(description ? { description } : {}), properties, additionalProperties: false };
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
