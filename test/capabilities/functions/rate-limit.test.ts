// The invocation limiter's state lives in PostgreSQL: two limiter instances
// on two connection pools (standing in for two server processes) share it.
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createTestDb, uniqueName, type TestDb } from "../../helpers/db.js";
import { createPgSql } from "../../../src/infra/storage/pg-sql.js";
import type { Sql } from "../../../src/infra/storage/sql.js";
import { createInvocationLimiter } from "../../../src/capabilities/functions/function-runtime.js";

let db: TestDb;
let second: Sql;

beforeAll(async () => {
  db = await createTestDb("postgres");
  second = createPgSql({ connectionString: db.url!, schema: db.schema!, max: 4 });
});
afterAll(async () => {
  await second.close();
  await db.drop();
});

describe("shared rate limiter", () => {
  it("never allows more than the limit across two processes", async () => {
    const a = createInvocationLimiter(db.sql);
    const b = createInvocationLimiter(second);
    const key = uniqueName("lease");
    const results = await Promise.all(Array.from({ length: 40 }, (_, i) => (i % 2 ? a : b).take({ key, limit: 12 })));
    expect(results.filter((r) => r.allowed)).toHaveLength(12);
    const denied = results.find((r) => !r.allowed);
    expect(denied).toMatchObject({ allowed: false, key });
    // One token comes back every 5 s at 12/min.
    expect(!denied!.allowed && denied!.retryAfterSeconds).toBeGreaterThanOrEqual(4);
    expect(!denied!.allowed && denied!.retryAfterSeconds).toBeLessThanOrEqual(5);
  });

  it("refills over time; unlimited touches nothing", async () => {
    // Time passes without waiting: the limiter's own clock (it remembers a
    // refusal for a second) is a fake one, and the bucket's last update is
    // moved back in the database (which computes the refill).
    vi.useFakeTimers({ toFake: ["Date"] });
    try {
      const a = createInvocationLimiter(db.sql);
      const key = uniqueName("slow");
      // 6/min = one token every 10 s; start with an empty bucket.
      await db.sql.query("INSERT INTO rate_limit_buckets (name, key, tokens, updated_at) VALUES ('functions', $1, 0, clock_timestamp())", [key]);
      expect((await a.take({ key, limit: 6 })).allowed).toBe(false);
      // past the remembered refusal, but no time has passed for the bucket: still empty
      vi.advanceTimersByTime(1100);
      expect((await a.take({ key, limit: 6 })).allowed).toBe(false);
      // 10.5 s later for the bucket: one token
      vi.advanceTimersByTime(1100);
      await db.sql.query("UPDATE rate_limit_buckets SET updated_at = updated_at - interval '10500 milliseconds' WHERE name = 'functions' AND key = $1", [key]);
      expect((await a.take({ key, limit: 6 })).allowed).toBe(true);
      expect((await a.take({ key, limit: 6 })).allowed).toBe(false);
    } finally {
      vi.useRealTimers();
    }
    const a = createInvocationLimiter(db.sql);
    const free = uniqueName("x");
    expect(await a.take({ key: free, limit: 0 })).toEqual({ allowed: true });
    expect((await db.sql.query("SELECT key FROM rate_limit_buckets WHERE key = $1", [free])).rows).toHaveLength(0);
  });

  it("spends a high limit locally with one statement per batch of tokens", async () => {
    let statements = 0;
    const counting = { ...db.sql, query: (t: string, p?: readonly unknown[]) => { statements++; return db.sql.query(t, p); } } as Sql;
    const a = createInvocationLimiter(counting);
    const key = uniqueName("hot");
    const results = await Promise.all(Array.from({ length: 1000 }, () => a.take({ key, limit: 600_000 })));
    expect(results.every((r) => r.allowed)).toBe(true);
    expect(statements).toBeLessThanOrEqual(12);
  });

  it("does not spend a token of one bucket when the other refuses", async () => {
    const a = createInvocationLimiter(db.sql);
    const app = uniqueName("app");
    const fn = uniqueName("fn");
    expect((await a.take({ key: app, limit: 3 }, { key: fn, limit: 1 })).allowed).toBe(true);
    expect(await a.take({ key: app, limit: 3 }, { key: fn, limit: 1 })).toMatchObject({ allowed: false, key: fn });
    // the app's bucket still has its two remaining tokens
    expect((await a.take({ key: app, limit: 3 })).allowed).toBe(true);
    expect((await a.take({ key: app, limit: 3 })).allowed).toBe(true);
    expect((await a.take({ key: app, limit: 3 })).allowed).toBe(false);
  });
});
