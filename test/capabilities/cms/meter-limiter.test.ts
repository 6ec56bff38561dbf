// The in-memory halves of metering and the per-second limit that the
// synchronous REST fast path uses: UsageMeter.record (per UTC day, the day
// string computed once a day) and RateLimiter.tryTake (never waits, spends
// nothing when it says no).
import { describe, expect, it } from "vitest";
import { perSecondLimiter } from "../../../src/capabilities/cms/request-limits.js";
import { UsageMeter } from "../../../src/capabilities/cms/usage-meter.js";
import type { Sql } from "../../../src/infra/storage/sql.js";

function fakeSql(onQuery: (text: string, params: readonly unknown[]) => unknown[] = () => []): Sql & { calls: { text: string; params: readonly unknown[] }[] } {
  const calls: { text: string; params: readonly unknown[] }[] = [];
  const sql: Sql & { calls: typeof calls } = {
    kind: "postgres" as const,
    calls,
    async query<R>(text: string, params: readonly unknown[] = []) {
      calls.push({ text, params });
      const rows = onQuery(text, params) as R[];
      return { rows, rowCount: rows.length };
    },
    async exec() {},
    async transaction<T>(fn: (tx: Sql) => Promise<T>): Promise<T> {
      return fn(sql);
    },
    async close() {},
  };
  return sql;
}

describe("UsageMeter.record", () => {
  it("counts per application per UTC day, across midnight", async () => {
    const sql = fakeSql();
    let now = Date.parse("2026-11-21T23:59:59.998Z");
    const meter = new UsageMeter(sql, 60_000, () => new Date(now));
    meter.record(1, false);
    meter.record(1, true);
    meter.record(2, false);
    now += 1; // 23:59:59.999
    meter.record(1, false);
    now += 1; // midnight
    meter.record(1, false);
    meter.record(1, true);
    now = Date.parse("2026-11-21T12:00:00Z"); // a clock stepping back is still counted on its day
    meter.record(1, false);
    await meter.flush();
    const insert = sql.calls.find((c) => c.text.includes("INSERT INTO cms_usage_daily"))!;
    const [apps, days, counted, included] = insert.params as [number[], string[], number[], number[]];
    const rows = apps.map((a, i) => `${a} ${days[i]} ${counted[i]} ${included[i]}`).sort();
    expect(rows).toEqual(["1 2026-11-21 1 3", "1 2026-11-22 1 1", "2 2026-11-21 0 1"]);
  });
});

describe("RateLimiter.tryTake", () => {
  it("is true without a limit, spends only tokens claimed by take(), and never claims itself", async () => {
    const sql = fakeSql((text) => (text.includes("INSERT INTO rate_limit_windows") ? [{ last_grant: 2 }] : []));
    const now = 1_000_000;
    const limiter = perSecondLimiter(sql, () => now);
    expect(limiter.tryTake("1", 0)).toBe(true);
    expect(limiter.tryTake("1", 20)).toBe(false); // nothing claimed yet
    expect(sql.calls).toHaveLength(0);
    expect((await limiter.take({ key: "1", limit: 20 })).allowed).toBe(true); // claims 2, spends 1
    expect(limiter.tryTake("1", 20)).toBe(true); // the second one
    expect(limiter.tryTake("1", 20)).toBe(false);
    expect(sql.calls.filter((c) => c.text.includes("INSERT INTO rate_limit_windows"))).toHaveLength(1);
  });

  it("does not spend tokens of a past window", async () => {
    const sql = fakeSql((text) => (text.includes("INSERT INTO rate_limit_windows") ? [{ last_grant: 5 }] : []));
    let now = 2_000_500;
    const limiter = perSecondLimiter(sql, () => now);
    expect((await limiter.take({ key: "7", limit: 50 })).allowed).toBe(true);
    expect(limiter.tryTake("7", 50)).toBe(true);
    now += 1000;
    expect(limiter.tryTake("7", 50)).toBe(false);
  });
});
