// Cross-process staleness (`--only cluster`): how long a change made through
// one server takes to reach the caches of the others, against the documented
// bound (README, Scale-out: 1 s). Three real server processes
// (test/helpers/cluster.ts: one PostgreSQL schema, a private nats-server this
// scenario stops and starts) with the caches' own TTLs, as in production.
// Each case is made ROUNDS times; a round's figure is the slowest server's:
// the time from the operator call's answer to a device, polling every 20 ms,
// getting the new answer from that server (so up to 20 ms of polling and the
// request itself are included). The cluster tests (test/e2e/cluster-*.test.ts)
// check that every change arrives; this measures how soon.
import { CmsService } from "../../gen/pulsebase/admin/v1/cms_pb.js";
import { DatabaseService } from "../../gen/pulsebase/admin/v1/database_pb.js";
import { FunctionService } from "../../gen/pulsebase/admin/v1/functions_pb.js";
import { IdentityService } from "../../gen/pulsebase/admin/v1/identity_pb.js";
import { startCluster, untilEverywhere, type ClusterServer } from "../../test/helpers/cluster.js";
import { NATS_SERVER_BIN } from "../../test/infra/queue/jetstream-helpers.js";
import type { Row } from "../lib.js";
import type { BenchContext } from "../run.js";

/** The documented bound on a change reaching every server (README, Scale-out). */
const BOUND_MS = 1000;
const ROUNDS = 5;

export async function clusterScenarios(_ctx: BenchContext): Promise<Row[]> {
  if (!NATS_SERVER_BIN) throw new Error("the cluster scenario needs nats-server (/usr/sbin/nats-server)");
  const c = await startCluster(["A", "B", "C"], { env: { PULSEBASE_LOG_LEVEL: "error" } });
  const [A, B] = c.servers as [ClusterServer, ClusterServer];
  const all = c.servers;
  const rows: Row[] = [];
  /** Makes `change` ROUNDS times (round i through server i % 3) and records when every server saw each. */
  const measure = async <T>(scenario: string, check: (s: ClusterServer) => Promise<T>, accept: (v: T, round: number) => boolean, change: (via: ClusterServer, round: number) => Promise<void>) => {
    const worst: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      await change(all[round % all.length]!, round);
      const since = Date.now();
      const took = await untilEverywhere(all, check, (v) => accept(v, round), { since, timeoutMs: 60_000 });
      worst.push(Math.max(...Object.values(took)));
    }
    const sorted = [...worst].sort((a, b) => a - b);
    const over = worst.filter((ms) => ms > BOUND_MS).length;
    rows.push({
      scenario: `staleness: ${scenario}, slowest of 3 servers`,
      transport: "cluster",
      result: { requests: ROUNDS, errors: over, durationMs: worst.reduce((a, b) => a + b, 0), rps: 0, p50Ms: sorted[sorted.length >> 1]!, p99Ms: sorted[sorted.length - 1]!, statuses: {} },
      note: `target <= ${BOUND_MS} ms (errors: rounds over it); rounds ${worst.join(", ")} ms`,
    });
  };
  try {
    const ids = A.client(IdentityService);
    const team = await ids.createTeam({ name: "staleness" });
    const app = await ids.createApp({ teamId: team.id, name: "staleness", plan: { name: "free", functionsEnabled: true } });
    const cms = A.client(CmsService);
    await cms.createContentType({ appId: app.id, contentType: { slug: "post", name: "Post", fields: [{ name: "title", type: "text" }] } });
    const entry = await cms.createEntry({ appId: app.id, contentType: "post", data: { title: "start" }, publish: true });
    const title = async (s: ClusterServer) => {
      const r = await s.get("/api/v1/post", { "x-app-key": app.appKey });
      return r.status === 200 ? (JSON.parse(r.body) as { data: { title: string }[] }).data[0]?.title : `status ${r.status}`;
    };
    const retitle = (label: string) => async (via: ClusterServer, round: number) => {
      // every server has the current list cached before the change
      await untilEverywhere(all, title, (v) => v !== undefined && !v.startsWith("status"));
      await via.client(CmsService).updateEntry({ appId: app.id, id: entry.id, data: { title: `${label}${round}` } });
    };

    // Devices: one registered per round, seen on every server, then deleted.
    const register = async () => {
      const r = await B.request("/api/consumer", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ app_key: app.appKey, device_id: `d-${Math.random()}`, device_model: "m", user_id: "u", os: "ios", country: "DE", language: "de" }),
      });
      return JSON.parse(r.body) as { id: number; token: string };
    };
    const session = (token: string) => async (s: ClusterServer) =>
      (await s.request("/api/session/start", { method: "POST", headers: { authorization: `Bearer ${token}` } })).status;
    let device = { id: 0, token: "" };
    const revoke = async (via: ClusterServer) => {
      device = await register();
      await untilEverywhere(all, session(device.token), (v) => v === 200);
      await via.client(IdentityService).deleteConsumer({ consumerId: BigInt(device.id) });
    };

    await measure("CMS change, NATS up", title, (v, r) => v === `up${r}`, retitle("up"));
    await measure("DeleteConsumer (token refused), NATS up", (s) => session(device.token)(s), (v) => v === 401, revoke);

    // A new active version (function resolution cache).
    const fns = A.client(FunctionService);
    const fn = await fns.createFunction({ appId: app.id, name: "v" });
    const deploy = (v: string) => fns.deployVersion({ functionId: fn.id, code: `export default async function () { return { v: ${JSON.stringify(v)} }; }`, activate: true });
    await deploy("start");
    await fns.createHttpTrigger({ functionId: fn.id, slug: "v" });
    const reader = await register();
    const version = async (s: ClusterServer) => {
      const r = await s.get("/api/fn/v", { authorization: `Bearer ${reader.token}` });
      return r.status === 200 ? (JSON.parse(r.body) as { v: string }).v : `status ${r.status}`;
    };
    await measure("ActivateVersion, NATS up", version, (v, r) => v === `v${r}`, async (_via, r) => {
      await untilEverywhere(all, version, (v) => !v.startsWith("status"));
      await deploy(`v${r}`);
    });

    // Suspend and resume a linked database in turn (database link cache).
    const dbs = A.client(DatabaseService);
    const db = await dbs.createDatabase({ teamId: team.id, name: "main" });
    await dbs.linkDatabase({ databaseId: db.id, appId: app.id });
    const query = async (s: ClusterServer) =>
      (await s.request("/api/db/query", { method: "POST", headers: { authorization: `Bearer ${reader.token}`, "content-type": "application/json" }, body: '{"sql":"SELECT 1"}' })).status;
    await measure("SuspendDatabase / ResumeDatabase, NATS up", query, (v, r) => v === (r % 2 === 0 ? 503 : 200), async (via, r) => {
      await untilEverywhere(all, query, (v) => v === (r % 2 === 0 ? 200 : 503));
      if (r % 2 === 0) await via.client(DatabaseService).suspendDatabase({ id: db.id });
      else await via.client(DatabaseService).resumeDatabase({ id: db.id });
    });

    // Through PostgreSQL only: every server knows NATS is gone.
    await c.stopNats();
    await untilEverywhere(all, async (s) => /^pulsebase_nats_connected (\d)/m.exec(await s.metrics())?.[1], (v) => v === "0", { timeoutMs: 30_000 });
    await measure("CMS change, NATS down", title, (v, r) => v === `down${r}`, retitle("down"));
    await measure("DeleteConsumer (token refused), NATS down", (s) => session(device.token)(s), (v) => v === 401, revoke);
    await c.startNats();
  } finally {
    await c.close();
  }
  return rows;
}
