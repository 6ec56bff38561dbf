// ctx.waitUntil through the functions runtime (docs/functions.md, "Timers
// and waitUntil"), on PostgreSQL: an HTTP caller is answered before the
// work runs and the invocation is recorded when it is over; event and
// schedule runs end with the work, and work cut by the timeout makes them
// a timeout (so an event is retried).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDb, type TestDb } from "../../helpers/db.js";
import { consumerOfApp, createApp, createHarness, dec, deployHttp, type Harness } from "./fixtures.js";

const CODE = `export default async function (req, ctx) {
  const op = ctx.trigger === "http" ? req.query.op : ctx.event.op;
  if (op === "hang") ctx.waitUntil(new Promise(() => {}));
  else ctx.waitUntil(new Promise((r) => setTimeout(r, 200)).then(() => console.log("after the wait")));
  return { answered: ctx.trigger };
}`;

let db: TestDb;
let h: Harness;
let appId: number;
let fn: { functionId: bigint; triggerId: bigint };

beforeAll(async () => {
  db = await createTestDb("postgres");
  h = createHarness(db.sql);
  appId = await createApp(db.sql);
  fn = await deployHttp(h, appId, "bg", CODE, { timeoutMs: 600 });
});
afterAll(async () => {
  await h.close();
  await db.drop();
});

async function recordOf(requestId: string) {
  for (let i = 0; i < 100; i++) {
    const found = (await h.admin.listInvocations({ functionId: fn.functionId, pageSize: 50 })).invocations.find((x) => x.requestId === requestId);
    if (found) return found;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`no invocation ${requestId}`);
}

describe("ctx.waitUntil in the runtime", () => {
  it("answers an HTTP call first and records the invocation with the work's log when the work is over", async () => {
    const res = await h.device(consumerOfApp(appId, 1)).invoke(
      { method: "GET", pathParams: { slug: "bg" }, query: { op: "wait" }, headers: {}, body: new Uint8Array(), contentType: "" },
      { headers: { "x-test-request-id": "http-wait" } },
    );
    expect(JSON.parse(dec.decode(res.body))).toEqual({ answered: "http" });
    // answered first: the work (200 ms) is not over, so nothing is recorded yet
    await h.fn.recorder.flush();
    expect((await h.admin.listInvocations({ functionId: fn.functionId })).invocations.find((x) => x.requestId === "http-wait")).toBeUndefined();
    const rec = await recordOf("http-wait");
    expect(rec).toMatchObject({ status: 200, outcome: "ok", logs: [expect.objectContaining({ message: "after the wait" })] });
    expect(rec.durationMs).toBeGreaterThanOrEqual(190);
  });

  it("an HTTP call whose work never settles keeps its 200; the record says the work was cut", async () => {
    const res = await h.device(consumerOfApp(appId, 1)).invoke(
      { method: "GET", pathParams: { slug: "bg" }, query: { op: "hang" }, headers: {}, body: new Uint8Array(), contentType: "" },
      { headers: { "x-test-request-id": "http-hang" } },
    );
    expect(res.status).toBe(200);
    const rec = await recordOf("http-hang");
    expect(rec).toMatchObject({ status: 200, outcome: "ok" });
    expect(rec.logs).toEqual([expect.objectContaining({ level: "warn", message: expect.stringContaining("ctx.waitUntil work did not settle within the function's timeout and was cut") })]);
    expect(rec.durationMs).toBeGreaterThanOrEqual(590);
  });

  it("an event run ends when its work settles", async () => {
    const report = await h.fn.runtime.runEvent(appId, Number(fn.functionId), Number(fn.triggerId), { op: "wait" }, "event-wait");
    expect(report).toMatchObject({ status: 200, outcome: "ok", logs: [expect.objectContaining({ message: "after the wait" })] });
    expect(report!.durationMs).toBeGreaterThanOrEqual(190);
  });

  it("an event or schedule run whose work is cut at the timeout is a timeout (an event is retried)", async () => {
    const ev = await h.fn.runtime.runEvent(appId, Number(fn.functionId), Number(fn.triggerId), { op: "hang" }, "event-hang");
    expect(ev).toMatchObject({ status: 504, outcome: "timeout", error: expect.stringContaining("ctx.waitUntil work did not settle within the function's timeout and was cut") });
    expect(ev!.durationMs).toBeGreaterThanOrEqual(590);
    const sched = await h.fn.runtime.runSchedule(Number(fn.functionId), Number(fn.triggerId), { op: "hang" }, "schedule-hang");
    expect(sched).toMatchObject({ status: 504, outcome: "timeout" });
    expect((await recordOf("schedule-hang")).outcome).toBe("timeout");
    const ok = await h.fn.runtime.runSchedule(Number(fn.functionId), Number(fn.triggerId), { op: "wait" }, "schedule-wait");
    expect(ok).toMatchObject({ status: 200, outcome: "ok" });
  });
});
