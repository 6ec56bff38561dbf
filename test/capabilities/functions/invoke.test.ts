// The HTTP trigger (pulsebase.platform.v1.FunctionService.Invoke) against
// real PostgreSQL and libSQL: every status of the spec's table, header
// stripping, response shaping, env and db, concurrency.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConnectError } from "@connectrpc/connect";
import { createTestDb, type TestDb } from "../../helpers/db.js";
import { errorDetail } from "../../../src/kernel/errors.js";
import { FUNCTION_SANDBOX_CSP } from "../../../src/capabilities/functions/response-shaping.js";
import { consumerOfApp, createApp, createHarness, dec, deployHttp, enc, setPlan, type Harness } from "./fixtures.js";

let db: TestDb;
let h: Harness;
let appId: number;

beforeAll(async () => {
  db = await createTestDb("postgres");
  h = createHarness(db.sql);
  appId = await createApp(db.sql);
});
afterAll(async () => {
  await h.close();
  await db.drop();
});

function call(slug: string, over: Partial<{ method: string; headers: Record<string, string>; body: Uint8Array; contentType: string; query: Record<string, string> }> = {}, who: ReturnType<typeof consumerOfApp> | null = consumerOfApp(appId, 42)) {
  return h.device(who ?? undefined).invoke({
    method: over.method ?? "POST",
    pathParams: { slug },
    query: over.query ?? {},
    headers: over.headers ?? {},
    body: over.body ?? new Uint8Array(),
    contentType: over.contentType ?? "",
  });
}

async function failure(p: Promise<unknown>): Promise<{ http: number; code: string; message: string; retryAfter: number }> {
  try {
    await p;
  } catch (err) {
    const d = errorDetail(err);
    return { http: d?.httpStatus ?? 0, code: d?.code ?? "", message: (err as ConnectError).rawMessage, retryAfter: d?.retryAfterSeconds ?? 0 };
  }
  throw new Error("expected a failure");
}

describe("HTTP trigger statuses", () => {
  it("200 with the function's JSON result", async () => {
    await deployHttp(h, appId, "hello", `export default async (req, ctx) => ({ hello: ctx.consumer.id, method: req.method, slug: req.slug })`);
    const res = await call("hello");
    expect(res.status).toBe(200);
    expect(res.headers["content-type"]).toBe("application/json");
    expect(JSON.parse(dec.decode(res.body))).toEqual({ hello: 42, method: "POST", slug: "hello" });
  });

  it("401 without a consumer", async () => {
    expect(await failure(call("hello", {}, null))).toMatchObject({ http: 401, code: "unauthenticated" });
  });

  it("402 when the plan has no functions and enforcement is on; runs when enforcement is off", async () => {
    const other = await createApp(db.sql);
    await deployHttp(h, other, "paid", `export default () => "ran"`);
    await setPlan(db.sql, other, { functionsEnabled: false });
    expect(await failure(call("paid", {}, consumerOfApp(other)))).toMatchObject({ http: 402, code: "plan_required" });
    const lax = createHarness(db.sql, { enforcePlan: false });
    try {
      const res = await lax.device(consumerOfApp(other)).invoke({ method: "GET", pathParams: { slug: "paid" } });
      expect([res.headers["content-type"], dec.decode(res.body)]).toEqual(["application/json", JSON.stringify("ran")]);
    } finally {
      await lax.close();
    }
  });

  it("404 for an unknown slug, a disabled trigger, and another application's slug", async () => {
    expect(await failure(call("nope"))).toMatchObject({ http: 404, code: "not_found" });
    const { triggerId } = await deployHttp(h, appId, "toggled", `export default () => 1`);
    await h.admin.setTriggerEnabled({ triggerId, enabled: false });
    expect(await failure(call("toggled"))).toMatchObject({ http: 404, code: "not_found" });
    await h.admin.setTriggerEnabled({ triggerId, enabled: true });
    expect((await call("toggled")).status).toBe(200);
    const stranger = await createApp(db.sql);
    expect(await failure(call("hello", {}, consumerOfApp(stranger)))).toMatchObject({ http: 404 });
  });

  it("429 past the application's plan limit, with retry-after", async () => {
    const limited = await createApp(db.sql, { functionInvocationsPerMinute: 3 });
    await deployHttp(h, limited, "busy", `export default () => 1`);
    for (let i = 0; i < 3; i++) expect((await call("busy", {}, consumerOfApp(limited))).status).toBe(200);
    const f = await failure(call("busy", {}, consumerOfApp(limited)));
    expect(f).toMatchObject({ http: 429, code: "rate_limited" });
    expect(f.retryAfter).toBeGreaterThanOrEqual(1);
    expect(f.retryAfter).toBeLessThanOrEqual(20);
  });

  it("429 past the function's own limit while other functions of the app still run", async () => {
    await deployHttp(h, appId, "capped", `export default () => 1`, { invocationsPerMinute: 2 });
    await call("capped");
    await call("capped");
    expect(await failure(call("capped"))).toMatchObject({ http: 429, code: "rate_limited" });
    expect((await call("hello")).status).toBe(200);
  });

  it("500 when the function throws: generic message with the request id, error recorded", async () => {
    const { functionId } = await deployHttp(h, appId, "thrower", `export default () => { console.log("about to fail"); throw new Error("secret detail"); }`);
    const f = await failure(h.device(consumerOfApp(appId)).invoke({ method: "GET", pathParams: { slug: "thrower" } }, { headers: { "x-test-request-id": "rid-500" } }));
    expect(f).toMatchObject({ http: 500, code: "function_error" });
    expect(f.message).toContain("rid-500");
    expect(f.message).not.toContain("secret detail");
    const list = await h.admin.listInvocations({ functionId });
    expect(list.invocations[0]).toMatchObject({ status: 500, outcome: "error", error: "Error: secret detail", requestId: "rid-500", triggerKind: "http" });
    expect(list.invocations[0]!.logs).toEqual([expect.objectContaining({ level: "log", message: "about to fail" })]);
  });

  it("500 for a status outside 200-599", async () => {
    await deployHttp(h, appId, "badstatus", `export default () => ({ status: 700, body: "x" })`);
    expect(await failure(call("badstatus"))).toMatchObject({ http: 500, code: "function_error" });
  });

  it("503 when the function has no active version", async () => {
    const f = await h.admin.createFunction({ appId: BigInt(appId), name: "undeployed" });
    await h.admin.createHttpTrigger({ functionId: f.id, slug: "undeployed" });
    expect(await failure(call("undeployed"))).toMatchObject({ http: 503, code: "no_active_version" });
  });

  it("504 past the timeout", async () => {
    await deployHttp(h, appId, "slow", `export default async () => { for (;;) {} }`, { timeoutMs: 100 });
    expect(await failure(call("slow"))).toMatchObject({ http: 504, code: "function_timeout" });
  });
});

describe("request and response", () => {
  it("strips cookie, authorization, proxy-authorization and x-pulsebase-* headers; passes query and method", async () => {
    await deployHttp(h, appId, "echo", `export default (req) => ({ seen: req })`);
    const res = await call("echo", {
      method: "PUT",
      query: { a: "1", b: "x,y" },
      headers: { Cookie: "s=1", authorization: "Bearer t", "Proxy-Authorization": "Basic x", "X-Pulsebase-App": "9", "x-pulsebase-internal": "1", "X-Custom": "kept", accept: "application/json" },
      body: enc.encode(JSON.stringify({ n: 1, list: [1, 2] })),
      contentType: "application/json",
    });
    expect(JSON.parse(dec.decode(res.body)).seen).toEqual({
      method: "PUT",
      slug: "echo",
      query: { a: "1", b: "x,y" },
      headers: { "x-custom": "kept", accept: "application/json" },
      body: { n: 1, list: [1, 2] },
      rawBody: JSON.stringify({ n: 1, list: [1, 2] }),
      rawBodyEncoding: "utf8",
    });
  });

  it("parses form fields and keeps other bodies as text", async () => {
    const form = await call("echo", { body: enc.encode("a=1&b=2&a=3"), contentType: "application/x-www-form-urlencoded" });
    expect(JSON.parse(dec.decode(form.body)).seen.body).toEqual({ a: ["1", "3"], b: "2" });
    const text = await call("echo", { body: enc.encode("plain words"), contentType: "text/plain" });
    expect(JSON.parse(dec.decode(text.body)).seen.body).toBe("plain words");
    expect(await failure(call("echo", { body: enc.encode("{bad"), contentType: "application/json" }))).toMatchObject({ http: 422 });
    // JSON too deep to copy into the isolate is the caller's input (422), not the function failing (500)
    const deep = "[".repeat(20_000) + "]".repeat(20_000);
    expect(await failure(call("echo", { body: enc.encode(deep), contentType: "application/json" }))).toMatchObject({ http: 422 });
    const ok = "[".repeat(500) + "]".repeat(500);
    expect((await call("echo", { body: enc.encode(ok), contentType: "application/json" })).status).toBe(200);
    // An unknown slug is a 404 whatever the body.
    expect(await failure(call("no-such-fn", { body: enc.encode("{bad"), contentType: "application/json" }))).toMatchObject({ http: 404 });
  });

  it("shapes responses: status and headers, text bodies, JSON bodies, forbidden headers dropped", async () => {
    await deployHttp(h, appId, "shape", `export default (req) => {
      switch (req.query.kind) {
        case "text": return { body: "plain" };
        case "typed": return { status: 202, headers: { "Content-Type": "text/html; charset=utf-8", "X-Extra": "1" }, body: "<b>hi</b>" };
        case "json": return { status: 201, body: { a: 1 } };
        case "forbidden": return { body: "x", headers: { "Set-Cookie": "a=b", "Transfer-Encoding": "chunked", "Content-Length": "1", Connection: "close", "X-Pulsebase-Role": "admin", "Bad Name": "v", "X-Ok": "yes" } };
        case "array": return [1, 2];
        case "string": return "just text";
        case "null": return null;
        default: return { nobody: true };
      }
    }`);
    const text = await call("shape", { query: { kind: "text" } });
    expect([text.status, text.headers["content-type"], dec.decode(text.body)]).toEqual([200, "text/plain; charset=utf-8", "plain"]);
    const typed = await call("shape", { query: { kind: "typed" } });
    expect([typed.status, typed.headers["content-type"], typed.headers["x-extra"], dec.decode(typed.body)]).toEqual([202, "text/html; charset=utf-8", "1", "<b>hi</b>"]);
    const json = await call("shape", { query: { kind: "json" } });
    expect([json.status, json.headers["content-type"], dec.decode(json.body)]).toEqual([201, "application/json", '{"a":1}']);
    const forbidden = await call("shape", { query: { kind: "forbidden" } });
    // (the sandbox policy is the server's: docs/console.md, "Session cookie and host names")
    expect(forbidden.headers).toEqual({ "x-ok": "yes", "content-type": "text/plain; charset=utf-8", "content-security-policy": FUNCTION_SANDBOX_CSP });
    expect(dec.decode((await call("shape", { query: { kind: "array" } })).body)).toBe("[1,2]");
    const str = await call("shape", { query: { kind: "string" } });
    expect([str.status, str.headers["content-type"], dec.decode(str.body)]).toEqual([200, "application/json", '"just text"']);
    expect(dec.decode((await call("shape", { query: { kind: "null" } })).body)).toBe("null");
    const plain = await call("shape");
    expect([plain.status, dec.decode(plain.body)]).toEqual([200, '{"nobody":true}']);
  });

  it("gives the function its secrets as env and its application's database as db", async () => {
    const { functionId } = await deployHttp(h, appId, "notes", `export default async (req, { env, db }) => {
      await db.query("CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, text TEXT)");
      if (req.method === "POST") await db.query("INSERT INTO notes (text) VALUES (?)", [req.body.text]);
      const { rows } = await db.query("SELECT text FROM notes ORDER BY id");
      return { key: env.API_KEY, notes: rows.map((x) => x.text) };
    }`);
    await h.admin.setSecret({ functionId, name: "API_KEY", value: "k-123" });
    await call("notes", { body: enc.encode('{"text":"first"}'), contentType: "application/json" });
    const res = await call("notes", { method: "GET" });
    expect(JSON.parse(dec.decode(res.body))).toEqual({ key: "k-123", notes: ["first"] });
    const rows = await h.fdb.client(appId).execute("SELECT text FROM notes");
    expect(rows.rows.map((r) => r.text)).toEqual(["first"]);
  });

  it("runs many parallel invocations of one function with correct, independent results", async () => {
    await deployHttp(h, appId, "double", `let calls = 0; export default async (req) => { calls++; await null; return { n: Number(req.query.n) * 2 }; }`);
    const results = await Promise.all(Array.from({ length: 80 }, (_, n) => call("double", { query: { n: String(n) } })));
    results.forEach((r, n) => expect(JSON.parse(dec.decode(r.body))).toEqual({ n: n * 2 }));
  });
});

describe("isolation and limits through the trigger", () => {
  it("keeps each application's database to itself", async () => {
    const a = await createApp(db.sql);
    const b = await createApp(db.sql);
    await h.fdb.client(a).execute("CREATE TABLE secrets (v TEXT)");
    await h.fdb.client(a).execute("INSERT INTO secrets VALUES ('a-only')");
    const code = `export default async (req, { db }) => { const r = await db.query("SELECT v FROM secrets"); return r.error ? { error: r.error } : { rows: r.values }; }`;
    await deployHttp(h, a, "peek", code);
    await deployHttp(h, b, "peek", code);
    expect(JSON.parse(dec.decode((await call("peek", {}, consumerOfApp(a))).body))).toEqual({ rows: [["a-only"]] });
    expect(JSON.parse(dec.decode((await call("peek", {}, consumerOfApp(b))).body)).error).toMatch(/no such table/);
  });

  it("answers 500 to a memory bomb, a huge response and deep recursion, and keeps serving", async () => {
    await deployHttp(h, appId, "hostile", `export default (req) => {
      if (req.query.kind === "memory") { const a = []; for (;;) a.push("x".repeat(1e6) + Math.random()); }
      if (req.query.kind === "huge") return { body: "x".repeat(7 * 1024 * 1024) };
      if (req.query.kind === "recursion") { const f = (n) => f(n + 1) + 1; return f(0); }
      return "fine";
    }`, { memoryMb: 32, timeoutMs: 3000 });
    for (const kind of ["memory", "huge", "recursion"]) {
      expect(await failure(call("hostile", { query: { kind } }))).toMatchObject({ http: 500, code: "function_error" });
    }
    expect(dec.decode((await call("hostile")).body)).toBe(JSON.stringify("fine"));
  });

  it("treats a form field named __proto__ as data", async () => {
    const res = await call("echo", { body: enc.encode("__proto__=x&__proto__=y&a=1"), contentType: "application/x-www-form-urlencoded" });
    expect(JSON.parse(dec.decode(res.body)).seen.body).toEqual(JSON.parse('{"__proto__":["x","y"],"a":"1"}'));
  });
});
