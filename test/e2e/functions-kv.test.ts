// ctx.kv through the whole server (docs/functions.md): functions deployed over
// the operator API and called over /api/fn/{slug} store, read, expire, list
// and delete keys of their own application only; the store's limits come
// back as errors the function catches; calls a run leaves behind are
// cancelled when it ends.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FunctionService as AdminFunctionService } from "../../gen/pulsebase/admin/v1/functions_pb.js";
import { createModules } from "../../src/server/modules.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { until } from "../helpers/until.js";

const KV = `export default async function (req, ctx) {
  const b = req.body ?? {};
  try {
    switch (b.op) {
      case "put": return { result: (await ctx.kv.put(b.key, b.value, b.opts)) ?? null };
      case "get": return { result: await ctx.kv.get(b.key) };
      case "delete": return { result: await ctx.kv.delete(b.key) };
      case "list": return { result: await ctx.kv.list(b.opts) };
      case "leave":
        // not awaited: cancelled when the function returns
        if (b.later) await ctx.kv.get("anything");
        for (let i = 0; i < 10; i++) ctx.kv.put("left:" + i, "x").catch(() => 0);
        return { result: "left" };
    }
    return { result: "no op" };
  } catch (e) {
    return { error: { code: e.code, message: e.message, isError: e instanceof Error } };
  }
}`;

let s: TestServer;
/** Per application: its consumer token and id. */
const apps: Record<"a" | "b" | "small", { token: string; appId: bigint }> = {} as never;

beforeAll(async () => {
  // One PostgreSQL connection: the server's statements run one at a time in
  // the order they were asked (the pool's queue is first in, first out),
  // which the last test uses as its barrier.
  s = await startTestServer({
    modules: createModules,
    env: { NATS_URL: "", PULSEBASE_KV_MAX_BYTES_PER_APP: "4096", PULSEBASE_KV_MAX_KEYS_PER_APP: "20", PULSEBASE_PG_POOL_SIZE: "1" },
  });
  const fns = s.adminClient(AdminFunctionService);
  for (const name of ["a", "b", "small"] as const) {
    const app = await s.createApp(`kv ${name}`);
    apps[name] = { appId: app.appId, token: (await s.register(app.appKey)).token };
    const fn = await fns.createFunction({ appId: app.appId, name: "kv" });
    await fns.deployVersion({ functionId: fn.id, code: KV, activate: true });
    await fns.createHttpTrigger({ functionId: fn.id, slug: "kv" });
  }
}, 60_000);
afterAll(() => s?.close());

async function kv(app: keyof typeof apps, body: Record<string, unknown>): Promise<{ result?: unknown; error?: { code: string; message: string; isError: boolean } }> {
  const res = await s.fetch("/api/fn/kv", {
    method: "POST",
    headers: { authorization: `Bearer ${apps[app].token}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  expect(res.status, text).toBe(200);
  return JSON.parse(text);
}

const keysOf = async (app: keyof typeof apps, prefix: string) =>
  ((await kv(app, { op: "list", opts: { prefix, limit: 1000 } })).result as { entries: Array<{ key: string }> }).entries.map((e) => e.key);

describe("ctx.kv", () => {
  it("stores, reads, overwrites and deletes values of any text", async () => {
    const value = JSON.stringify({ name: "Zoë 🚀", n: [1, 2, 3], nested: { ok: true } });
    expect(await kv("a", { op: "get", key: "user:1" })).toEqual({ result: null });
    expect(await kv("a", { op: "put", key: "user:1", value })).toEqual({ result: null });
    expect(await kv("a", { op: "get", key: "user:1" })).toEqual({ result: value });
    await kv("a", { op: "put", key: "user:1", value: "second" });
    expect(await kv("a", { op: "get", key: "user:1" })).toEqual({ result: "second" });
    expect(await kv("a", { op: "delete", key: "user:1" })).toEqual({ result: true });
    expect(await kv("a", { op: "delete", key: "user:1" })).toEqual({ result: false });
    expect(await kv("a", { op: "get", key: "user:1" })).toEqual({ result: null });
  });

  it("expires a key after its time to live", async () => {
    await kv("a", { op: "put", key: "ttl:short", value: "soon gone", opts: { ttlSeconds: 1 } });
    await kv("a", { op: "put", key: "ttl:long", value: "stays", opts: { ttlSeconds: 3600 } });
    expect(await kv("a", { op: "get", key: "ttl:short" })).toEqual({ result: "soon gone" });
    const listed = (await kv("a", { op: "list", opts: { prefix: "ttl:" } })).result as { entries: Array<{ key: string; expires_at: string | null }> };
    expect(listed.entries.map((e) => e.key)).toEqual(["ttl:long", "ttl:short"]);
    expect(Date.parse(listed.entries[0]!.expires_at!) - Date.now()).toBeGreaterThan(3500_000);
    // expired on the database's clock a second after the put
    await until(async () => ((await kv("a", { op: "get", key: "ttl:short" })).result === null ? true : undefined), 10_000, 50);
    expect(await kv("a", { op: "get", key: "ttl:short" })).toEqual({ result: null });
    expect(await keysOf("a", "ttl:")).toEqual(["ttl:long"]);
  });

  it("lists keys by prefix in key order, a page at a time", async () => {
    const keys = ["p:3", "p:1", "p:6", "p:2", "p:7", "p:5", "p:4"];
    for (const key of keys) await kv("a", { op: "put", key, value: `v${key}` });
    await kv("a", { op: "put", key: "q:1", value: "other prefix" });
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page = (await kv("a", { op: "list", opts: { prefix: "p:", limit: 3, cursor } })).result as {
        entries: Array<{ key: string; size: number; expires_at: string | null; updated_at: string }>;
        cursor: string | null;
      };
      expect(page.entries.length).toBeLessThanOrEqual(3);
      for (const e of page.entries) {
        expect(e).toEqual({ key: e.key, size: 7, expires_at: null, updated_at: expect.any(String) });
        seen.push(e.key);
      }
      cursor = page.cursor;
      pages++;
    } while (cursor);
    expect(seen).toEqual([...keys].sort());
    expect(pages).toBe(3);
  });

  it("refuses what the store's limits refuse, with an error the function catches", async () => {
    const refused = async (body: Record<string, unknown>, code: string, message: RegExp) => {
      const r = await kv("small", body);
      expect(r.error, JSON.stringify(r)).toMatchObject({ code, isError: true });
      expect(r.error!.message).toMatch(message);
    };
    await refused({ op: "put", key: "k".repeat(600), value: "v" }, "validation_failed", /at most 512 bytes/);
    await refused({ op: "put", key: "k", value: { not: "a string" } }, "validation_failed", /A value is a string/);
    await refused({ op: "put", key: "k", value: "v", opts: { ttlSeconds: 0 } }, "validation_failed", /time to live/);
    await refused({ op: "get", key: "" }, "validation_failed", /non-empty/);
    await refused({ op: "list", opts: { limit: 5000 } }, "validation_failed", /1 to 1000/);
    await refused({ op: "list", opts: { cursor: 12 } }, "validation_failed", /cursor/);
    // the application's quota: 4096 bytes, 20 keys
    await refused({ op: "put", key: "big", value: "x".repeat(5000) }, "quota_exceeded", /key-value store is full/);
    for (let i = 0; i < 20; i++) expect(await kv("small", { op: "put", key: `n:${String(i).padStart(2, "0")}`, value: "1" })).toEqual({ result: null });
    await refused({ op: "put", key: "n:20", value: "1" }, "quota_exceeded", /at most 4096 bytes in 20 keys/);
    // an overwrite and a delete are still allowed
    expect(await kv("small", { op: "put", key: "n:00", value: "2" })).toEqual({ result: null });
    expect(await kv("small", { op: "delete", key: "n:01" })).toEqual({ result: true });
    expect(await kv("small", { op: "put", key: "n:20", value: "1" })).toEqual({ result: null });
  });

  it("keeps each application's keys to itself", async () => {
    await kv("a", { op: "put", key: "shared-name", value: "from a" });
    expect(await kv("b", { op: "get", key: "shared-name" })).toEqual({ result: null });
    expect(await kv("b", { op: "delete", key: "shared-name" })).toEqual({ result: false });
    await kv("b", { op: "put", key: "shared-name", value: "from b" });
    expect(await kv("a", { op: "get", key: "shared-name" })).toEqual({ result: "from a" });
    expect(await keysOf("b", "")).toEqual(["shared-name"]);
    // the operator sees each application's own store
    const fns = s.adminClient(AdminFunctionService);
    const listed = await fns.listKvEntries({ appId: apps.b.appId, pageSize: 100 } as never);
    expect(listed.entries.map((e) => e.key)).toEqual(["shared-name"]);
  });

  it("cancels the kv calls a run leaves behind when it ends", async () => {
    for (const later of [false, true]) {
      expect(await kv("b", { op: "leave", later })).toEqual({ result: "left" });
      // at most the calls already running when the run ended (4 at once) get
      // through, of the 10 it left; the queued ones never run. (A running
      // call's put may land after a first list, so each list is held to the
      // bound, not to the one before.)
      const first = (await keysOf("b", "left:")).length;
      expect(first, `later=${later}`).toBeLessThanOrEqual(later ? 4 : 0);
      await kv("b", { op: "get", key: "shared-name" }); // a later run of the same application
      expect((await keysOf("b", "left:")).length, `later=${later}`).toBeLessThanOrEqual(later ? 4 : 0);
      for (let i = 0; i < 10; i++) await kv("b", { op: "delete", key: `left:${i}` });
    }
    // and the application's function still answers
    expect(await kv("b", { op: "get", key: "shared-name" })).toEqual({ result: "from b" });
  });
});
