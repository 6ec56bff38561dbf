// Event triggers end to end: SQLite capture triggers on a real libSQL file,
// the drainer, real JetStream (a unique stream for this file), the ordered
// dispatcher with retries and dead letters, and CMS changes.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { createTestDb, TEST_NATS_URL, uniqueName, type TestDb } from "../../helpers/db.js";
import { createApp, createHarness, type Harness } from "./fixtures.js";
import { until } from "../../helpers/until.js";

let db: TestDb;
let h: Harness;
let nc: NatsConnection;
let appId: number;
const stream = uniqueName("PBFN").toUpperCase();
const prefix = `test.${stream.toLowerCase()}`;

beforeAll(async () => {
  db = await createTestDb("postgres");
  nc = await connect({ servers: TEST_NATS_URL });
  h = createHarness(db.sql, {}, (fdb) => ({
    nats: nc,
    capture: fdb,
    config: { stream, subjectPrefix: prefix, durable: "fn", drainIntervalMs: 50, maxAttempts: 3, baseBackoffMs: 20, maxBackoffMs: 50 },
  }));
  appId = await createApp(db.sql);
  await h.fdb.client(appId).executeMultiple(`
    CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT, qty INTEGER, data BLOB);
    CREATE TABLE seen (n INTEGER PRIMARY KEY AUTOINCREMENT, line TEXT);
  `);
  await h.fn.events!.start();
});
afterAll(async () => {
  await h.close();
  const jsm = await jetstreamManager(nc);
  await jsm.streams.delete(stream).catch(() => {});
  await nc.close();
  await db.drop();
});


async function seenLines(n: number): Promise<string[]> {
  return until(async () => {
    const r = await h.fdb.client(appId).execute("SELECT line FROM seen ORDER BY n");
    return r.rows.length >= n ? r.rows.map((x) => String(x.line)) : undefined;
  });
}

describe("event triggers", () => {
  it("delivers inserts and updates of a watched table in order, with the documented event shape", async () => {
    const f = await h.admin.createFunction({ appId: BigInt(appId), name: "audit" });
    await h.admin.deployVersion({
      functionId: f.id,
      activate: true,
      code: `export default async (req, { event, db }) => {
        if (event.after && event.after.item === "boom") throw new Error("refused " + event.after.id);
        await db.query("INSERT INTO seen (line) VALUES (?)", [event.source + ":" + event.table + ":" + event.operation + ":" +
          JSON.stringify(event.before) + "->" + JSON.stringify(event.after) + ":" + (event.id.startsWith("db:") && typeof event.at)]);
      }`,
    });
    await h.admin.createEventTrigger({ functionId: f.id, source: "db", target: "orders", operations: ["insert", "update"] });
    // Wait until the capture triggers are installed.
    await until(async () => {
      const r = await h.fdb.client(appId).execute("SELECT count(*) AS n FROM sqlite_master WHERE type = 'trigger'");
      return Number(r.rows[0]!.n) === 2 ? true : undefined;
    });
    const c = h.fdb.client(appId);
    await c.execute("INSERT INTO orders (id, item, qty, data) VALUES (1, 'apple', 1, x'0aff')");
    await c.execute("INSERT INTO orders (id, item, qty) VALUES (2, 'pear', 2)");
    await c.execute("UPDATE orders SET qty = 5 WHERE id = 1");
    await c.execute("DELETE FROM orders WHERE id = 2"); // not watched
    await c.execute("INSERT INTO orders (id, item, qty) VALUES (3, 'plum', 3)");
    const lines = await seenLines(4);
    expect(lines).toEqual([
      'db:orders:insert:null->{"id":1,"item":"apple","qty":1,"data":"0AFF"}:string',
      'db:orders:insert:null->{"id":2,"item":"pear","qty":2,"data":null}:string',
      'db:orders:update:{"id":1,"item":"apple","qty":1,"data":"0AFF"}->{"id":1,"item":"apple","qty":5,"data":"0AFF"}:string',
      'db:orders:insert:null->{"id":3,"item":"plum","qty":3,"data":null}:string',
    ]);
    // The change table was drained.
    const left = await c.execute("SELECT count(*) AS n FROM _pulsebase_changes");
    expect(Number(left.rows[0]!.n)).toBe(0);
    const inv = await h.admin.listInvocations({ functionId: f.id });
    expect(inv.invocations.every((i) => i.triggerKind === "event" && i.status === 200)).toBe(true);
  });

  it("retries a failing change with backoff, dead-letters it after the attempts, and moves on", async () => {
    const c = h.fdb.client(appId);
    await c.execute("INSERT INTO orders (id, item, qty) VALUES (10, 'boom', 1)");
    await c.execute("INSERT INTO orders (id, item, qty) VALUES (11, 'fig', 1)");
    const lines = await seenLines(5);
    expect(lines[4]).toContain('"item":"fig"');
    const functionId = (await h.admin.listFunctions({ appId: BigInt(appId) })).functions.find((f) => f.name === "audit")!.id;
    const inv = await h.admin.listInvocations({ functionId });
    const failed = inv.invocations.filter((i) => i.outcome === "error");
    expect(failed).toHaveLength(3);
    expect(failed[0]!.error).toBe("Error: refused 10");
    const jsm = await jetstreamManager(nc);
    const dead = await jsm.streams.getMessage(stream, { last_by_subj: `${prefix}.dead.db.${appId}` });
    expect(dead?.json<{ after: { id: number } }>().after.id).toBe(10);
    expect(dead?.header.get("Pb-Attempts")).toBe("3");
  });

  it("runs cms triggers from emitCmsChange with the collection and before/after", async () => {
    const f = await h.admin.createFunction({ appId: BigInt(appId), name: "cms-hook" });
    await h.admin.deployVersion({
      functionId: f.id,
      activate: true,
      code: `export default async (req, { event, db }) => {
        await db.query("INSERT INTO seen (line) VALUES (?)", ["cms:" + event.collection + ":" + event.operation + ":" + event.after.title]);
      }`,
    });
    await h.admin.createEventTrigger({ functionId: f.id, source: "cms", target: "articles", operations: ["update"] });
    await h.fn.emitCmsChange(appId, { collection: "articles", operation: "insert", before: null, after: { title: "ignored" } });
    await h.fn.emitCmsChange(appId, { collection: "articles", operation: "update", before: { title: "a" }, after: { title: "b" } });
    const lines = await seenLines(6);
    expect(lines[5]).toBe("cms:articles:update:b");
  });
});
