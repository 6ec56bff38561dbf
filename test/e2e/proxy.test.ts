// Behind a TLS-terminating proxy: X-Forwarded-Proto and X-Forwarded-Host
// count only from the configured proxy addresses, and then only
// their rightmost value (the one the proxy itself wrote). Redirects to HTTPS
// point at PULSEBASE_PUBLIC_URL, never at a Host the client chose.
import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../helpers/server.js";

let s: TestServer;
let pub: TestServer;
beforeAll(async () => {
  s = await startTestServer({ kind: "pglite", env: { PULSEBASE_TRUSTED_PROXIES: "127.0.0.1" } });
  pub = await startTestServer({ kind: "pglite", env: { PULSEBASE_TRUSTED_PROXIES: "127.0.0.1", PULSEBASE_PUBLIC_URL: "https://api.example.com" } });
});
afterAll(() => Promise.all([s.close(), pub.close()]));

/** A GET on the plain listener with the Host header given. */
function plainGet(server: TestServer, path: string, host: string): Promise<{ status: number; location?: string }> {
  const u = new URL(server.httpUrl);
  return new Promise((resolve, reject) => {
    const req = request({ host: u.hostname, port: Number(u.port), path, headers: { host } }, (res) => {
      res.resume();
      resolve({ status: res.statusCode ?? 0, location: res.headers.location });
    });
    req.on("error", reject);
    req.end();
  });
}

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

describe("redirects to HTTPS", () => {
  it("point the plain listener's 308 at the configured public address, whatever Host the client sent", async () => {
    expect(await plainGet(pub, "/api/v1/article?page=2", "evil.example")).toEqual({ status: 308, location: "https://api.example.com/api/v1/article?page=2" });
    const port = new URL(s.httpsUrl).port;
    expect(await plainGet(s, "/api/v1/_schemas", "evil.example:8080")).toEqual({ status: 308, location: `https://localhost:${port}/api/v1/_schemas` });
  });

  it("point the public listener's 308 at the configured public address over X-Forwarded-Host", async () => {
    const r = await pub.fetch("/api/v1/_schemas", { headers: { "x-forwarded-proto": "http", "x-forwarded-host": "evil.example" }, redirect: "manual" });
    expect(r.status).toBe(308);
    expect(r.headers.get("location")).toBe("https://api.example.com/api/v1/_schemas");
  });
});

describe("forwarded headers from a trusted proxy", () => {
  it("take the rightmost X-Forwarded-Proto: what the client prepended does not count", async () => {
    const forgedHttps = await s.fetch("/api/session/start", { method: "POST", headers: { "x-forwarded-proto": "https, http" } });
    expect(await forgedHttps.json()).toEqual({ error: "unauthenticated", message: "HTTPS is required." });
    const forgedHttp = await s.fetch("/api/session/start", { method: "POST", headers: { "x-forwarded-proto": "http, https" } });
    expect(await forgedHttp.json()).toMatchObject({ error: "unauthenticated", message: "Missing Bearer token." });
  });

  it("take the rightmost X-Forwarded-Host, and ignore one that is not a host", async () => {
    const r = await s.fetch("/api/v1/_schemas", { headers: { "x-forwarded-proto": "http", "x-forwarded-host": "evil.example, cms.example" }, redirect: "manual" });
    expect(r.headers.get("location")).toBe("https://cms.example/api/v1/_schemas");
    const bad = await s.fetch("/api/v1/_schemas", { headers: { "x-forwarded-proto": "http", "x-forwarded-host": "evil.example/x@y" }, redirect: "manual" });
    expect(bad.headers.get("location")).toBe(`https://localhost:${new URL(s.httpsUrl).port}/api/v1/_schemas`);
  });
});

it("ignores X-Forwarded-* from an address that is not a trusted proxy", async () => {
  const other = await startTestServer({ kind: "pglite", env: { PULSEBASE_TRUSTED_PROXIES: "10.9.9.9" } });
  try {
    const r = await other.fetch("/api/session/start", { method: "POST", headers: { "x-forwarded-proto": "http" } });
    expect(await r.json()).toMatchObject({ message: "Missing Bearer token." });
  } finally {
    await other.close();
  }
});
