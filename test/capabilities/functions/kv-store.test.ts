// The per-application key-value store behind ctx.kv (docs/functions.md), on
// real PostgreSQL and on PGlite: get/put/delete, list by prefix in pages,
// TTL expiry and the sweep, the per-application quota under concurrent
// writes, hostile keys and prefixes, and one application never seeing or
// filling another's store.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Code, ConnectError } from "@connectrpc/connect";
import { errorDetail } from "../../../src/kernel/errors.js";
import { createKvStore, type KvStore } from "../../../src/capabilities/functions/kv-store.js";
import { createApps, createTestDb, type TestDb } from "../../helpers/db.js";
import { until } from "../../helpers/until.js";

for (const kind of ["postgres", "pglite"] as const) {
  describe(`kv store (${kind})`, () => {
    let db: TestDb;
    let kv: KvStore;
    let small: KvStore;
    let app1: number;
    let app2: number;
    let app3: number;

    beforeAll(async () => {
      db = await createTestDb(kind);
      [app1, app2, app3] = await createApps(db, "one", "two", "three");
      kv = createKvStore(db.sql);
      small = createKvStore(db.sql, { maxBytesPerApp: 1000, maxKeysPerApp: 5, maxValueBytes: 300 });
    });
    afterAll(() => db.drop());

    it("puts, gets, overwrites and deletes; another application sees nothing", async () => {
      await kv.put(app1, "user:1", JSON.stringify({ name: "Ada" }));
      expect(JSON.parse((await kv.get(app1, "user:1"))!)).toEqual({ name: "Ada" });
      await kv.put(app1, "user:1", "v2");
      expect(await kv.get(app1, "user:1")).toBe("v2");
      expect(await kv.get(app2, "user:1")).toBeNull();
      expect(await kv.delete(app2, "user:1")).toBe(false);
      expect(await kv.get(app1, "user:1")).toBe("v2");
      expect(await kv.usage(app1)).toEqual({ bytes: "user:1".length + 2, keys: 1 });
      expect(await kv.delete(app1, "user:1")).toBe(true);
      expect(await kv.delete(app1, "user:1")).toBe(false);
      expect(await kv.get(app1, "user:1")).toBeNull();
      expect(await kv.usage(app1)).toEqual({ bytes: 0, keys: 0 });
    });

    it("lists by prefix in key order, page by page, wildcards taken literally", async () => {
      const keys = Array.from({ length: 25 }, (_, i) => `order:${String(i).padStart(3, "0")}`);
      for (const k of keys) await kv.put(app1, k, k.toUpperCase());
      await kv.put(app1, "order_x", "not under order:");
      await kv.put(app1, "orders", "not under order:");
      await kv.put(app1, "a%b", "1");
      await kv.put(app1, "axb", "2");
      const seen: string[] = [];
      let cursor: string | undefined;
      let pages = 0;
      do {
        const page = await kv.list(app1, { prefix: "order:", limit: 10, cursor });
        seen.push(...page.entries.map((e) => e.key));
        expect(page.entries.every((e) => e.size === Buffer.byteLength(e.key) * 2)).toBe(true);
        cursor = page.cursor ?? undefined;
        pages++;
      } while (cursor);
      expect(seen).toEqual(keys);
      expect(pages).toBe(3);
      // "%" and "_" in a prefix are literal
      expect((await kv.list(app1, { prefix: "a%" })).entries.map((e) => e.key)).toEqual(["a%b"]);
      expect((await kv.list(app1, { prefix: "order_" })).entries.map((e) => e.key)).toEqual(["order_x"]);
      expect((await kv.list(app2, { prefix: "" })).entries).toEqual([]);
    });

    it("expires keys after their TTL: invisible at once, swept and uncounted later", async () => {
      // (the three keys with a TTL are put together, so one second covers them all)
      await kv.put(app2, "session", "abc", { ttlSeconds: 1 });
      await kv.put(app2, "keep", "forever");
      // a put without TTL over a key with one makes it permanent (in another
      // application: its keys are not counted below)
      await kv.put(app1, "t", "1", { ttlSeconds: 1 });
      await kv.put(app1, "t", "2");
      expect((await kv.getEntry(app1, "t"))!.expires_at ?? null).toBeNull();
      // still counted until swept (put after "t" with the same TTL: once it
      // has expired, "t"'s first TTL would have too)
      await kv.put(app2, "again", "x", { ttlSeconds: 1 });
      expect(await kv.get(app2, "session")).toBe("abc");
      const entry = await kv.getEntry(app2, "session");
      expect(entry!.expires_at).toBeInstanceOf(Date);
      // expired on the database's clock after a second
      await until(async () => ((await kv.get(app2, "session")) === null ? true : undefined), 10_000, 50);
      expect(await kv.get(app2, "session")).toBeNull();
      await until(async () => ((await kv.get(app2, "again")) === null ? true : undefined), 10_000, 50);
      expect((await kv.list(app2)).entries.map((e) => e.key)).toEqual(["keep"]);
      expect(await kv.delete(app2, "session")).toBe(false);
      expect((await kv.usage(app2)).keys).toBe(2);
      expect(await kv.sweep()).toBeGreaterThanOrEqual(1);
      expect(await kv.usage(app2)).toEqual({ bytes: "keep".length + "forever".length, keys: 1 });
      // the permanent one is still there, past when its first TTL would have expired it
      expect(await kv.get(app1, "t")).toBe("2");
    });

    it("refuses writes past the application's quota (403 quota_exceeded) without touching another application", async () => {
      await small.put(app3, "a", "x".repeat(290));
      await small.put(app3, "b", "x".repeat(290));
      await small.put(app3, "c", "x".repeat(290));
      const full = await small.put(app3, "d", "x".repeat(290)).catch((e: unknown) => e);
      expect(errorDetail(full)).toMatchObject({ code: "quota_exceeded", httpStatus: 403 });
      // overwriting with something smaller is allowed when full; deleting frees room
      await small.put(app3, "a", "tiny");
      await small.put(app3, "d", "x".repeat(290));
      expect((await small.usage(app3)).bytes).toBeLessThanOrEqual(1000);
      // key count
      await small.delete(app3, "d");
      for (const k of ["k1", "k2"]) await small.put(app3, k, "1");
      const tooMany = await small.put(app3, "k3", "1").catch((e: unknown) => e);
      expect(errorDetail(tooMany)?.code).toBe("quota_exceeded");
      // another application under the same limits is unaffected
      await small.put(app2, "fine", "1");
      expect(await small.get(app2, "fine")).toBe("1");
      await small.delete(app2, "fine");
    });

    it("keeps the totals exact under concurrent writes of the same and different keys", async () => {
      const writes = [];
      for (let i = 0; i < 40; i++) writes.push(kv.put(app3, `c:${i % 8}`, "v".repeat(i + 1)));
      for (let i = 0; i < 10; i++) writes.push(kv.delete(app3, `c:${i % 8}`));
      await Promise.all(writes);
      const actual = await db.sql.query<{ bytes: string; keys: string }>("SELECT COALESCE(sum(size), 0) AS bytes, count(*) AS keys FROM function_kv WHERE app_id = $1", [app3]);
      const usage = await kv.usage(app3);
      expect(usage).toEqual({ bytes: Number(actual.rows[0]!.bytes), keys: Number(actual.rows[0]!.keys) });
    });

    it("refuses bad keys, values, TTLs, limits and cursors with 422 naming the field", async () => {
      const field = async (p: Promise<unknown>) => {
        const err = await p.then(() => undefined, (e: unknown) => e);
        expect(err).toBeInstanceOf(ConnectError);
        expect((err as ConnectError).code).toBe(Code.InvalidArgument);
        return errorDetail(err)!.fieldViolations.map((f) => f.field);
      };
      expect(await field(kv.put(app1, "", "v"))).toEqual(["key"]);
      expect(await field(kv.put(app1, "k".repeat(513), "v"))).toEqual(["key"]);
      expect(await field(kv.put(app1, "nul\u0000key", "v"))).toEqual(["key"]);
      expect(await field(kv.put(app1, "k", "v".repeat(128 * 1024 + 1)))).toEqual(["value"]);
      expect(await field(kv.put(app1, "k", 42 as unknown as string))).toEqual(["value"]);
      expect(await field(kv.put(app1, "k", "v", { ttlSeconds: 0 }))).toEqual(["ttl_seconds"]);
      expect(await field(kv.put(app1, "k", "v", { ttlSeconds: 1.5 }))).toEqual(["ttl_seconds"]);
      expect(await field(kv.get(app1, "x".repeat(600)))).toEqual(["key"]);
      expect(await field(kv.list(app1, { limit: 5000 }))).toEqual(["limit"]);
      expect(await field(kv.list(app1, { cursor: Buffer.from("a\u0000").toString("base64url") }))).toEqual(["cursor"]);
      // a multi-byte key at the limit is fine, and listed back intact
      const key = "é".repeat(256);
      await kv.put(app1, key, "ok");
      expect(await kv.get(app1, key)).toBe("ok");
      expect((await kv.list(app1, { prefix: "éé" })).entries.map((e) => e.key)).toEqual([key]);
    });
  });
}
