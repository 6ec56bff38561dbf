// Timers and ctx.waitUntil through the whole server (docs/functions.md,
// "Timers and waitUntil"): functions deployed over the operator API and
// called over /api/fn/{slug} wait on timers within their timeout, answer
// before their waitUntil work runs, and a hostile function (a timer past the
// deadline, 10,000 timers, work that never settles) is refused or cut while
// another application keeps answering.
import { randomUUID } from "node:crypto";
import { fromJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FunctionService as AdminFunctionService } from "../../gen/pulsebase/admin/v1/functions_pb.js";
import { createModules } from "../../src/server/modules.js";
import { capturedLogger, startTestServer, type TestServer } from "../helpers/server.js";
import { until } from "../helpers/until.js";

const TIMERS = `let runs = 0;
// Which isolate answered: a module's top level runs once per isolate.
const isolate = Math.random().toString(36).slice(2);
export default async function (req, ctx) {
  runs++;
  const b = (ctx.trigger === "manual" ? req : req.body) ?? {};
  const t0 = Date.now();
  switch (b.op) {
    case "order": {
      const seen = [];
      await new Promise((done) => {
        setTimeout(() => seen.push(["b", Date.now() - t0]), 150);
        setTimeout(() => seen.push(["a", Date.now() - t0]), 10);
        clearTimeout(setTimeout(() => seen.push(["cleared"]), 20));
        let ticks = 0;
        const id = setInterval(() => { if (++ticks === 4) { clearInterval(id); seen.push(["ticks", ticks]); } }, 5);
        setTimeout(done, 200);
      });
      return { seen };
    }
    case "late":
      // due after the 1 s timeout (and the test's): never fires
      await new Promise((r) => setTimeout(r, 600_000));
      return "never";
    case "many": {
      let made = 0, error = null;
      try { for (let i = 0; i < 10_000; i++) { setTimeout(() => {}, 500); made++; } } catch (e) { error = e.name + ": " + e.message; }
      return { made, error };
    }
    case "throws":
      ctx.waitUntil(new Promise((r) => setTimeout(() => { r(); throw new TypeError("timer blew up"); }, 20)));
      return "answered";
    case "open":
      await ctx.kv.put(b.gate, "open");
      return "opened";
    case "bg-kv":
      ctx.waitUntil((async () => {
        // held until the test opens the gate (when it names one)
        while (b.gate && !(await ctx.kv.get(b.gate))) await new Promise((r) => setTimeout(r, 10));
        await new Promise((r) => setTimeout(r, 300));
        await ctx.kv.put(b.key, "written after the response");
        console.log("stored", b.key);
      })());
      return { answered: true };
    case "hang":
      ctx.waitUntil(new Promise(() => {}));
      return { runs, isolate };
  }
  return { runs, isolate };
}`;

let s: TestServer;
const apps: Record<"a" | "b", { token: string; appId: bigint; functionId: bigint }> = {} as never;
const fns = () => s.adminClient(AdminFunctionService);
/** The server's log lines (pino JSON). */
let logLines: Array<Record<string, unknown>> = [];

beforeAll(async () => {
  const captured = capturedLogger();
  logLines = captured.lines;
  s = await startTestServer({ modules: createModules, env: { NATS_URL: "" }, logger: captured.logger });
  for (const name of ["a", "b"] as const) {
    const app = await s.createApp(`timers ${name}`);
    const fn = await fns().createFunction({ appId: app.appId, name: "timers", timeoutMs: 1000 });
    await fns().deployVersion({ functionId: fn.id, code: TIMERS, activate: true });
    await fns().createHttpTrigger({ functionId: fn.id, slug: "timers" });
    apps[name] = { appId: app.appId, functionId: fn.id, token: (await s.register(app.appKey)).token };
  }
}, 60_000);
afterAll(() => s?.close());

async function call(app: "a" | "b", body: Record<string, unknown>): Promise<{ status: number; json: unknown; ms: number }> {
  const t0 = performance.now();
  const res = await s.fetch("/api/fn/timers", {
    method: "POST",
    headers: { authorization: `Bearer ${apps[app].token}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: JSON.parse(text), ms: performance.now() - t0 };
}

/** The newest invocation record of app a's function that satisfies `ok`, waiting for the recorder's flush. */
async function record(ok: (i: { requestId: string; logs: Array<{ level: string; message: string }>; outcome: string; status: number; durationMs: number }) => boolean) {
  for (let i = 0; i < 50; i++) {
    const found = (await fns().listInvocations({ functionId: apps.a.functionId, pageSize: 50 })).invocations.find(ok);
    if (found) return found;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error("no such invocation record");
}

describe("timers in functions", () => {
  it("fire in order with plausible delays; cleared timers do not fire; an interval counts its ticks", async () => {
    const r = await call("a", { op: "order" });
    expect(r.status).toBe(200);
    const seen = (r.json as { seen: Array<[string, number]> }).seen;
    expect(seen.map((x) => x[0])).toEqual(["a", "ticks", "b"]);
    expect(seen[1]![1]).toBe(4);
    expect(seen[0]![1]).toBeGreaterThanOrEqual(9);
    expect(seen[2]![1]).toBeGreaterThanOrEqual(149);
  });

  it("a timer past the deadline never fires: the call ends at the timeout with 504, and says why in the record", async () => {
    const r = await call("a", { op: "late" });
    expect(r.status).toBe(504);
    expect(r.json).toMatchObject({ error: "function_timeout" });
    expect(r.ms).toBeGreaterThanOrEqual(990);
    const rec = await record((i) => i.outcome === "timeout");
    expect(rec.logs.map((l) => l.message).join("\n")).toMatch(/timers due past the timeout never fire/);
  });

  it("refuses timers past 1,000 pending with an error the function catches", async () => {
    const r = await call("a", { op: "many" });
    expect(r).toMatchObject({ status: 200, json: { made: 1000, error: "RangeError: too many timers: at most 1000 pending in one invocation" } });
  });
});

describe("ctx.waitUntil", () => {
  it("answers before the work runs; the work's ctx.kv.put is visible after a short wait, and recorded", async () => {
    const key = `bg:${randomUUID()}`;
    const gate = `gate:${randomUUID()}`;
    const r = await call("a", { op: "bg-kv", key, gate });
    expect(r).toMatchObject({ status: 200, json: { answered: true } });
    // the work waits for the gate the test holds: nothing written yet
    await expect(fns().getKvEntry({ appId: apps.a.appId, key })).rejects.toThrow(/not_found|No such|not found/i);
    expect(await call("a", { op: "open", gate })).toMatchObject({ status: 200, json: "opened" });
    const value = await until(() => fns().getKvEntry({ appId: apps.a.appId, key }).then((e) => e.value, () => undefined), 10_000, 20);
    expect(value).toBe("written after the response");
    const rec = await record((i) => i.logs.some((l) => l.message === `stored ${key}`));
    expect(rec).toMatchObject({ status: 200, outcome: "ok" });
    expect(rec.durationMs).toBeGreaterThanOrEqual(290);
  });

  it("a timer callback that throws after the response leaves the response as it was and is in the record's log", async () => {
    const r = await call("a", { op: "throws" });
    expect(r).toMatchObject({ status: 200, json: "answered" });
    const rec = await record((i) => i.logs.some((l) => l.message.includes("timer blew up")));
    expect(rec).toMatchObject({ status: 200, outcome: "ok" });
    expect(rec.logs.find((l) => l.message.includes("timer blew up"))!.level).toBe("error");
  });

  it("cuts work that never settles at the timeout, discards the isolate; the same and another app answer meanwhile and after", async () => {
    // warm: one isolate that has served runs
    await call("a", {});
    const cutLogged = () => logLines.some((l) => l.msg === "function background work timed out");
    expect(cutLogged()).toBe(false);
    const r = await call("a", { op: "hang" });
    expect(r.status).toBe(200);
    const hung = (r.json as { isolate: string }).isolate;
    // while the hanging work waits: another app, and the same function (another isolate), answer at once
    const other = await call("b", {});
    expect(other.status).toBe(200);
    // both answered before the work was cut (at the 1 s timeout)
    expect(cutLogged()).toBe(false);
    const rec = await record((i) => i.logs.some((l) => l.message.includes("ctx.waitUntil work did not settle")));
    expect(rec).toMatchObject({ status: 200, outcome: "ok" });
    expect(rec.logs.find((l) => l.message.includes("did not settle"))!.level).toBe("warn");
    expect(rec.durationMs).toBeGreaterThanOrEqual(990);
    // the server logs the user's cut work at warn, never at error
    expect(logLines.find((l) => l.msg === "function background work timed out")).toMatchObject({ level: 40, appId: Number(apps.a.appId), version: 1, trigger: "http" });
    expect(logLines.filter((l) => (l.level as number) >= 50)).toEqual([]);
    // the cut isolate is gone: none of the next runs is answered by it
    for (let i = 0; i < 4; i++) {
      const next = await call("a", {});
      expect(next.status).toBe(200);
      expect((next.json as { isolate: string }).isolate).not.toBe(hung);
    }
    expect((await call("b", {})).status).toBe(200);
  });

  it("a manual run (like schedules and events) ends when its waitUntil work settles, or times out with it", async () => {
    const key = `manual:${randomUUID()}`;
    const run = await fns().runFunction({ functionId: apps.a.functionId, payload: fromJson(ValueSchema, { op: "bg-kv", key }) });
    expect(run).toMatchObject({ status: 200, outcome: "ok" });
    expect(run.durationMs).toBeGreaterThanOrEqual(290);
    expect((await fns().getKvEntry({ appId: apps.a.appId, key })).value).toBe("written after the response");
    const hang = await fns().runFunction({ functionId: apps.a.functionId, payload: fromJson(ValueSchema, { op: "hang" }) });
    expect(hang).toMatchObject({ status: 504, outcome: "timeout" });
    expect(hang.error).toMatch(/ctx.waitUntil work did not settle within the function's timeout and was cut/);
  });
});
