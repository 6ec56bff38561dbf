// Shared setup of the functions tests: a migrated database, an application
// with a given plan, the functions module over a real libSQL FunctionDb, and
// Connect clients for both services (the device client calls as a consumer).
import { randomBytes } from "node:crypto";
import { createClient, createRouterTransport, type Client } from "@connectrpc/connect";
import { FunctionService as AdminFunctionService } from "../../../gen/pulsebase/admin/v1/functions_pb.js";
import { FunctionService as DeviceFunctionService } from "../../../gen/pulsebase/platform/v1/functions_pb.js";
import { FREE_PLAN, type PlanLimits } from "../../../src/capabilities/identity/plan.js";
import { kConsumer, kRequestId, type ConsumerPrincipal } from "../../../src/kernel/principal.js";
import type { Sql } from "../../../src/infra/storage/sql.js";
import { createFunctionsModule, type FunctionsModule, type FunctionsModuleDeps } from "../../../src/capabilities/functions/functions-module.js";
import type { FunctionsConfig } from "../../../src/capabilities/functions/config.js";
import { dbCapability } from "../../../src/capabilities/database/function-db.js";
import { createTestFunctionDb, type TestFunctionDb } from "./libsql-function-db.js";

export async function createApp(sql: Sql, plan: Partial<PlanLimits> = {}): Promise<number> {
  const t = await sql.query<{ id: number }>("INSERT INTO teams (name) VALUES ('t') RETURNING id");
  const a = await sql.query<{ id: number }>(
    "INSERT INTO apps (team_id, name, app_key, plan) VALUES ($1, 'app', $2, $3) RETURNING id",
    [t.rows[0]!.id, `key-${randomBytes(6).toString("hex")}`, JSON.stringify({ ...FREE_PLAN, ...plan })],
  );
  return Number(a.rows[0]!.id);
}

export async function setPlan(sql: Sql, appId: number, plan: Partial<PlanLimits>): Promise<void> {
  await sql.query("UPDATE apps SET plan = $2 WHERE id = $1", [appId, JSON.stringify({ ...FREE_PLAN, ...plan })]);
}

export function consumerOfApp(appId: number, consumerId = 1): ConsumerPrincipal {
  return { consumerId, appId, appKey: "k", userId: `u${consumerId}`, deviceId: `d${consumerId}` };
}

export interface Harness {
  fn: FunctionsModule;
  fdb: TestFunctionDb;
  admin: Client<typeof AdminFunctionService>;
  /** A device client calling as `who` (undefined = unauthenticated). */
  device(who: ConsumerPrincipal | undefined): Client<typeof DeviceFunctionService>;
  close(): Promise<void>;
}

export function createHarness(
  sql: Sql,
  config: Partial<FunctionsConfig> = {},
  events?: (fdb: TestFunctionDb) => FunctionsModuleDeps["events"],
): Harness {
  const fdb = createTestFunctionDb();
  const fn = createFunctionsModule({
    sql,
    hostCapabilities: [dbCapability(fdb)],
    events: events?.(fdb),
    config: { resolveCacheMs: 0, recorder: { flushMs: 20 }, sandbox: { maxIsolates: 16 }, ...config },
  });
  const adminTransport = createRouterTransport((r) => r.service(AdminFunctionService, fn.adminService));
  const deviceTransport = createRouterTransport((r) => r.service(DeviceFunctionService, fn.invokeService), {
    router: {
      interceptors: [
        (next) => async (req) => {
          const who = req.header.get("x-test-consumer");
          req.contextValues.set(kConsumer, who ? (JSON.parse(who) as ConsumerPrincipal) : undefined);
          req.contextValues.set(kRequestId, req.header.get("x-test-request-id") ?? "req-test");
          return next(req);
        },
      ],
    },
  });
  const deviceClient = createClient(DeviceFunctionService, deviceTransport);
  return {
    fn,
    fdb,
    admin: createClient(AdminFunctionService, adminTransport),
    device(who) {
      return {
        invoke: (req, opts) =>
          deviceClient.invoke(req, {
            ...opts,
            headers: { ...(who ? { "x-test-consumer": JSON.stringify(who) } : {}), ...((opts?.headers as Record<string, string>) ?? {}) },
          }),
      } as Client<typeof DeviceFunctionService>;
    },
    async close() {
      await fn.close();
      fdb.close();
    },
  };
}

/** Creates a function with an active version and an HTTP trigger. */
export async function deployHttp(h: Harness, appId: number, slug: string, code: string, settings: { timeoutMs?: number; memoryMb?: number; invocationsPerMinute?: number } = {}) {
  const f = await h.admin.createFunction({ appId: BigInt(appId), name: slug, ...settings });
  await h.admin.deployVersion({ functionId: f.id, code, activate: true });
  const t = await h.admin.createHttpTrigger({ functionId: f.id, slug });
  return { functionId: f.id, triggerId: t.id };
}

export const enc = new TextEncoder();
export const dec = new TextDecoder();
