// A function's fetch end to end inside the sandbox, against real local HTTP
// servers started here: WHATWG shapes (Headers, Request, Response, JSON and
// bytes both ways), redirects in the three modes, abort, and the egress
// policy on every connection and every redirect hop, with a resolver
// injected so that a public-looking name resolves to a private address.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSandbox } from "../../../src/infra/sandbox/sandbox.js";
import { createFetchHost, type EgressPolicy } from "../../../src/infra/sandbox/fetch-host.js";
import type { RunInput, RunTarget } from "../../../src/infra/sandbox/types.js";

let server: Server;
let base: string;
let port: number;
const seen: Array<{ url: string; method: string; headers: IncomingMessage["headers"]; body: string }> = [];
let openSockets = 0;
const slowSockets = new Set<import("node:net").Socket>();

function handle(req: IncomingMessage, res: ServerResponse, body: Buffer): void {
  const u = new URL(req.url!, "http://x");
  seen.push({ url: req.url!, method: req.method!, headers: req.headers, body: body.toString() });
  switch (u.pathname) {
    case "/json":
      res.setHeader("content-type", "application/json");
      res.setHeader("set-cookie", ["a=1", "b=2"]);
      res.setHeader("x-extra", "yes");
      return void res.end(JSON.stringify({ method: req.method, got: body.length ? JSON.parse(body.toString()) : null }));
    case "/gzip": {
      const n = Number(u.searchParams.get("n"));
      res.setHeader("content-encoding", "gzip");
      return void res.end(gzipSync(Buffer.alloc(n, 120)));
    }
    case "/bytes":
      return void res.end(Buffer.from([0, 1, 2, 255, 254]));
    case "/redirect":
      res.statusCode = Number(u.searchParams.get("status") ?? 302);
      res.setHeader("location", u.searchParams.get("to")!);
      return void res.end();
    case "/loop":
      res.statusCode = 302;
      res.setHeader("location", "/loop");
      return void res.end();
    case "/slow":
      // answers never; the client must give up
      slowSockets.add(req.socket);
      req.socket.on("close", () => slowSockets.delete(req.socket));
      return;
    case "/slow-closed": {
      // answers once no /slow request is open any more (or says "open" after a second)
      const t0 = Date.now();
      const check = (): void => {
        if (slowSockets.size === 0) res.end("closed");
        else if (Date.now() - t0 > 1000) res.end("open");
        else setTimeout(check, 10);
      };
      return check();
    }
    case "/endless": {
      const chunk = Buffer.alloc(64 * 1024, 120);
      const write = () => {
        while (res.write(chunk)) { /* until the socket buffer is full */ }
      };
      res.on("drain", write);
      return write();
    }
    default:
      res.statusCode = 404;
      res.end("nope");
  }
}

const policies = new Map<number, EgressPolicy>();
// "public.test" resolves to a loopback address: a name that looks public but is not
const fetchHost = createFetchHost({
  policyOf: async (appId) => policies.get(appId) ?? { allowHosts: [], allowPrivate: false },
  resolve: async (host) => (host === "public.test" || host === "localhost" ? [{ address: "127.0.0.1", family: 4 }] : [{ address: "93.184.216.34", family: 4 }]),
  // the test switch: loopback counts as private (these tests' servers are local)
  limits: { subrequests: 5, responseBytes: 1024 * 1024, timeoutMs: 2_000, redirects: 3, allowLoopback: true },
});
const sandbox = createSandbox({ capabilities: fetchHost.capabilities, limits: { syncSliceMs: 0 } });
const OPEN = 1, CLOSED = 2, LISTED = 3;
policies.set(OPEN, { allowHosts: [], allowPrivate: true });
policies.set(CLOSED, { allowHosts: [], allowPrivate: false });

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => handle(req, res, Buffer.concat(chunks)));
  });
  server.on("connection", (s) => {
    openSockets++;
    s.on("close", () => openSockets--);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  port = (server.address() as AddressInfo).port;
  base = `http://127.0.0.1:${port}`;
  policies.set(LISTED, { allowHosts: ["localhost", "*.allowed.test"], allowPrivate: true });
});
afterAll(async () => {
  sandbox.close();
  await fetchHost.close();
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

let nextVersion = 1;
const target = (appId: number, code: string, timeoutMs = 5_000): RunTarget => ({ versionId: nextVersion++, appId, code, memoryMb: 64, timeoutMs });
const input = (req: unknown = null): RunInput => ({ req, consumer: null, event: null, env: { BASE: base }, trigger: "manual", requestId: "r" });
async function run(appId: number, code: string, timeoutMs?: number): Promise<{ outcome: string; body: any; error?: string; logs: unknown[] }> { // eslint-disable-line @typescript-eslint/no-explicit-any
  const r = await sandbox.run(target(appId, code, timeoutMs), input());
  return { outcome: r.outcome, body: r.response ? JSON.parse(r.response.body) : undefined, error: r.error, logs: r.logs };
}
/** The function body's error as the function caught it. */
const caught = (expr: string) => `export default async (req, ctx) => {
  const BASE = ctx.env.BASE;
  try { await ${expr}; return { ok: true }; }
  catch (e) { return { name: e.name, code: e.code ?? null, message: e.message, type: e instanceof TypeError }; }
}`;

describe("WHATWG shapes", () => {
  it("POSTs JSON and reads status, headers (iterated, set-cookie kept apart) and the JSON body", async () => {
    const r = await run(OPEN, `export default async (req, ctx) => {
      const res = await fetch(ctx.env.BASE + "/json", { method: "POST", headers: { "X-Custom": "v1", authorization: "Bearer mine" }, body: JSON.stringify({ a: 1 }) });
      const names = [...res.headers.keys()];
      return { status: res.status, ok: res.ok, type: res.headers.get("content-type"), cookies: res.headers.getSetCookie(), names, json: await res.json(), used: res.bodyUsed, url: res.url };
    }`);
    expect(r.outcome).toBe("ok");
    expect(r.body).toMatchObject({ status: 200, ok: true, type: "application/json", cookies: ["a=1", "b=2"], json: { method: "POST", got: { a: 1 } }, used: true, url: `${base}/json` });
    expect(r.body.names).toEqual([...r.body.names].sort());
    expect(r.body.names).toContain("x-extra");
    const sent = seen.at(-1)!;
    expect(sent.headers["x-custom"]).toBe("v1");
    // the function set it itself: sent
    expect(sent.headers.authorization).toBe("Bearer mine");
    expect(sent.headers["user-agent"]).toBe("Pulsebase-Functions/1");
    expect(sent.headers["content-type"]).toBe("text/plain;charset=UTF-8");
  });

  it("drops hop-by-hop and x-pulsebase-* headers the function sets", async () => {
    const r = await run(OPEN, `export default async (req, ctx) => {
      const res = await fetch(ctx.env.BASE + "/json", { headers: [["X-Pulsebase-Consumer", "1"], ["connection", "upgrade"], ["x-ok", "1"], ["host", "evil"]] });
      return res.status;
    }`);
    expect(r.body).toBe(200);
    const sent = seen.at(-1)!;
    expect(sent.headers["x-pulsebase-consumer"]).toBeUndefined();
    expect(sent.headers.host).toBe(`127.0.0.1:${port}`);
    expect(sent.headers["x-ok"]).toBe("1");
  });

  it("gives bytes back exactly; Request, Response and Headers objects work like the standard's", async () => {
    const r = await run(OPEN, `export default async (req, ctx) => {
      const res = await fetch(new Request(ctx.env.BASE + "/bytes", { headers: new Headers([["x-a", "1"]]) }));
      const bytes = [...new Uint8Array(await res.arrayBuffer())];
      let again;
      try { await res.text(); } catch (e) { again = e instanceof TypeError; }
      const made = new Response(JSON.stringify({ x: 1 }), { status: 201, headers: { "content-type": "application/json" } });
      const h = new Headers({ A: "1" }); h.append("a", "2");
      return { bytes, again, made: { status: made.status, json: await made.clone().json() }, joined: h.get("a"), missing: (await fetch(ctx.env.BASE + "/nope")).status };
    }`);
    expect(r.body).toEqual({ bytes: [0, 1, 2, 255, 254], again: true, made: { status: 201, json: { x: 1 } }, joined: "1, 2", missing: 404 });
  });
});

describe("redirects", () => {
  it("follows (POST becomes GET on 302), returns the 3xx with manual, rejects with error", async () => {
    const r = await run(OPEN, `export default async (req, ctx) => {
      const to = encodeURIComponent(ctx.env.BASE + "/json");
      const followed = await fetch(ctx.env.BASE + "/redirect?to=" + to, { method: "POST", body: "{}" });
      const manual = await fetch(ctx.env.BASE + "/redirect?status=307&to=" + to, { redirect: "manual" });
      let error;
      try { await fetch(ctx.env.BASE + "/redirect?to=" + to, { redirect: "error" }); } catch (e) { error = e instanceof TypeError; }
      return { followed: [followed.status, followed.redirected, followed.url, (await followed.json()).method], manual: [manual.status, manual.headers.get("location")], error };
    }`);
    expect(r.body).toEqual({ followed: [200, true, `${base}/json`, "GET"], manual: [307, `${base}/json`], error: true });
  });

  it("stops after the redirect limit", async () => {
    const r = await run(OPEN, caught(`fetch(BASE + "/loop")`));
    expect(r.body).toMatchObject({ type: true, code: "fetch_limit" });
    expect(r.body.message).toMatch(/more than 3 redirects/);
  });
});

describe("egress policy", () => {
  for (const [what, url] of [
    ["127.0.0.1", `http://127.0.0.1:PORT/json`],
    ["localhost", `http://localhost:PORT/json`],
    ["[::1]", `http://[::1]:PORT/json`],
    ["an IPv4-mapped IPv6 loopback", `http://[::ffff:127.0.0.1]:PORT/json`],
    ["a name resolving to a private address", `http://public.test:PORT/json`],
    ["10.0.0.1", `http://10.0.0.1/`],
    ["0x7f.1 (another spelling of 127.0.0.1)", `http://0x7f.1:PORT/json`],
  ] as const) {
    it(`refuses ${what} by default with a catchable TypeError (egress_refused)`, async () => {
      const before = seen.length;
      const r = await run(CLOSED, caught(`fetch("${url}".replace("PORT", ${"BASE.split(':')[2]"}))`));
      expect(r.outcome).toBe("ok");
      expect(r.body).toMatchObject({ type: true, code: "egress_refused" });
      expect(r.body.message).toMatch(/private/);
      expect(seen.length).toBe(before);
    });
  }

  it("refuses cloud metadata even when private addresses are allowed", async () => {
    for (const url of ["http://169.254.169.254/latest/meta-data/", "http://[fd00:ec2::254]/", "http://metadata.google.internal/"]) {
      const r = await run(OPEN, caught(`fetch("${url}")`));
      expect(r.body).toMatchObject({ type: true, code: "egress_refused" });
      expect(r.body.message).toMatch(/metadata/);
    }
  });

  it("checks every redirect hop: an allowed host redirecting to metadata or to a host off the list is refused", async () => {
    const via = (to: string) => caught(`fetch("http://localhost:" + BASE.split(":")[2] + "/redirect?to=" + encodeURIComponent("${to}"))`);
    const before = seen.length;
    const meta = await run(LISTED, via("http://169.254.169.254/latest/meta-data/"));
    expect(meta.body).toMatchObject({ type: true, code: "egress_refused" });
    expect(meta.body.message).toMatch(/metadata/);
    const off = await run(LISTED, via("http://10.1.2.3/"));
    expect(off.body).toMatchObject({ type: true, code: "egress_refused" });
    // the first hops were made, the refused ones never
    expect(seen.slice(before).map((s) => s.url.split("?")[0])).toEqual(["/redirect", "/redirect"]);
  });

  it("refuses other schemes and hosts off the allowlist", async () => {
    expect((await run(OPEN, caught(`fetch("file:///etc/passwd")`))).body).toMatchObject({ type: true, code: "egress_refused" });
    const off = await run(LISTED, caught(`fetch(BASE + "/json")`));
    expect(off.body).toMatchObject({ code: "egress_refused" });
    expect(off.body.message).toMatch(/allowlist/);
  });
});

describe("limits and cancellation", () => {
  it("cuts an endless response at the limit", async () => {
    const r = await run(OPEN, caught(`fetch(BASE + "/endless").then((r) => r.text())`));
    expect(r.body).toMatchObject({ type: true, code: "fetch_limit" });
    expect(r.body.message).toMatch(/larger than 1048576 bytes/);
  });

  it("decompresses gzip, and counts the limit on the decompressed bytes (a 1 KiB bomb of 8 MiB is cut)", async () => {
    const r = await run(OPEN, `export default async (req, ctx) => {
      const small = await (await fetch(ctx.env.BASE + "/gzip?n=1000")).text();
      let bomb;
      try { await fetch(ctx.env.BASE + "/gzip?n=" + 8 * 1024 * 1024); } catch (e) { bomb = e.code; }
      return { small: small.length, bomb };
    }`);
    expect(r.body).toEqual({ small: 1000, bomb: "fetch_limit" });
  });

  it("is refused in the module's top-level code (outside any run)", async () => {
    const r = await run(OPEN, `let early; fetch("http://127.0.0.1/").catch((e) => { early = e.message; });
      export default async () => early`);
    expect(r.body).toMatch(/only available while the function runs/);
  });

  it("holds at most processBytes of responses for all runs together; what a run held is given back", async () => {
    const host = createFetchHost({ policyOf: async () => ({ allowHosts: [], allowPrivate: true }), limits: { responseBytes: 8 * 1024 * 1024, processBytes: 1024 * 1024, allowLoopback: true } });
    const sb = createSandbox({ capabilities: host.capabilities });
    try {
      const r = await sb.run(target(OPEN, caught(`fetch(BASE + "/endless")`)), input());
      expect(JSON.parse(r.response!.body)).toMatchObject({ code: "unavailable", type: true });
      const again = await sb.run(target(OPEN, caught(`fetch(BASE + "/bytes")`)), input());
      expect(JSON.parse(again.response!.body)).toEqual({ ok: true });
    } finally {
      sb.close();
      await host.close();
    }
  });

  it("refuses subrequests past the limit, the first ones done", async () => {
    const r = await run(OPEN, `export default async (req, ctx) => {
      const all = await Promise.allSettled(Array.from({ length: 10000 }, () => fetch(ctx.env.BASE + "/json")));
      const codes = {};
      for (const a of all) { const k = a.status === "fulfilled" ? a.value.status : a.reason.code; codes[k] = (codes[k] || 0) + 1; }
      return codes;
    }`);
    expect(r.outcome).toBe("ok");
    expect(r.body).toEqual({ 200: 5, fetch_limit: 9995 });
  });

  it("aborts with AbortError and closes the connection", async () => {
    const r = await run(OPEN, `export default async (req, ctx) => {
      const c = new AbortController();
      const p = fetch(ctx.env.BASE + "/slow", { signal: c.signal });
      await fetch(ctx.env.BASE + "/json");
      c.abort();
      let name;
      try { await p; name = "resolved"; } catch (e) { name = e.name; }
      // the server closed the aborted request while this run goes on
      return [name, c.signal.aborted, await (await fetch(ctx.env.BASE + "/slow-closed")).text()];
    }`);
    expect(r.body).toEqual(["AbortError", true, "closed"]);
    expect(r.logs).toEqual([]);
    await expect.poll(() => seen.filter((s) => s.url === "/slow").length).toBe(1);
  });

  it("a fetch pending at the deadline: the run times out and its socket is closed", async () => {
    const before = openSockets;
    const r = await run(OPEN, `export default async (req, ctx) => { await fetch(ctx.env.BASE + "/slow"); return 1; }`, 300);
    expect(r.outcome).toBe("timeout");
    await expect.poll(() => openSockets, { timeout: 20_000 }).toBeLessThanOrEqual(before);
  });
});
