// The OpenAPI 3.1 document of the REST surface, generated from the same
// route table (google.api.http annotations) and message descriptors.
import { ScalarType, type DescField, type DescMessage } from "@bufbuild/protobuf";
import { Auth } from "../../gen/pulsebase/common/v1/options_pb.js";
import { restName } from "./rest-json.js";
import type { RouteTable } from "./route-table.js";

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
  for (const r of table.routes) {
    const op: Record<string, unknown> = {
      operationId: `${r.service.name}_${r.method.name}${r.verb === "PATCH" ? "_patch" : ""}`,
      summary: r.method.name,
      tags: [r.service.name],
      parameters: r.pathParams.map((p) => ({ name: p, in: "path", required: true, schema: { type: "string" } })),
      responses: {
        [String(r.status)]: {
          description: "OK",
          content: { "application/json": { schema: r.responseBody ? fieldSchema(r.method.output.fields.find((f) => f.name === r.responseBody)!, ref) : ref(r.method.output) } },
        },
        default: { description: "Error envelope", content: { "application/json": { schema: { $ref: r.iface === "cms" ? "#/components/schemas/CmsError" : "#/components/schemas/PlatformError" } } } },
      },
    };
    if (r.auth === Auth.CONSUMER_UNSPECIFIED) op.security = [{ bearer: [] }];
    else if (r.auth === Auth.APP_KEY) op.security = [{ appKey: [] }];
    else op.security = [];
    if (r.body || r.passthrough) {
      const content: Record<string, unknown> = { "application/json": { schema: r.passthrough ? {} : ref(r.method.input) } };
      if (r.multipart) content["multipart/form-data"] = { schema: ref(r.method.input) };
      op.requestBody = { required: false, content };
    } else if (r.rawQueryField) {
      op.parameters = [...(op.parameters as unknown[]), { name: "query", in: "query", style: "form", explode: true, schema: { type: "object", additionalProperties: { type: "string" } } }];
    }
    (paths[r.template] ??= {})[r.verb.toLowerCase()] = op;
  }
  components.PlatformError = {
    type: "object",
    properties: { error: { type: "string" }, message: { type: "string" }, errors: { type: "object", additionalProperties: { type: "array", items: { type: "string" } } } },
  };
  components.CmsError = {
    type: "object",
    properties: { error: { type: "object", properties: { status: { type: "integer" }, code: { type: "string" }, message: { type: "string" } } } },
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

function messageSchema(m: DescMessage, ref: (m: DescMessage) => Schema): Schema {
  const properties: Record<string, Schema> = {};
  for (const f of m.fields) properties[restName(f)] = fieldSchema(f, ref);
  return { type: "object", properties, additionalProperties: false };
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
    default: return { type: "integer" };
  }
}
