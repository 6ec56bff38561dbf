// Functions over the real database module (src/capabilities/database): ctx.db goes
// through the /api/db query runner (guard, linked database) and db event
// triggers capture changes on the embedded libSQL file through the engine
// pool, published to real JetStream.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fromJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { createClient, createRouterTransport } from "@connectrpc/connect";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { FunctionService as AdminFunctionService } from "../../../gen/pulsebase/admin/v1/functions_pb.js";
import { createDatabaseModule, type DatabaseModule } from "../../../src/capabilities/database/database-module.js";
import { changeCaptureFromDatabase } from "../../../src/capabilities/functions/events/database-capture.js";
import type { ChangeCaptureDb } from "../../../src/capabilities/functions/events/change-capture.js";
import { createFunctionsModule, type FunctionsModule } from "../../../src/capabilities/functions/functions-module.js";
import { createTestDb, TEST_NATS_URL, uniqueName, type TestDb } from "../../helpers/db.js";
import { consumerOfApp, createApp } from "./fixtures.js";
import { until } from "../../helpers/until.js";

let db: TestDb;
let dataDir: string;
let dbModule: DatabaseModule;
let fn: FunctionsModule;
let nc: NatsConnection;
let appId: number;
let capture: ChangeCaptureDb;
const stream = uniqueName("PBFNDB").toUpperCase();
const admin = () => createClient(AdminFunctionService, createRouterTransport((r) => r.service(AdminFunctionService, fn.adminService)));

beforeAll(async () => {
  db = await createTestDb("postgres");
  dataDir = await mkdtemp(join(tmpdir(), "pb-fn-int-"));
  dbModule = await createDatabaseModule({ dataDir, linkCacheMs: 0, engineProcesses: 1 }, { sql: db.sql });
  nc = await connect({ servers: TEST_NATS_URL });
  capture = changeCaptureFromDatabase({ store: dbModule.store, pool: dbModule.pool, dataDir });
  fn = createFunctionsModule({
    sql: db.sql,
    hostCapabilities: dbModule.hostCapabilities,
    config: { resolveCacheMs: 0 },
    events: {
      nats: nc,
      capture,
      config: { stream, subjectPrefix: `test.${stream.toLowerCase()}`, drainIntervalMs: 50 },
    },
  });
  appId = await createApp(db.sql);
  const team = await db.sql.query<{ team_id: number }>("SELECT team_id FROM apps WHERE id = $1", [appId]);
  const linked = await dbModule.manager.create({ teamId: Number(team.rows[0]!.team_id), name: "main" });
  await dbModule.manager.link(linked.id, appId);
  await fn.events!.start();
});
afterAll(async () => {
  await fn.close();
  await dbModule.stop();
  const jsm = await jetstreamManager(nc);
  await jsm.streams.delete(stream).catch(() => {});
  await nc.close();
  await rm(dataDir, { recursive: true, force: true });
  await db.drop();
});

describe("functions with the database module", () => {
  it("queries the linked database through the /api/db rules", async () => {
    const a = admin();
    const f = await a.createFunction({ appId: BigInt(appId), name: "todo" });
    await a.deployVersion({
      functionId: f.id,
      activate: true,
      code: `export default async (req, { db }) => {
        await db.batch([{ sql: "CREATE TABLE IF NOT EXISTS todos (id INTEGER PRIMARY KEY, title TEXT)" },
                        { sql: "INSERT INTO todos (title) VALUES (?)", params: [req.title] }], { transaction: true });
        const { rows, columns, values } = await db.query("SELECT id, title FROM todos ORDER BY id");
        let refused = null;
        try { await db.query("PRAGMA table_info(todos)"); } catch (e) { refused = e.code; }
        return { rows, columns, values, refused };
      }`,
    });
    const run = await a.runFunction({ functionId: f.id, payload: fromJson(ValueSchema, { title: "milk" }) });
    expect(run.outcome).toBe("ok");
    expect(JSON.parse(run.body)).toEqual({ rows: [{ id: 1, title: "milk" }], columns: ["id", "title"], values: [[1, "milk"]], refused: "forbidden_query" });
  });

  it("refuses malformed ctx.db calls with validation_failed naming the field, as /api/db does", async () => {
    const a = admin();
    const f = await a.createFunction({ appId: BigInt(appId), name: "bad-calls" });
    await a.deployVersion({
      functionId: f.id,
      activate: true,
      code: `export default async (req, { db }) => {
        const out = [];
        for (const call of [() => db.query(42), () => db.query("SELECT 1", 7), () => db.batch("SELECT 1"), () => db.batch([null]),
                            () => db.batch([{ sql: 1 }]), () => db.batch(Array.from({ length: 101 }, () => ({ sql: "SELECT 1" }))), () => db.query("x".repeat(100001))]) {
          try { await call(); out.push("ran"); } catch (e) { out.push([e.code, e.message]); }
        }
        return out;
      }`,
    });
    const run = await a.runFunction({ functionId: f.id });
    expect(run.outcome).toBe("ok");
    const out = JSON.parse(run.body) as Array<[string, string]>;
    expect(out.map((o) => o[0])).toEqual(Array(7).fill("validation_failed"));
    expect(out[0]![1]).toMatch(/sql/);
    expect(out[1]![1]).toMatch(/params/);
    expect(out[3]![1]).toMatch(/statements/);
    expect(out[4]![1]).toMatch(/statements\.0\.sql/);
    expect(out[5]![1]).toMatch(/100 statements/);
    expect(out[6]![1]).toMatch(/100000 characters/);
  });

  it("captures changes of the embedded database for db event triggers", async () => {
    const a = admin();
    const f = await a.createFunction({ appId: BigInt(appId), name: "on-todo" });
    await a.deployVersion({ functionId: f.id, activate: true, code: `export default (req, { event }) => { console.log(event.operation, event.table, JSON.stringify(event.after)); }` });
    await a.createEventTrigger({ functionId: f.id, source: "db", target: "todos", operations: ["insert"] });
    // Wait for the capture trigger, then change the table as a device would.
    const deadline = Date.now() + 8000;
    for (;;) {
      const r = await capture.serviceBatch(appId, [{ sql: "SELECT count(*) FROM sqlite_master WHERE type = 'trigger'" }]);
      if (r[0]!.rows[0]![0] === 1) break;
      if (Date.now() > deadline) throw new Error("capture trigger not installed");
      await new Promise((res) => setTimeout(res, 50));
    }
    await dbModule.runner.query(appId, { sql: "INSERT INTO todos (title) VALUES ('bread')" });
    let logs: string[] = [];
    while (Date.now() < deadline + 4000) {
      const inv = await a.listInvocations({ functionId: f.id });
      logs = inv.invocations.flatMap((i) => i.logs.map((l) => l.message));
      if (logs.length > 0) break;
      await new Promise((res) => setTimeout(res, 50));
    }
    expect(logs).toEqual(['insert todos {"id":2,"title":"bread"}']);
  });

  it("ctx.db keeps the operator's rights under access rules; ctx.db.asConsumer() runs with the calling consumer's", async () => {
    await dbModule.runner.batch(appId, [
      { sql: "CREATE TABLE notes (id INTEGER PRIMARY KEY, owner_id TEXT NOT NULL, body TEXT)" },
      { sql: "INSERT INTO notes (owner_id, body) VALUES ('u7', 'mine'), ('u8', 'theirs')" },
    ], false);
    await db.sql.query("INSERT INTO app_access_rules (app_id, version, mode, tables) VALUES ($1, 1, 'rules', $2)", [
      appId,
      JSON.stringify({ notes: { select: "owner_id = :user_id", insert: "owner_id = :user_id" } }),
    ]);
    dbModule.runner.invalidate();
    const a = admin();
    const f = await a.createFunction({ appId: BigInt(appId), name: "mine" });
    await a.deployVersion({
      functionId: f.id,
      activate: true,
      code: `export default async (req, { db }) => {
        const everything = (await db.query("SELECT body FROM notes ORDER BY id")).values;
        const mine = (await db.asConsumer().query("SELECT body FROM notes ORDER BY id")).values;
        const forged = (await db.asConsumer().batch([{ sql: "INSERT INTO notes (owner_id, body) VALUES ('u8', 'x')" }])).error;
        return { everything, mine, forged };
      }`,
    });
    await a.createHttpTrigger({ functionId: f.id, slug: "mine" });
    const res = await fn.runtime.invokeHttp(consumerOfApp(appId, 7), "mine", () => ({}), "req-mine");
    expect(JSON.parse(String(res.body))).toEqual({
      everything: [["mine"], ["theirs"]],
      mine: [["mine"]],
      forged: "access rule: insert on notes refused (the new row does not pass the rule)",
    });
    // a run without a consumer (manual, schedule, event) has no consumer's rights to take
    const manual = await a.runFunction({ functionId: f.id });
    expect(manual.outcome).toBe("error");
    expect(manual.error).toContain("ctx.db.asConsumer() needs the consumer of the run");
  });

  it("change capture sees a write made under access rules (its triggers are the service's)", async () => {
    const a = admin();
    const f = await a.createFunction({ appId: BigInt(appId), name: "on-note" });
    await a.deployVersion({ functionId: f.id, activate: true, code: `export default (req, { event }) => { console.log(event.operation, event.table, event.after.body); }` });
    await a.createEventTrigger({ functionId: f.id, source: "db", target: "notes", operations: ["insert"] });
    await until(async () => {
      const r = await capture.serviceBatch(appId, [{ sql: "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'notes'" }]);
      return r[0]!.rows[0]![0] === 1 ? true : undefined;
    });
    // a device's write under the owner rule (the rules set by the test above)
    const [w] = await dbModule.runner.query(appId, { sql: "INSERT INTO notes (owner_id, body) VALUES ('u7', 'captured')" }, { caller: { consumerId: 7, userId: "u7", appId } });
    expect(w!.error).toBeUndefined();
    const logs = await until(async () => {
      const inv = await a.listInvocations({ functionId: f.id });
      const l = inv.invocations.flatMap((i) => i.logs.map((x) => x.message));
      return l.length > 0 ? l : undefined;
    });
    expect(logs).toEqual(["insert notes captured"]);
  });
});
