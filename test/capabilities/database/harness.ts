// A database capability wired for tests: real PostgreSQL (or PGlite) for
// the service's tables, real libSQL files in a temp data directory, the real
// engine processes, and both services behind createRouterTransport. The
// caller's application is chosen per call with the "x-test-app" header.
import { randomBytes, randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient, createRouterTransport, type Client } from "@connectrpc/connect";
import { DatabaseService as AdminDatabaseService } from "../../../gen/pulsebase/admin/v1/database_pb.js";
import { DatabaseService } from "../../../gen/pulsebase/platform/v1/database_pb.js";
import { AccessRulesService } from "../../../gen/pulsebase/admin/v1/access_rules_pb.js";
import { createAccessRulesServiceImpl } from "../../../src/capabilities/database/access-rules-service.js";
import { createAccessRulesStore } from "../../../src/capabilities/database/access-rules-store.js";
import { createDatabaseModule, type DatabaseModule } from "../../../src/capabilities/database/database-module.js";
import { createDatabaseServiceImpl } from "../../../src/capabilities/database/platform-service.js";
import { createDatabaseAdminServiceImpl } from "../../../src/capabilities/database/admin-service.js";
import type { DatabaseLimits } from "../../../src/capabilities/database/database-config.js";
import { jsonToValue } from "../../../src/capabilities/database/proto-values.js";
import { kConsumer, kRequestId } from "../../../src/kernel/principal.js";
import { createTestDb, type TestDb } from "../../helpers/db.js";

export interface Harness {
  testDb: TestDb;
  module: DatabaseModule;
  dataDir: string;
  admin: Client<typeof AdminDatabaseService>;
  device: Client<typeof DatabaseService>;
  /** The access-rules operator service. */
  rules: Client<typeof AccessRulesService>;
  lastRequestId(): string;
  team(): Promise<number>;
  app(teamId: number): Promise<number>;
  /** An active embedded database of the team, linked to the given apps. */
  linkedDb(teamId: number, ...appIds: number[]): Promise<number>;
  query(appId: number, sql: string, params?: unknown): ReturnType<Client<typeof DatabaseService>["query"]>;
  /** A device call as the given consumer (id and user_id) of the application. */
  queryAs(appId: number, as: { consumerId: number; userId: string }, sql: string, params?: unknown): ReturnType<Client<typeof DatabaseService>["query"]>;
  batchAs(
    appId: number,
    as: { consumerId: number; userId: string },
    statements: { sql: string; params?: unknown }[],
    transaction?: boolean,
  ): ReturnType<Client<typeof DatabaseService>["batch"]>;
  batch(
    appId: number,
    statements: { sql: string; params?: unknown }[],
    transaction?: boolean,
  ): ReturnType<Client<typeof DatabaseService>["batch"]>;
  close(): Promise<void>;
}

export async function createHarness(
  opts: { kind?: "postgres" | "pglite"; limits?: Partial<DatabaseLimits>; engineProcesses?: number } = {},
): Promise<Harness> {
  const testDb = await createTestDb(opts.kind ?? "postgres");
  const dataDir = await mkdtemp(join(tmpdir(), "pb-db-"));
  const module = await createDatabaseModule(
    { dataDir, limits: opts.limits, engineProcesses: opts.engineProcesses, linkCacheMs: 0 },
    { sql: testDb.sql },
  );
  let requestId = "";
  const transport = createRouterTransport(
    (router) => {
      router.service(DatabaseService, createDatabaseServiceImpl({ runner: module.runner }));
      router.service(AdminDatabaseService, createDatabaseAdminServiceImpl({ manager: module.manager }));
      router.service(AccessRulesService, createAccessRulesServiceImpl({ store: createAccessRulesStore(testDb.sql), runner: module.runner, changed: () => module.runner.invalidate() }));
    },
    {
      router: {
        interceptors: [
          (next) => async (req) => {
            const app = req.header.get("x-test-app");
            if (app) {
              const consumerId = Number(req.header.get("x-test-consumer") ?? 1);
              const userId = req.header.get("x-test-user") ?? "u";
              req.contextValues.set(kConsumer, { consumerId, appId: Number(app), appKey: "k", userId, deviceId: "d" });
            }
            requestId = randomUUID();
            req.contextValues.set(kRequestId, requestId);
            return next(req);
          },
        ],
      },
    },
  );
  const admin = createClient(AdminDatabaseService, transport);
  const device = createClient(DatabaseService, transport);
  const rules = createClient(AccessRulesService, transport);
  const asHeaders = (appId: number, as: { consumerId: number; userId: string }) => ({
    headers: { "x-test-app": String(appId), "x-test-consumer": String(as.consumerId), "x-test-user": as.userId },
  });
  const h: Harness = {
    testDb,
    module,
    dataDir,
    admin,
    device,
    rules,
    lastRequestId: () => requestId,
    async team() {
      const { rows } = await testDb.sql.query<{ id: string }>("INSERT INTO teams (name) VALUES ('t') RETURNING id");
      return Number(rows[0]!.id);
    },
    async app(teamId) {
      const { rows } = await testDb.sql.query<{ id: string }>(
        "INSERT INTO apps (team_id, name, app_key, plan) VALUES ($1, 'a', $2, '{}') RETURNING id",
        [teamId, randomBytes(8).toString("hex")],
      );
      return Number(rows[0]!.id);
    },
    async linkedDb(teamId, ...appIds) {
      const db = await module.manager.create({ teamId, name: "main" });
      for (const a of appIds) await module.manager.link(db.id, a);
      return db.id;
    },
    query(appId, sql, params) {
      return device.query(
        { sql, ...(params !== undefined ? { params: jsonToValue(params) } : {}) },
        { headers: { "x-test-app": String(appId) } },
      );
    },
    queryAs(appId, as, sql, params) {
      return device.query({ sql, ...(params !== undefined ? { params: jsonToValue(params) } : {}) }, asHeaders(appId, as));
    },
    batchAs(appId, as, statements, transaction = false) {
      return device.batch(
        {
          transaction,
          statements: statements.map((s) => ({ sql: s.sql, ...(s.params !== undefined ? { params: jsonToValue(s.params) } : {}) })),
        },
        asHeaders(appId, as),
      );
    },
    batch(appId, statements, transaction = false) {
      return device.batch(
        {
          transaction,
          statements: statements.map((s) => ({ sql: s.sql, ...(s.params !== undefined ? { params: jsonToValue(s.params) } : {}) })),
        },
        { headers: { "x-test-app": String(appId) } },
      );
    },
    async close() {
      await module.stop();
      await testDb.drop();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
  return h;
}

/** Rows of a result as plain JSON. */
export function rowsOf(r: { rows: { values: { kind: { case?: string; value?: unknown } }[] }[] } | undefined): unknown[][] {
  return (r?.rows ?? []).map((row) => row.values.map((v) => (v.kind.case === "nullValue" ? null : v.kind.value)));
}
