// Three real server processes on one PostgreSQL and a private nats-server
// (docs/cms.md): the CMS daily allowance holds across servers
// (never more counted requests than the plan allows, whichever server
// answers), and a revocation (DeleteConsumer, RotateAppKey), a plan change
// or a function activation made through one server applies on every server
// within the documented bound (README, Scale-out: 1 s), with NATS up or down.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CmsService } from "../../gen/pulsebase/admin/v1/cms_pb.js";
import { DatabaseService } from "../../gen/pulsebase/admin/v1/database_pb.js";
import { FunctionService } from "../../gen/pulsebase/admin/v1/functions_pb.js";
import { IdentityService } from "../../gen/pulsebase/admin/v1/identity_pb.js";
import { field } from "../capabilities/cms/cms-fixture.js";
import { startCluster, untilEverywhere, type Cluster, type ClusterServer } from "../helpers/cluster.js";
import { NATS_SERVER_BIN } from "../infra/queue/jetstream-helpers.js";

/** The documented bound on a change reaching every server (README, Scale-out). */
const BOUND_MS = 1000;

let c: Cluster;
let A: ClusterServer;
let B: ClusterServer;
let C: ClusterServer;
let all: ClusterServer[];
const figures: Record<string, Record<string, number>> = {};
/** A plan message leaves nothing unset (an unset bool is false). */
const FREE = { name: "free", functionsEnabled: true };

beforeAll(async () => {
  if (!NATS_SERVER_BIN) throw new Error("nats-server is required (/usr/sbin/nats-server)");
  c = await startCluster(["A", "B", "C"]);
  all = c.servers;
  [A, B, C] = all as [ClusterServer, ClusterServer, ClusterServer];
}, 120_000);

afterAll(async () => {
  console.log(`cluster-revocation staleness (ms after the change answered): ${JSON.stringify(figures)}`);
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

async function staleness<T>(label: string, servers: ClusterServer[], check: (s: ClusterServer) => Promise<T>, accept: (v: T) => boolean, since: number, bound = BOUND_MS) {
  const took = await untilEverywhere(servers, check, accept, { since, timeoutMs: bound + 6000 });
  figures[label] = took;
  expect(Math.max(...Object.values(took)), `${label}: ${JSON.stringify(took)}`).toBeLessThanOrEqual(bound);
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
    figures["daily allowance 20, 60 requests on 3 servers: served"] = { all: ok };
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
  it("DeleteConsumer: the token is refused everywhere within the bound", async () => {
    const { appKey } = await newApp("delete consumer");
    const me = await register(B, appKey);
    await untilEverywhere(all, withToken(me.token), (v) => v === 200);
    await A.client(IdentityService).deleteConsumer({ consumerId: BigInt(me.id) });
    await staleness("DeleteConsumer, NATS up", all, withToken(me.token), (v) => v === 401, Date.now());
  });

  it("RotateAppKey: old tokens and the old X-App-Key are refused everywhere, the rotating server included", async () => {
    const { appId, appKey } = await newApp("rotate");
    const me = await register(C, appKey);
    await untilEverywhere(all, withToken(me.token), (v) => v === 200);
    await untilEverywhere(all, withKey(appKey), (v) => v === 200);
    for (const s of all) expect(await withKey(appKey)(s)).toBe(200); // cached now
    const rotated = await A.client(IdentityService).rotateAppKey({ appId });
    const since = Date.now();
    await staleness("RotateAppKey: old X-App-Key", all, withKey(appKey), (v) => v === 400, since);
    await staleness("RotateAppKey: old token", all, withToken(me.token), (v) => v === 401, since);
    for (const s of all) expect(await withKey(rotated.appKey)(s)).toBe(200);
  });

  it("SetAppPlan: a lower CMS rate limit applies everywhere within the bound", async () => {
    const { appId, appKey } = await newApp("plan");
    await untilEverywhere(all, withKey(appKey), (v) => v === 200);
    for (const s of all) expect(await withKey(appKey)(s)).toBe(200); // the old plan is cached
    await A.client(IdentityService).setAppPlan({ appId, plan: { ...FREE, name: "slow", cmsRequestsPerSecond: 1 } });
    // A server with the new plan refuses part of a burst of three (one request per second is allowed).
    const burst = async (s: ClusterServer) => (await Promise.all([1, 2, 3].map(() => withKey(appKey)(s)))).includes(429);
    await staleness("SetAppPlan (CMS limit), NATS up", all, burst, (v) => v, Date.now());
  });

  it("ActivateVersion: every server runs the new version at once (NATS up)", async () => {
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
    // Over NATS: well under the 1 s the resolution cache used to keep the old version.
    await staleness("ActivateVersion, NATS up", all, version, (v) => v === "v2", Date.now(), 500);
  });

  it("SuspendDatabase: queries are refused on every server at once (NATS up)", async () => {
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
    // Over NATS: well under the 1 s the link cache used to keep serving.
    await staleness("SuspendDatabase, NATS up", all, query, (v) => v === 503, Date.now(), 500);
  });

  it("with NATS down, revocation goes through PostgreSQL within the bound", async () => {
    const { appKey } = await newApp("nats down");
    await c.stopNats();
    const me = await register(B, appKey);
    await untilEverywhere(all, withToken(me.token), (v) => v === 200);
    await C.client(IdentityService).deleteConsumer({ consumerId: BigInt(me.id) });
    await staleness("DeleteConsumer, NATS down", all, withToken(me.token), (v) => v === 401, Date.now());
    await c.startNats();
  });
});
