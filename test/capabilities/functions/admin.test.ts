// The operator API (pulsebase.admin.v1.FunctionService) on PostgreSQL and
// PGlite: functions, settings bounded by the plan, secrets, versions,
// triggers, manual runs and the invocation log.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fromJson, toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { createTestDb, type TestDb } from "../../helpers/db.js";
import { errorDetail } from "../../../src/kernel/errors.js";
import { FunctionSchema, TriggerKind } from "../../../gen/pulsebase/admin/v1/functions_pb.js";
import { consumerOfApp, createApp, createHarness, dec, type Harness } from "./fixtures.js";

async function failure(p: Promise<unknown>) {
  try {
    await p;
  } catch (err) {
    const d = errorDetail(err);
    return { http: d?.httpStatus, code: d?.code, fields: Object.fromEntries((d?.fieldViolations ?? []).map((v) => [v.field, v.messages])) };
  }
  throw new Error("expected a failure");
}

describe.each(["postgres", "pglite"] as const)("admin FunctionService on %s", (kind) => {
  let db: TestDb;
  let h: Harness;
  let appId: number;

  beforeAll(async () => {
    db = await createTestDb(kind);
    h = createHarness(db.sql);
    appId = await createApp(db.sql, { functionMaxTimeoutMs: 2000, functionMaxMemoryMb: 64, functionInvocationsPerMinute: 1000 });
  });
  afterAll(async () => {
    await h.close();
    await db.drop();
  });

  it("creates, gets, lists and deletes functions; names are unique per application", async () => {
    const a = await h.admin.createFunction({ appId: BigInt(appId), name: "alpha" });
    expect(a).toMatchObject({ name: "alpha", activeVersion: 0, latestVersion: 0, secretNames: [] });
    expect(a.settings).toMatchObject({ timeoutMs: 2000, memoryMb: 64, invocationsPerMinute: 0 });
    expect(await failure(h.admin.createFunction({ appId: BigInt(appId), name: "alpha" }))).toMatchObject({ http: 409, code: "conflict" });
    expect(await failure(h.admin.createFunction({ appId: BigInt(appId), name: "bad name!" }))).toMatchObject({ http: 422, fields: { name: expect.any(Array) } });
    const b = await h.admin.createFunction({ appId: BigInt(appId), name: "beta" });
    expect((await h.admin.getFunction({ id: b.id })).name).toBe("beta");
    const p1 = await h.admin.listFunctions({ appId: BigInt(appId), pageSize: 1 });
    expect(p1.functions.map((f) => f.name)).toEqual(["alpha"]);
    const p2 = await h.admin.listFunctions({ appId: BigInt(appId), pageSize: 1, pageToken: p1.nextPageToken });
    expect(p2.functions.map((f) => f.name)).toEqual(["beta"]);
    await h.admin.deleteFunction({ id: b.id });
    expect(await failure(h.admin.getFunction({ id: b.id }))).toMatchObject({ http: 404 });
    expect(await failure(h.admin.deleteFunction({ id: b.id }))).toMatchObject({ http: 404 });
  });

  it("bounds settings by the plan", async () => {
    const f = await h.admin.createFunction({ appId: BigInt(appId), name: "bounded", timeoutMs: 1500, memoryMb: 32 });
    expect(await failure(h.admin.updateFunctionSettings({ id: f.id, timeoutMs: 5000 }))).toMatchObject({ http: 422, fields: { timeout_ms: expect.any(Array) } });
    expect(await failure(h.admin.updateFunctionSettings({ id: f.id, memoryMb: 512 }))).toMatchObject({ http: 422, fields: { memory_mb: expect.any(Array) } });
    expect(await failure(h.admin.updateFunctionSettings({ id: f.id, invocationsPerMinute: 5000 }))).toMatchObject({ http: 422 });
    const u = await h.admin.updateFunctionSettings({ id: f.id, timeoutMs: 800, invocationsPerMinute: 10 });
    expect(u.settings).toMatchObject({ timeoutMs: 800, memoryMb: 32, invocationsPerMinute: 10 });
  });

  it("keeps secrets write-only and gives them to the function as env", async () => {
    const f = await h.admin.createFunction({ appId: BigInt(appId), name: "secretive" });
    const s = await h.admin.setSecret({ functionId: f.id, name: "TOKEN", value: "hunter2" });
    expect(s.secretNames).toEqual(["TOKEN"]);
    expect(JSON.stringify(toJson(FunctionSchema, s))).not.toContain("hunter2");
    await h.admin.deployVersion({ functionId: f.id, code: `export default (req, { env }) => env`, activate: true });
    const run = await h.admin.runFunction({ functionId: f.id });
    expect(JSON.parse(run.body)).toEqual({ TOKEN: "hunter2" });
    await h.admin.deleteSecret({ functionId: f.id, name: "TOKEN" });
    expect(JSON.parse((await h.admin.runFunction({ functionId: f.id })).body)).toEqual({});
    expect(await failure(h.admin.setSecret({ functionId: f.id, name: "1bad", value: "x" }))).toMatchObject({ http: 422 });
  });

  it("deploys numbered immutable versions, refuses bad code with the compiler's message, rolls back and forward", async () => {
    const f = await h.admin.createFunction({ appId: BigInt(appId), name: "versioned" });
    const syntax = await failure(h.admin.deployVersion({ functionId: f.id, code: "export default function ( {" }));
    expect(syntax).toMatchObject({ http: 422, fields: { code: [expect.stringContaining("SyntaxError")] } });
    expect((await failure(h.admin.deployVersion({ functionId: f.id, code: "export const x = 1" }))).fields.code![0]).toMatch(/default export/);
    expect((await failure(h.admin.deployVersion({ functionId: f.id, code: `import x from "y"; export default x` }))).fields.code![0]).toMatch(/imports/);
    const v1 = await h.admin.deployVersion({ functionId: f.id, code: `export default () => "v1"` });
    expect(v1).toMatchObject({ version: 1, active: false });
    expect(await failure(h.admin.runFunction({ functionId: f.id }))).toMatchObject({ http: 503, code: "no_active_version" });
    const v2 = await h.admin.deployVersion({ functionId: f.id, code: `export default () => "v2"`, activate: true });
    expect(v2).toMatchObject({ version: 2, active: true });
    expect((await h.admin.runFunction({ functionId: f.id })).body).toBe(JSON.stringify("v2"));
    expect((await h.admin.runFunction({ functionId: f.id, version: 1 })).body).toBe(JSON.stringify("v1"));
    const back = await h.admin.activateVersion({ functionId: f.id, version: 1 });
    expect(back).toMatchObject({ activeVersion: 1, latestVersion: 2 });
    expect((await h.admin.runFunction({ functionId: f.id })).body).toBe(JSON.stringify("v1"));
    await h.admin.activateVersion({ functionId: f.id, version: 2 });
    expect((await h.admin.runFunction({ functionId: f.id })).body).toBe(JSON.stringify("v2"));
    expect(await failure(h.admin.activateVersion({ functionId: f.id, version: 9 }))).toMatchObject({ http: 404 });
    const list = await h.admin.listVersions({ functionId: f.id });
    expect(list.versions.map((v) => [v.version, v.active])).toEqual([[2, true], [1, false]]);
  });

  it("manages HTTP and event triggers; a slug is unique within the application only", async () => {
    const f = await h.admin.createFunction({ appId: BigInt(appId), name: "triggered" });
    const t1 = await h.admin.createHttpTrigger({ functionId: f.id, slug: "orders" });
    expect(t1).toMatchObject({ kind: TriggerKind.HTTP, slug: "orders", enabled: true });
    await h.admin.createHttpTrigger({ functionId: f.id, slug: "orders-v2", enabled: false });
    expect(await failure(h.admin.createHttpTrigger({ functionId: f.id, slug: "orders" }))).toMatchObject({ http: 409 });
    expect(await failure(h.admin.createHttpTrigger({ functionId: f.id, slug: "Bad Slug" }))).toMatchObject({ http: 422 });
    const otherApp = await createApp(db.sql);
    const g = await h.admin.createFunction({ appId: BigInt(otherApp), name: "triggered" });
    await h.admin.createHttpTrigger({ functionId: g.id, slug: "orders" });
    const e = await h.admin.createEventTrigger({ functionId: f.id, source: "db", target: "orders", operations: ["insert", "DELETE"] });
    expect(e).toMatchObject({ kind: TriggerKind.EVENT, source: "db", target: "orders", operations: ["insert", "delete"] });
    expect(await failure(h.admin.createEventTrigger({ functionId: f.id, source: "s3", target: "x", operations: ["insert"] }))).toMatchObject({ fields: { source: expect.any(Array) } });
    expect(await failure(h.admin.createEventTrigger({ functionId: f.id, source: "cms", target: "articles", operations: ["upsert"] }))).toMatchObject({ fields: { "operations.0": expect.any(Array) } });
    expect((await h.admin.setTriggerEnabled({ triggerId: t1.id, enabled: false })).enabled).toBe(false);
    expect((await h.admin.listTriggers({ functionId: f.id })).triggers).toHaveLength(3);
    await h.admin.deleteTrigger({ triggerId: t1.id });
    expect((await h.admin.listTriggers({ functionId: f.id })).triggers.map((t) => t.slug || t.target)).toEqual(["orders-v2", "orders"]);
  });

  it("runs manually with a payload as req and returns result, status, duration and logs; invocations are listed", async () => {
    const f = await h.admin.createFunction({ appId: BigInt(appId), name: "manual", timeoutMs: 300 });
    await h.admin.deployVersion({ functionId: f.id, code: `export default async (req, ctx) => { console.log("got", req.n); if (req.loop) for (;;) {} return { doubled: req.n * 2, consumer: ctx.consumer, trigger: ctx.trigger }; }`, activate: true });
    const run = await h.admin.runFunction({ functionId: f.id, payload: fromJson(ValueSchema, { n: 21 }) });
    expect(run).toMatchObject({ status: 200, outcome: "ok", version: 1, logs: [expect.objectContaining({ level: "log", message: "got 21" })] });
    expect(JSON.parse(run.body)).toEqual({ doubled: 42, consumer: null, trigger: "manual" });
    expect(run.result?.kind.case).toBe("structValue");
    expect(run.durationMs).toBeGreaterThan(0);
    const timeout = await h.admin.runFunction({ functionId: f.id, payload: fromJson(ValueSchema, { n: 1, loop: true }) });
    expect(timeout).toMatchObject({ status: 504, outcome: "timeout" });
    // An HTTP invocation too, then all three are listed newest first.
    await h.admin.createHttpTrigger({ functionId: f.id, slug: "manual-http" });
    const res = await h.device(consumerOfApp(appId, 5)).invoke({ method: "POST", pathParams: { slug: "manual-http" }, body: new TextEncoder().encode('{"n":2}'), contentType: "application/json" });
    expect(JSON.parse(dec.decode(res.body)).consumer).toEqual({ id: 5, user_id: "u5", device_id: "d5" });
    const list = await h.admin.listInvocations({ functionId: f.id });
    expect(list.invocations.map((i) => [i.triggerKind, i.status, i.outcome])).toEqual([["http", 200, "ok"], ["manual", 504, "timeout"], ["manual", 200, "ok"]]);
    expect(list.invocations[2]).toMatchObject({ id: run.invocationId, version: 1, logs: [expect.objectContaining({ message: "got 21" })] });
    expect(Number(list.invocations[2]!.memoryBytes)).toBeGreaterThan(0);
    const page = await h.admin.listInvocations({ functionId: f.id, pageSize: 2 });
    const rest = await h.admin.listInvocations({ functionId: f.id, pageSize: 2, pageToken: page.nextPageToken });
    expect(rest.invocations.map((i) => i.id)).toEqual([run.invocationId]);
  });
});
