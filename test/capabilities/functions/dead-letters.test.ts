// The operator API over dead-lettered event deliveries
// (ListFunctionDeadLetters, ReplayFunctionDeadLetters), on both transports:
// real JetStream (a stream of its own) and the PostgreSQL table transport
// (no NATS), the latter on PostgreSQL and on PGlite (the embedded default). Changes come from SQLite capture triggers on real libSQL files;
// a function records each run it completes in the app's `seen` table, so the
// tests see exactly which changes were delivered, and how often.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Code, ConnectError } from "@connectrpc/connect";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { createTestDb, TEST_NATS_URL, uniqueName, type TestDb } from "../../helpers/db.js";
import { createApp, createHarness, type Harness } from "./fixtures.js";
import { until } from "../../helpers/until.js";

const FAILING = `export default async (req, { event, db }) => {
  if (event.after && String(event.after.item).startsWith("boom")) throw new Error("refused " + event.after.id);
  await db.query("INSERT INTO seen (fn, item) VALUES (?, ?)", ["%FN%", event.operation + ":" + event.after.item]);
}`;
const FIXED = `export default async (req, { event, db }) => {
  await db.query("INSERT INTO seen (fn, item) VALUES (?, ?)", ["%FN%", event.operation + ":" + event.after.item + ":" + event.id]);
}`;

const isBarrier = (row: string) => row.includes("barrier-");

const CASES = [
  { transport: "jetstream", sql: "postgres" },
  { transport: "table", sql: "postgres" },
  { transport: "table", sql: "pglite" },
] as const;

for (const { transport, sql } of CASES) {
  describe(`function dead letters (${transport} transport, ${sql})`, () => {
    let db: TestDb;
    let h: Harness;
    let nc: NatsConnection | undefined;
    let appId: number;
    let otherApp: number;
    let auditId: bigint;
    let mirrorId: bigint;
    let auditTrigger: bigint;
    const stream = uniqueName("PBFNDL").toUpperCase();

    const seen = async (app = appId) => {
      const r = await h.fdb.client(app).execute("SELECT fn, item FROM seen ORDER BY n");
      return r.rows.map((x) => `${String(x.fn)} ${String(x.item)}`);
    };
    const list = (extra: { functionId?: bigint; pageSize?: number; pageToken?: string; app?: number } = {}) =>
      h.admin.listFunctionDeadLetters({ appId: BigInt(extra.app ?? appId), functionId: extra.functionId ?? 0n, pageSize: extra.pageSize ?? 0, pageToken: extra.pageToken ?? "" });
    /**
     * A positive barrier for a negative: a new change of the same table goes
     * to the same ordered lane as every delivery queued before it (a replay
     * included), so once both functions have seen it, any duplicate queued
     * before it has been delivered too.
     */
    const barrier = async (id: number, name: string) => {
      await h.fdb.client(appId).execute({ sql: "INSERT INTO orders (id, item) VALUES (?, ?)", args: [id, name] });
      await until(async () => ((await seen()).filter((r) => r.includes(`insert:${name}`)).length === 2 ? true : undefined));
    };
    const deadCount = async (n: number, app = appId) => until(async () => ((await list({ app })).deadLetters.length >= n ? true : undefined));

    async function deploy(app: number, name: string, code: string, operations = ["insert"]) {
      const f = await h.admin.createFunction({ appId: BigInt(app), name });
      await h.admin.deployVersion({ functionId: f.id, activate: true, code: code.replace("%FN%", name) });
      const t = await h.admin.createEventTrigger({ functionId: f.id, source: "db", target: "orders", operations });
      return { functionId: f.id, triggerId: t.id };
    }

    beforeAll(async () => {
      db = await createTestDb(sql);
      if (transport === "jetstream") nc = await connect({ servers: TEST_NATS_URL });
      h = createHarness(db.sql, {}, (fdb) => ({
        nats: nc,
        capture: fdb,
        config: { stream, subjectPrefix: `test.${stream.toLowerCase()}`, durable: "fn", drainIntervalMs: 40, maxAttempts: 2, baseBackoffMs: 20, maxBackoffMs: 40 },
      }));
      appId = await createApp(db.sql);
      otherApp = await createApp(db.sql);
      for (const app of [appId, otherApp]) {
        await h.fdb.client(app).executeMultiple(`
          CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT);
          CREATE TABLE seen (n INTEGER PRIMARY KEY AUTOINCREMENT, fn TEXT, item TEXT);
        `);
      }
      // Two functions watch the same table: "audit" fails on "boom*" items,
      // "mirror" always succeeds.
      ({ functionId: auditId, triggerId: auditTrigger } = await deploy(appId, "audit", FAILING));
      ({ functionId: mirrorId } = await deploy(appId, "mirror", FAILING.replace("startsWith(\"boom\")", "startsWith(\"never\")")));
      await deploy(otherApp, "other", FAILING);
      await h.fn.events!.start();
      // Wait until the capture triggers are installed in both databases.
      for (const app of [appId, otherApp]) {
        await until(async () => {
          const r = await h.fdb.client(app).execute("SELECT count(*) AS n FROM sqlite_master WHERE type = 'trigger'");
          return Number(r.rows[0]!.n) === 1 ? true : undefined;
        });
      }
    });

    afterAll(async () => {
      await h?.close();
      if (nc) {
        const jsm = await jetstreamManager(nc);
        await jsm.streams.delete(stream).catch(() => {});
        await nc.close();
      }
      await db?.drop();
    });

    it("lists the failed deliveries newest first with function, trigger, event, error, attempts and time; pages and filters", async () => {
      const start = Date.now();
      const c = h.fdb.client(appId);
      await c.execute("INSERT INTO orders (id, item) VALUES (1, 'boom-a')");
      await c.execute("INSERT INTO orders (id, item) VALUES (2, 'apple')");
      await c.execute("INSERT INTO orders (id, item) VALUES (3, 'boom-b')");
      await h.fdb.client(otherApp).execute("INSERT INTO orders (id, item) VALUES (1, 'boom-other')");
      await deadCount(2);
      await deadCount(1, otherApp);
      // The stream moved on: mirror saw everything, audit everything but the failures.
      await until(async () => ((await seen()).length === 4 ? true : undefined));
      expect(await seen()).toEqual(["mirror insert:boom-a", "audit insert:apple", "mirror insert:apple", "mirror insert:boom-b"]);

      const { deadLetters, nextPageToken } = await list();
      expect(nextPageToken).toBe("");
      expect(deadLetters.map((d) => d.event?.after)).toEqual([
        { id: 3, item: "boom-b" },
        { id: 1, item: "boom-a" },
      ]);
      const d = deadLetters[1]!;
      expect(d).toMatchObject({
        appId: BigInt(appId),
        functionId: auditId,
        triggerId: auditTrigger,
        source: "db",
        target: "orders",
        operation: "insert",
        attempts: 2,
        lastError: "Error: refused 1",
      });
      expect(d.eventId).toMatch(new RegExp(`^db:${appId}:\\d+$`));
      expect(d.event).toMatchObject({ id: d.eventId, source: "db", app_id: appId, table: "orders", operation: "insert", before: null });
      const at = Number(d.deadLetteredAt!.seconds) * 1000;
      expect(at).toBeGreaterThanOrEqual(start - 2000);
      expect(at).toBeLessThanOrEqual(Date.now() + 2000);

      // Paged one at a time: same order, nothing lost.
      const p1 = await list({ pageSize: 1 });
      expect(p1.deadLetters.map((x) => x.id)).toEqual([deadLetters[0]!.id]);
      expect(p1.nextPageToken).not.toBe("");
      const p2 = await list({ pageSize: 1, pageToken: p1.nextPageToken });
      expect(p2.deadLetters.map((x) => x.id)).toEqual([deadLetters[1]!.id]);
      expect(p2.nextPageToken).toBe("");

      // Filtered by function; the other application sees only its own.
      expect((await list({ functionId: mirrorId })).deadLetters).toEqual([]);
      expect((await list({ functionId: auditId })).deadLetters).toHaveLength(2);
      const other = await list({ app: otherApp });
      expect(other.deadLetters.map((x) => x.lastError)).toEqual(["Error: refused 1"]);
    });

    it("replays one dead letter for its own trigger only, once, and removes it", async () => {
      // The operator fixes the function, then replays the oldest dead letter.
      await h.admin.deployVersion({ functionId: auditId, activate: true, code: FIXED.replace("%FN%", "audit") });
      const before = (await list()).deadLetters;
      const oldest = before[before.length - 1]!;
      const [a, b] = await Promise.all([
        h.admin.replayFunctionDeadLetters({ appId: BigInt(appId), ids: [oldest.id] }),
        h.admin.replayFunctionDeadLetters({ appId: BigInt(appId), ids: [oldest.id] }),
      ]);
      expect(a.replayed + b.replayed).toBe(1);
      expect((await h.admin.replayFunctionDeadLetters({ appId: BigInt(appId), ids: [oldest.id] })).replayed).toBe(0);
      await until(async () => ((await seen()).length === 5 ? true : undefined));
      // A duplicate delivery would have shown up by the barrier: there is none.
      await barrier(101, "barrier-1");
      const rows = (await seen()).filter((r) => !isBarrier(r));
      expect(rows.slice(4)).toEqual([`audit insert:boom-a:${oldest.eventId}`]);
      // mirror (which had succeeded) did not run again.
      expect(rows.filter((r) => r.startsWith("mirror"))).toHaveLength(3);
      expect((await list()).deadLetters.map((x) => x.id)).toEqual([before[0]!.id]);
      const inv = await h.admin.listInvocations({ functionId: auditId });
      expect(inv.invocations[0]).toMatchObject({ triggerKind: "event", triggerId: auditTrigger, outcome: "ok" });
    });

    it("ignores ids of other applications and unknown ids", async () => {
      const foreign = (await list({ app: otherApp })).deadLetters[0]!;
      const r = await h.admin.replayFunctionDeadLetters({ appId: BigInt(appId), ids: [foreign.id, "999999", "x"] });
      expect(r.replayed).toBe(0);
      expect((await list({ app: otherApp })).deadLetters.map((x) => x.id)).toEqual([foreign.id]);
    });

    it("a replay that fails again is dead-lettered again", async () => {
      // "other" still fails: replaying its dead letter brings it back, with a new id.
      const first = (await list({ app: otherApp })).deadLetters[0]!;
      expect((await h.admin.replayFunctionDeadLetters({ appId: BigInt(otherApp), ids: [first.id] })).replayed).toBe(1);
      const again = await until(async () => {
        const l = (await list({ app: otherApp })).deadLetters;
        return l.length === 1 && l[0]!.id !== first.id ? l[0]! : undefined;
      });
      expect(again).toMatchObject({ eventId: first.eventId, attempts: 2, lastError: "Error: refused 1" });
      expect(await seen(otherApp)).toEqual([]);
    });

    it("replays every dead letter of the application (or of one function) when no ids are given", async () => {
      const c = h.fdb.client(appId);
      await c.execute("INSERT INTO orders (id, item) VALUES (4, 'boom-c')"); // audit is fixed now: no dead letter
      await h.admin.deployVersion({ functionId: mirrorId, activate: true, code: FAILING.replace("%FN%", "mirror").replace('"boom"', '"boom-d"') });
      await c.execute("INSERT INTO orders (id, item) VALUES (5, 'boom-d')"); // mirror fails it
      await deadCount(2);
      const mirrorDead = (await list({ functionId: mirrorId })).deadLetters;
      expect(mirrorDead.map((d) => d.event?.after)).toEqual([{ id: 5, item: "boom-d" }]);
      // Only audit's: boom-b.
      expect((await h.admin.replayFunctionDeadLetters({ appId: BigInt(appId), functionId: auditId })).replayed).toBe(1);
      expect((await list()).deadLetters.map((d) => d.id)).toEqual([mirrorDead[0]!.id]);
      await h.admin.deployVersion({ functionId: mirrorId, activate: true, code: FIXED.replace("%FN%", "mirror") });
      expect((await h.admin.replayFunctionDeadLetters({ appId: BigInt(appId) })).replayed).toBe(1);
      expect((await h.admin.replayFunctionDeadLetters({ appId: BigInt(appId) })).replayed).toBe(0);
      await until(async () => ((await seen()).filter((r) => r.includes("boom-b") || r.includes("boom-d")).length === 4 ? true : undefined));
      await barrier(102, "barrier-2");
      const rows = await seen();
      expect(rows.filter((r) => r.startsWith("audit insert:boom-b"))).toHaveLength(1);
      expect(rows.filter((r) => r.startsWith("mirror insert:boom-d"))).toHaveLength(1);
      expect((await list()).deadLetters).toEqual([]);
    });

    it("refuses an unknown application, another application's function and a bad page token", async () => {
      const err = async (p: Promise<unknown>) => p.then(() => undefined, (e: unknown) => ConnectError.from(e).code);
      expect(await err(h.admin.listFunctionDeadLetters({ appId: 987654n }))).toBe(Code.NotFound);
      expect(await err(h.admin.listFunctionDeadLetters({ appId: BigInt(otherApp), functionId: auditId }))).toBe(Code.NotFound);
      expect(await err(h.admin.replayFunctionDeadLetters({ appId: BigInt(otherApp), functionId: auditId }))).toBe(Code.NotFound);
      expect(await err(h.admin.listFunctionDeadLetters({ appId: BigInt(appId), pageToken: "nope" }))).toBe(Code.InvalidArgument);
    });
  });
}
