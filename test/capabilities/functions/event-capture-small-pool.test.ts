// PULSEBASE_PG_POOL_SIZE=1 is allowed: with a pool of one connection the
// capture install of a db event trigger (its lock's transaction holds that
// connection) needs no second one, so CreateEventTrigger answers at once and
// the first write after it is delivered. Everything is as in the server:
// the database module (embedded libSQL through the engine pool, link lookups
// in PostgreSQL), the PostgreSQL table transport, the background worker.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createClient, createRouterTransport } from "@connectrpc/connect";
import { FunctionService as AdminFunctionService } from "../../../gen/pulsebase/admin/v1/functions_pb.js";
import { createDatabaseModule, type DatabaseModule } from "../../../src/capabilities/database/database-module.js";
import { changeCaptureFromDatabase } from "../../../src/capabilities/functions/events/database-capture.js";
import { createFunctionsModule, type FunctionsModule } from "../../../src/capabilities/functions/functions-module.js";
import { createPgSql } from "../../../src/infra/storage/pg-sql.js";
import type { Sql } from "../../../src/infra/storage/sql.js";
import { createTestDb, type TestDb } from "../../helpers/db.js";
import { until } from "../../helpers/until.js";
import { createApp } from "./fixtures.js";

let db: TestDb;
let small: Sql;
let dataDir: string;
let dbModule: DatabaseModule;
let fn: FunctionsModule;
let appId: number;
const admin = () => createClient(AdminFunctionService, createRouterTransport((r) => r.service(AdminFunctionService, fn.adminService)));

beforeAll(async () => {
  db = await createTestDb("postgres");
  // A wait for a second connection would never end on its own here (an
  // hour, not the usual 5 s): CreateEventTrigger answering at all shows
  // nothing waits for one (the test's timeout catches the hang).
  small = createPgSql({ connectionString: db.url!, schema: db.schema!, max: 1, applicationName: db.schema, connectionTimeoutMs: 3_600_000 });
  dataDir = await mkdtemp(join(tmpdir(), "pb-fn-pool1-"));
  dbModule = await createDatabaseModule({ dataDir, linkCacheMs: 0, engineProcesses: 1 }, { sql: small });
  fn = createFunctionsModule({
    sql: small,
    hostCapabilities: dbModule.hostCapabilities,
    config: { resolveCacheMs: 0, recorder: { flushMs: 20 } },
    events: {
      capture: changeCaptureFromDatabase({ store: dbModule.store, pool: dbModule.pool, dataDir }),
      config: { drainIntervalMs: 100 },
    },
  });
  appId = await createApp(small);
  const team = await small.query<{ team_id: number }>("SELECT team_id FROM apps WHERE id = $1", [appId]);
  const linked = await dbModule.manager.create({ teamId: Number(team.rows[0]!.team_id), name: "main" });
  await dbModule.manager.link(linked.id, appId);
  await dbModule.runner.query(appId, { sql: "CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT)" });
  await fn.events!.start();
});
afterAll(async () => {
  await fn?.close();
  await dbModule?.stop();
  await small?.close();
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
  await db.drop();
});

describe("a service database pool of one connection", () => {
  it("CreateEventTrigger installs the capture and the first insert is delivered", async () => {
    const a = admin();
    const f = await a.createFunction({ appId: BigInt(appId), name: "on-order" });
    await a.deployVersion({ functionId: f.id, activate: true, code: `export default (req, { event }) => { console.log(event.operation, event.table, JSON.stringify(event.after)); }` });
    // Answered at all: with one connection and no connection wait timeout, a
    // wait for a second connection would hang here.
    await a.createEventTrigger({ functionId: f.id, source: "db", target: "orders", operations: ["insert"] });
    await dbModule.runner.query(appId, { sql: "INSERT INTO orders (item) VALUES ('first')" });
    const logs = await until(async () => {
      const inv = await a.listInvocations({ functionId: f.id });
      const lines = inv.invocations.flatMap((i) => i.logs.map((l) => l.message));
      return lines.length > 0 ? lines : undefined;
    });
    expect(logs).toEqual(['insert orders {"id":1,"item":"first"}']);
  });
});
