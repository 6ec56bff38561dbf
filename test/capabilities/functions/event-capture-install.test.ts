// db event triggers install their change capture before the operator API
// answers: a write made right after CreateEventTrigger (or enabling a
// trigger) returns is captured and delivered, with no wait for the event
// worker's periodic pass (set to a minute here, so nothing but the RPC
// itself can have installed the capture). Refusals leave no trigger behind.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConnectError } from "@connectrpc/connect";
import { errorDetail } from "../../../src/kernel/errors.js";
import { createTestDb, type TestDb } from "../../helpers/db.js";
import { until } from "../../helpers/until.js";
import { createApp, createHarness, type Harness } from "./fixtures.js";

let db: TestDb;
let h: Harness;
let appId: number;

beforeAll(async () => {
  db = await createTestDb("postgres");
  h = createHarness(db.sql, {}, (fdb) => ({
    capture: fdb,
    // The PostgreSQL table transport; the periodic drain only every minute.
    config: { drainIntervalMs: 60_000, maxAttempts: 2, baseBackoffMs: 20, maxBackoffMs: 50 },
  }));
  appId = await createApp(db.sql);
  await h.fdb.client(appId).executeMultiple(`
    CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT);
    CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT);
    CREATE TABLE seen (n INTEGER PRIMARY KEY AUTOINCREMENT, line TEXT);
  `);
  await h.fn.events!.start();
});
afterAll(async () => {
  await h.close();
  await db.drop();
});

async function failure(p: Promise<unknown>): Promise<{ code: string; message: string; fields: string[] }> {
  try {
    await p;
  } catch (err) {
    const d = errorDetail(err);
    return { code: d?.code ?? "", message: (err as ConnectError).rawMessage, fields: (d?.fieldViolations ?? []).map((f) => f.field) };
  }
  throw new Error("expected a failure");
}

async function recorder(name: string, app = appId): Promise<bigint> {
  const f = await h.admin.createFunction({ appId: BigInt(app), name });
  await h.admin.deployVersion({
    functionId: f.id,
    activate: true,
    code: `export default async (req, { event, db }) => {
      await db.query("INSERT INTO seen (line) VALUES (?)", [event.table + ":" + event.operation + ":" + JSON.stringify(event.after)]);
    }`,
  });
  return f.id;
}

const captured = async (table: string) =>
  Number((await h.fdb.client(appId).execute({ sql: "SELECT count(*) AS n FROM _pulsebase_changes WHERE tbl = ?", args: [table] })).rows[0]!.n);
const captureTriggers = async () =>
  (await h.fdb.client(appId).execute("SELECT name FROM sqlite_master WHERE type = 'trigger' ORDER BY name")).rows.map((r) => String(r.name));

async function seenLine(prefix: string): Promise<string> {
  await h.fn.events!.drainOnce();
  return until(async () => {
    const r = await h.fdb.client(appId).execute({ sql: "SELECT line FROM seen WHERE line LIKE ? ORDER BY n", args: [`${prefix}%`] });
    return r.rows.length > 0 ? String(r.rows[0]!.line) : undefined;
  });
}

describe("installing the capture with the operator call", () => {
  it("delivers an INSERT made right after CreateEventTrigger returns", async () => {
    const fn = await recorder("first-write");
    await h.admin.createEventTrigger({ functionId: fn, source: "db", target: "orders", operations: ["insert"] });
    // No sleep: the capture is in place once the call has returned.
    await h.fdb.client(appId).execute("INSERT INTO orders (id, item) VALUES (1, 'first')");
    expect(await captured("orders")).toBe(1);
    expect(await seenLine("orders:insert")).toBe('orders:insert:{"id":1,"item":"first"}');
  });

  it("SetTriggerEnabled(false) removes the capture at once and (true) installs it before answering", async () => {
    const fn = await recorder("toggled");
    const t = await h.admin.createEventTrigger({ functionId: fn, source: "db", target: "notes", operations: ["insert", "update"] });
    expect(await captureTriggers()).toEqual(expect.arrayContaining(["_pulsebase_t_notes_insert", "_pulsebase_t_notes_update"]));
    await h.admin.setTriggerEnabled({ triggerId: t.id, enabled: false });
    expect((await captureTriggers()).filter((n) => n.includes("notes"))).toEqual([]);
    await h.fdb.client(appId).execute("INSERT INTO notes (id, body) VALUES (1, 'while disabled')");
    expect(await captured("notes")).toBe(0);
    await h.admin.setTriggerEnabled({ triggerId: t.id, enabled: true });
    await h.fdb.client(appId).execute("UPDATE notes SET body = 'after enable' WHERE id = 1");
    expect(await captured("notes")).toBe(1);
    expect(await seenLine("notes:update")).toBe('notes:update:{"id":1,"body":"after enable"}');
  });

  it("DeleteTrigger removes the capture at once; the other triggers' capture stays", async () => {
    const fn = await recorder("deleted");
    const t = await h.admin.createEventTrigger({ functionId: fn, source: "db", target: "notes", operations: ["delete"] });
    expect(await captureTriggers()).toContain("_pulsebase_t_notes_delete");
    await h.admin.deleteTrigger({ triggerId: t.id });
    const left = await captureTriggers();
    expect(left).not.toContain("_pulsebase_t_notes_delete");
    expect(left).toContain("_pulsebase_t_orders_insert");
  });

  it("refuses a trigger on a table that does not exist and keeps no trigger", async () => {
    const fn = await recorder("missing-table");
    expect(await failure(h.admin.createEventTrigger({ functionId: fn, source: "db", target: "later", operations: ["insert"] }))).toMatchObject({
      code: "failed_precondition",
      message: expect.stringContaining("later does not exist"),
      fields: ["target"],
    });
    expect((await h.admin.listTriggers({ functionId: fn })).triggers).toEqual([]);
    // A disabled trigger is stored as asked: its capture is installed when it is enabled.
    const t = await h.admin.createEventTrigger({ functionId: fn, source: "db", target: "later", operations: ["insert"], enabled: false });
    expect(await failure(h.admin.setTriggerEnabled({ triggerId: t.id, enabled: true }))).toMatchObject({ code: "failed_precondition" });
    expect((await h.admin.listTriggers({ functionId: fn })).triggers.map((x) => x.enabled)).toEqual([false]);
    await h.fdb.client(appId).execute("CREATE TABLE later (id INTEGER PRIMARY KEY)");
    await h.admin.setTriggerEnabled({ triggerId: t.id, enabled: true });
    await h.fdb.client(appId).execute("INSERT INTO later (id) VALUES (7)");
    expect(await seenLine("later:insert")).toBe('later:insert:{"id":7}');
  });

  it("refuses a db trigger of an application without a linked database and keeps no trigger", async () => {
    const other = await createApp(db.sql);
    h.fdb.unlinked.add(other);
    const fn = await recorder("unlinked", other);
    expect(await failure(h.admin.createEventTrigger({ functionId: fn, source: "db", target: "orders", operations: ["insert"] }))).toMatchObject({
      code: "database_not_linked",
    });
    expect((await h.admin.listTriggers({ functionId: fn })).triggers).toEqual([]);
    // cms triggers need no database.
    await h.admin.createEventTrigger({ functionId: fn, source: "cms", target: "articles", operations: ["insert"] });
    expect((await h.admin.listTriggers({ functionId: fn })).triggers).toHaveLength(1);
  });
});

describe("two processes on one service database", () => {
  it("a trigger disabled while its database fails is disabled at once; its capture is removed once the database answers", async () => {
    let broken = false;
    const c = createHarness(db.sql, {}, () => ({
      capture: {
        async serviceBatch(app, statements) {
          if (broken) throw new Error("server unreachable");
          return h.fdb.serviceBatch(app, statements);
        },
      },
      config: { drainIntervalMs: 60_000 },
    }));
    try {
      const other = await createApp(db.sql);
      await h.fdb.client(other).execute("CREATE TABLE jobs (id INTEGER PRIMARY KEY)");
      const fn = await recorder("broken-db", other);
      const t = await h.admin.createEventTrigger({ functionId: fn, source: "db", target: "jobs", operations: ["insert"] });
      const triggers = async () => (await h.fdb.client(other).execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")).rows.length;
      expect(await triggers()).toBe(1);
      broken = true;
      // Process C did not install this capture; the database fails while C disables the trigger.
      const off = await c.admin.setTriggerEnabled({ triggerId: t.id, enabled: false });
      expect(off.enabled).toBe(false);
      expect(await triggers()).toBe(1);
      broken = false;
      await c.fn.events!.drainOnce();
      expect(await triggers()).toBe(0);
    } finally {
      await c.close();
    }
  });

  it("a sync another process started from an older trigger list cannot undo the capture CreateEventTrigger installed", async () => {
    // Process B's drainer stops inside its capture sync of the app (after it
    // read the watched tables) until released; process A then creates a
    // trigger. A must wait for B's sync and install after it, so B's older
    // list never lands last.
    let armed = false;
    let paused!: () => void;
    const pausedP = new Promise<void>((r) => (paused = r));
    let releaseB!: () => void;
    const gate = new Promise<void>((r) => (releaseB = r));
    const b = createHarness(db.sql, {}, () => ({
      capture: {
        async serviceBatch(app, statements) {
          if (armed && app === shared && statements[0]?.sql.includes("CREATE TABLE IF NOT EXISTS")) {
            armed = false;
            paused();
            await gate;
          }
          return h.fdb.serviceBatch(app, statements);
        },
      },
      config: { drainIntervalMs: 60_000 },
    }));
    const shared = await createApp(db.sql);
    try {
      await h.fdb.client(shared).executeMultiple("CREATE TABLE orders (id INTEGER PRIMARY KEY); CREATE TABLE notes (id INTEGER PRIMARY KEY);");
      const fn = await recorder("two-processes", shared);
      await h.admin.createEventTrigger({ functionId: fn, source: "db", target: "orders", operations: ["insert"] });
      armed = true;
      const bSync = b.fn.events!.drainOnce();
      await pausedP;
      let created = false;
      const aCreate = h.admin.createEventTrigger({ functionId: fn, source: "db", target: "notes", operations: ["insert"] }).then(() => (created = true));
      // A's sync has reached the app's capture lock, which B holds: it waits there.
      await until(async () => {
        const r = await db.sql.query(
          `SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
           WHERE l.locktype = 'advisory' AND NOT l.granted AND l.classid = 7022 AND l.objid = $1::int::oid AND l.objsubid = 2
             AND a.application_name = $2`,
          [shared, db.schema],
        );
        return r.rows[0];
      });
      expect(created).toBe(false);
      releaseB();
      await Promise.all([aCreate, bSync]);
      await h.fdb.client(shared).execute("INSERT INTO notes (id) VALUES (1)");
      const n = await h.fdb.client(shared).execute("SELECT count(*) AS n FROM _pulsebase_changes WHERE tbl = 'notes'");
      expect(Number(n.rows[0]!.n)).toBe(1);
    } finally {
      releaseB();
      await b.close();
    }
  });
});
