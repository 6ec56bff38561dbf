// Issue #28, point 4, through the whole server as an operator runs it (no
// test switch): a function of an application the operator allowed private
// addresses, with an allowlist naming 127.0.0.1, localhost, *.localhost,
// [::1] and *.0.0.1, cannot read the admin listener's /metrics (every
// tenant's figures), reach the operator API or the public listener, on
// loopback, in an IPv4-mapped spelling, or on this machine's non-loopback
// interface address (the public listener here binds all interfaces), nor any
// link-local address. Each refusal is the function's catchable TypeError.
import { networkInterfaces } from "node:os";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FunctionService as AdminFunctionService } from "../../gen/pulsebase/admin/v1/functions_pb.js";
import { createModules } from "../../src/server/modules.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

const CALLER = `export default async function (req) {
  const out = {};
  for (const url of req.body.urls) {
    try { const res = await fetch(url); out[url] = "fetched " + res.status + " " + (await res.text()).length + " bytes"; }
    catch (e) { out[url] = { code: e.code ?? null, typeError: e instanceof TypeError, message: e.message }; }
  }
  return out;
}`;

let s: TestServer;
/** "open": private addresses allowed, any host; "listed": also an allowlist naming loopback every way the store takes. */
const tokens = {} as Record<"open" | "listed", string>;

beforeAll(async () => {
  // "::" binds the public and plain listeners on every interface (IPv4 too): the helper's 127.0.0.1 URLs still work
  s = await startTestServer({ modules: createModules, env: { NATS_URL: "", PULSEBASE_HOST: "::" } });
  const fns = s.adminClient(AdminFunctionService);
  for (const name of ["open", "listed"] as const) {
    const app = await s.createApp(`egress self ${name}`);
    const fn = await fns.createFunction({ appId: app.appId, name: "caller", timeoutMs: 10_000 });
    await fns.deployVersion({ functionId: fn.id, code: CALLER, activate: true });
    await fns.createHttpTrigger({ functionId: fn.id, slug: "caller" });
    const allowHosts = name === "listed" ? ["127.0.0.1", "localhost", "*.app.localhost", "[::1]", "::ffff:127.0.0.1", "0.0.0.0"] : [];
    await fns.setEgressPolicy({ appId: app.appId, allowHosts, allowPrivate: true });
    tokens[name] = (await s.register(app.appKey)).token;
  }
}, 60_000);
afterAll(async () => {
  await s?.close();
});

async function fetchAll(app: keyof typeof tokens, urls: string[]): Promise<Record<string, unknown>> {
  const res = await s.fetch("/api/fn/caller", {
    method: "POST",
    headers: { authorization: `Bearer ${tokens[app]}`, "content-type": "application/json" },
    body: JSON.stringify({ urls }),
  });
  expect(res.status).toBe(200);
  return (await res.json()) as Record<string, unknown>;
}

const refused = { code: "egress_refused", typeError: true };

describe("a function allowed private addresses cannot reach the platform itself", () => {
  it("not the admin listener's /metrics or operator API, nor the public listener, in any loopback spelling", async () => {
    const admin = new URL(s.adminUrl).port, https = new URL(s.httpsUrl).port, http = new URL(s.httpUrl).port;
    // the same /metrics an operator reads: 200 with the operator token, so a refusal is the egress check's
    expect((await fetch(`${s.adminUrl}/metrics`, { headers: { authorization: `Bearer ${s.operatorToken}` } })).status).toBe(200);
    const urls = [
      `${s.adminUrl}/metrics`, `http://localhost:${admin}/metrics`, `http://admin.app.localhost:${admin}/metrics`, `http://[::1]:${admin}/metrics`,
      `http://[::ffff:127.0.0.1]:${admin}/metrics`, `http://[::ffff:7f00:1]:${admin}/pulsebase.admin.v1.IdentityService/ListApps`,
      `http://2130706433:${admin}/metrics`, `http://127.1:${admin}/metrics`, `http://0.0.0.0:${admin}/metrics`,
      `${s.httpsUrl}/healthz`, `https://localhost:${https}/healthz`, `http://127.0.0.1:${http}/`, `http://[::1]:${https}/healthz`,
    ];
    for (const app of ["open", "listed"] as const) {
      const out = await fetchAll(app, urls);
      for (const u of urls) expect(out[u], `${app}: ${u}`).toMatchObject(refused);
    }
  });

  it("not the public listener on this machine's own non-loopback interface address", async () => {
    const https = new URL(s.httpsUrl).port, http = new URL(s.httpUrl).port;
    // e.g. fd00::2 on eth0 (unique local, a private range the policy opens)
    const own = Object.values(networkInterfaces()).flatMap((l) => l ?? []).filter((a) => !a.internal).map((a) => a.address);
    const hosts = own.map((a) => (a.includes(":") ? `[${a.split("%")[0]}]` : a));
    const urls = hosts.flatMap((h) => [`https://${h}:${https}/healthz`, `http://${h}:${http}/`]).filter((u) => URL.canParse(u));
    if (urls.length === 0) return;
    const out = await fetchAll("open", urls);
    for (const u of urls) expect(out[u], u).toMatchObject(refused);
  });

  it("nor link-local addresses, plain or IPv4-mapped", async () => {
    const urls = ["http://169.254.1.1/", "http://169.254.10.20:8080/", "http://[fe80::1]/", "http://[::ffff:169.254.1.1]/", "http://[::ffff:a9fe:101]/"];
    const out = await fetchAll("open", urls);
    for (const u of urls) expect(out[u], u).toMatchObject(refused);
  });
});
