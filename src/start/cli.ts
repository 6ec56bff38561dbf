// `npx pulsebase <command>`: the operator CLI over the admin Connect API, and
// a load generator that drives the binary protocol against a deployment.
import { parseArgs } from "node:util";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { toJson, type DescMessage, type Message } from "@bufbuild/protobuf";
import { IdentityService } from "../../gen/pulsebase/admin/v1/identity_pb.js";
import { rotateKeys } from "../identity/token-keys.js";
import { runLoad } from "./load.js";

const HELP = `pulsebase <command> [options]

Operator commands (admin API; --admin-url, default http://127.0.0.1:8444, and
the operator token from --token, PULSEBASE_OPERATOR_TOKEN or <data dir>/operator-token):
  users create --name N --email E
  teams create --name N [--member USER_ID ...]
  apps create --name N [--team TEAM_ID]     (no --team: a new team named after the app)
  apps list [--team TEAM_ID]
  apps get (--id ID | --key APP_KEY)
  apps rotate-key --id ID
  apps plan --id ID [--plan-name N] [--functions-enabled true|false]
            [--invocations-per-minute N] [--cms-requests-per-day N] [--cms-requests-per-second N]
  apps settings --id ID [--strict-token-mode true|false]
  consumers list --app ID
  consumers delete --id ID
  sessions list --consumer ID
  keys rotate [--file PATH]                 (adds a JWT signing key; restart to use it)

Load test (Connect binary protocol over HTTP/2):
  load --url https://127.0.0.1:8443 --app-key KEY [--rpc session.start|consumer.create]
       [--duration 10] [--concurrency 32] [--insecure]
`;

function transport(adminUrl: string, token: string) {
  return createConnectTransport({
    baseUrl: adminUrl,
    httpVersion: "1.1",
    useBinaryFormat: true,
    interceptors: [(next) => (req) => {
      req.header.set("authorization", `Bearer ${token}`);
      return next(req);
    }],
  });
}

async function operatorToken(flag: string | undefined): Promise<string> {
  if (flag) return flag;
  if (process.env.PULSEBASE_OPERATOR_TOKEN) return process.env.PULSEBASE_OPERATOR_TOKEN;
  const dir = process.env.PULSEBASE_DATA_DIR || ".data";
  try {
    return (await readFile(join(dir, "operator-token"), "utf8")).trim();
  } catch {
    throw new Error("no operator token: pass --token or set PULSEBASE_OPERATOR_TOKEN");
  }
}

function print(schema: DescMessage, msg: Message): void {
  console.log(JSON.stringify(toJson(schema, msg, { alwaysEmitImplicit: true }), null, 2));
}

const bool = (s: string | undefined) => (s === undefined ? undefined : s === "true" || s === "1");
const big = (s: string | undefined) => (s === undefined ? 0n : BigInt(s));

export async function main(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      "admin-url": { type: "string", default: process.env.PULSEBASE_ADMIN_URL ?? "http://127.0.0.1:8444" },
      token: { type: "string" },
      name: { type: "string" },
      email: { type: "string" },
      member: { type: "string", multiple: true },
      team: { type: "string" },
      id: { type: "string" },
      key: { type: "string" },
      app: { type: "string" },
      consumer: { type: "string" },
      file: { type: "string" },
      "plan-name": { type: "string" },
      "functions-enabled": { type: "string" },
      "invocations-per-minute": { type: "string" },
      "cms-requests-per-day": { type: "string" },
      "cms-requests-per-second": { type: "string" },
      "strict-token-mode": { type: "string" },
      url: { type: "string" },
      "app-key": { type: "string" },
      rpc: { type: "string", default: "session.start" },
      duration: { type: "string", default: "10" },
      concurrency: { type: "string", default: "32" },
      insecure: { type: "boolean", default: false },
      help: { type: "boolean", short: "h" },
    },
  });
  const [group, action] = positionals;
  if (!group || values.help) {
    console.log(HELP);
    return;
  }
  if (group === "load") {
    if (!values.url || !values["app-key"]) throw new Error("load needs --url and --app-key");
    await runLoad({
      url: values.url,
      appKey: values["app-key"],
      rpc: values.rpc!,
      durationSec: Number(values.duration),
      concurrency: Number(values.concurrency),
      insecure: values.insecure!,
    });
    return;
  }
  if (group === "keys" && action === "rotate") {
    const file = values.file ?? join(process.env.PULSEBASE_DATA_DIR || ".data", "jwt-keys.json");
    console.log(`new signing key ${await rotateKeys(file)} in ${file}; restart the server to sign with it`);
    return;
  }
  const id: Client<typeof IdentityService> = createClient(IdentityService, transport(values["admin-url"]!, await operatorToken(values.token)));
  const key = `${group} ${action ?? ""}`.trim();
  switch (key) {
    case "users create": {
      const u = await id.createUser({ name: values.name ?? "", email: values.email ?? "" });
      return console.log(JSON.stringify({ id: Number(u.id), name: u.name, email: u.email }, null, 2));
    }
    case "teams create": {
      const t = await id.createTeam({ name: values.name ?? "", memberUserIds: (values.member ?? []).map(BigInt) });
      return console.log(JSON.stringify({ id: Number(t.id), name: t.name }, null, 2));
    }
    case "apps create": {
      let teamId = big(values.team);
      if (!teamId) teamId = (await id.createTeam({ name: values.name ?? "" })).id;
      const app = await id.createApp({ teamId, name: values.name ?? "" });
      return console.log(JSON.stringify({ id: Number(app.id), team_id: Number(app.teamId), name: app.name, app_key: app.appKey }, null, 2));
    }
    case "apps list": {
      const r = await id.listApps({ teamId: big(values.team), pageSize: 500 });
      return console.log(JSON.stringify(r.apps.map((a) => ({ id: Number(a.id), team_id: Number(a.teamId), name: a.name, app_key: a.appKey, plan: a.plan?.name })), null, 2));
    }
    case "apps get": {
      const { AppSchema } = await import("../../gen/pulsebase/admin/v1/identity_pb.js");
      const app = await id.getApp({ key: values.key ? { case: "appKey", value: values.key } : { case: "id", value: big(values.id) } });
      return print(AppSchema, app);
    }
    case "apps rotate-key": {
      const app = await id.rotateAppKey({ appId: big(values.id) });
      return console.log(JSON.stringify({ id: Number(app.id), app_key: app.appKey }, null, 2));
    }
    case "apps plan": {
      const { AppSchema } = await import("../../gen/pulsebase/admin/v1/identity_pb.js");
      const cur = await id.getApp({ key: { case: "id", value: big(values.id) } });
      const p = cur.plan!;
      const app = await id.setAppPlan({
        appId: big(values.id),
        plan: {
          ...p,
          name: values["plan-name"] ?? p.name,
          functionsEnabled: bool(values["functions-enabled"]) ?? p.functionsEnabled,
          functionInvocationsPerMinute: values["invocations-per-minute"] ? Number(values["invocations-per-minute"]) : p.functionInvocationsPerMinute,
          cmsRequestsPerDay: values["cms-requests-per-day"] ? BigInt(values["cms-requests-per-day"]) : p.cmsRequestsPerDay,
          cmsRequestsPerSecond: values["cms-requests-per-second"] ? Number(values["cms-requests-per-second"]) : p.cmsRequestsPerSecond,
        },
      });
      return print(AppSchema, app);
    }
    case "apps settings": {
      const { AppSchema } = await import("../../gen/pulsebase/admin/v1/identity_pb.js");
      return print(AppSchema, await id.updateAppSettings({ appId: big(values.id), strictTokenMode: bool(values["strict-token-mode"]) }));
    }
    case "consumers list": {
      const { ListConsumersResponseSchema } = await import("../../gen/pulsebase/admin/v1/identity_pb.js");
      return print(ListConsumersResponseSchema, await id.listConsumers({ appId: big(values.app), pageSize: 500 }));
    }
    case "consumers delete":
      await id.deleteConsumer({ consumerId: big(values.id) });
      return console.log("deleted");
    case "sessions list": {
      const { ListSessionsResponseSchema } = await import("../../gen/pulsebase/admin/v1/identity_pb.js");
      return print(ListSessionsResponseSchema, await id.listSessions({ consumerId: big(values.consumer), pageSize: 500 }));
    }
    default:
      console.error(`unknown command: ${key}\n`);
      console.log(HELP);
      process.exitCode = 2;
  }
}

main(process.argv.slice(2)).catch((err: Error) => {
  console.error(`error: ${err.message}`);
  process.exit(1);
});
