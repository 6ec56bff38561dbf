// A PostgreSQL connection that dies while the pool has lent it out (server
// restart, failover, pg_terminate_backend) must fail only the work on it, as
// `unavailable` (503): no uncaught 'error' event (vitest fails the file on
// one), and the pool goes on with fresh connections.
import { randomBytes } from "node:crypto";
import { COMMIT_UNKNOWN_MESSAGE } from "../../../src/infra/storage/pg-sql.js";
import { afterAll, describe, expect, it, vi } from "vitest";
import { Code } from "@connectrpc/connect";
import pg from "pg";
import { createPgSql } from "../../../src/infra/storage/pg-sql.js";
import { errorDetail } from "../../../src/kernel/errors.js";
import { storageFailure } from "../../../src/infra/storage/sql.js";
import { TEST_DATABASE_URL } from "../../helpers/db.js";
import { until } from "../../helpers/until.js";

const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
const adminReady = admin.connect();
afterAll(() => admin.end());

const appName = () => `pbtest_loss_${randomBytes(5).toString("hex")}`;

/** Terminates every backend of `name`, optionally only those in `state`; returns how many. */
async function terminate(name: string, state?: string): Promise<number> {
  await adminReady;
  const r = await admin.query(
    `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
     WHERE application_name = $1 AND ($2::text IS NULL OR state = $2) AND pid <> pg_backend_pid()`,
    [name, state ?? null],
  );
  return r.rowCount ?? 0;
}

/** Waits until one backend of `name` is in `state`. */
async function waitForBackend(name: string, state: string): Promise<void> {
  await adminReady;
  await until(async () => {
    const r = await admin.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND state = $2", [name, state]);
    return r.rows[0].n === 1 ? true : undefined;
  });
}

function expectUnavailable(err: unknown) {
  expect(err).toBeInstanceOf(Error);
  const e = err as { code: Code };
  expect(e.code).toBe(Code.Unavailable);
  expect(errorDetail(err)?.code).toBe("unavailable");
  expect(errorDetail(err)?.httpStatus).toBe(503);
}

describe("PostgreSQL connection lost while checked out", () => {
  it("fails a transaction whose connection dies between statements with unavailable, and the pool recovers", async () => {
    const name = appName();
    const sql = createPgSql({ connectionString: TEST_DATABASE_URL, applicationName: name, max: 2 });
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const tx = sql.transaction(async (t) => {
      await t.query("SELECT 1");
      await gate; // the connection sits "idle in transaction" while it is killed
      await t.query("SELECT 2");
    });
    const outcome = tx.catch((e: unknown) => e);
    await waitForBackend(name, "idle in transaction");
    const emitted = vi.spyOn(pg.Client.prototype, "emit");
    try {
      expect(await terminate(name)).toBe(1);
      // The server's FATAL reaches the client with no query running: the
      // client emits 'error', which used to be an uncaught exception.
      await until(async () => (emitted.mock.calls.some(([event]) => event === "error") ? true : undefined));
    } finally {
      emitted.mockRestore();
    }
    release();
    const err = await outcome;
    expectUnavailable(err);
    // Nothing was committed: safe to run the transaction again.
    expect(storageFailure(err)?.kind).toBe("retry");
    expect((await sql.query<{ one: number }>("SELECT 1 AS one")).rows[0]!.one).toBe(1);
    await sql.close();
  });

  it("fails a transaction whose statement is running when the connection dies, and the pool recovers", async () => {
    const name = appName();
    const sql = createPgSql({ connectionString: TEST_DATABASE_URL, applicationName: name, max: 2 });
    const outcome = sql
      .transaction(async (t) => {
        await t.query("SELECT pg_sleep(10)");
      })
      .catch((e: unknown) => e);
    await waitForBackend(name, "active");
    expect(await terminate(name)).toBe(1);
    const err = await outcome;
    expectUnavailable(err);
    expect(storageFailure(err)?.kind).toBe("retry");
    // Both connections of the pool can be used again (the dead one was discarded).
    const both = await Promise.all([
      sql.transaction((t) => t.query<{ n: number }>("SELECT 1 AS n, pg_sleep(0.05)")),
      sql.transaction((t) => t.query<{ n: number }>("SELECT 1 AS n, pg_sleep(0.05)")),
    ]);
    expect(both.map((r) => r.rows[0]!.n)).toEqual([1, 1]);
    await sql.close();
  });

  it("re-runs a read that lost its connection once, on a fresh connection, but not a write (its outcome is unknown)", async () => {
    const name = appName();
    const sql = createPgSql({ connectionString: TEST_DATABASE_URL, applicationName: name, max: 2 });
    const read = sql.query<{ one: number }>("SELECT 1 AS one, pg_sleep(0.5)");
    await waitForBackend(name, "active");
    expect(await terminate(name, "active")).toBe(1);
    expect((await read).rows[0]!.one).toBe(1);

    const write = sql.query("DO $$ BEGIN PERFORM pg_sleep(10); END $$").catch((e: unknown) => e);
    await waitForBackend(name, "active");
    expect(await terminate(name, "active")).toBe(1);
    expectUnavailable(await write);
    expect((await sql.query<{ one: number }>("SELECT 1 AS one")).rows[0]!.one).toBe(1);
    await sql.close();
  });

  it("reports a connection lost during COMMIT as unavailable with an unknown outcome, not as retryable", async () => {
    const name = appName();
    const sql = createPgSql({ connectionString: TEST_DATABASE_URL, applicationName: name, max: 2 });
    // A deferred constraint trigger that sleeps makes COMMIT itself slow.
    const outcome = sql
      .transaction(async (t) => {
        await t.exec(`
          CREATE TEMP TABLE slow_commit (id int) ON COMMIT DROP;
          CREATE FUNCTION pg_temp.slow() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(10); RETURN NULL; END $$;
          CREATE CONSTRAINT TRIGGER slow AFTER INSERT ON slow_commit DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION pg_temp.slow();
          INSERT INTO slow_commit VALUES (1);`);
      })
      .catch((e: unknown) => e);
    await until(async () => {
      const r = await admin.query("SELECT 1 FROM pg_stat_activity WHERE application_name = $1 AND state = 'active' AND query = 'COMMIT'", [name]);
      return r.rowCount === 1 ? true : undefined;
    });
    expect(await terminate(name)).toBe(1);
    const err = await outcome;
    expectUnavailable(err);
    expect((err as Error).message).toContain(COMMIT_UNKNOWN_MESSAGE);
    expect(storageFailure(err)?.kind).not.toBe("retry");
    expect((await sql.query<{ one: number }>("SELECT 1 AS one")).rows[0]!.one).toBe(1);
    await sql.close();
  });
});
