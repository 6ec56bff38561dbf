// db event triggers on remote libSQL databases (kind "remote"). The capture
// SQL and the drainer are shared with embedded files; only the executor
// differs (@libsql/client). The executor's own behaviour is checked on the
// client's local "file:" URLs (same code path); the flow end to end runs
// against a real libSQL server (sqld, started here).
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createClient as createConnectClient, createRouterTransport } from "@connectrpc/connect";
import { createClient as createLibsqlClient } from "@libsql/client";
import { FunctionService as AdminFunctionService } from "../../../gen/pulsebase/admin/v1/functions_pb.js";
import { createDatabaseModule, type DatabaseModule } from "../../../src/capabilities/database/database-module.js";
import { CHANGE_TABLE, deleteChanges, readChanges, syncCapture, type ChangeCaptureDb, type Operation } from "../../../src/capabilities/functions/events/change-capture.js";
import { changeCaptureFromDatabase } from "../../../src/capabilities/functions/events/database-capture.js";
import { createLibsqlCaptureExecutor, type LibsqlCaptureExecutor } from "../../../src/capabilities/functions/events/libsql-capture.js";
import { createFunctionsModule, type FunctionsModule } from "../../../src/capabilities/functions/functions-module.js";
import { createTestDb, type TestDb } from "../../helpers/db.js";
import { createApp, createHarness } from "./fixtures.js";
import { startSqld } from "../../helpers/sqld.js";
import { until } from "../../helpers/until.js";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "pb-fn-remote-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("capture through the @libsql/client executor (file: URL)", () => {
  let exec: LibsqlCaptureExecutor;
  let capture: ChangeCaptureDb;
  let target: { id: number; url: string; authToken: string };
  const watch = (entries: [string, Operation[]][]) => new Map(entries.map(([t, ops]) => [t, new Set(ops)]));

  beforeAll(async () => {
    exec = createLibsqlCaptureExecutor();
    target = { id: 1, url: `file:${join(dir, "exec.db")}`, authToken: "" };
    capture = { serviceBatch: (_appId, statements) => exec.run(target, statements) };
    const c = createLibsqlClient({ url: target.url });
    await c.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, data BLOB, n INTEGER)");
    c.close();
  });
  afterAll(() => exec.close());

  it("installs the capture triggers and reads every change with before and after", async () => {
    const { missing } = await syncCapture(capture, 1, watch([["items", ["insert", "update", "delete"]], ["later", ["insert"]]]));
    expect(missing).toEqual(["later"]);
    const c = createLibsqlClient({ url: target.url });
    await c.execute("INSERT INTO items (id, name, data, n) VALUES (1, 'a', x'00ff', 42)");
    await c.execute("UPDATE items SET name = 'b' WHERE id = 1");
    await c.execute("DELETE FROM items WHERE id = 1");
    c.close();
    const changes = await readChanges(capture, 1, 10);
    expect(changes.map((x) => [x.table, x.operation, x.before, x.after])).toEqual([
      ["items", "insert", null, { id: 1, name: "a", data: "00FF", n: 42 }],
      ["items", "update", { id: 1, name: "a", data: "00FF", n: 42 }, { id: 1, name: "b", data: "00FF", n: 42 }],
      ["items", "delete", { id: 1, name: "b", data: "00FF", n: 42 }, null],
    ]);
    expect(changes[0]!.at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    await deleteChanges(capture, 1, changes[1]!.seq);
    expect((await readChanges(capture, 1, 10)).map((x) => x.operation)).toEqual(["delete"]);
    // Unwatching an operation drops its trigger.
    await syncCapture(capture, 1, watch([["items", ["insert"]]]));
    const [triggers] = await exec.run(target, [{ sql: "SELECT name FROM sqlite_master WHERE type = 'trigger' ORDER BY name" }]);
    expect(triggers!.rows).toEqual([["_pulsebase_t_items_insert"]]);
  });

  it("applies a batch atomically: a failing statement rejects and nothing is kept", async () => {
    await expect(
      exec.run(target, [{ sql: "CREATE TABLE atomic_t (v INTEGER)" }, { sql: "INSERT INTO no_such_table VALUES (1)" }]),
    ).rejects.toThrow(/no such table/);
    const [r] = await exec.run(target, [{ sql: "SELECT count(*) FROM sqlite_master WHERE name = 'atomic_t'" }]);
    expect(r!.rows).toEqual([[0]]);
  });

  it("follows a changed URL and gives up on a server that does not answer", async () => {
    const other = { ...target, url: `file:${join(dir, "moved.db")}` };
    await exec.run(other, [{ sql: "CREATE TABLE moved_marker (v INTEGER)" }]);
    const [r] = await exec.run(other, [{ sql: "SELECT name FROM sqlite_master WHERE name IN ('items', 'moved_marker')" }]);
    expect(r!.rows).toEqual([["moved_marker"]]);

    // A TCP server that accepts and never answers: the call fails at the time limit.
    const sockets: import("node:net").Socket[] = [];
    const server: Server = createServer((s) => sockets.push(s));
    await new Promise<void>((res) => server.listen(0, "127.0.0.1", res));
    const port = (server.address() as { port: number }).port;
    const slow = createLibsqlCaptureExecutor({ timeoutMs: 300 });
    // (the server never answers: failing at all is the time limit)
    await expect(slow.run({ id: 7, url: `http://127.0.0.1:${port}`, authToken: "t" }, [{ sql: "SELECT 1" }])).rejects.toThrow(/did not answer within 300 ms/);
    slow.close();
    for (const s of sockets) s.destroy();
    await new Promise<void>((res) => server.close(() => res()));
  });
});

/**
 * The functions module over the real database module with a remote-kind
 * database: writes through /api/db's runner reach a db event trigger.
 */
async function remoteFlow(opts: { url: string; authToken: string }) {
  const db: TestDb = await createTestDb("postgres");
  const dataDir = await mkdtemp(join(tmpdir(), "pb-fn-remote-mod-"));
  const dbModule: DatabaseModule = await createDatabaseModule({ dataDir, linkCacheMs: 0, engineProcesses: 1 }, { sql: db.sql });
  const capture = changeCaptureFromDatabase({
    store: dbModule.store,
    // Remote databases never reach the engine pool.
    pool: { run: () => Promise.reject(new Error("the engine pool is for embedded files")) },
    dataDir,
  });
  const fn: FunctionsModule = createFunctionsModule({
    sql: db.sql,
    hostCapabilities: dbModule.hostCapabilities,
    config: { resolveCacheMs: 0, recorder: { flushMs: 20 } },
    // The PostgreSQL table transport (no NATS).
    events: { capture, config: { drainIntervalMs: 50 } },
  });
  const admin = createConnectClient(AdminFunctionService, createRouterTransport((r) => r.service(AdminFunctionService, fn.adminService)));
  const appId = await createApp(db.sql);
  const team = Number((await db.sql.query<{ team_id: number }>("SELECT team_id FROM apps WHERE id = $1", [appId])).rows[0]!.team_id);
  const databaseId = (await dbModule.manager.create({ teamId: team, name: "remote", kind: "remote", url: opts.url, authToken: opts.authToken })).id;
  await dbModule.manager.link(databaseId, appId);
  const table = `orders_${Date.now().toString(36)}`;
  return {
    db,
    dbModule,
    fn,
    admin,
    appId,
    table,
    capture,
    async close() {
      await dbModule.runner.query(appId, { sql: `DROP TABLE IF EXISTS ${table}` }).catch(() => {});
      await capture.serviceBatch(appId, [{ sql: `DELETE FROM ${CHANGE_TABLE} WHERE tbl = ?`, params: [table] }]).catch(() => {});
      await fn.close();
      await dbModule.stop();
      await rm(dataDir, { recursive: true, force: true });
      await db.drop();
    },
  };
}

async function expectDelivered(f: Awaited<ReturnType<typeof remoteFlow>>): Promise<void> {
  const { admin, appId, table, dbModule } = f;
  await dbModule.runner.query(appId, { sql: `CREATE TABLE ${table} (id INTEGER PRIMARY KEY, item TEXT, qty INTEGER)` });
  const fnRow = await admin.createFunction({ appId: BigInt(appId), name: "on-order" });
  await admin.deployVersion({
    functionId: fnRow.id,
    activate: true,
    code: `export default (req, { event }) => { console.log(event.id.split(":")[0], event.operation, event.table === ${JSON.stringify(table)}, JSON.stringify(event.before), JSON.stringify(event.after)); }`,
  });
  await admin.createEventTrigger({ functionId: fnRow.id, source: "db", target: table, operations: ["insert", "update"] });
  // The capture triggers are installed in the remote database itself.
  await until(async () => {
    const r = await f.capture.serviceBatch(appId, [{ sql: "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND tbl_name = ?", params: [table] }]);
    return r[0]!.rows[0]![0] === 2 ? true : undefined;
  });
  await dbModule.runner.batch(
    appId,
    [
      { sql: `INSERT INTO ${table} (id, item, qty) VALUES (1, 'apple', 1)` },
      { sql: `UPDATE ${table} SET qty = 5 WHERE id = 1` },
    ],
    true,
  );
  const logs = await until(async () => {
    const inv = await admin.listInvocations({ functionId: fnRow.id });
    const lines = inv.invocations.flatMap((i) => i.logs.map((l) => l.message)).reverse();
    return lines.length >= 2 ? lines : undefined;
  });
  expect(logs).toEqual([
    'db insert true null {"id":1,"item":"apple","qty":1}',
    'db update true {"id":1,"item":"apple","qty":1} {"id":1,"item":"apple","qty":5}',
  ]);
}

describe("db event triggers on a remote-kind database", () => {
  it("reach the function from a real libSQL server", async () => {
    const sqld = await startSqld();
    const f = await remoteFlow({ url: sqld.url, authToken: sqld.authToken });
    try {
      await f.fn.events!.start();
      await expectDelivered(f);
    } finally {
      await f.close();
      await sqld.stop();
    }
  });
});

describe("the shared drainer", () => {
  it("keeps delivering other applications' changes while one database hangs or fails", async () => {
    const db = await createTestDb("postgres");
    let hung = 0;
    let unhung = 0;
    // a remote server that does not answer until the test lets it
    let answer!: () => void;
    const hang = new Promise<void>((r) => (answer = r));
    let slowApp = 0;
    let brokenApp = 0;
    const h = createHarness(db.sql, {}, (fdb) => ({
      capture: {
        async serviceBatch(appId, statements) {
          if (appId === slowApp) {
            hung++;
            await hang;
            unhung++;
          }
          if (appId === brokenApp) throw new Error("server unreachable");
          return fdb.serviceBatch(appId, statements);
        },
      },
      config: { drainIntervalMs: 50 },
    }));
    try {
      const apps = [await createApp(db.sql), await createApp(db.sql), await createApp(db.sql)];
      const okApp = apps[2]!;
      for (const app of apps) {
        await h.fdb.client(app).execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT)");
        const f = await h.admin.createFunction({ appId: BigInt(app), name: "log" });
        await h.admin.deployVersion({ functionId: f.id, activate: true, code: "export default (req, { event }) => { console.log(event.after.item); }" });
        await h.admin.createEventTrigger({ functionId: f.id, source: "db", target: "orders", operations: ["insert"] });
      }
      // The two databases go bad after their triggers were created (and installed).
      [slowApp, brokenApp] = [apps[0]!, apps[1]!];
      const okFn = (await h.admin.listFunctions({ appId: BigInt(okApp) })).functions[0]!.id;
      await h.fn.events!.start();
      await until(async () => (hung > 0 ? true : undefined));
      await h.fdb.client(okApp).execute("INSERT INTO orders (item) VALUES ('pear')");
      // delivered while the other application's remote database still hangs
      const logs = await until(async () => {
        const inv = await h.admin.listInvocations({ functionId: okFn });
        return inv.invocations.length > 0 ? inv.invocations.flatMap((i) => i.logs.map((l) => l.message)) : undefined;
      }, 10_000);
      expect(logs).toEqual(["pear"]);
      expect(unhung).toBe(0);
    } finally {
      answer();
      await h.close();
      await db.drop();
    }
  });
});
