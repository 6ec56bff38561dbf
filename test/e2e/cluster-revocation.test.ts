// Three real server processes on one PostgreSQL and a private nats-server
// (docs/cms.md): the CMS daily allowance holds across servers
// (never more counted requests than the plan allows, whichever server
// answers), and a revocation (DeleteConsumer, RotateAppKey), a plan change
// or a function activation made through one server applies on every server,
// with NATS up or down. The servers keep every cache entry for ten minutes
// (CACHE_TTL), so a change seen on another server came over the change bus,
// not by an entry expiring. How soon (the documented 1 s bound, README,
// Scale-out) is the bench's business: `npm run bench -- --only cluster`.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CmsService } from "../../gen/pulsebase/admin/v1/cms_pb.js";
import { DatabaseService } from "../../gen/pulsebase/admin/v1/database_pb.js";
import { FunctionService } from "../../gen/pulsebase/admin/v1/functions_pb.js";
import { IdentityService } from "../../gen/pulsebase/admin/v1/identity_pb.js";
import { field } from "../capabilities/cms/cms-fixture.js";
import { startCluster, untilEverywhere, type Cluster, type ClusterServer } from "../helpers/cluster.js";
import { NATS_SERVER_BIN } from "../infra/queue/jetstream-helpers.js";

/** Longer than any wait below: no cache entry expires during the file. */
const CACHE_TTL = { PULSEBASE_CACHE_TTL_MS: String(10 * 60_000) };

let c: Cluster;
let A: ClusterServer;
let B: ClusterServer;
let C: ClusterServer;
let all: ClusterServer[];
/** A plan message leaves nothing unset (an unset bool is false). */
const FREE = { name: "free", functionsEnabled: true };

beforeAll(async () => {
  if (!NATS_SERVER_BIN) throw new Error("nats-server is required (/usr/sbin/nats-server)");
  c = await startCluster(["A", "B", "C"], { env: CACHE_TTL });
  all = c.servers;
  [A, B, C] = all as [ClusterServer, ClusterServer, ClusterServer];
}, 120_000);

afterAll(async () => {
  await c?.close();
});

/** An application of its own per test, with a published CMS entry. */
async function newApp(name: string): Promise<{ appId: bigint; appKey: string; teamId: bigint }> {
  const ids = A.client(IdentityService);
  const team = await ids.createTeam({ name });
  const app = await ids.createApp({ teamId: team.id, name, plan: FREE });
  const cms = A.client(CmsService);
  await cms.createContentType({
    appId: app.id,
    contentType: { slug: "post", name: "Post", fields: [field("title", "text")], searchableFields: ["title"] },
  });
  await cms.createEntry({ appId: app.id, contentType: "post", data: { title: "hello" }, publish: true });
  return { appId: app.id, appKey: app.appKey, teamId: team.id };
}

async function register(via: ClusterServer, key: string): Promise<{ id: number; token: string }> {
  const r = await via.request("/api/consumer", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ app_key: key, device_id: `d-${Math.random()}`, device_model: "Pixel 9", user_id: "u1", os: "android", country: "DE", language: "de" }),
  });
  expect(r.status, r.body).toBe(200);
  return JSON.parse(r.body) as { id: number; token: string };
}

/** The status a device gets for an authenticated call with this token. */
const withToken = (token: string) => async (s: ClusterServer) =>
  (await s.request("/api/session/start", { method: "POST", headers: { authorization: `Bearer ${token}` } })).status;

/** The status of a cached CMS read with this key. */
const withKey = (key: string) => async (s: ClusterServer) => (await s.get("/api/v1/post", { "x-app-key": key })).status;

/** Waits until every server gives what `accept` wants (it cannot come from an expired entry: CACHE_TTL). */
async function reachesAll<T>(servers: ClusterServer[], check: (s: ClusterServer) => Promise<T>, accept: (v: T) => boolean): Promise<void> {
  await untilEverywhere(servers, check, accept, { timeoutMs: 30_000 });
}

describe("the CMS daily allowance across servers", () => {
  it("three servers together serve no more counted requests than the plan allows", async () => {
    const { appId, appKey } = await newApp("quota");
    await A.client(IdentityService).setAppPlan({ appId, plan: { ...FREE, name: "small", cmsRequestsPerDay: 20n } });
    // 20 left, 20 counted requests (search is always counted) at each of three servers at once.
    const results = await Promise.all(
      all.flatMap((s) => Array.from({ length: 20 }, () => s.get("/api/v1/post/search?q=hello", { "x-app-key": appKey }))),
    );
    const ok = results.filter((r) => r.status === 200).length;
    const refused = results.filter((r) => r.status === 429);
    expect(ok).toBe(20);
    expect(refused).toHaveLength(40);
    expect(JSON.parse(refused[0]!.body)).toMatchObject({ error: { status: 429 } });
    expect(Number(refused[0]!.headers.get("retry-after"))).toBeGreaterThan(0);
    // Later, on any server: still refused (nothing was left over to any of them).
    for (const s of all) expect((await s.get("/api/v1/post/search?q=hello", { "x-app-key": appKey })).status).toBe(429);
    // Cached shapes are not counted: still served.
    for (const s of all) expect((await s.get("/api/v1/post", { "x-app-key": appKey })).status).toBe(200);
  });
});

describe("revocations and plan changes reach every server", () => {
  it("DeleteConsumer: the token is refused everywhere", async () => {
    const { appKey } = await newApp("delete consumer");
    const me = await register(B, appKey);
    await untilEverywhere(all, withToken(me.token), (v) => v === 200);
    await A.client(IdentityService).deleteConsumer({ consumerId: BigInt(me.id) });
    await reachesAll(all, withToken(me.token), (v) => v === 401);
  });

  it("RotateAppKey: old tokens and the old X-App-Key are refused everywhere, the rotating server included", async () => {
    const { appId, appKey } = await newApp("rotate");
    const me = await register(C, appKey);
    await untilEverywhere(all, withToken(me.token), (v) => v === 200);
    await untilEverywhere(all, withKey(appKey), (v) => v === 200);
    for (const s of all) expect(await withKey(appKey)(s)).toBe(200); // cached now
    const rotated = await A.client(IdentityService).rotateAppKey({ appId });
    await reachesAll(all, withKey(appKey), (v) => v === 400);
    await reachesAll(all, withToken(me.token), (v) => v === 401);
    for (const s of all) expect(await withKey(rotated.appKey)(s)).toBe(200);
  });

  it("SetAppPlan: a lower CMS rate limit applies everywhere", async () => {
    const { appId, appKey } = await newApp("plan");
    await untilEverywhere(all, withKey(appKey), (v) => v === 200);
    for (const s of all) expect(await withKey(appKey)(s)).toBe(200); // the old plan is cached
    await A.client(IdentityService).setAppPlan({ appId, plan: { ...FREE, name: "slow", cmsRequestsPerSecond: 1 } });
    // A server with the new plan refuses part of a burst of three (one request per second is allowed).
    const burst = async (s: ClusterServer) => (await Promise.all([1, 2, 3].map(() => withKey(appKey)(s)))).includes(429);
    await reachesAll(all, burst, (v) => v);
  });

  it("ActivateVersion: every server runs the new version (NATS up)", async () => {
    const { appId, appKey } = await newApp("activate");
    const fns = A.client(FunctionService);
    const fn = await fns.createFunction({ appId, name: "hello" });
    await fns.deployVersion({ functionId: fn.id, code: 'export default async function () { return { v: "v1" }; }', activate: true });
    await fns.createHttpTrigger({ functionId: fn.id, slug: "hello" });
    const me = await register(A, appKey);
    const version = async (s: ClusterServer) => {
      const r = await s.get("/api/fn/hello", { authorization: `Bearer ${me.token}` });
      return r.status === 200 ? (JSON.parse(r.body) as { v: string }).v : `status ${r.status}`;
    };
    await untilEverywhere(all, version, (v) => v === "v1");
    for (const s of all) expect(await version(s)).toBe("v1"); // resolution cached on every server
    await fns.deployVersion({ functionId: fn.id, code: 'export default async function () { return { v: "v2" }; }', activate: true });
    await reachesAll(all, version, (v) => v === "v2");
  });

  it("SuspendDatabase: queries are refused on every server (NATS up)", async () => {
    const { appId, appKey, teamId } = await newApp("database");
    const dbs = A.client(DatabaseService);
    const db = await dbs.createDatabase({ teamId, name: "main" });
    await dbs.linkDatabase({ databaseId: db.id, appId });
    const me = await register(A, appKey);
    const query = async (s: ClusterServer) =>
      (await s.request("/api/db/query", { method: "POST", headers: { authorization: `Bearer ${me.token}`, "content-type": "application/json" }, body: '{"sql":"SELECT 1"}' })).status;
    await untilEverywhere(all, query, (v) => v === 200);
    for (const s of all) expect(await query(s)).toBe(200); // the link is cached on every server
    await dbs.suspendDatabase({ id: db.id });
    await reachesAll(all, query, (v) => v === 503);
  });

  it("with NATS down, revocation goes through PostgreSQL", async () => {
    const { appKey } = await newApp("nats down");
    await c.stopNats();
    const me = await register(B, appKey);
    await untilEverywhere(all, withToken(me.token), (v) => v === 200);
    await C.client(IdentityService).deleteConsumer({ consumerId: BigInt(me.id) });
    await reachesAll(all, withToken(me.token), (v) => v === 401);
    await c.startNats();
  });
});
