// The SDK's identity against a real server: registration once per device,
// the consumer and token kept in the storage adapter, token re-issue on 401
// (also in strict token mode), a new registration when the consumer is gone,
// and user changes through the update endpoint (kept while offline).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { memoryStorage, NetworkError, ValidationError } from "../../packages/client/src/index.js";
import { createModules } from "../../src/server/modules.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { sdkClient } from "./sdk-fixture.js";

let s: TestServer;
let appKey: string;

beforeAll(async () => {
  s = await startTestServer({ modules: createModules });
  ({ appKey } = await s.createApp("sdk identity"));
});
afterAll(() => s.close());

const consumerRow = async (id: number) =>
  (await s.db.sql.query<{ user_id: string; user_email: string | null; device_id: string }>("SELECT user_id, user_email, device_id FROM consumers WHERE id = $1", [id])).rows[0];

describe("identity", () => {
  it("registers once and keeps the consumer and token in the storage adapter", async () => {
    const storage = memoryStorage();
    const a = sdkClient(s, appKey, { storage, userId: "alice" });
    const me = await a.ready();
    expect(me.consumerId).toBeGreaterThan(0);
    expect(me.token).toMatch(/^ey/);
    expect((await consumerRow(me.consumerId))).toMatchObject({ user_id: "alice", device_id: me.deviceId });
    const stored = JSON.parse((await storage.get(`pb:${appKey}:id`))!);
    expect(stored).toMatchObject({ consumerId: me.consumerId, token: me.token, deviceId: me.deviceId });

    // The next start (same storage) makes no registration: same consumer, same token.
    const b = sdkClient(s, appKey, { storage, userId: "alice" });
    const again = await b.ready();
    expect(again.consumerId).toBe(me.consumerId);
    expect(again.token).toBe(me.token);
    const r = await b.request<{ session_id: number; consumer_id: number }>("/api/session/start", { body: {} });
    expect(r.data.consumer_id).toBe(me.consumerId);
  });

  it("re-issues the token on a 401 and retries the request", async () => {
    const storage = memoryStorage();
    const me = await sdkClient(s, appKey, { storage }).ready();
    // A token the server no longer accepts (expired, or from before a key change).
    await storage.set(`pb:${appKey}:id`, JSON.stringify({ ...me, token: "eyJexpired.token.value" }));
    const c = sdkClient(s, appKey, { storage });
    const r = await c.request<{ consumer_id: number }>("/api/session/start", { body: {} });
    expect(r.status).toBe(200);
    expect(r.data.consumer_id).toBe(me.consumerId);
    expect(c.identity!.token).not.toBe("eyJexpired.token.value");
    expect(c.identity!.consumerId).toBe(me.consumerId); // a new token, not a new consumer
    expect(JSON.parse((await storage.get(`pb:${appKey}:id`))!).token).toBe(c.identity!.token);
  });

  it("re-issues in strict token mode, where the device id is required", async () => {
    const strict = await s.createApp("sdk strict");
    await s.admin.updateAppSettings({ appId: strict.appId, strictTokenMode: true });
    const storage = memoryStorage();
    const me = await sdkClient(s, strict.appKey, { storage }).ready();
    // The endpoint refuses a request without the device id in this mode ...
    const bare = await s.fetch(`/api/consumer/token?app_key=${strict.appKey}&consumer_id=${me.consumerId}`);
    expect(bare.status).toBe(422);
    // ... and the SDK sends it.
    await storage.set(`pb:${strict.appKey}:id`, JSON.stringify({ ...me, token: "bad" }));
    const c = sdkClient(s, strict.appKey, { storage });
    expect((await c.request("/api/session/start", { body: {} })).status).toBe(200);
    expect(c.identity!.consumerId).toBe(me.consumerId);
  });

  it("registers again when the consumer was deleted", async () => {
    const storage = memoryStorage();
    const me = await sdkClient(s, appKey, { storage, userId: "bob" }).ready();
    await s.admin.deleteConsumer({ consumerId: BigInt(me.consumerId) } as never);
    const c = sdkClient(s, appKey, { storage, userId: "bob" });
    const r = await c.request<{ consumer_id: number }>("/api/session/start", { body: {} });
    expect(r.status).toBe(200);
    expect(c.identity!.consumerId).not.toBe(me.consumerId);
    expect(r.data.consumer_id).toBe(c.identity!.consumerId);
    expect(c.identity!.deviceId).toBe(me.deviceId); // the same device
  });

  it("changes the user through the update endpoint, also after an offline change", async () => {
    const storage = memoryStorage();
    const c = sdkClient(s, appKey, { storage, userId: "anon-1" });
    const me = await c.ready();
    await c.setUser({ userId: "carol", userEmail: "carol@example.com" });
    expect(await consumerRow(me.consumerId)).toMatchObject({ user_id: "carol", user_email: "carol@example.com" });
    expect(c.identity!.userId).toBe("carol");

    // Offline: the change is kept (also in storage) and applied before the next request.
    const offline = sdkClient(s, appKey, { storage, baseUrl: "https://127.0.0.1:1" });
    await expect(offline.setUser({ userId: "dave" })).rejects.toBeInstanceOf(NetworkError);
    expect(JSON.parse((await storage.get(`pb:${appKey}:id`))!).pending).toEqual({ userId: "dave" });
    const back = sdkClient(s, appKey, { storage });
    await back.request("/api/session/start", { body: {} });
    expect((await consumerRow(me.consumerId))!.user_id).toBe("dave");
    expect(back.identity).toMatchObject({ userId: "dave", consumerId: me.consumerId });
    expect(back.identity!.pending).toBeUndefined();

    // A change the server refuses is a ValidationError naming the field, and is not kept.
    await expect(back.setUser({ country: "XX" })).rejects.toMatchObject({ fields: { country: expect.any(Array) } });
    await expect(back.setUser({ country: "XX" })).rejects.toBeInstanceOf(ValidationError);
    expect(back.identity!.pending).toBeUndefined();
    expect(back.identity!.country).toBe("DE");
  });

  it("a registration the server refuses is a ValidationError with field paths and the request id", async () => {
    const c = sdkClient(s, "pk_not_a_key");
    const err = await c.ready().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).fields).toHaveProperty("app_key");
    expect((err as ValidationError).requestId).toMatch(/^[0-9a-f-]{36}$/);
  });

});
