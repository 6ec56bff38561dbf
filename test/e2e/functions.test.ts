// Functions through the whole server: deploy over the operator API, call
// /api/fn/{slug} over REST with every method, statuses of the spec's table,
// header stripping and response shaping; event triggers end to end over the
// real NATS JetStream (an INSERT through /api/db reaches the function).
import { connect as h2connect } from "node:http2";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { FunctionService as AdminFunctionService } from "../../gen/pulsebase/admin/v1/functions_pb.js";
import { FunctionService as PlatformFunctionService } from "../../gen/pulsebase/platform/v1/functions_pb.js";
import { DatabaseService as AdminDatabaseService } from "../../gen/pulsebase/admin/v1/database_pb.js";
import { createModules } from "../../src/server/modules.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { TEST_NATS_URL } from "../helpers/db.js";

let s: TestServer;
let token: string;
let appId: bigint;

const ECHO = `export default async function (req, ctx) {
  if (req.query.fail) throw new Error("secret internal detail");
  if (req.query.shape) return { status: 201, headers: { "x-made-by": "fn", "set-cookie": "a=b" }, body: "created" };
  if (req.query.status) return { status: Number(req.query.status), headers: JSON.parse(req.query.h ?? "{}"), body: "a body" };
  return { method: req.method, slug: req.slug, query: req.query, headers: req.headers, payload: req.body, consumer: ctx.consumer.id, env: ctx.env.GREETING };
}`;

beforeAll(async () => {
  s = await startTestServer({ modules: createModules, env: { NATS_URL: TEST_NATS_URL } });
  const app = await s.createApp("fn e2e");
  appId = app.appId;
  token = (await s.register(app.appKey)).token;
  const fns = s.adminClient(AdminFunctionService);
  const fn = await fns.createFunction({ appId, name: "echo" });
  await fns.setSecret({ functionId: fn.id, name: "GREETING", value: "hej" } as never);
  await fns.deployVersion({ functionId: fn.id, code: ECHO, activate: true });
  await fns.createHttpTrigger({ functionId: fn.id, slug: "echo" });
  const idle = await fns.createFunction({ appId, name: "idle" });
  await fns.createHttpTrigger({ functionId: idle.id, slug: "idle" });
});
afterAll(() => s.close());

const call = (path: string, init: RequestInit = {}, tok = token) =>
  s.fetch(path, { ...init, headers: { authorization: `Bearer ${tok}`, ...(init.headers as Record<string, string>) } });

describe("/api/fn/{slug}", () => {
  it("passes method, query, body and the consumer; strips credentials and internal headers", async () => {
    for (const method of ["GET", "POST", "PUT", "PATCH", "DELETE"]) {
      const hasBody = method !== "GET" && method !== "DELETE";
      const res = await call(`/api/fn/echo?x=1`, {
        method,
        headers: { "content-type": "application/json", cookie: "sid=1", "x-pulsebase-app": "9", "x-custom": "kept" },
        body: hasBody ? JSON.stringify({ n: 5 }) : undefined,
      });
      const raw = await res.text();
      expect(res.status, raw).toBe(200);
      expect(res.headers.get("x-request-id")).toBeTruthy();
      const body = JSON.parse(raw);
      expect(body, raw).not.toBeNull();
      expect(body).toMatchObject({ method, slug: "echo", query: { x: "1" }, env: "hej" });
      expect(typeof body.consumer).toBe("number");
      if (hasBody) expect(body.payload).toEqual({ n: 5 });
      expect(body.headers).not.toHaveProperty("authorization");
      expect(body.headers).not.toHaveProperty("cookie");
      expect(body.headers).not.toHaveProperty("x-pulsebase-app");
      expect(body.headers["x-custom"]).toBe("kept");
    }
  });

  it("shapes responses and hides a thrown error's message", async () => {
    const shaped = await call("/api/fn/echo?shape=1");
    expect(shaped.status).toBe(201);
    expect(shaped.headers.get("x-made-by")).toBe("fn");
    expect(shaped.headers.get("set-cookie")).toBeNull();
    expect(await shaped.text()).toBe("created");
    const failed = await call("/api/fn/echo?fail=1");
    expect(failed.status).toBe(500);
    const text = await failed.text();
    expect(text).not.toContain("secret internal detail");
    expect(JSON.parse(text).error).toBe("function_error");
  });

  it("keeps answers private and drops origin-wide headers and bodies of 204, 205 and 304, over HTTP/1.1 and HTTP/2", async () => {
    const h = encodeURIComponent(JSON.stringify({ "cache-control": "public, max-age=600", "clear-site-data": '"*"', "service-worker-allowed": "/", etag: '"v1"' }));
    const ok = await call(`/api/fn/echo?status=200&h=${h}`);
    expect(ok.headers.get("cache-control")).toBe("private, max-age=600");
    expect(ok.headers.get("clear-site-data")).toBeNull();
    expect(ok.headers.get("service-worker-allowed")).toBeNull();
    expect(await ok.text()).toBe("a body");
    for (const status of [204, 205, 304]) {
      const r = await call(`/api/fn/echo?status=${status}&h=${h}`);
      expect(r.status).toBe(status);
      expect(r.headers.get("etag")).toBe('"v1"');
      expect(await r.text()).toBe("");
      // a 204 has no body and so no Content-Type or Content-Length (RFC 9110 8.6)
      if (status === 204) expect([r.headers.get("content-type"), r.headers.get("content-length")]).toEqual([null, null]);
    }
    const session = h2connect(s.httpsUrl, { rejectUnauthorized: false });
    try {
      for (const status of [204, 205, 304, 200]) {
        const st = session.request({ ":path": `/api/fn/echo?status=${status}&h=${h}`, authorization: `Bearer ${token}` });
        const answer = await new Promise<{ status: number; body: string; headers: Record<string, unknown> }>((resolve, reject) => {
          let headers: Record<string, unknown> = {};
          let body = "";
          st.on("response", (x) => (headers = x));
          st.on("data", (d: Buffer) => (body += d.toString()));
          st.on("end", () => resolve({ status: Number(headers[":status"]), body, headers }));
          st.on("error", reject);
        });
        expect(answer.status).toBe(status);
        expect(answer.body).toBe(status === 200 ? "a body" : "");
        expect(answer.headers["cache-control"]).toBe("private, max-age=600");
        if (status === 204) expect(answer.headers["content-type"]).toBeUndefined();
      }
    } finally {
      session.destroy();
    }
  });

  it("drops HTTP2-Settings, a header HTTP/2 refuses: the answer arrives over HTTP/2, not a stream left hanging", async () => {
    const h = encodeURIComponent(JSON.stringify({ "http2-settings": "AAMAAABkAAQAAP__", "x-kept": "yes" }));
    const session = h2connect(s.httpsUrl, { rejectUnauthorized: false });
    session.on("error", () => {});
    try {
      // twice: a run answered asynchronously and one answered in the batch's own call
      for (let i = 0; i < 2; i++) {
        const st = session.request({ ":path": `/api/fn/echo?status=200&h=${h}`, authorization: `Bearer ${token}` });
        const answer = await new Promise<{ status: number; body: string; headers: Record<string, unknown> } | "no answer">((resolve) => {
          let headers: Record<string, unknown> = {};
          let body = "";
          const timer = setTimeout(() => resolve("no answer"), 3000);
          st.on("response", (x) => (headers = x));
          st.on("data", (d: Buffer) => (body += d.toString()));
          st.on("end", () => {
            clearTimeout(timer);
            resolve({ status: Number(headers[":status"]), body, headers });
          });
          st.on("error", () => {});
        });
        expect(answer).toMatchObject({ status: 200, body: "a body", headers: { "x-kept": "yes" } });
        expect((answer as { headers: Record<string, unknown> }).headers["http2-settings"]).toBeUndefined();
      }
    } finally {
      session.destroy();
    }
    const over1 = await call(`/api/fn/echo?status=200&h=${h}`);
    expect(over1.status).toBe(200);
    expect(over1.headers.get("http2-settings")).toBeNull();
  });

  it("answers the same over Connect (FunctionService/Invoke), binary and JSON", async () => {
    for (const useBinaryFormat of [true, false]) {
      const transport = createConnectTransport({
        baseUrl: s.httpsUrl, httpVersion: "2", useBinaryFormat, nodeOptions: { rejectUnauthorized: false },
        interceptors: [(next) => (req) => { req.header.set("authorization", `Bearer ${token}`); return next(req); }],
      });
      const fnClient = createClient(PlatformFunctionService, transport);
      const shaped = await fnClient.invoke({ method: "POST", pathParams: { slug: "echo" }, query: { shape: "1" } });
      expect(shaped.status).toBe(201);
      expect(shaped.headers).toMatchObject({ "x-made-by": "fn", "content-type": "text/plain; charset=utf-8" });
      expect(shaped.headers).not.toHaveProperty("set-cookie");
      expect(Buffer.from(shaped.body).toString()).toBe("created");
      const echo = await fnClient.invoke({ method: "GET", pathParams: { slug: "echo" }, query: { x: "2" } });
      expect(echo.status).toBe(200);
      expect(JSON.parse(Buffer.from(echo.body).toString())).toMatchObject({ method: "GET", slug: "echo", query: { x: "2" }, env: "hej" });
      const missing = await fnClient.invoke({ method: "GET", pathParams: { slug: "nope" } }).catch((e: unknown) => e);
      expect(missing).toBeInstanceOf(ConnectError);
      expect((missing as ConnectError).code).toBe(Code.NotFound);
    }
  });

  it("answers 401, 404 and 503 as the spec's table says", async () => {
    expect((await call("/api/fn/echo", {}, "nope")).status).toBe(401);
    const missing = await call("/api/fn/nothing");
    expect(missing.status).toBe(404);
    expect(await missing.json()).toEqual({ error: "not_found", message: "No enabled HTTP trigger matches this slug." });
    const idle = await call("/api/fn/idle");
    expect(idle.status).toBe(503);
    expect((await idle.json()).error).toBe("no_active_version");
  });

  it("answers odd slugs with 404 in the platform envelope with X-Request-Id, never a 500 or Fastify's format", async () => {
    const nul = await call("/api/fn/a%00b");
    expect(nul.status).toBe(404);
    expect((await nul.json()).error).toBe("not_found");
    const long = await call(`/api/fn/${"a".repeat(300)}`);
    expect(long.status).toBe(404);
    expect(long.headers.get("x-request-id")).toBeTruthy();
    expect(await long.json()).toEqual({ error: "not_found", message: expect.any(String) });
    const badUrl = await call("/api/fn/%E0%A4%A");
    expect(badUrl.status).toBe(400);
    expect(badUrl.headers.get("x-request-id")).toBeTruthy();
    expect(await badUrl.json()).toEqual({ error: "bad_request", message: expect.any(String) });
    const cms = await s.fetch(`/api/v1/article/${"a".repeat(300)}`, { headers: { "x-app-key": "k" } });
    expect(cms.status).toBe(404);
    expect((await cms.json()).error).toMatchObject({ status: 404, code: "NOT_FOUND" });
  });
});

describe("event triggers", () => {
  it("delivers an INSERT made through /api/db to the watching function", async () => {
    const dbs = s.adminClient(AdminDatabaseService);
    const app = await s.admin.getApp({ key: { case: "id", value: appId } });
    const db = await dbs.createDatabase({ teamId: app.teamId, name: "events" });
    await dbs.linkDatabase({ databaseId: db.id, appId });
    const q = (sql: string, params?: unknown[]) =>
      call("/api/db/query", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ sql, params }) }).then((r) => r.json());
    await q("CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT)");
    await q("CREATE TABLE seen (op TEXT, item TEXT)");
    const fns = s.adminClient(AdminFunctionService);
    const fn = await fns.createFunction({ appId, name: "on-order" });
    await fns.deployVersion({
      functionId: fn.id,
      activate: true,
      code: `export default async function (req, ctx) {
        await ctx.db.query("INSERT INTO seen (op, item) VALUES (?, ?)", [ctx.event.operation, ctx.event.after.item]);
        return "ok";
      }`,
    });
    await fns.createEventTrigger({ functionId: fn.id, source: "db", target: "orders", operations: ["insert"] });
    // The very first write after the call returns is delivered (no wait before it).
    await q("INSERT INTO orders (item) VALUES (?)", ["apple"]);
    let seen: unknown[] = [];
    const deadline = Date.now() + 20_000;
    while (Date.now() < deadline) {
      seen = (await q("SELECT op, item FROM seen")).results[0].rows;
      if (seen.length > 0) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(seen).toEqual([["insert", "apple"]]);
  }, 40_000);

  it("refuses a db trigger on a table the linked database does not have, and keeps none", async () => {
    const fns = s.adminClient(AdminFunctionService);
    const fn = await fns.createFunction({ appId, name: "on-nothing" });
    const err = await fns.createEventTrigger({ functionId: fn.id, source: "db", target: "no_such_table", operations: ["insert"] }).then(
      () => undefined,
      (e: unknown) => e as ConnectError,
    );
    expect(err?.code).toBe(Code.FailedPrecondition);
    expect(err?.rawMessage).toContain("no_such_table does not exist");
    expect((await fns.listTriggers({ functionId: fn.id })).triggers).toEqual([]);
  });
});
