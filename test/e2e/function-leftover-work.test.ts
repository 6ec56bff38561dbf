// Issue 15 point 1, as a hostile tenant plays it against the server a user
// runs (a child process): a function of application A leaves work behind
// (a db call it does not await, whose continuation spins for ever) and
// answers. Nothing of that run may keep running past its deadline, the
// server keeps answering every tenant (GET /metrics included), the spoilt
// isolate is never used again, and SIGTERM still stops the process.
import { readFile, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { Agent, fetch } from "undici";
import { createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import type { DescService } from "@bufbuild/protobuf";
import { IdentityService } from "../../gen/pulsebase/admin/v1/identity_pb.js";
import { FunctionService as AdminFunctionService } from "../../gen/pulsebase/admin/v1/functions_pb.js";
import { spawnServer, type ChildServer } from "../helpers/child-server.js";
import { until } from "../helpers/until.js";
import { spinningThreads } from "../helpers/spinning-threads.js";

const dispatcher = new Agent({ connect: { rejectUnauthorized: false } });
let dataDir: string;
let server: ChildServer;
let tokenA: string;
let tokenB: string;

// `runs` counts the runs an isolate has served: a fresh isolate starts at 1.
const HOSTILE = `let runs = 0;
export default async function (req, ctx) {
  runs++;
  // no linked database: the call fails, and its catch spins for ever
  if (req.query.leave === "catch") ctx.db.query("SELECT 1").catch(() => { for (;;) {} });
  // after a wait on the host, the output goes back while the isolate goes
  // on with microtasks: a chain long enough to run after it, then a spin
  if (req.query.leave === "chain") {
    await ctx.db.query("SELECT 1").catch(() => 0);
    let p = Promise.resolve();
    for (let i = 0; i < 40; i++) p = p.then(() => 0);
    p.then(() => { for (;;) {} });
  }
  if (req.query.leave === "later") {
    await ctx.db.query("SELECT 1").catch(() => 0);
    ctx.db.query("SELECT 2").catch(() => { for (;;) {} });
  }
  return { ok: 1, runs };
}`;

function client<S extends DescService>(service: S, operator: string): Client<S> {
  return createClient(service, createConnectTransport({
    baseUrl: `http://127.0.0.1:${server.admin}`, httpVersion: "1.1",
    interceptors: [(next) => (req) => { req.header.set("authorization", `Bearer ${operator}`); return next(req); }],
  }));
}

async function register(appKey: string): Promise<string> {
  const res = await fetch(`https://127.0.0.1:${server.https}/api/consumer`, {
    method: "POST", dispatcher, headers: { "content-type": "application/json" },
    body: JSON.stringify({ app_key: appKey, device_id: `d${Math.random()}`, device_model: "m", user_id: "u", os: "ios", country: "DE", language: "de" }),
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as { token: string }).token;
}

/** A request that must answer within `ms` (a frozen event loop never does). */
async function timed(url: string, init: Parameters<typeof fetch>[1] = {}, ms = 5000): Promise<{ status: number; body: string; ms: number }> {
  const t0 = performance.now();
  const res = await fetch(url, { dispatcher, ...init, signal: AbortSignal.timeout(ms) });
  const body = await res.text();
  return { status: res.status, body, ms: performance.now() - t0 };
}

const fn = (slug: string, token: string, query = "") =>
  timed(`https://127.0.0.1:${server.https}/api/fn/${slug}${query}`, { headers: { authorization: `Bearer ${token}` } });

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), "pulsebase-leftover-"));
  server = await spawnServer({ dataDir, env: { PULSEBASE_ACCESS_LOG: "off" }, seedEmbeddedDb: true });
  await server.ready();
  const operator = (await readFile(join(dataDir, "operator-token"), "utf8")).trim();
  const admin = client(IdentityService, operator);
  const fns = client(AdminFunctionService, operator);
  const team = await admin.createTeam({ name: "tenants" });
  const a = await admin.createApp({ teamId: team.id, name: "hostile" });
  const b = await admin.createApp({ teamId: team.id, name: "victim" });
  tokenA = await register(a.appKey);
  tokenB = await register(b.appKey);
  const bad = await fns.createFunction({ appId: a.id, name: "hostile", timeoutMs: 2000 });
  await fns.deployVersion({ functionId: bad.id, code: HOSTILE, activate: true });
  await fns.createHttpTrigger({ functionId: bad.id, slug: "hostile" });
  const good = await fns.createFunction({ appId: b.id, name: "hello" });
  await fns.deployVersion({ functionId: good.id, code: `export default () => ({ hello: "b" })`, activate: true });
  await fns.createHttpTrigger({ functionId: good.id, slug: "hello" });
}, 120_000);

afterAll(async () => {
  // a frozen server ignores SIGTERM: never leave one behind
  if (server && server.child.exitCode === null && server.child.signalCode === null) server.child.kill("SIGKILL");
  await server?.exited;
  await rm(dataDir, { recursive: true, force: true });
});

it("keeps every tenant answered after a run leaves spinning work behind, and never reuses that isolate", async () => {
  const pid = server.child.pid!;
  for (const leave of ["catch", "chain", "later"]) {
    // warm: one isolate that has served one run
    const warm = await fn("hostile", tokenA);
    expect(warm.status, warm.body).toBe(200);
    const attack = await fn("hostile", tokenA, `?leave=${leave}`);
    expect(attack.status, attack.body).toBe(200);
    expect(JSON.parse(attack.body).ok).toBe(1);
    await new Promise((r) => setTimeout(r, 200)); // a head start for the left-over work (leave=chain spins until the deadline)

    // the operator's scrape, the other tenant and the attacker itself all answer at once
    const metrics = await timed(`http://127.0.0.1:${server.admin}/metrics`);
    expect(metrics.status).toBe(200);
    expect(metrics.body).toMatch(/pulsebase_isolate_heap_bytes \d+/);
    // (the left-over work spins for ever: the answer does not wait for it)
    const other = await fn("hello", tokenB);
    expect(other.status, other.body).toBe(200);
    // the spoilt isolate is gone: the next run starts in a fresh one
    const next = await fn("hostile", tokenA);
    expect(next.status, next.body).toBe(200);
    expect(JSON.parse(next.body).runs, `after leave=${leave}`).toBe(1);
  }

  // nothing of the attacks runs past the 2 s timeout: no thread spins any
  // more (work spinning for ever would keep one runnable: this wait's limit)
  await until(async () => ((await spinningThreads(pid)).length === 0 ? true : undefined), 30_000, 0);

  // and SIGTERM still ends it, cleanly
  server.child.kill("SIGTERM");
  const code = await Promise.race([server.exited, new Promise((r) => setTimeout(() => r("still running"), 15_000))]);
  expect(code, server.output().slice(-3000)).toBe(0);
}, 120_000);
