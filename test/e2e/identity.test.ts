// The foundation end to end: a real TLS server on random ports, driven over
// REST (undici), Connect binary over HTTP/2 and gRPC (@grpc/grpc-js).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createClient, ConnectError, Code } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { SignJWT } from "jose";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { ConsumerService } from "../../gen/pulsebase/platform/v1/consumer_pb.js";
import { SessionService } from "../../gen/pulsebase/platform/v1/session_pb.js";
import { IdentityService } from "../../gen/pulsebase/admin/v1/identity_pb.js";
import { ErrorDetailSchema } from "../../gen/pulsebase/common/v1/error_pb.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

let s: TestServer;
let appKey: string;
let appId: bigint;

const json = (body: unknown, headers: Record<string, string> = {}) => ({
  method: "POST",
  headers: { "content-type": "application/json", ...headers },
  body: JSON.stringify(body),
});

beforeAll(async () => {
  s = await startTestServer();
  ({ appKey, appId } = await s.createApp("identity e2e"));
});
afterAll(() => s.close());

describe("consumers over REST", () => {
  it("registers a device and returns the spec's fields and a token", async () => {
    const res = await s.fetch("/api/consumer", json({
      app_key: appKey, device_id: "d-1", device_model: "iPhone 16", user_id: "alice", os: "ios",
      country: "us", language: "EN", user_email: "alice@example.com",
    }));
    expect(res.status).toBe(200);
    expect(res.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    const body = await res.json();
    expect(Object.keys(body).sort()).toEqual(
      ["app_key", "country", "device_id", "device_model", "id", "language", "os", "token", "user_email", "user_id"].sort(),
    );
    expect(body).toMatchObject({ app_key: appKey, device_id: "d-1", user_id: "alice", country: "US", language: "en", user_email: "alice@example.com" });
    expect(typeof body.id).toBe("number");
    expect(body.token.split(".")).toHaveLength(3);
  });

  it("is idempotent on (app, device_id, user_id): same id, new token, fields updated", async () => {
    const a = await s.register(appKey, { device_id: "same", user_id: "bob", os: "android" });
    const b = await s.register(appKey, { device_id: "same", user_id: "bob", os: "android 15" });
    expect(b.id).toBe(a.id);
    expect(b.token).not.toBe(a.token);
    expect(b.body.os).toBe("android 15");
    // both tokens stay valid
    for (const t of [a.token, b.token]) {
      const r = await s.fetch("/api/session/start", { method: "POST", headers: { authorization: `Bearer ${t}` } });
      expect(r.status).toBe(200);
    }
  });

  it("refuses bad registrations with 422 naming every field", async () => {
    const res = await s.fetch("/api/consumer", json({ app_key: appKey, device_id: "", country: "XX", language: "english", user_email: "nope", os: "ios", user_id: "x".repeat(256) }));
    expect(res.status).toBe(422);
    const body = await res.json();
    expect(body.message).toBeTypeOf("string");
    expect(Object.keys(body.errors).sort()).toEqual(["country", "device_id", "device_model", "language", "user_email", "user_id"].sort());
    expect(body.errors.device_model).toEqual(["The device_model field is required."]);
    // wrong JSON types are reported before the value rules
    const types = await s.fetch("/api/consumer", json({ app_key: appKey, user_id: {}, device_id: ["a"], os: true }));
    expect(types.status).toBe(422);
    expect(Object.keys((await types.json()).errors).sort()).toEqual(["device_id", "os", "user_id"]);
  });

  it("refuses unknown fields and an unknown app key", async () => {
    const unknown = await s.fetch("/api/consumer", json({ app_key: appKey, device_id: "x", device_model: "m", user_id: "u", os: "o", country: "DE", language: "de", nickname: "z" }));
    expect(unknown.status).toBe(422);
    expect((await unknown.json()).errors).toHaveProperty("nickname");
    const badKey = await s.fetch("/api/consumer", json({ app_key: "pk_nope", device_id: "x", device_model: "m", user_id: "u", os: "o", country: "DE", language: "de" }));
    expect(badKey.status).toBe(422);
    expect((await badKey.json()).errors).toHaveProperty("app_key");
  });

  it("answers malformed JSON, wrong content type, wrong method, unknown route and oversized bodies in the envelope", async () => {
    const malformed = await s.fetch("/api/consumer", { method: "POST", headers: { "content-type": "application/json" }, body: "{not json" });
    expect(malformed.status).toBe(400);
    expect(await malformed.json()).toMatchObject({ error: "bad_request" });
    const text = await s.fetch("/api/consumer", { method: "POST", headers: { "content-type": "text/plain" }, body: "hello" });
    expect(text.status).toBe(415);
    expect(await text.json()).toMatchObject({ error: "unsupported_media_type" });
    const method = await s.fetch("/api/consumer", { method: "DELETE" });
    expect(method.status).toBe(405);
    expect(await method.json()).toMatchObject({ error: "method_not_allowed" });
    const nope = await s.fetch("/api/nothing-here");
    expect(nope.status).toBe(404);
    expect(await nope.json()).toMatchObject({ error: "not_found" });
    const big = await s.fetch("/api/consumer", json({ app_key: "x".repeat(51 * 1024 * 1024) }));
    expect(big.status).toBe(413);
    expect(await big.json()).toMatchObject({ error: "payload_too_large" });
    const array = await s.fetch("/api/consumer", json([1, 2]));
    expect(array.status).toBe(422);
  });

  it("updates only the caller's own consumer", async () => {
    const me = await s.register(appKey, { user_id: "carol" });
    const other = await s.register(appKey, { user_id: "dave" });
    const ok = await s.fetch(`/api/consumer/${me.id}`, { method: "PUT", headers: { "content-type": "application/json", authorization: `Bearer ${me.token}` }, body: JSON.stringify({ country: "FR", user_email: "c@example.com" }) });
    expect(ok.status).toBe(200);
    const body = await ok.json();
    expect(body).toMatchObject({ id: me.id, country: "FR", user_email: "c@example.com", app_key: appKey });
    expect(body.updated_at).toMatch(/Z$/);
    expect(body).not.toHaveProperty("token");
    const patch = await s.fetch(`/api/consumer/${me.id}`, { method: "PATCH", headers: { "content-type": "application/json", authorization: `Bearer ${me.token}` }, body: JSON.stringify({ language: "xx" }) });
    expect(patch.status).toBe(422);
    const theirs = await s.fetch(`/api/consumer/${other.id}`, { method: "PATCH", headers: { "content-type": "application/json", authorization: `Bearer ${me.token}` }, body: JSON.stringify({ country: "FR" }) });
    expect(theirs.status).toBe(404);
    const garbage = await s.fetch(`/api/consumer/abc`, { method: "PATCH", headers: { "content-type": "application/json", authorization: `Bearer ${me.token}` }, body: "{}" });
    expect(garbage.status).toBe(404);
  });

  it("issues a token from the query string or a JSON body (body wins), and 404 for another app's consumer", async () => {
    const me = await s.register(appKey);
    const q = await s.fetch(`/api/consumer/token?app_key=${appKey}&consumer_id=${me.id}`);
    expect(q.status).toBe(200);
    const { token } = await q.json();
    const start = await s.fetch("/api/session/start", { method: "POST", headers: { authorization: `Bearer ${token}` } });
    expect(start.status).toBe(200);
    const { request, Agent } = await import("undici");
    const body = await request(`${s.httpsUrl}/api/consumer/token?app_key=wrong&consumer_id=0`, {
      method: "GET",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ app_key: appKey, consumer_id: String(me.id) }),
      dispatcher: new Agent({ connect: { rejectUnauthorized: false } }),
    });
    expect(body.statusCode).toBe(200);
    expect(((await body.body.json()) as { token: string }).token.split(".")).toHaveLength(3);
    const other = await s.createApp("other");
    const cross = await s.fetch(`/api/consumer/token?app_key=${other.appKey}&consumer_id=${me.id}`);
    expect(cross.status).toBe(404);
    const missing = await s.fetch(`/api/consumer/token`);
    expect(missing.status).toBe(422);
    expect(Object.keys((await missing.json()).errors).sort()).toEqual(["app_key", "consumer_id"]);
  });
});

describe("sessions over REST", () => {
  it("starts, ends, and refuses to end twice or someone else's session", async () => {
    const me = await s.register(appKey);
    const auth = { authorization: `Bearer ${me.token}` };
    const started = await (await s.fetch("/api/session/start", { method: "POST", headers: auth })).json();
    expect(started).toMatchObject({ consumer_id: me.id, ended_at: null });
    expect(typeof started.session_id).toBe("number");
    const end = await s.fetch("/api/session/end", json({ session_id: String(started.session_id) }, auth));
    expect(end.status).toBe(200);
    const ended = await end.json();
    expect(ended.session_id).toBe(started.session_id);
    expect(Date.parse(ended.ended_at)).toBeGreaterThanOrEqual(Date.parse(ended.started_at));
    const again = await s.fetch("/api/session/end", json({ session_id: started.session_id }, auth));
    expect(again.status).toBe(409);
    const intruder = await s.register(appKey);
    const s2 = await (await s.fetch("/api/session/start", { method: "POST", headers: auth })).json();
    const theirs = await s.fetch("/api/session/end", json({ session_id: s2.session_id }, { authorization: `Bearer ${intruder.token}` }));
    expect(theirs.status).toBe(404);
    const early = await s.fetch("/api/session/end", json({ session_id: s2.session_id, timestamp: "2000-01-01T00:00:00Z" }, auth));
    expect(early.status).toBe(422);
    expect((await early.json()).errors).toHaveProperty("timestamp");
    const missing = await s.fetch("/api/session/end", json({}, auth));
    expect(missing.status).toBe(422);
    expect((await missing.json()).errors).toHaveProperty("session_id");
    const wrongType = await s.fetch("/api/session/end", json({ session_id: "abc" }, auth));
    expect(wrongType.status).toBe(422);
  });

  it("creates a batch in order and names a bad item's index", async () => {
    const me = await s.register(appKey);
    const auth = { authorization: `Bearer ${me.token}` };
    const ok = await s.fetch("/api/session/batch", json({ sessions: [
      { started_at: "2026-01-01T10:00:00Z", ended_at: "2026-01-01T10:05:00Z" },
      { started_at: "2026-01-02T10:00:00+02:00", ended_at: "2026-01-02T11:00:00+02:00" },
    ] }, auth));
    expect(ok.status).toBe(200);
    const rows = await ok.json();
    expect(Array.isArray(rows)).toBe(true);
    expect(rows).toHaveLength(2);
    expect(rows[0]).toMatchObject({ started_at: "2026-01-01T10:00:00.000Z", ended_at: "2026-01-01T10:05:00.000Z" });
    expect(rows[1]).toMatchObject({ started_at: "2026-01-02T08:00:00.000Z" });
    expect(rows[1].session_id).toBeGreaterThan(rows[0].session_id);
    const bad = await s.fetch("/api/session/batch", json({ sessions: [
      { started_at: "2026-01-01T10:00:00Z", ended_at: "2026-01-01T10:05:00Z" },
      { started_at: "2026-01-01T10:00:00Z", ended_at: "2025-01-01T10:05:00Z" },
      { started_at: 5 },
    ] }, auth));
    expect(bad.status).toBe(422);
    const errs = (await bad.json()).errors;
    expect(Object.keys(errs).sort()).toEqual(["sessions.1.ended_at", "sessions.2.ended_at", "sessions.2.started_at"]);
    const sessions = await s.admin.listSessions({ consumerId: BigInt(me.id) });
    expect(sessions.sessions).toHaveLength(2);
    const empty = await s.fetch("/api/session/batch", json({ sessions: [] }, auth));
    expect(empty.status).toBe(422);
  });
});

describe("authentication", () => {
  it("refuses missing, malformed, forged, expired and revoked tokens with 401", async () => {
    const me = await s.register(appKey);
    const call = (h?: string) => s.fetch("/api/session/start", { method: "POST", headers: h ? { authorization: h } : {} });
    expect((await call()).status).toBe(401);
    expect((await call("Basic abc")).status).toBe(401);
    expect((await call(`Bearer ${me.token.slice(0, -2)}xx`)).status).toBe(401);
    const keys = JSON.parse(await readFile(join(s.dataDir, "jwt-keys.json"), "utf8")).keys;
    const secret = Buffer.from(keys[0].secret, "base64url");
    const expired = await new SignJWT({ app_key: appKey })
      .setProtectedHeader({ alg: "HS256", kid: keys[0].kid })
      .setSubject(String(me.id)).setIssuer("pulsebase").setIssuedAt(1000).setExpirationTime(2000)
      .sign(secret);
    const r = await call(`Bearer ${expired}`);
    expect(r.status).toBe(401);
    expect(await r.json()).toEqual({ error: "unauthenticated", message: "The token has expired." });
    // deleting the consumer revokes its tokens
    await s.admin.deleteConsumer({ consumerId: BigInt(me.id) });
    expect((await call(`Bearer ${me.token}`)).status).toBe(401);
  });

  it("a rotated app key revokes the app's tokens; a token never reaches another app", async () => {
    const app2 = await s.createApp("rotating");
    const me = await s.register(app2.appKey);
    const ok = await s.fetch("/api/session/start", { method: "POST", headers: { authorization: `Bearer ${me.token}` } });
    expect(ok.status).toBe(200);
    await s.admin.rotateAppKey({ appId: app2.appId });
    const after = await s.fetch("/api/session/start", { method: "POST", headers: { authorization: `Bearer ${me.token}` } });
    expect(after.status).toBe(401);
  });

  it("keeps admin and device credentials apart", async () => {
    const me = await s.register(appKey);
    const asDevice = createClient(IdentityService, createConnectTransport({
      baseUrl: s.adminUrl, httpVersion: "1.1",
      interceptors: [(next) => (req) => { req.header.set("authorization", `Bearer ${me.token}`); return next(req); }],
    }));
    await expect(asDevice.listApps({})).rejects.toMatchObject({ code: Code.Unauthenticated });
    const opOnDevice = await s.fetch("/api/session/start", { method: "POST", headers: { authorization: `Bearer ${s.operatorToken}` } });
    expect(opOnDevice.status).toBe(401);
  });

  it("refuses plain HTTP: 401 for the platform, 308 to HTTPS for CMS reads", async () => {
    const plain = await fetch(s.httpUrl + "/api/session/start", { method: "POST" });
    expect(plain.status).toBe(401);
    expect(plain.headers.get("x-request-id")).toBeTruthy();
    expect(await plain.json()).toMatchObject({ error: "unauthenticated" });
    const cms = await fetch(s.httpUrl + "/api/v1/_schemas", { redirect: "manual" });
    expect(cms.status).toBe(308);
    // Without PULSEBASE_PUBLIC_URL: this server's HTTPS port on localhost.
    expect(cms.headers.get("location")).toBe(`https://localhost:${new URL(s.httpsUrl).port}/api/v1/_schemas`);
    // a URL the router cannot decode is refused the same way, not in Fastify's format
    const bad = await fetch(s.httpUrl + "/api/fn/%E0%A4%A", { method: "POST" });
    expect(bad.status).toBe(401);
    expect(bad.headers.get("x-request-id")).toBeTruthy();
    expect(await bad.json()).toMatchObject({ error: "unauthenticated" });
  });

  it("keeps a well-formed incoming X-Request-Id and replaces a malformed one", async () => {
    const id = "0b7f3c1e-2d4a-4b6c-8e9f-0a1b2c3d4e5f";
    const kept = await s.fetch("/api/session/start", { method: "POST", headers: { "x-request-id": id } });
    expect(kept.headers.get("x-request-id")).toBe(id);
    const replaced = await s.fetch("/api/session/start", { method: "POST", headers: { "x-request-id": "<script>" } });
    expect(replaced.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
  });
});

describe("the same calls over Connect and gRPC", () => {
  it("serves Connect binary over HTTP/2 with error details", async () => {
    const transport = createConnectTransport({ baseUrl: s.httpsUrl, httpVersion: "2", useBinaryFormat: true, nodeOptions: { rejectUnauthorized: false } });
    const consumers = createClient(ConsumerService, transport);
    const c = await consumers.createConsumer({ appKey, deviceId: "connect-1", deviceModel: "m", userId: "u", os: "ios", country: "GB", language: "en" });
    expect(c.id).toBeGreaterThan(0n);
    const sessions = createClient(SessionService, transport);
    const started = await sessions.startSession({}, { headers: { authorization: `Bearer ${c.token}` } });
    expect(started.consumerId).toBe(c.id);
    expect(started.endedAt).toBeUndefined();
    const err = await sessions.endSession({ sessionId: 0n }, { headers: { authorization: `Bearer ${c.token}` } }).catch((e) => e);
    expect(err).toBeInstanceOf(ConnectError);
    expect(err.code).toBe(Code.InvalidArgument);
    const detail = (err as ConnectError).findDetails(ErrorDetailSchema)[0]!;
    expect(detail.code).toBe("validation_failed");
    expect(detail.httpStatus).toBe(422);
    expect(detail.fieldViolations.map((v) => v.field)).toEqual(["session_id"]);
    await expect(sessions.startSession({})).rejects.toMatchObject({ code: Code.Unauthenticated });
  });

  it("serves gRPC to an independent client (@grpc/grpc-js)", async () => {
    const grpc = await import("@grpc/grpc-js");
    const { fromBinary, toBinary, create } = await import("@bufbuild/protobuf");
    const { CreateConsumerRequestSchema, ConsumerSchema } = await import("../../gen/pulsebase/platform/v1/consumer_pb.js");
    const ca = await readFile(join(s.dataDir, "tls", "cert.pem"));
    const client = new grpc.Client(s.httpsUrl.replace("https://", ""), grpc.credentials.createSsl(ca), { "grpc.ssl_target_name_override": "localhost" });
    const req = create(CreateConsumerRequestSchema, { appKey, deviceId: "grpc-1", deviceModel: "m", userId: "u", os: "linux", country: "NL", language: "nl" });
    const res = await new Promise<ReturnType<typeof fromBinary<typeof ConsumerSchema>>>((resolve, reject) => {
      client.makeUnaryRequest(
        "/pulsebase.platform.v1.ConsumerService/CreateConsumer",
        (m: typeof req) => Buffer.from(toBinary(CreateConsumerRequestSchema, m)),
        (b: Buffer) => fromBinary(ConsumerSchema, b),
        req,
        (e, v) => (e ? reject(e) : resolve(v!)),
      );
    });
    client.close();
    expect(res.deviceId).toBe("grpc-1");
    expect(res.token).toBeTruthy();
    expect(res.country).toBe("NL");
  });
});

describe("operator API", () => {
  it("lists apps and consumers with paging", async () => {
    const app3 = await s.createApp("paging");
    for (let i = 0; i < 3; i++) await s.register(app3.appKey, { user_id: `p${i}` });
    const p1 = await s.admin.listConsumers({ appId: app3.appId, pageSize: 2 });
    expect(p1.consumers).toHaveLength(2);
    expect(p1.nextPageToken).not.toBe("");
    const p2 = await s.admin.listConsumers({ appId: app3.appId, pageSize: 2, pageToken: p1.nextPageToken });
    expect(p2.consumers.map((c) => c.userId)).toEqual(["p2"]);
    expect(p2.nextPageToken).toBe("");
    const apps = await s.admin.listApps({ teamId: app3.teamId });
    expect(apps.apps.map((a) => a.name)).toEqual(["paging"]);
    expect(apps.apps[0]!.plan?.name).toBe("free");
  });

  it("strict token mode requires the device id", async () => {
    const app4 = await s.createApp("strict");
    const me = await s.register(app4.appKey, { device_id: "phone-9" });
    await s.admin.updateAppSettings({ appId: app4.appId, strictTokenMode: true });
    const without = await s.fetch(`/api/consumer/token?app_key=${app4.appKey}&consumer_id=${me.id}`);
    expect(without.status).toBe(422);
    const wrong = await s.fetch(`/api/consumer/token?app_key=${app4.appKey}&consumer_id=${me.id}&device_id=other`);
    expect(wrong.status).toBe(404);
    const right = await s.fetch(`/api/consumer/token?app_key=${app4.appKey}&consumer_id=${me.id}&device_id=phone-9`);
    expect(right.status).toBe(200);
  });

  it("serves the OpenAPI document and health probes", async () => {
    const doc = await (await s.fetch("/openapi.json")).json();
    expect(doc.openapi).toBe("3.1.0");
    expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining(["/api/consumer", "/api/consumer/{id}", "/api/consumer/token", "/api/session/start", "/api/session/end", "/api/session/batch"]));
    expect(Object.keys(doc.paths["/api/consumer/{id}"]).sort()).toEqual(["patch", "put"]);
    expect((await s.fetch("/healthz")).status).toBe(200);
    expect(await (await s.fetch("/readyz")).json()).toEqual({ status: "ready" });
  });
});

it("answers CORS preflights for any origin by default and exposes X-Request-Id", async () => {
  const res = await s.fetch("/api/session/start", { method: "OPTIONS", headers: { origin: "https://app.example", "access-control-request-method": "POST", "access-control-request-headers": "authorization" } });
  expect(res.status).toBe(204);
  // any origin, no credentials: the one answer for every origin, so no Vary
  expect(res.headers.get("access-control-allow-origin")).toBe("*");
  expect(res.headers.get("access-control-allow-headers")).toBe("authorization");
  expect(res.headers.get("access-control-allow-methods")).toContain("POST");
  const r = await s.fetch("/api/session/start", { method: "POST", headers: { origin: "https://app.example" } });
  expect(r.headers.get("access-control-allow-origin")).toBe("*");
  expect(r.headers.get("access-control-expose-headers")).toContain("x-request-id");
});

describe("CORS with a list of allowed origins (PULSEBASE_CORS_ORIGINS)", () => {
  let limited: TestServer;
  beforeAll(async () => {
    limited = await startTestServer({ env: { PULSEBASE_CORS_ORIGINS: "https://app.example,https://admin.example" } });
  });
  afterAll(() => limited?.close());

  it("reflects an allowed origin, says the answer varies by Origin, and leaves others without access", async () => {
    const pre = (origin: string) => limited.fetch("/api/session/start", { method: "OPTIONS", headers: { origin, "access-control-request-method": "POST" } });
    const ok = await pre("https://admin.example");
    expect(ok.status).toBe(204);
    expect(ok.headers.get("access-control-allow-origin")).toBe("https://admin.example");
    expect(ok.headers.get("vary")).toMatch(/origin/i);
    const other = await pre("https://evil.example");
    expect(other.headers.get("access-control-allow-origin")).toBeNull();
    const r = await limited.fetch("/api/session/start", { method: "POST", headers: { origin: "https://evil.example" } });
    expect(r.status).toBe(401); // CORS is the browser's check; the request itself still needs a token
    expect(r.headers.get("access-control-allow-origin")).toBeNull();
    expect(r.headers.get("vary")).toMatch(/origin/i);
  });
});

it("keeps app ids apart", () => {
  expect(appId).toBeGreaterThan(0n);
});
