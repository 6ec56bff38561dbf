// /openapi.json against a real server: the document is a valid OpenAPI 3.1
// document (checked by a real validator), and real answers of a representative
// set of routes match the response schema the document gives for their
// path, method and status.
import { Validator } from "@seriousme/openapi-schema-validator";
import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { FormData } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CmsService } from "../../gen/pulsebase/admin/v1/cms_pb.js";
import { DatabaseService } from "../../gen/pulsebase/admin/v1/database_pb.js";
import { FunctionService } from "../../gen/pulsebase/admin/v1/functions_pb.js";
import { createModules } from "../../src/server/modules.js";
import { startTestServer, type TestResponse, type TestServer } from "../helpers/server.js";

/* eslint-disable @typescript-eslint/no-explicit-any */
let s: TestServer;
let doc: any;
let appKey: string;
let token: string;
let entryId: string;
const DOC_ID = "https://pulsebase.test/openapi.json";
const ajv = new Ajv2020({ strict: false, allErrors: true });
(addFormats as unknown as (a: Ajv2020) => void)(ajv);
// OpenAPI's own formats, not JSON Schema's.
ajv.addFormat("int32", { type: "number", validate: (n: number) => Number.isInteger(n) && n >= -(2 ** 31) && n < 2 ** 31 });
ajv.addFormat("int64", { type: "number", validate: (n: number) => Number.isSafeInteger(n) });
ajv.addFormat("binary", true);

beforeAll(async () => {
  s = await startTestServer({ modules: createModules });
  const app = await s.createApp("openapi e2e");
  appKey = app.appKey;
  token = (await s.register(appKey)).token;
  const dbs = s.adminClient(DatabaseService);
  const db = await dbs.createDatabase({ teamId: app.teamId, name: "main" });
  await dbs.linkDatabase({ databaseId: db.id, appId: app.appId });
  const fns = s.adminClient(FunctionService);
  const fn = await fns.createFunction({ appId: app.appId, name: "hello" });
  await fns.deployVersion({ functionId: fn.id, activate: true, code: "export default async (req) => ({ hello: req.query.name ?? 'world' })" });
  await fns.createHttpTrigger({ functionId: fn.id, slug: "hello" });
  const cms = s.adminClient(CmsService);
  await cms.createContentType({ appId: app.appId, contentType: { slug: "note", name: "Note", fields: [{ name: "title", type: "text", required: true }, { name: "stars", type: "number" }] } });
  entryId = (await cms.createEntry({ appId: app.appId, contentType: "note", publish: true, data: { title: "first", stars: 3 } })).id;
  doc = await (await s.fetch("/openapi.json")).json();
  ajv.addSchema({ $id: DOC_ID, components: doc.components });
});
afterAll(() => s.close());

const validators = new Map<string, ValidateFunction>();
/** The JSON schema the document gives for this answer; its $refs resolve into the document's components. */
function responseValidator(template: string, method: string, status: number): ValidateFunction {
  const key = `${method} ${template} ${status}`;
  let v = validators.get(key);
  if (!v) {
    const responses = doc.paths[template]?.[method]?.responses;
    expect(responses, `no operation ${method} ${template}`).toBeDefined();
    const response = responses[String(status)] ?? responses[`${String(status)[0]}XX`] ?? responses.default;
    expect(response, `${key}: no response for the status`).toBeDefined();
    const schema = response.content?.["application/json"]?.schema;
    expect(schema, `${key}: no application/json schema`).toBeDefined();
    const absolute = JSON.parse(JSON.stringify(schema).replaceAll('"#/components/', `"${DOC_ID}#/components/`));
    v = ajv.compile(typeof absolute === "object" && !Array.isArray(absolute) ? absolute : {});
    validators.set(key, v);
  }
  return v;
}

/** Asserts the real answer's JSON body matches the document; returns the body. */
async function conforms(res: TestResponse, template: string, method: string, expectedStatus: number): Promise<any> {
  const text = await res.text();
  expect(res.status, text).toBe(expectedStatus);
  expect(res.headers.get("content-type")).toMatch(/^application\/json/);
  const body = JSON.parse(text);
  const v = responseValidator(template, method, res.status);
  expect(v(body), `${method.toUpperCase()} ${template} ${res.status}: ${ajv.errorsText(v.errors)}\n${text}`).toBe(true);
  return body;
}

const auth = (extra: Record<string, string> = {}) => ({ authorization: `Bearer ${token}`, ...extra });
const json = (body: unknown) => ({ method: "POST", headers: auth({ "content-type": "application/json" }), body: JSON.stringify(body) });

describe("/openapi.json", () => {
  it("is a valid OpenAPI 3.1 document with unique operationIds", async () => {
    const validator = new Validator();
    const res = await validator.validate(structuredClone(doc));
    expect(res.errors ?? [], JSON.stringify(res.errors, null, 2)).toEqual([]);
    expect(res.valid).toBe(true);
    expect(validator.version).toBe("3.1");
    const ids: string[] = [];
    for (const ops of Object.values<any>(doc.paths)) for (const op of Object.values<any>(ops)) ids.push(op.operationId);
    expect(new Set(ids).size).toBe(ids.length);
    expect(Object.keys(doc.paths["/api/fn/{slug}"]).sort()).toEqual(["delete", "get", "patch", "post", "put"]);
  });

  it("marks the fields the API writes as null", () => {
    const consumer = doc.components.schemas["pulsebase.platform.v1.Consumer"];
    expect(consumer.properties.user_email.type).toEqual(["string", "null"]);
    const session = Object.values<any>(doc.components.schemas).find((c) => c.properties?.ended_at && c.properties?.session_id);
    expect(session.properties.ended_at.type).toEqual(["string", "null"]);
  });

  it("describes /api/fn/{slug} as the function's own answer, platform errors in the envelope", () => {
    const op = doc.paths["/api/fn/{slug}"].post;
    expect(op.description).toMatch(/whatever the function returns/);
    expect(op.responses["200"].content["*/*"]).toBeDefined();
    expect(op.responses.default.content["*/*"]).toBeDefined();
    for (const status of ["401", "402", "404", "429", "500", "503", "504"]) {
      expect(op.responses[status].content["application/json"].schema.$ref).toBe("#/components/schemas/PlatformError");
    }
    expect(op.requestBody.content["*/*"]).toBeDefined();
  });

  it("gives multipart bodies to the multipart routes and the CMS envelope to /api/v1 errors", () => {
    expect(doc.paths["/api/logs"].post.requestBody.content["multipart/form-data"]).toBeDefined();
    expect(doc.paths["/api/v1/{content_type}"].get.responses.default.content["application/json"].schema.$ref).toBe("#/components/schemas/CmsError");
    expect(doc.paths["/api/consumer/token"].get.parameters.map((p: any) => p.name)).toEqual(expect.arrayContaining(["app_key", "consumer_id"]));
  });
});

describe("real answers match the document's schemas", () => {
  it("consumer register and sessions", async () => {
    const reg = await s.fetch("/api/consumer", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ app_key: appKey, device_id: "oa-1", device_model: "Pixel", user_id: "u", os: "android", country: "DE", language: "de" }),
    });
    const me = await conforms(reg, "/api/consumer", "post", 200);
    expect(me.user_email).toBeNull();
    const started = await conforms(await s.fetch("/api/session/start", { method: "POST", headers: auth() }), "/api/session/start", "post", 200);
    expect(started.ended_at).toBeNull();
    await conforms(await s.fetch("/api/session/end", json({ session_id: started.session_id })), "/api/session/end", "post", 200);
  });

  it("events and a multipart log", async () => {
    await conforms(await s.fetch("/api/events", json({ name: "purchase", metadata: { sku: "A1" } })), "/api/events", "post", 200);
    const form = new FormData();
    form.set("app_version", "1.0.0");
    form.set("classFQN", "com.example.Crash");
    form.set("message", "boom");
    form.set("type", "crash");
    form.set("context", JSON.stringify({ screen: "home" }));
    const log = await conforms(await s.fetch("/api/logs", { method: "POST", headers: auth(), body: form as unknown as RequestInit["body"] }), "/api/logs", "post", 200);
    expect(log.stack_trace).toBeNull();
  });

  it("a database query", async () => {
    await conforms(await s.fetch("/api/db/query", json({ sql: "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)" })), "/api/db/query", "post", 200);
    const r = await conforms(await s.fetch("/api/db/query", json({ sql: "SELECT 1 AS one, NULL AS none" })), "/api/db/query", "post", 200);
    expect(r.results[0].rows).toEqual([[1, null]]);
  });

  it("a function's answer, and a platform error", async () => {
    const fn = await s.fetch("/api/fn/hello?name=Ada", { headers: auth() });
    expect(await conforms(fn, "/api/fn/{slug}", "get", 200)).toEqual({ hello: "Ada" });
    await conforms(await s.fetch("/api/fn/missing", { headers: auth() }), "/api/fn/{slug}", "get", 404);
    await conforms(await s.fetch("/api/session/start", { method: "POST", headers: { authorization: "Bearer nope" } }), "/api/session/start", "post", 401);
    const invalid = await conforms(await s.fetch("/api/events", json({})), "/api/events", "post", 422);
    expect(invalid.errors.name).toBeDefined();
  });

  it("CMS list, show and a CMS error", async () => {
    const cms = { headers: { "x-app-key": appKey } };
    const list = await conforms(await s.fetch("/api/v1/note", cms), "/api/v1/{content_type}", "get", 200);
    expect(list.data[0].title).toBe("first");
    await conforms(await s.fetch(`/api/v1/note/${entryId}`, cms), "/api/v1/{content_type}/{uuid}", "get", 200);
    const missing = await conforms(await s.fetch("/api/v1/nothing", cms), "/api/v1/{content_type}", "get", 404);
    expect(missing.error.status).toBe(404);
  });
});
