// ctx.waitUntil through the functions runtime (docs/functions.md, "Timers
// and waitUntil"), on PostgreSQL: an HTTP caller is answered before the
// work runs and the invocation is recorded when it is over; event and
// schedule runs end with the work, and work cut by the timeout makes them
// a timeout (so an event is retried).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDb, type TestDb } from "../../helpers/db.js";
import { until } from "../../helpers/until.js";
import { consumerOfApp, createApp, createHarness, dec, deployHttp, type Harness } from "./fixtures.js";

const CODE = `export default async function (req, ctx) {
  const op = ctx.trigger === "http" ? req.query.op : ctx.event.op;
  if (op === "hang") ctx.waitUntil(new Promise(() => {}));
  // work that waits for the test's gate (a database call the test holds), then 200 ms
  else if (op === "gated") ctx.waitUntil(ctx.db.query("SELECT 'gate'").then(() => new Promise((r) => setTimeout(r, 200))).then(() => console.log("after the wait")));
  else ctx.waitUntil(new Promise((r) => setTimeout(r, 200)).then(() => console.log("after the wait")));
  return { answered: ctx.trigger };
}`;

let db: TestDb;
let h: Harness;
let appId: number;
let fn: { functionId: bigint; triggerId: bigint };
/** The same code with a timeout the gated work cannot reach. */
let gatedFn: { functionId: bigint; triggerId: bigint };

beforeAll(async () => {
  db = await createTestDb("postgres");
  h = createHarness(db.sql);
  appId = await createApp(db.sql);
  fn = await deployHttp(h, appId, "bg", CODE, { timeoutMs: 600 });
  gatedFn = await deployHttp(h, appId, "bg-gated", CODE, { timeoutMs: 10_000 });
});
afterAll(async () => {
  await h.close();
  await db.drop();
});

function recordOf(requestId: string, functionId = fn.functionId) {
  return until(async () => (await h.admin.listInvocations({ functionId, pageSize: 50 })).invocations.find((x) => x.requestId === requestId), 10_000, 20);
}

describe("ctx.waitUntil in the runtime", () => {
  it("answers an HTTP call first and records the invocation with the work's log when the work is over", async () => {
    // the work waits for a database call the test answers only after the checks below
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    const query = h.fdb.query.bind(h.fdb);
    let gated = 0;
    h.fdb.query = async (app, statement, opts) => {
      if (statement.sql === "SELECT 'gate'") {
        gated++;
        await gate;
      }
      return query(app, statement, opts);
    };
    try {
      const res = await h.device(consumerOfApp(appId, 1)).invoke(
        { method: "GET", pathParams: { slug: "bg-gated" }, query: { op: "gated" }, headers: {}, body: new Uint8Array(), contentType: "" },
        { headers: { "x-test-request-id": "http-wait" } },
      );
      expect(JSON.parse(dec.decode(res.body))).toEqual({ answered: "http" });
      // answered first: the work is not over (it waits at the gate), so nothing is recorded yet
      await until(async () => (gated > 0 ? true : undefined));
      await h.fn.recorder.flush();
      expect((await h.admin.listInvocations({ functionId: gatedFn.functionId })).invocations.find((x) => x.requestId === "http-wait")).toBeUndefined();
      open();
      const rec = await recordOf("http-wait", gatedFn.functionId);
      expect(rec).toMatchObject({ status: 200, outcome: "ok", logs: [expect.objectContaining({ message: "after the wait" })] });
      expect(rec.durationMs).toBeGreaterThanOrEqual(190);
    } finally {
      open();
      h.fdb.query = query;
    }
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
