import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/kernel/config.js";

describe("configuration", () => {
  it("has working defaults for the embedded mode", () => {
    const c = loadConfig({});
    expect(c.httpsPort).toBe(8443);
    expect(c.adminHost).toBe("127.0.0.1");
    expect(c.databaseUrl).toBeUndefined();
    expect(c.natsUrl).toBeUndefined();
    expect(c.tokenTtlSeconds).toBe(30 * 24 * 3600);
    expect(c).toMatchObject({ bodyBudgetBytes: 256 * 1024 * 1024, bodyTimeoutSeconds: 30, bodyMinRateBytes: 4096, http2MaxStreams: 100 });
    expect(c.publicUrl).toBeUndefined();
    expect(loadConfig({ PULSEBASE_PUBLIC_URL: "https://API.example.com:8443/" }).publicUrl).toBe("https://api.example.com:8443");
    // unset: every change-bus cache keeps its own TTL (the cluster tests set one for all)
    expect(c.cacheTtlMs).toBeUndefined();
    expect(loadConfig({ PULSEBASE_CACHE_TTL_MS: "600000" }).cacheTtlMs).toBe(600_000);
  });

  it.each([
    [{ PULSEBASE_HTTPS_PORT: "abc" }, /PULSEBASE_HTTPS_PORT must be an integer/],
    [{ PULSEBASE_ADMIN_PORT: "70000" }, /PULSEBASE_ADMIN_PORT must be between/],
    [{ DATABASE_URL: "mysql://x" }, /DATABASE_URL must use postgres:/],
    [{ NATS_URL: "::::" }, /NATS_URL is not a valid URL/],
    [{ PULSEBASE_TLS_CERT_FILE: "/x" }, /must be set together/],
    [{ PULSEBASE_TRUSTED_PROXIES: "proxy.local" }, /PULSEBASE_TRUSTED_PROXIES must list IP addresses/],
    [{ PULSEBASE_PLAN_ENFORCEMENT: "maybe" }, /PULSEBASE_PLAN_ENFORCEMENT must be true or false/],
    [{ PULSEBASE_PUBLIC_URL: "https://api.example.com/v1" }, /PULSEBASE_PUBLIC_URL must be an origin/],
    [{ PULSEBASE_PUBLIC_URL: "ftp://api.example.com" }, /PULSEBASE_PUBLIC_URL must use https: or http:/],
    [{ PULSEBASE_BODY_BUDGET_BYTES: String(64 * 1024 * 1024) }, /PULSEBASE_BODY_BUDGET_BYTES must be at least twice PULSEBASE_BODY_LIMIT_BYTES/],
    [{ PULSEBASE_HTTP2_MAX_STREAMS: "0" }, /PULSEBASE_HTTP2_MAX_STREAMS must be between/],
    [{ PULSEBASE_CACHE_TTL_MS: "0" }, /PULSEBASE_CACHE_TTL_MS must be between/],
  ])("refuses %o naming the variable", (env, re) => {
    expect(() => loadConfig(env as Record<string, string>)).toThrow(re);
  });
});

describe("observability settings", () => {
  it("logs every request unless PULSEBASE_ACCESS_LOG turns it off; /metrics is open unless a token is set", () => {
    expect(loadConfig({}).accessLog).toBe(true);
    expect(loadConfig({ PULSEBASE_ACCESS_LOG: "off" }).accessLog).toBe(false);
    expect(loadConfig({}).rpcPipeline).toBe("fast");
    expect(loadConfig({ PULSEBASE_RPC_PIPELINE: "connect-node" }).rpcPipeline).toBe("connect-node");
    expect(loadConfig({}).metricsToken).toBeUndefined();
    expect(loadConfig({ PULSEBASE_METRICS_TOKEN: " scrape_token_0123456789 " }).metricsToken).toBe("scrape_token_0123456789");
  });

  it.each([
    [{ PULSEBASE_ACCESS_LOG: "sometimes" }, /PULSEBASE_ACCESS_LOG must be true or false/],
    [{ PULSEBASE_RPC_PIPELINE: "grpc-js" }, /PULSEBASE_RPC_PIPELINE must be one of fast, connect-node/],
    [{ PULSEBASE_METRICS_TOKEN: "short" }, /PULSEBASE_METRICS_TOKEN must be at least 16 characters/],
  ])("refuses %o naming the variable", (env, re) => {
    expect(() => loadConfig(env as Record<string, string>)).toThrow(re);
  });
});

describe("tenant fairness settings", () => {
  it("defaults to a fair share of the engines and bounded queues; each is settable", () => {
    const c = loadConfig({});
    expect(c.db).toEqual({ engineProcesses: 2, appRunning: 0, appQueued: 64, queueWaitMs: 2000, remoteAppRunning: 8 });
    expect(c.fnDbCalls).toEqual({ running: 4, queued: 100 });
    const set = loadConfig({
      PULSEBASE_DB_ENGINE_PROCESSES: "4", PULSEBASE_DB_APP_RUNNING: "2", PULSEBASE_DB_APP_QUEUED: "10",
      PULSEBASE_DB_QUEUE_WAIT_MS: "500", PULSEBASE_DB_REMOTE_APP_RUNNING: "3",
      PULSEBASE_FN_DB_CALLS_RUNNING: "1", PULSEBASE_FN_DB_CALLS_QUEUED: "0",
    });
    expect(set.db).toEqual({ engineProcesses: 4, appRunning: 2, appQueued: 10, queueWaitMs: 500, remoteAppRunning: 3 });
    expect(set.fnDbCalls).toEqual({ running: 1, queued: 0 });
  });

  it.each([
    [{ PULSEBASE_DB_ENGINE_PROCESSES: "0" }, /PULSEBASE_DB_ENGINE_PROCESSES must be between 1 and 64/],
    [{ PULSEBASE_DB_APP_QUEUED: "0" }, /PULSEBASE_DB_APP_QUEUED must be between/],
    [{ PULSEBASE_DB_QUEUE_WAIT_MS: "1s" }, /PULSEBASE_DB_QUEUE_WAIT_MS must be an integer/],
    [{ PULSEBASE_FN_DB_CALLS_RUNNING: "0" }, /PULSEBASE_FN_DB_CALLS_RUNNING must be between 1 and 100/],
  ])("refuses %o naming the variable", (env, re) => {
    expect(() => loadConfig(env as Record<string, string>)).toThrow(re);
  });
});

describe("functions' fetch settings", () => {
  it("defaults to the documented per-invocation limits; each is settable and bounded", () => {
    expect(loadConfig({}).functions.fetch).toEqual({
      subrequests: 50, concurrent: 6, responseBytes: 10 * 1024 * 1024, runResponseBytes: 32 * 1024 * 1024,
      requestBytes: 10 * 1024 * 1024, redirects: 10, timeoutMs: 30_000, processBytes: 256 * 1024 * 1024,
      allowLoopback: false,
    });
    expect(loadConfig({ PULSEBASE_FUNCTION_EGRESS_ALLOW_LOOPBACK: "1" }).functions.fetch.allowLoopback).toBe(true);
    const c = loadConfig({ PULSEBASE_FUNCTION_FETCH_SUBREQUESTS: "0", PULSEBASE_FUNCTION_FETCH_RESPONSE_BYTES: "1048576", PULSEBASE_FUNCTION_FETCH_TIMEOUT_MS: "2000" });
    expect(c.functions.fetch).toMatchObject({ subrequests: 0, responseBytes: 1024 * 1024, timeoutMs: 2000 });
    expect(() => loadConfig({ PULSEBASE_FUNCTION_FETCH_REDIRECTS: "50" })).toThrow(/PULSEBASE_FUNCTION_FETCH_REDIRECTS must be between/);
    expect(() => loadConfig({ PULSEBASE_FUNCTION_FETCH_CONCURRENCY: "0" })).toThrow(/PULSEBASE_FUNCTION_FETCH_CONCURRENCY must be between/);
  });
});

describe("per-application shares (issue 28)", () => {
  it("defaults to the README's limits: a quarter of the body budget per application, an eighth without a token, 1 MiB per address", () => {
    const c = loadConfig({});
    expect(c).toMatchObject({ bodyAppShareBytes: 64 * 1024 * 1024, bodyAnonymousShareBytes: 32 * 1024 * 1024, bodyAddressShareBytes: 1024 * 1024 });
    // shares follow the budget, and the per-application one is never below one full body
    const small = loadConfig({ PULSEBASE_BODY_BUDGET_BYTES: String(128 * 1024 * 1024) });
    expect(small.bodyAppShareBytes).toBe(small.bodyLimitBytes);
    expect(small.bodyAnonymousShareBytes).toBe(16 * 1024 * 1024);
    expect(() => loadConfig({ PULSEBASE_BODY_ADDRESS_SHARE_BYTES: String(64 * 1024 * 1024) })).toThrow(/PULSEBASE_BODY_ADDRESS_SHARE_BYTES must be between/);
  });

  it("defaults the isolate and heap shares, the sandbox CSP and the audit retention as documented", () => {
    const c = loadConfig({});
    expect(c.fnIsolates).toEqual({ appIsolates: 0, heapBudgetMb: 2048, appHeapMb: 0, keepHeapMb: 64 });
    expect(c.functions.sandboxCsp).toBe(true);
    expect(loadConfig({ PULSEBASE_FUNCTION_SANDBOX_CSP: "false" }).functions.sandboxCsp).toBe(false);
    expect(c.console.auditRetentionDays).toBe(365);
    expect(c.adminHosts).toEqual([]);
    expect(loadConfig({ PULSEBASE_ADMIN_HOSTS: "Console.Example.com" }).adminHosts).toEqual(["console.example.com"]);
    expect(() => loadConfig({ PULSEBASE_ADMIN_HOSTS: "https://console.example.com/" })).toThrow(/PULSEBASE_ADMIN_HOSTS must list host names/);
  });
});
