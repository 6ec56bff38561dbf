// A plan change (SetAppPlan: the plan is stored, then planChanged runs in
// this process) holds from the very next invocation, also when an
// invocation that began under the old plan is still in flight at the change
// and finishes after it: its trigger lookup does not cache the old plan, and
// the tokens its rate-limit claim leased under the old limit are not spent
// under the new one. The runtime caches resolutions for a minute here, so a
// stale entry could not expire during the test.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { errorDetail } from "../../../src/kernel/errors.js";
import { createFunctionRuntime, createInvocationLimiter, type FunctionRuntime } from "../../../src/capabilities/functions/function-runtime.js";
import { createFunctionStore, type FunctionStore } from "../../../src/capabilities/functions/function-store.js";
import type { Sql } from "../../../src/infra/storage/sql.js";
import { createTestDb, type TestDb } from "../../helpers/db.js";
import { consumerOfApp, createApp, createHarness, deployHttp, setPlan, type Harness } from "./fixtures.js";

let db: TestDb;
let h: Harness;

beforeAll(async () => {
  db = await createTestDb("postgres");
  h = createHarness(db.sql);
});
afterAll(async () => {
  await h.close();
  await db.drop();
});

/** Holds the next matching call after its real work is done, until released. */
function gate() {
  let armed = false;
  let reached!: () => void;
  const reachedP = new Promise<void>((r) => (reached = r));
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  return {
    arm: () => (armed = true),
    /** Called by the wrapper: waits when armed (once). */
    async pass(): Promise<void> {
      if (!armed) return;
      armed = false;
      reached();
      await released;
    },
    reached: reachedP,
    release,
  };
}

function runtimeOver(store: FunctionStore, limiterSql: Sql): FunctionRuntime {
  return createFunctionRuntime({
    store,
    sandbox: h.fn.sandbox,
    limiter: createInvocationLimiter(limiterSql),
    recorder: h.fn.recorder,
    config: { ...h.fn.config, resolveCacheMs: 60_000 },
  });
}

/** One HTTP-trigger invocation: "ok" or the error code. */
const invoke = (runtime: FunctionRuntime, appId: number) =>
  Promise.resolve().then(() => runtime.invokeHttp(consumerOfApp(appId), "hi", async () => ({}), "req-race")).then(
    () => "ok",
    (err: unknown) => errorDetail(err)?.code ?? String(err),
  );

describe("a plan change with an invocation in flight", () => {
  it("a trigger lookup that read the old plan does not cache it: the next call is refused", async () => {
    const appId = await createApp(db.sql);
    await deployHttp(h, appId, "hi", "export default () => ({ hi: true })");
    const real = createFunctionStore(db.sql);
    const g = gate();
    // The real lookup has read the plan (functions on) when the wrapper holds it.
    const store: FunctionStore = {
      ...real,
      async resolveHttp(app, slug) {
        const row = await real.resolveHttp(app, slug);
        await g.pass();
        return row;
      },
    };
    const runtime = runtimeOver(store, db.sql);
    g.arm();
    const first = invoke(runtime, appId);
    await g.reached;
    await setPlan(db.sql, appId, { functionsEnabled: false });
    runtime.planChanged();
    g.release();
    expect(await first).toBe("ok"); // admitted before the change
    expect(await invoke(runtime, appId)).toBe("plan_required");
    expect(await invoke(runtime, appId)).toBe("plan_required");
  });

  it("tokens a claim in flight leased under the old limit are not spent under the lowered one", async () => {
    const appId = await createApp(db.sql);
    await deployHttp(h, appId, "hi", "export default () => ({ hi: true })");
    const g = gate();
    // The app bucket's claim has taken its batch of tokens (10, at 6000/min)
    // from the database when the wrapper holds it, before they are leased.
    const limiterSql: Sql = {
      ...db.sql,
      async query(text, params) {
        const r = await db.sql.query(text, params);
        if (text.includes("UPDATE rate_limit_buckets b") && params?.[1] === `app:${appId}`) await g.pass();
        return r as never;
      },
    };
    const runtime = runtimeOver(createFunctionStore(db.sql), limiterSql);
    g.arm();
    const first = invoke(runtime, appId);
    await g.reached;
    await setPlan(db.sql, appId, { functionInvocationsPerMinute: 2 });
    runtime.planChanged();
    g.release();
    expect(await first).toBe("ok");
    // Two a minute from now on: the bucket holds at most 2 tokens.
    const next: string[] = [];
    for (let i = 0; i < 3; i++) next.push(await invoke(runtime, appId));
    expect(next).toEqual(["ok", "ok", "rate_limited"]);
  });
});
