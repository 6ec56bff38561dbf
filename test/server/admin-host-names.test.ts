// DNS rebinding (issue #28, point 11): the admin listener answers only the
// host names it serves, over a real socket with the Host header a browser
// would send: a page on evil.example whose name was pointed at 127.0.0.1 gets
// 421 in the envelope; 127.0.0.1, localhost, [::1] with any port and the
// names of PULSEBASE_ADMIN_HOSTS are served. The CLI reaches it by address.
import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/kernel/config.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

let s: TestServer;
let port: number;

beforeAll(async () => {
  s = await startTestServer({ env: { PULSEBASE_ADMIN_HOSTS: "console.example.com, Ops.Example.NET" } });
  port = Number(new URL(s.adminUrl).port);
});
afterAll(() => s.close());

/** GET or POST on the admin listener at 127.0.0.1 with the given Host header. */
function send(host: string | undefined, path: string, init: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { ...init.headers };
    if (host !== undefined) headers.host = host;
    const req = request({ host: "127.0.0.1", port, path, method: init.method ?? "GET", headers, setHost: host === undefined }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (body += c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on("error", reject);
    req.end(init.body);
  });
}

const getSetupStatus = (host: string) =>
  send(host, "/pulsebase.admin.v1.AccountService/GetSetupStatus", { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });

describe("admin listener host names", () => {
  it.each(["evil.example", "evil.example:PORT", "evil.example.:8444", "127.0.0.1.nip.io", "localhost.evil.example", "console.example.com.evil.example"])(
    "refuses Host %s with 421 in the envelope and a request id, before any method runs",
    async (name) => {
      const host = name.replace("PORT", String(port));
      for (const res of [await getSetupStatus(host), await send(host, "/"), await send(host, "/healthz")]) {
        expect(res.status).toBe(421);
        expect(res.headers["x-request-id"]).toBeTruthy();
        expect(JSON.parse(res.body)).toEqual({ error: "misdirected_request", message: expect.stringMatching(/host name/) });
        // Nothing of the console reaches that page.
        expect(res.body).not.toContain("<script");
      }
    },
  );

  it.each(["127.0.0.1", "127.0.0.1:PORT", "localhost:PORT", "LOCALHOST:1", "[::1]:PORT", "[::1]", "console.example.com:PORT", "ops.example.net", "10.1.2.3:8444"])(
    "serves Host %s",
    async (name) => {
      const res = await getSetupStatus(name.replace("PORT", String(port)));
      expect(res.status, res.body).toBe(200);
      expect(res.headers["x-request-id"]).toBeTruthy();
      expect(JSON.parse(res.body)).toHaveProperty("needsSetup");
    },
  );

  it("the operator token and the CLI's address still work", async () => {
    expect((await s.admin.createTeam({ name: "by address" })).id).toBeGreaterThan(0n);
  });

  it("PULSEBASE_ADMIN_HOSTS takes host names only", () => {
    expect(loadConfig({ PULSEBASE_ADMIN_HOSTS: "a.example, B.example" }).adminHosts).toEqual(["a.example", "b.example"]);
    expect(loadConfig({}).adminHosts).toEqual([]);
    for (const bad of ["https://a.example", "a.example:8444", "a.example/x"]) {
      expect(() => loadConfig({ PULSEBASE_ADMIN_HOSTS: bad })).toThrow(/PULSEBASE_ADMIN_HOSTS/);
    }
  });
});
