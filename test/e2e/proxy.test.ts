// Behind a TLS-terminating proxy: X-Forwarded-Proto counts only from the
// configured proxy addresses (DECISIONS 1).
import { afterAll, beforeAll, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../helpers/server.js";

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer({ kind: "pglite", env: { PULSEBASE_TRUSTED_PROXIES: "127.0.0.1" } });
});
afterAll(() => s.close());

it("treats X-Forwarded-Proto: http from a trusted proxy as plain HTTP", async () => {
  const plain = await s.fetch("/api/session/start", { method: "POST", headers: { "x-forwarded-proto": "http" } });
  expect(plain.status).toBe(401);
  expect(await plain.json()).toEqual({ error: "unauthenticated", message: "HTTPS is required." });
  const cms = await s.fetch("/api/v1/_schemas", { headers: { "x-forwarded-proto": "http", "x-forwarded-host": "cms.example" }, redirect: "manual" });
  expect(cms.status).toBe(308);
  expect(cms.headers.get("location")).toBe("https://cms.example/api/v1/_schemas");
  const https = await s.fetch("/api/session/start", { method: "POST", headers: { "x-forwarded-proto": "https" } });
  expect(await https.json()).toMatchObject({ error: "unauthenticated", message: "Missing Bearer token." });
});
