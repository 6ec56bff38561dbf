// The change bus between "processes" (two buses on one PostgreSQL schema and
// the test NATS): a change reaches the other side over NATS at once, through
// the change table when NATS is not there (or a message was missed), each
// change once per path at most; the embedded database keeps changes local.
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ChangeBus, type Change } from "../../../src/infra/cluster/change-bus.js";
import { NatsLink } from "../../../src/infra/nats/nats-link.js";
import { createTestDb, TEST_NATS_URL, type TestDb } from "../../helpers/db.js";
import { until } from "../../helpers/until.js";

let db: TestDb;
const links: NatsLink[] = [];
const buses: ChangeBus[] = [];

beforeAll(async () => {
  db = await createTestDb("postgres");
});
afterAll(async () => {
  for (const b of buses) await b.stop();
  for (const l of links) await l.close();
  await db.drop();
});

async function bus(opts: { nats?: boolean; subject: string; pollMs?: number }): Promise<{ bus: ChangeBus; seen: Change[] }> {
  let link: NatsLink | undefined;
  if (opts.nats) {
    link = new NatsLink({ servers: TEST_NATS_URL, name: "change-bus-test" });
    links.push(link);
    await link.connection(10_000);
  }
  const b = new ChangeBus({ sql: db.sql, nats: link, subject: opts.subject, pollMs: opts.pollMs ?? 100 });
  buses.push(b);
  const seen: Change[] = [];
  for (const kind of ["cms", "consumer", "app"] as const) b.subscribe(kind, (c) => seen.push(c));
  await b.start();
  if (link) {
    // subscribed, and the subscription has reached the server (a round trip after it)
    const inside = b as unknown as { sub?: unknown };
    await until(async () => (inside.sub !== undefined ? true : undefined), 10_000, 5);
    await (await link.connection()).flush();
  }
  return { bus: b, seen };
}

/**
 * Waits for two reads of the change table by `b` to complete: the second
 * started after the first ended, so after this call began. Whatever the
 * table has to deliver by now has been delivered.
 */
async function tableRead(b: ChangeBus): Promise<void> {
  const inside = b as unknown as { lastRead: number };
  for (let i = 0; i < 2; i++) {
    const before = inside.lastRead;
    await until(async () => (inside.lastRead > before ? true : undefined), 10_000, 5);
  }
}

const subject = () => `test.changes.${randomBytes(4).toString("hex")}`;

describe("change bus", () => {
  it("delivers locally at once, and to another process over NATS with the item, once", async () => {
    const s = subject();
    const a = await bus({ nats: true, subject: s, pollMs: 100 });
    const b = await bus({ nats: true, subject: s, pollMs: 100 });
    await a.bus.publish("consumer", 7001, 42);
    expect(a.seen).toEqual([{ kind: "consumer", appId: 7001, itemId: 42 }]);
    await until(async () => (b.seen.length ? true : undefined), 2000, 5);
    // Heard over NATS with the version before it: the table's read has
    // nothing more to deliver (no app-wide drop for one consumer).
    await tableRead(b.bus);
    expect(b.seen).toEqual([{ kind: "consumer", appId: 7001, itemId: 42 }]);
    const before = b.seen.length;
    await a.bus.publish("consumer", 7001, 43);
    await a.bus.publish("consumer", 7001, 44);
    await until(async () => (b.seen.length >= before + 2 ? true : undefined), 2000, 5);
    await tableRead(b.bus);
    expect(b.seen.slice(before)).toEqual([
      { kind: "consumer", appId: 7001, itemId: 43 },
      { kind: "consumer", appId: 7001, itemId: 44 },
    ]);
    expect(a.seen.filter((c) => c.appId === 7001)).toEqual([42, 43, 44].map((itemId) => ({ kind: "consumer", appId: 7001, itemId })));
  });

  it("reaches a process without NATS through the change table within the poll interval", async () => {
    const s = subject();
    const a = await bus({ nats: true, subject: s, pollMs: 100 });
    const b = await bus({ nats: false, subject: s, pollMs: 100 });
    // (within a few 100 ms polls; how long exactly on a loaded machine is not this test's business)
    await a.bus.publish("cms", 7002);
    await until(async () => (b.seen.some((c) => c.appId === 7002) ? true : undefined), 5000, 5);
    expect(b.seen.filter((c) => c.appId === 7002)).toEqual([{ kind: "cms", appId: 7002 }]);
    // One change, one delivery: later reads do not deliver it again.
    await tableRead(b.bus);
    expect(b.seen.filter((c) => c.appId === 7002)).toHaveLength(1);
  });

  it("a missed NATS message is made up for by the table", async () => {
    const s = subject();
    const a = await bus({ nats: true, subject: s, pollMs: 100 });
    const b = await bus({ nats: true, subject: s, pollMs: 100 });
    // Version 1 heard over NATS and by the table; version 2 recorded by
    // another writer without a NATS message (as if it was lost).
    await a.bus.publish("app", 7003);
    await until(async () => (b.seen.some((c) => c.appId === 7003) ? true : undefined), 2000, 5);
    await tableRead(b.bus);
    const before = b.seen.filter((c) => c.appId === 7003).length;
    await db.sql.query("UPDATE cluster_changes SET version = version + 1, changed_at = clock_timestamp() WHERE app_id = 7003 AND kind = 'app'");
    await until(async () => (b.seen.filter((c) => c.appId === 7003).length > before ? true : undefined), 2000, 5);
  });
});
