// /openapi.json as client generators see it: inside the test run, clients
// are generated from the live document with openapi-typescript (types,
// checked by the TypeScript compiler) + openapi-fetch and with
// @hey-api/openapi-ts, and each calls every class of operation against the
// real server: no credentials, Bearer without a body, a JSON body, a log
// with a file attachment (multipart), path variables, CMS filters and sort by
// name, and the error envelopes. `@redocly/cli lint` reports no problem.
import { execFile } from "node:child_process";
import { mkdir, rm, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { createClient as heyApi } from "@hey-api/openapi-ts";
import openapiTS, { astToString } from "openapi-typescript";
import ts from "typescript";
import { Agent, fetch as undiciFetch } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CmsService } from "../../gen/pulsebase/admin/v1/cms_pb.js";
import { createModules } from "../../src/server/modules.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

/* eslint-disable @typescript-eslint/no-explicit-any */
const repo = resolve(import.meta.dirname, "../..");
// Under the repository (ignored by git) so the generated code resolves its imports.
const dir = join(repo, "tmp", `openapi-clients-${process.pid}`);
let s: TestServer;
let appKey: string;
let doc: any;
const dispatcher = new Agent({ connect: { rejectUnauthorized: false } });
/** fetch for generated clients: the test server's certificate is self-signed. */
const trustingFetch = async (input: Request): Promise<Response> =>
  undiciFetch(input.url, {
    method: input.method,
    headers: input.headers as any,
    body: input.body ? Buffer.from(await input.arrayBuffer()) : undefined,
    dispatcher,
  }) as unknown as Response;

beforeAll(async () => {
  // A media address that is not localhost (the linter's no-server-example.com).
  s = await startTestServer({ modules: createModules, env: { PULSEBASE_MEDIA_BASE_URL: "https://media.pulsebase.test/files" } });
  const app = await s.createApp("openapi clients");
  appKey = app.appKey;
  const cms = s.adminClient(CmsService);
  await cms.createContentType({
    appId: app.appId,
    contentType: {
      slug: "product", name: "Product",
      fields: [{ name: "title", type: "text", required: true, searchable: true }, { name: "featured", type: "boolean" }, { name: "stars", type: "number" }],
      filterableFields: ["featured", "stars"], sortableFields: ["stars"], searchableFields: ["title"],
    },
  });
  for (const [title, featured, stars] of [["Rocket red", true, 3], ["Rocket blue", false, 5], ["Rocket green", true, 4]] as const) {
    await cms.createEntry({ appId: app.appId, contentType: "product", publish: true, data: { title, featured: String(featured), stars } });
  }
  doc = await (await s.fetch("/openapi.json")).json();
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, "openapi.json"), JSON.stringify(doc));
});
afterAll(async () => {
  await s?.close();
  await rm(dir, { recursive: true, force: true });
});

const logFields = { app_version: "1.0.0", classFQN: "com.example.Crash", message: "boom", type: "crash", context: { screen: "home" } };
const tooBig = () => new Blob([new Uint8Array(4 * 1024 * 1024 + 1)]);

describe("the document", () => {
  it("offers multipart only where a file travels, names the CMS parameters, documents 4xx, servers and the media path", () => {
    expect(Object.keys(doc.paths["/api/logs"].post.requestBody.content)).toEqual(["multipart/form-data"]);
    expect(Object.keys(doc.paths["/api/log/batch"].post.requestBody.content)).toEqual(["multipart/form-data", "application/json"]);
    expect(Object.keys(doc.paths["/api/events/batch"].post.requestBody.content)).toEqual(["application/json", "multipart/form-data"]);
    const list = doc.paths["/api/v1/{content_type}"].get;
    expect(list.parameters.map((p: any) => p.name)).toEqual(["content_type", "filter", "sort", "page", "per_page", "fields"]);
    expect(list.parameters.find((p: any) => p.name === "filter")).toMatchObject({ in: "query", style: "deepObject", explode: true });
    const search = doc.paths["/api/v1/{content_type}/search"].get;
    expect(search.parameters.find((p: any) => p.name === "q")).toMatchObject({ required: true });
    expect(doc.paths["/api/v1/{content_type}/{uuid}"].get.parameters.map((p: any) => p.name)).toEqual(["content_type", "uuid", "populate"]);
    expect(Object.keys(list.responses)).toEqual(expect.arrayContaining(["200", "304", "400", "404", "429", "504", "default"]));
    expect(Object.keys(doc.paths["/api/db/query"].post.responses)).toEqual(expect.arrayContaining(["401", "403", "422", "503"]));
    expect(Object.keys(doc.paths["/api/consumer"].post.responses)).not.toContain("401");
    expect(doc.servers).toEqual([expect.objectContaining({ url: "/" })]);
    expect(doc.paths["/{app_key}/cms/media/{file_id}"].servers[0].url).toBe("https://media.pulsebase.test/files");
    expect(doc.paths["/api/logs"].post.description).toMatch(/file attachment/);
    expect(doc.components.schemas["pulsebase.platform.v1.LogItem"].properties.file.description).toMatch(/4 MiB/);
  });

  it("passes @redocly/cli lint", async () => {
    const { stdout } = await promisify(execFile)(join(repo, "node_modules/.bin/redocly"), ["lint", "--config", join(repo, "redocly.yaml"), "--format=json", join(dir, "openapi.json")], { cwd: repo });
    const report = JSON.parse(stdout);
    expect(report.problems, JSON.stringify(report.problems, null, 2)).toEqual([]);
    expect(report.totals).toMatchObject({ errors: 0, warnings: 0 });
  });
});

describe("openapi-typescript + openapi-fetch", () => {
  it("generates types that type-check the calls, which then work against the server", async () => {
    // format: binary as Blob (openapi-typescript's documented transform), so a file part is typed.
    const ast = await openapiTS(doc, {
      transform: (schema) => (schema.format === "binary" ? ts.factory.createTypeReferenceNode("Blob") : undefined),
    });
    await writeFile(join(dir, "schema.d.ts"), astToString(ast));
    const calls = join(dir, "openapi-fetch-calls.ts");
    await writeFile(calls, OPENAPI_FETCH_CALLS);
    const program = ts.createProgram([calls], {
      strict: true, noEmit: true, target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext,
      lib: ["lib.es2022.d.ts", "lib.dom.d.ts"], types: [], skipLibCheck: true, allowImportingTsExtensions: true,
    });
    const problems = ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, "\n"));
    expect(problems).toEqual([]);

    const { run } = await import(pathToFileURL(calls).href);
    const r = await run(s.httpsUrl, trustingFetch, appKey, tooBig());
    expect(r.consumer).toMatchObject({ app_key: appKey, device_id: "oa-fetch" });
    expect(r.session.ended_at).toBeNull();
    expect(r.event).toMatchObject({ name: "purchase" });
    expect(r.log).toMatchObject({ classFQN: "com.example.Crash", context: { screen: "home" } });
    expect(r.tooBig.status).toBe(422);
    expect(r.tooBig.error.errors).toHaveProperty("file");
    expect(r.updated).toMatchObject({ user_id: "u-fetch-2" });
    expect(r.featured.data.map((e: any) => e.title)).toEqual(["Rocket green", "Rocket red"]);
    expect(r.featured.meta).toMatchObject({ total: 2, current_page: 1 });
    expect(r.found.meta).toMatchObject({ query: "blue", total: 1 });
    expect(r.entry.data.title).toBe("Rocket green");
    expect(r.cmsError).toEqual({ status: 404, error: { error: expect.objectContaining({ status: 404, code: "CONTENT_TYPE_NOT_FOUND" }) } });
    expect(r.invalid.status).toBe(422);
    expect(r.invalid.error.errors.name).toBeDefined();
    expect(r.unauthenticated).toEqual({ status: 401, error: expect.objectContaining({ error: "unauthenticated" }) });
  });
});

describe("@hey-api/openapi-ts", () => {
  it("generates an SDK whose calls work against the server", async () => {
    const out = join(dir, "hey-api");
    await heyApi({
      input: join(dir, "openapi.json"),
      output: { path: out, importFileExtension: ".ts" },
      plugins: ["@hey-api/client-fetch", "@hey-api/typescript", "@hey-api/sdk"],
      logs: { level: "silent" },
    });
    const sdk = await import(pathToFileURL(join(out, "sdk.gen.ts")).href);
    const { client } = await import(pathToFileURL(join(out, "client.gen.ts")).href);
    client.setConfig({ baseUrl: s.httpsUrl, fetch: trustingFetch });

    const consumer = await sdk.consumerServiceCreateConsumer({
      body: { app_key: appKey, device_id: "oa-hey", device_model: "Pixel", user_id: "u-hey", os: "android", country: "DE", language: "de" },
    });
    expect(consumer.response.status).toBe(200);
    const auth = { auth: consumer.data.token };
    const session = await sdk.sessionServiceStartSession(auth);
    expect(session.data.ended_at).toBeNull();
    expect((await sdk.analyticsServiceRecordEvent({ ...auth, body: { name: "purchase", metadata: { sku: "A1" } } })).data).toMatchObject({ name: "purchase" });
    // The SDK sends the log as multipart/form-data: the file as a file part.
    const log = await sdk.analyticsServiceRecordLog({ ...auth, body: { ...logFields, file: new Blob(["dump"]) } });
    expect(log.response.status).toBe(200);
    expect(log.data).toMatchObject({ classFQN: "com.example.Crash", context: { screen: "home" } });
    const big = await sdk.analyticsServiceRecordLog({ ...auth, body: { ...logFields, file: tooBig() } });
    expect(big.response.status).toBe(422);
    expect(big.error.errors).toHaveProperty("file");
    // A batch (202): items in a list travel as JSON (bracket-keyed files need multipart by hand).
    const batch = await sdk.analyticsServiceBatchLogs({ ...auth, body: { logs: [{ ...logFields, session_id: session.data.session_id }] } });
    expect(batch.response.status).toBe(202);
    const updated = await sdk.consumerServiceUpdateConsumerPatch({ ...auth, path: { id: String(consumer.data.id) }, body: { user_id: "u-hey-2" } });
    expect(updated.data).toMatchObject({ user_id: "u-hey-2" });

    const cms = { headers: { "X-App-Key": appKey } };
    const sorted = await sdk.contentServiceListEntries({ ...cms, path: { content_type: "product" }, query: { filter: { featured: "true" }, sort: "stars" } });
    expect(sorted.data.data.map((e: any) => e.title)).toEqual(["Rocket red", "Rocket green"]);
    const found = await sdk.contentServiceSearchEntries({ ...cms, path: { content_type: "product" }, query: { q: "green", per_page: 1 } });
    expect(found.data.meta).toMatchObject({ query: "green", total: 1, per_page: 1 });
    const missing = await sdk.contentServiceListEntries({ ...cms, path: { content_type: "nothing" } });
    expect(missing.response.status).toBe(404);
    expect(missing.error.error).toMatchObject({ status: 404, code: "CONTENT_TYPE_NOT_FOUND" });
    const noKey = await sdk.contentServiceListSchemas();
    expect(noKey.response.status).toBe(400);
    expect(noKey.error.error.code).toBe("MISSING_APP_KEY");
  });
});

/** The openapi-fetch calls, type-checked against the generated schema.d.ts, then run. */
const OPENAPI_FETCH_CALLS = `
import createClient from "openapi-fetch";
import type { paths } from "./schema.d.ts";

export async function run(baseUrl: string, fetch: (r: Request) => Promise<Response>, appKey: string, bigFile: Blob) {
  const anonymous = createClient<paths>({ baseUrl, fetch });
  const { data: consumer } = await anonymous.POST("/api/consumer", {
    body: { app_key: appKey, device_id: "oa-fetch", device_model: "Pixel", user_id: "u-fetch", os: "android", country: "DE", language: "de" },
  });
  const client = createClient<paths>({ baseUrl, fetch, headers: { Authorization: "Bearer " + consumer!.token } });
  const { data: session } = await client.POST("/api/session/start");
  const { data: event } = await client.POST("/api/events", { body: { name: "purchase", metadata: { sku: "A1" } } });
  // multipart/form-data: openapi-fetch sends a FormData body as is.
  const form = (body?: object) => {
    const fd = new FormData();
    for (const [k, v] of Object.entries(body ?? {})) fd.append(k, v instanceof Blob ? v : typeof v === "object" ? JSON.stringify(v) : String(v));
    return fd;
  };
  const fields = { app_version: "1.0.0", classFQN: "com.example.Crash", message: "boom", type: "crash", context: { screen: "home" } };
  const { data: log } = await client.POST("/api/logs", { body: { ...fields, file: new Blob(["dump"]) }, bodySerializer: form });
  const big = await client.POST("/api/logs", { body: { ...fields, file: bigFile }, bodySerializer: form });
  const { data: updated } = await client.PATCH("/api/consumer/{id}", { params: { path: { id: String(consumer!.id) } }, body: { user_id: "u-fetch-2" } });

  const cms = createClient<paths>({ baseUrl, fetch, headers: { "X-App-Key": appKey } });
  const { data: featured } = await cms.GET("/api/v1/{content_type}", {
    params: { path: { content_type: "product" }, query: { filter: { featured: "true" }, sort: "-stars", per_page: 10 } },
  });
  const { data: found } = await cms.GET("/api/v1/{content_type}/search", { params: { path: { content_type: "product" }, query: { q: "blue" } } });
  const first = (featured!.data as { id: string }[])[0]!;
  const { data: entry } = await cms.GET("/api/v1/{content_type}/{uuid}", { params: { path: { content_type: "product", uuid: first.id } } });
  const missing = await cms.GET("/api/v1/{content_type}", { params: { path: { content_type: "nothing" } } });
  const invalid = await client.POST("/api/events", { body: { name: "", metadata: {} } });
  const unauthenticated = await anonymous.POST("/api/session/start");
  return {
    consumer, session, event, log, updated, featured, found, entry,
    tooBig: { status: big.response.status, error: big.error },
    cmsError: { status: missing.response.status, error: missing.error },
    invalid: { status: invalid.response.status, error: invalid.error },
    unauthenticated: { status: unauthenticated.response.status, error: unauthenticated.error },
  };
}
`;
