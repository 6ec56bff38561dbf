import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/config.js";

describe("configuration", () => {
  it("has working defaults for the embedded mode", () => {
    const c = loadConfig({});
    expect(c.httpsPort).toBe(8443);
    expect(c.adminHost).toBe("127.0.0.1");
    expect(c.databaseUrl).toBeUndefined();
    expect(c.natsUrl).toBeUndefined();
    expect(c.tokenTtlSeconds).toBe(30 * 24 * 3600);
  });

  it.each([
    [{ PULSEBASE_HTTPS_PORT: "abc" }, /PULSEBASE_HTTPS_PORT must be an integer/],
    [{ PULSEBASE_ADMIN_PORT: "70000" }, /PULSEBASE_ADMIN_PORT must be between/],
    [{ DATABASE_URL: "mysql://x" }, /DATABASE_URL must use postgres:/],
    [{ NATS_URL: "::::" }, /NATS_URL is not a valid URL/],
    [{ PULSEBASE_TLS_CERT_FILE: "/x" }, /must be set together/],
    [{ PULSEBASE_TRUSTED_PROXIES: "proxy.local" }, /PULSEBASE_TRUSTED_PROXIES must list IP addresses/],
    [{ PULSEBASE_PLAN_ENFORCEMENT: "maybe" }, /PULSEBASE_PLAN_ENFORCEMENT must be true or false/],
  ])("refuses %o naming the variable", (env, re) => {
    expect(() => loadConfig(env as Record<string, string>)).toThrow(re);
  });
});
