// A function's fetch through the whole server (docs/functions.md, "Calling
// other services: fetch"): functions deployed over the operator API and
// called over /api/fn/{slug} call a real local HTTP server started here. The
// egress policy is the operator's (set with the CLI and the admin API):
// by default loopback, private and metadata addresses are refused, also
// behind a redirect; limits cut an endless response, 10,000 subrequests and
// a fetch still pending at the deadline, each time with a catchable error or
// the function's own timeout, while another application's calls succeed.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FunctionService as AdminFunctionService } from "../../gen/pulsebase/admin/v1/functions_pb.js";
import { createModules } from "../../src/server/modules.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { operatorEnv, runCli, type CliRun } from "../helpers/cli.js";

// Does what the request body says and reports the outcome, errors included (caught).
const CALLER = `export default async function (req, ctx) {
  const b = req.body ?? {};
  const url = (b.url ?? "").replace("UPSTREAM", ctx.env.UPSTREAM);
  const init = b.init ?? {};
  if (b.secret) init.headers = { ...(init.headers ?? {}), authorization: "Bearer " + ctx.env.API_KEY };
  if (b.forward) init.headers = req.headers;
  try {
    if (b.many) {
      const all = await Promise.allSettled(Array.from({ length: b.many }, () => fetch(url)));
      const out = {};
      for (const a of all) { const k = a.status === "fulfilled" ? String(a.value.status) : a.reason.code; out[k] = (out[k] || 0) + 1; }
      return { many: out };
    }
    const res = await fetch(url, init);
    const data = b.read === "json" ? await res.json() : b.read === "length" ? (await res.arrayBuffer()).byteLength : await res.text();
    return { status: res.status, ok: res.ok, redirected: res.redirected, headers: Object.fromEntries(res.headers), data };
  } catch (e) {
    return { error: { name: e.name, code: e.code ?? null, message: e.message, typeError: e instanceof TypeError } };
  }
}`;

let s: TestServer;
let upstream: Server;
let upstreamUrl: string;
let port: number;
const received: Array<{ path: string; method: string; headers: IncomingMessage["headers"]; body: string }> = [];
/** Bytes the endless response wrote before its socket closed. */
let endless = { written: 0, closed: false };
const slowSockets = new Set<Socket>();

const apps = {} as Record<"open" | "closed" | "listed" | "other" | "fresh", { token: string; appId: bigint; fnId: bigint }>;

function handle(req: IncomingMessage, res: ServerResponse, body: string): void {
  const u = new URL(req.url!, "http://x");
  received.push({ path: u.pathname, method: req.method!, headers: req.headers, body });
  switch (u.pathname) {
    case "/api/items":
      res.setHeader("content-type", "application/json");
      res.setHeader("x-upstream", "1");
      return void res.end(JSON.stringify({ method: req.method, auth: req.headers.authorization ?? null, got: body ? JSON.parse(body) : null }));
    case "/go":
      res.statusCode = 302;
      res.setHeader("location", u.searchParams.get("to")!);
      return void res.end();
    case "/slow":
      slowSockets.add(req.socket);
      req.socket.on("close", () => slowSockets.delete(req.socket));
      return; // never answers
    case "/endless": {
      // a 1 GB response, written as fast as the reader takes it
      endless = { written: 0, closed: false };
      res.setHeader("content-length", String(1024 ** 3));
      const chunk = Buffer.alloc(256 * 1024, 97);
      const state = endless;
      res.on("close", () => (state.closed = true));
      const write = () => {
        while (!state.closed && state.written < 1024 ** 3) {
          state.written += chunk.length;
          if (!res.write(chunk)) return;
        }
      };
      res.on("drain", write);
      return write();
    }
    default:
      res.statusCode = 404;
      res.end("not here");
  }
}

beforeAll(async () => {
  upstream = createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (c: string) => (body += c));
    req.on("end", () => handle(req, res, body));
  });
  await new Promise<void>((r) => upstream.listen(0, "127.0.0.1", r));
  port = (upstream.address() as AddressInfo).port;
  upstreamUrl = `http://127.0.0.1:${port}`;
  s = await startTestServer({
    modules: createModules,
    env: {
      NATS_URL: "", PULSEBASE_FUNCTION_FETCH_SUBREQUESTS: "20", PULSEBASE_FUNCTION_FETCH_RESPONSE_BYTES: String(1024 * 1024),
      // the operator's test switch: the local upstream is on loopback (never the server's own listeners)
      PULSEBASE_FUNCTION_EGRESS_ALLOW_LOOPBACK: "1",
    },
  });
  const fns = s.adminClient(AdminFunctionService);
  for (const name of ["open", "closed", "listed", "other", "fresh"] as const) {
    const app = await s.createApp(`fetch ${name}`);
    const fn = await fns.createFunction({ appId: app.appId, name: "caller", timeoutMs: 10_000 });
    await fns.setSecret({ functionId: fn.id, name: "UPSTREAM", value: upstreamUrl });
    await fns.setSecret({ functionId: fn.id, name: "API_KEY", value: "sk_live_123" });
    await fns.deployVersion({ functionId: fn.id, code: CALLER, activate: true });
    await fns.createHttpTrigger({ functionId: fn.id, slug: "caller" });
    apps[name] = { appId: app.appId, fnId: fn.id, token: (await s.register(app.appKey)).token };
  }
  // the same code with a short timeout, for a fetch pending at the deadline
  const waiter = await fns.createFunction({ appId: apps.open.appId, name: "waiter", timeoutMs: 1_000, code: CALLER });
  await fns.setSecret({ functionId: waiter.id, name: "UPSTREAM", value: upstreamUrl });
  await fns.createHttpTrigger({ functionId: waiter.id, slug: "waiter" });
  // the tests reach their local server through the explicit opt-in to private addresses
  await fns.setEgressPolicy({ appId: apps.open.appId, allowPrivate: true });
  await fns.setEgressPolicy({ appId: apps.other.appId, allowPrivate: true });
  await fns.setEgressPolicy({ appId: apps.listed.appId, allowHosts: ["localhost", "*.example.com"], allowPrivate: true });
}, 60_000);
afterAll(async () => {
  await s?.close();
  upstream.closeAllConnections();
  await new Promise((r) => upstream.close(r));
});

async function call(app: keyof typeof apps, body: Record<string, unknown>, headers: Record<string, string> = {}, slug = "caller"): Promise<{ status: number; json: any }> { // eslint-disable-line @typescript-eslint/no-explicit-any
  const res = await s.fetch(`/api/fn/${slug}`, {
    method: "POST",
    headers: { authorization: `Bearer ${apps[app].token}`, "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: await res.json() };
}

const cli = (args: string[]): Promise<CliRun> => runCli(args, { env: operatorEnv(s) });

describe("the egress policy, managed by the operator", () => {
  it("is the default until set (any public host, no private addresses); the CLI sets and shows it", async () => {
    const fns = s.adminClient(AdminFunctionService);
    const before = await fns.getEgressPolicy({ appId: apps.fresh.appId });
    expect(before).toMatchObject({ allowHosts: [], allowPrivate: false });
    expect(before.updatedAt).toBeUndefined();
    expect((await call("fresh", { url: "UPSTREAM/api/items" })).json.error).toMatchObject({ code: "egress_refused" });
    const set = await cli(["functions", "egress", "set", "--app", String(apps.fresh.appId), "--allow", "127.0.0.1,*.example.com", "--allow-private"]);
    expect(set.code, set.stderr).toBe(0);
    const shown = await cli(["functions", "egress", "get", "--app", String(apps.fresh.appId)]);
    expect(JSON.parse(shown.stdout)).toMatchObject({ allow_hosts: ["127.0.0.1", "*.example.com"], allow_private: true });
    expect((await call("fresh", { url: "UPSTREAM/api/items", read: "json" })).json).toMatchObject({ status: 200 });
  });

  it("refuses hosts that are not hosts, naming them", async () => {
    const fns = s.adminClient(AdminFunctionService);
    const err = await fns.setEgressPolicy({ appId: apps.closed.appId, allowHosts: ["api.example.com", "https://x.com/path", "*.com"] }).catch((e: unknown) => ConnectError.from(e));
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).code).toBe(Code.InvalidArgument);
    expect((err as ConnectError).rawMessage).toMatch(/https:\/\/x\.com\/path/);
    expect(await fns.getEgressPolicy({ appId: apps.closed.appId })).toMatchObject({ allowHosts: [], allowPrivate: false });
    const set = await fns.setEgressPolicy({ appId: apps.listed.appId, allowHosts: ["LOCALHOST.", "*.Example.com", "localhost"], allowPrivate: true });
    expect(set.allowHosts).toEqual(["localhost", "*.example.com"]);
  });
});

describe("fetch from a function", () => {
  it("GETs and POSTs JSON with a secret from ctx.env; headers go both ways", async () => {
    const got = await call("open", { url: "UPSTREAM/api/items", read: "json" });
    expect(got.status).toBe(200);
    expect(got.json).toMatchObject({ status: 200, ok: true, redirected: false, data: { method: "GET", auth: null }, headers: { "x-upstream": "1", "content-type": "application/json" } });
    const posted = await call("open", { url: "UPSTREAM/api/items", secret: true, read: "json", init: { method: "POST", headers: { "content-type": "application/json", "x-trace": "t1" }, body: JSON.stringify({ n: 1 }) } });
    expect(posted.json.data).toEqual({ method: "POST", auth: "Bearer sk_live_123", got: { n: 1 } });
    const seen = received.at(-1)!;
    expect(seen.headers["x-trace"]).toBe("t1");
    expect(seen.headers["user-agent"]).toBe("Pulsebase-Functions/1");
  });

  it("never carries the consumer's token or the platform's headers, even when the function forwards its request's headers", async () => {
    const r = await call("open", { url: "UPSTREAM/api/items", forward: true, read: "json" }, { "x-custom": "kept", "x-pulsebase-consumer": "1", cookie: "session=s" });
    expect(r.json.data.auth).toBeNull();
    const seen = received.at(-1)!;
    expect(seen.headers.authorization).toBeUndefined();
    expect(seen.headers.cookie).toBeUndefined();
    expect(Object.keys(seen.headers).filter((k) => k.startsWith("x-pulsebase"))).toEqual([]);
    expect(seen.headers["x-custom"]).toBe("kept");
  });

  it("follows a redirect, and refuses one that leads off the allowlist or to cloud metadata", async () => {
    const ok = await call("open", { url: `UPSTREAM/go?to=${encodeURIComponent("/api/items")}`, read: "json" });
    expect(ok.json).toMatchObject({ status: 200, redirected: true, data: { method: "GET" } });
    for (const to of [upstreamUrl + "/api/items", "http://169.254.169.254/latest/meta-data/iam/"]) {
      const before = received.length;
      const r = await call("listed", { url: `http://localhost:${port}/go?to=${encodeURIComponent(to)}` });
      expect(r.json.error).toMatchObject({ code: "egress_refused", typeError: true });
      // the allowed first hop was made, the refused one never
      expect(received.slice(before).map((x) => x.path)).toEqual(["/go"]);
    }
  });
});

describe("the server's own listeners", () => {
  it("stay closed to an application allowed private addresses, even with the loopback test switch on", async () => {
    const admin = new URL(s.adminUrl).port, https = new URL(s.httpsUrl).port;
    const before = received.length;
    for (const url of [`${s.adminUrl}/metrics`, `http://localhost:${admin}/metrics`, `http://[::ffff:127.0.0.1]:${admin}/metrics`, `${s.httpsUrl}/healthz`, `${s.httpUrl}/`, `https://localhost:${https}/healthz`]) {
      const r = await call("open", { url });
      expect(r.json.error, url).toMatchObject({ code: "egress_refused", typeError: true });
      expect(r.json.error.message, url).toMatch(/own listeners/);
    }
    // the local upstream, loopback too, is reached (the switch is on)
    expect((await call("open", { url: "UPSTREAM/api/items", read: "json" })).json).toMatchObject({ status: 200 });
    expect(received.length).toBe(before + 1);
  });
});

describe("refused by default", () => {
  const targets = () => [
    `http://127.0.0.1:${port}/api/items`,
    `http://localhost:${port}/api/items`,
    `http://[::1]:${port}/api/items`,
    `http://[::ffff:7f00:1]:${port}/api/items`,
    "http://169.254.169.254/latest/meta-data/",
    "http://metadata.google.internal/computeMetadata/v1/",
    "http://10.0.0.1/",
    "http://100.64.0.1/",
  ];
  it("loopback, localhost, [::1], IPv4-mapped loopback, metadata, private and CGNAT: a catchable TypeError, nothing sent", async () => {
    const before = received.length;
    for (const url of targets()) {
      const r = await call("closed", { url });
      expect(r.status, url).toBe(200);
      expect(r.json.error, url).toMatchObject({ name: "TypeError", code: "egress_refused", typeError: true });
      expect(r.json.error.message, url).toMatch(/refused/);
    }
    expect(received.length).toBe(before);
  });

  it("other schemes are refused; an uncaught refusal is the function's error, not the server's", async () => {
    expect((await call("closed", { url: "file:///etc/passwd" })).json.error).toMatchObject({ code: "egress_refused" });
    const fns = s.adminClient(AdminFunctionService);
    const fnId = (await fns.createFunction({ appId: apps.closed.appId, name: "uncaught", code: `export default async () => fetch("http://127.0.0.1:${port}/")` })).id;
    const r = await fns.runFunction({ functionId: fnId });
    expect(r.outcome).toBe("error");
    expect(r.error).toMatch(/TypeError: fetch to http:\/\/127\.0\.0\.1:\d+ refused/);
  });
});

describe("limits, with another application unaffected", () => {
  it("cuts a 1 GB response at the per-response limit: the upstream stops long before, the server's memory stays bounded", async () => {
    const rss = process.memoryUsage().rss;
    const [r, other] = await Promise.all([
      call("open", { url: "UPSTREAM/endless", read: "length" }),
      call("other", { url: "UPSTREAM/api/items", read: "json" }),
    ]);
    expect(r.json.error).toMatchObject({ code: "fetch_limit", typeError: true });
    expect(r.json.error.message).toMatch(/larger than 1048576 bytes/);
    expect(other.json).toMatchObject({ status: 200, data: { method: "GET" } });
    await expect.poll(() => endless.closed).toBe(true);
    expect(endless.written).toBeLessThan(64 * 1024 * 1024);
    expect(process.memoryUsage().rss - rss).toBeLessThan(256 * 1024 * 1024);
  });

  it("refuses subrequests past the limit (10,000 asked, 20 made) while another application fetches", async () => {
    const before = received.length;
    const [r, other] = await Promise.all([
      call("open", { url: "UPSTREAM/api/items", many: 10_000 }),
      call("other", { url: "UPSTREAM/api/items", read: "json" }),
    ]);
    expect(r.status).toBe(200);
    expect(r.json.many).toEqual({ 200: 20, fetch_limit: 9980 });
    expect(other.json).toMatchObject({ status: 200 });
    expect(received.length - before).toBe(21);
  });

  it("a fetch still pending at the deadline: the function times out (504) and the connection is closed", async () => {
    const [r, other] = await Promise.all([
      call("open", { url: "UPSTREAM/slow" }, {}, "waiter"),
      (async () => {
        await new Promise((res) => setTimeout(res, 200));
        return call("other", { url: "UPSTREAM/api/items", read: "json" });
      })(),
    ]);
    expect(r.status).toBe(504);
    expect(other.json).toMatchObject({ status: 200 });
    await expect.poll(() => slowSockets.size, { timeout: 3_000 }).toBe(0);
  });

  it("a policy change applies to the next invocation", async () => {
    const fns = s.adminClient(AdminFunctionService);
    await fns.setEgressPolicy({ appId: apps.other.appId, allowPrivate: false });
    expect((await call("other", { url: "UPSTREAM/api/items" })).json.error).toMatchObject({ code: "egress_refused" });
    await fns.setEgressPolicy({ appId: apps.open.appId, allowPrivate: true });
  await fns.setEgressPolicy({ appId: apps.other.appId, allowPrivate: true });
    expect((await call("other", { url: "UPSTREAM/api/items", read: "json" })).json).toMatchObject({ status: 200 });
  });
});

describe("fetch with timers and ctx.waitUntil", () => {
  beforeAll(async () => {
    const fns = s.adminClient(AdminFunctionService);
    const timed = await fns.createFunction({
      appId: apps.open.appId, name: "timed", timeoutMs: 5_000,
      code: `export default async function (req, ctx) {
        const started = Date.now();
        try { await fetch(ctx.env.UPSTREAM + "/slow", { signal: AbortSignal.timeout(150) }); return { error: null }; }
        catch (e) { return { error: { name: e.name }, ms: Date.now() - started }; }
      }`,
    });
    await fns.setSecret({ functionId: timed.id, name: "UPSTREAM", value: upstreamUrl });
    await fns.createHttpTrigger({ functionId: timed.id, slug: "timed" });
    const later = await fns.createFunction({
      appId: apps.open.appId, name: "later", timeoutMs: 5_000,
      code: `export default async function (req, ctx) {
        ctx.waitUntil((async () => {
          await new Promise((r) => setTimeout(r, 100));
          const res = await fetch(ctx.env.UPSTREAM + "/api/items?from=waitUntil", { method: "POST", body: JSON.stringify({ n: req.body.n }) });
          await ctx.kv.put("later:" + req.body.n, String(res.status));
        })());
        return { answered: true };
      }`,
    });
    await fns.setSecret({ functionId: later.id, name: "UPSTREAM", value: upstreamUrl });
    await fns.createHttpTrigger({ functionId: later.id, slug: "later" });
  });

  it("AbortSignal.timeout aborts a fetch that hangs, with a TimeoutError, well inside the function's timeout", async () => {
    // (answered 200 with the TimeoutError: the fetch was aborted before the function's 5 s timeout)
    const r = await call("open", {}, {}, "timed");
    expect(r.status).toBe(200);
    expect(r.json.error).toEqual({ name: "TimeoutError" });
    expect(r.json.ms).toBeGreaterThanOrEqual(140);
    await expect.poll(() => slowSockets.size, { timeout: 3_000 }).toBe(0);
  });

  it("a fetch inside ctx.waitUntil runs after the answer and is not cancelled by it", async () => {
    const n = Date.now();
    const r = await call("open", { n }, {}, "later");
    expect(r).toMatchObject({ status: 200, json: { answered: true } });
    await expect.poll(() => received.some((x) => x.path === "/api/items" && x.body === JSON.stringify({ n })), { timeout: 5_000 }).toBe(true);
  });
});
