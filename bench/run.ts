// `npm run bench [-- --duration 10 --only identity,database]`: starts the
// bare Fastify baseline and the service (each pinned to core 0 when taskset
// exists), drives each scenario from this process (core 1), and prints
// requests/s, p50/p99 and the ratio to the baseline measured in the same run.
import { parseArgs } from "node:util";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { IdentityService } from "../gen/pulsebase/admin/v1/identity_pb.js";
import { h1Load, h2, pinSelf, printTable, seqLoad, startServer, stopServer, type BenchResult, type Row } from "./lib.js";
import { identityScenarios } from "./scenarios/identity.js";
import { databaseScenarios, fairnessScenarios } from "./scenarios/database-http.js";
import { cmsScenarios } from "./scenarios/cms-http.js";
import { functionsScenarios } from "./scenarios/functions-http.js";
import { functionsFetchScenarios } from "./scenarios/functions-fetch.js";
import { analyticsScenarios } from "./scenarios/analytics-http.js";
import { cmsLargeScenarios } from "./scenarios/cms-large.js";
import { observabilityScenarios } from "./scenarios/observability.js";
import { kvScenarios } from "./scenarios/kv.js";
import { hostileFunctionsScenarios } from "./scenarios/hostile-functions.js";
import { hostileHttpScenarios } from "./scenarios/hostile-http.js";
import { consoleScenarios } from "./scenarios/console.js";
import { clusterScenarios } from "./scenarios/cluster.js";
import { accessRulesScenarios } from "./scenarios/access-rules.js";
import { realtimeScenarios } from "./scenarios/realtime.js";
import { randomBytes } from "node:crypto";
import { deleteStreamsWithPrefix } from "../test/helpers/nats-streams.js";
import type { DescService } from "@bufbuild/protobuf";
import type { Client } from "@connectrpc/connect";

process.env.NODE_TLS_REJECT_UNAUTHORIZED = "0";

export interface BenchContext {
  https: string;
  adminUrl: string;
  operatorToken: string;
  durationSec: number;
  admin: ReturnType<typeof createClient<typeof IdentityService>>;
  adminClient<S extends DescService>(service: S): Client<S>;
  /** PostgreSQL of the server and its schema (for seeding). */
  databaseUrl: string;
  schema: string;
  natsUrl: string;
  natsNamespace: string;
  /** The server's data directory (embedded database files live there). */
  dataDir: string;
  /** The bare Fastify POST route of the baseline server (for pairs measured turn about with it). */
  bareUrl: string;
  /** A baseline row measured earlier in this run, by "scenario transport". */
  baseline(name: string): BenchResult;
  /** A new app and one registered consumer (its user_id "bench" unless given: access rules read it). */
  newConsumer(name: string, opts?: { userId?: string }): Promise<{ appKey: string; appId: bigint; teamId: bigint; token: string; consumerId: number }>;
  /** A second service process with extra environment (same core, same PostgreSQL and NATS), for A/B rows. */
  variant(env: Record<string, string>): Promise<{ ctx: BenchContext; pid: number; stop(): Promise<void> }>;
}


type Suite = (ctx: BenchContext) => Promise<Row[]>;
const suites: Record<string, Suite> = {
  identity: identityScenarios,
  database: databaseScenarios,
  fairness: fairnessScenarios,
  analytics: analyticsScenarios,
  functions: functionsScenarios,
  "functions-fetch": functionsFetchScenarios,
  cms: cmsScenarios,
  "cms-large": cmsLargeScenarios,
  observability: observabilityScenarios,
  kv: kvScenarios,
  "hostile-functions": hostileFunctionsScenarios,
  "hostile-http": hostileHttpScenarios,
  console: consoleScenarios,
  cluster: clusterScenarios,
  "access-rules": accessRulesScenarios,
  realtime: realtimeScenarios,
};
/** Suites run when --only is not given (cms-large seeds 1M rows, realtime takes minutes: opt-in). */
const DEFAULT_SUITES = ["identity", "database", "fairness", "analytics", "functions", "functions-fetch", "cms", "observability", "kv", "hostile-functions", "hostile-http", "console", "cluster", "access-rules"];

const { values } = parseArgs({
  options: {
    duration: { type: "string", default: "10" },
    only: { type: "string" },
  },
});
const durationSec = Number(values.duration);
const only = values.only ? values.only.split(",") : DEFAULT_SUITES;

pinSelf();
const base = await startServer<{ https: number }>("bench/servers/baseline-server.ts");
const natsUrl = process.env.NATS_URL || "nats://127.0.0.1:4222";
const natsNamespace = `bench${randomBytes(4).toString("hex")}`;
type ServerInfo = { https: number; admin: number; operatorToken: string; dataDir: string; schema: string };
const serviceEnv = {
  NATS_URL: natsUrl,
  PULSEBASE_NATS_NAMESPACE: natsNamespace,
  // Batch workers run as separate processes in the analytics scenario.
  PULSEBASE_IN_PROCESS_WORKERS: "false",
  // The functions-fetch scenario's upstream is on loopback (the test switch; never the server's own listeners).
  PULSEBASE_FUNCTION_EGRESS_ALLOW_LOOPBACK: "1",
};
const pb = await startServer<ServerInfo>("bench/servers/pulsebase-server.ts", serviceEnv);
const rows: Row[] = [];
try {
  const baseUrl = `https://127.0.0.1:${base.info.https}`;
  const body = JSON.stringify({ x: 1 });
  rows.push({ scenario: "bare Fastify POST", transport: "REST h1", result: await h1Load({ url: `${baseUrl}/baseline`, method: "POST", headers: { "content-type": "application/json" }, body, durationSec }) });
  rows.push({ scenario: "bare Fastify POST", transport: "REST h2", result: await h2({ url: baseUrl, path: "/baseline", headers: { "content-type": "application/json" }, body: Buffer.from(body), durationSec }) });
  rows.push({ scenario: "bare Fastify GET", transport: "REST h1", result: await h1Load({ url: `${baseUrl}/baseline`, durationSec }) });
  rows.push({ scenario: "bare Fastify POST, 1 in flight", transport: "REST h1", result: await seqLoad({ url: `${baseUrl}/baseline`, method: "POST", headers: { "content-type": "application/json" }, body, durationSec }) });

  const ctx = contextFor(pb.info);
  for (const name of only) {
    const suite = suites[name];
    if (!suite) throw new Error(`unknown suite ${name}; one of ${Object.keys(suites).join(", ")}`);
    console.error(`running ${name} ...`);
    rows.push(...(await suite(ctx)));
  }
} finally {
  await stopServer(pb.child);
  await stopServer(base.child);
  await deleteStreamsWithPrefix(natsUrl, natsNamespace.toUpperCase()).catch(() => {});
}
printTable(rows);
// Done: a pool some suite's helpers leave open (test/helpers/db.ts's PostgreSQL
// connection, used by the cluster and realtime suites) must not hold the run.
process.exit(0);

function contextFor(info: ServerInfo): BenchContext {
  const https = `https://127.0.0.1:${info.https}`;
  const adminUrl = `http://127.0.0.1:${info.admin}`;
  const adminTransport = createConnectTransport({
    baseUrl: adminUrl, httpVersion: "1.1",
    interceptors: [(next) => (req) => { req.header.set("authorization", `Bearer ${info.operatorToken}`); return next(req); }],
  });
  const admin = createClient(IdentityService, adminTransport);
  return {
    https, adminUrl, operatorToken: info.operatorToken, durationSec, admin,
    bareUrl: `https://127.0.0.1:${base.info.https}/baseline`,
    adminClient: (service) => createClient(service, adminTransport),
    dataDir: info.dataDir,
    databaseUrl: process.env.DATABASE_URL || "postgres://root@127.0.0.1:5432/test",
    schema: info.schema,
    natsUrl,
    natsNamespace,
    baseline(name) {
      const r = rows.find((x) => `${x.scenario} ${x.transport}` === name);
      if (!r) throw new Error(`no baseline ${name}`);
      return r.result;
    },
    async newConsumer(name, opts) {
      const team = await admin.createTeam({ name });
      const app = await admin.createApp({ teamId: team.id, name });
      const res = await fetch(`${https}/api/consumer`, {
        method: "POST", headers: { "content-type": "application/json" },
        body: JSON.stringify({ app_key: app.appKey, device_id: `bench-${name}`, device_model: "m", user_id: opts?.userId ?? "bench", os: "ios", country: "US", language: "en" }),
      });
      const c = (await res.json()) as { id: number; token: string };
      return { appKey: app.appKey, appId: app.id, teamId: team.id, token: c.token, consumerId: c.id };
    },
    async variant(env) {
      const v = await startServer<ServerInfo>("bench/servers/pulsebase-server.ts", { ...serviceEnv, ...env });
      return { ctx: contextFor(v.info), pid: v.child.pid!, stop: () => stopServer(v.child) };
    },
  };
}

