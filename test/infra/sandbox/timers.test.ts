// Timers and ctx.waitUntil in the sandbox (docs/functions.md, "Timers and
// waitUntil"): timers driven by the host within the run's deadline, work
// after the response, and nothing of a run going on after it ended.
import { afterAll, describe, expect, it, vi } from "vitest";
import { FunctionIsolate } from "../../../src/infra/sandbox/function-isolate.js";
import { createSandbox } from "../../../src/infra/sandbox/sandbox.js";
import type { HostCapability } from "../../../src/kernel/host-capability.js";
import type { RunInput, RunTarget } from "../../../src/infra/sandbox/types.js";
import { MAX_TIMERS_PER_RUN, MAX_WAIT_UNTIL_PER_RUN } from "../../../src/infra/sandbox/timers.js";

// A host capability that remembers what it was given (ctx.note.put) and
// when: the proof that waitUntil work ran after the response.
const notes: Array<{ key: string; at: number }> = [];
const note: HostCapability = {
  name: "note",
  busyCode: "unavailable",
  failureCode: "internal_error",
  methods: {
    async put(_call, key) {
      notes.push({ key: String(key), at: performance.now() });
      return true;
    },
  },
};
const sandbox = createSandbox({ capabilities: [note], limits: { maxIsolates: 16, isolatesPerVersion: 2 } });
afterAll(() => sandbox.close());

let nextVersion = 1;
function target(code: string, over: Partial<RunTarget> = {}): RunTarget {
  return { versionId: nextVersion++, appId: 1, code, memoryMb: 32, timeoutMs: 1000, ...over };
}
function input(over: Partial<RunInput> = {}): RunInput {
  return { req: null, consumer: null, event: null, env: {}, trigger: "http", requestId: "r1", ...over };
}
const body = (r: { response?: { body: string } }) => JSON.parse(r.response!.body) as unknown;

describe("timers", () => {
  // (lower bounds only: a timer never fires early; how late it fires on a
  // loaded machine is not this test's business)
  it("fire in due order, none early; clearTimeout and clearInterval work; an interval counts ticks", async () => {
    const t = target(`export default async function () {
      const t0 = Date.now(), order = [];
      await new Promise((done) => {
        setTimeout(() => order.push(["c", Date.now() - t0]), 60);
        setTimeout((x) => order.push([x, Date.now() - t0]), 20, "a");
        setTimeout(() => order.push(["b", Date.now() - t0]), 40);
        const gone = setTimeout(() => order.push(["cleared"]), 30);
        clearTimeout(gone);
        setTimeout(done, 80);
      });
      let ticks = 0;
      await new Promise((done) => {
        const id = setInterval(() => { if (++ticks === 5) { clearInterval(id); setTimeout(done, 30); } }, 5);
      });
      return { order, ticks, took: Date.now() - t0 };
    }`);
    const r = await sandbox.run(t, input());
    expect(r.outcome, r.error).toBe("ok");
    const out = body(r) as { order: Array<[string, number]>; ticks: number; took: number };
    expect(out.order.map((o) => o[0])).toEqual(["a", "b", "c"]);
    const [a, b, c] = out.order.map((o) => o[1]);
    expect(a).toBeGreaterThanOrEqual(19);
    expect(b).toBeGreaterThanOrEqual(39);
    expect(c).toBeGreaterThanOrEqual(59);
    // cleared intervals stop: 5 ticks although 30 ms more passed
    expect(out.ticks).toBe(5);
    expect(out.took).toBeGreaterThanOrEqual(100);
  });

  it("awaits setTimeout(0) and queueMicrotask, also warm (the fast path)", async () => {
    const t = target(`export default async function () {
      const seen = [];
      queueMicrotask(() => seen.push("micro"));
      await new Promise((r) => setTimeout(r, 0));
      seen.push("timer");
      return seen;
    }`);
    for (let i = 0; i < 3; i++) {
      const r = await sandbox.run(t, input());
      expect(body(r)).toEqual(["micro", "timer"]);
    }
  });

  it("never fires a timer due after the deadline: the run times out at its deadline and says why", async () => {
    // (a run waiting for the timer would outlast the test's timeout)
    const t = target(`export default async function () {
      await new Promise((r) => setTimeout(r, 600_000));
      return "never";
    }`, { timeoutMs: 300 });
    const r = await sandbox.run(t, input());
    expect(r.outcome).toBe("timeout");
    expect(r.logs.map((l) => l.message).join("\n")).toMatch(/timer was due after the function's timeout/);
    // a guard timer past the deadline does not stop a function that answers in time
    const guard = await sandbox.run(target(`export default async function () {
      const guard = setTimeout(() => {}, 60_000);
      await new Promise((r) => setTimeout(r, 10));
      clearTimeout(guard);
      return "ok";
    }`, { timeoutMs: 300 }), input());
    expect(body(guard)).toBe("ok");
  });

  it(`refuses more than ${MAX_TIMERS_PER_RUN} pending timers with a RangeError the function catches`, async () => {
    const t = target(`export default async function () {
      let made = 0, error = null;
      try { for (let i = 0; i < 10000; i++) { setTimeout(() => {}, 100000); made++; } }
      catch (e) { error = e.name + ": " + e.message; }
      return { made, error };
    }`);
    const r = await sandbox.run(t, input());
    expect(body(r)).toEqual({ made: MAX_TIMERS_PER_RUN, error: `RangeError: too many timers: at most ${MAX_TIMERS_PER_RUN} pending in one invocation` });
    // the next run of the same isolate starts with none
    const again = await sandbox.run(t, input());
    expect(body(again)).toMatchObject({ made: MAX_TIMERS_PER_RUN });
  });

  it("a set-and-clear loop with ever earlier due times sends the host no more messages than one with later ones", async () => {
    // each timer earlier than the last one told would be a message to the
    // host; past the deadline none is sent (but one "late" notice), and due
    // times are whole ms. Counted: the isolate's wake-ups reaching the host.
    const loop = (sign: string) => target(`export default async function () {
      const f = () => {};
      for (let i = 0; i < 100000; i++) clearTimeout(setTimeout(f, 1e7 ${sign} i * 0.25));
      return "done";
    }`, { timeoutMs: 5000 });
    const wakes = vi.spyOn(FunctionIsolate.prototype as unknown as { onWake(run: number, dueAt: number): void }, "onWake");
    try {
      for (const t of [loop("+"), loop("-")]) {
        for (let i = 0; i < 2; i++) expect(body(await sandbox.run(t, input()))).toBe("done");
      }
      // messages per run of each isolate (they may reach the host after the run)
      const perRun = new Map<string, number>();
      const isolates = new Map<unknown, number>();
      wakes.mock.calls.forEach(([run], i) => {
        const self = wakes.mock.contexts[i];
        if (!isolates.has(self)) isolates.set(self, isolates.size);
        const key = `${isolates.get(self)}:${run}`;
        perRun.set(key, (perRun.get(key) ?? 0) + 1);
      });
      // before: one message per timer (100,000 a run)
      expect(perRun.size).toBeGreaterThan(0);
      expect(Math.max(...perRun.values())).toBeLessThanOrEqual(1);
    } finally {
      wakes.mockRestore();
    }
  });

  it("clears the timers when a run ends: a timer left behind never fires in a later run", async () => {
    const t = target(`let fired = 0;
      export default async function (req) {
        if (req === "arm") { setTimeout(() => { fired++; }, 30); return "armed"; }
        await new Promise((r) => setTimeout(r, 80));
        return { fired };
      }`);
    expect(body(await sandbox.run(t, input({ req: "arm" })))).toBe("armed");
    const r = await sandbox.run(t, input({ req: "check" }));
    expect(body(r)).toEqual({ fired: 0 });
  });

  it("logs a timer callback's exception in the invocation's log; the run goes on", async () => {
    const t = target(`export default async function () {
      setTimeout(() => { throw new TypeError("boom in timer"); }, 1);
      await new Promise((r) => setTimeout(r, 20));
      return "still fine";
    }`);
    const r = await sandbox.run(t, input());
    expect(body(r)).toBe("still fine");
    expect(r.logs).toEqual([expect.objectContaining({ level: "error", message: expect.stringContaining("TypeError: boom in timer") })]);
  });

  it("clamps nested timers to 4 ms like browsers", async () => {
    const t = target(`export default async function () {
      const t0 = Date.now();
      let n = 0;
      await new Promise((done) => { const step = () => (++n === 30 ? done() : setTimeout(step, 0)); setTimeout(step, 0); });
      return Date.now() - t0;
    }`);
    // 25 of the 30 are nested past level 5: at least 4 ms each
    expect(body(await sandbox.run(t, input()))).toBeGreaterThanOrEqual(100);
  });
});

describe("ctx.waitUntil", () => {
  it("answers at once and runs the work after the response, within the run", async () => {
    const t = target(`export default async function (req, ctx) {
      ctx.waitUntil(new Promise((r) => setTimeout(r, 300)).then(() => ctx.note.put("after-300")));
      console.log("answered");
      return "sent";
    }`);
    const t0 = performance.now();
    const r = await sandbox.run(t, input());
    // answered before the work: its note is not there yet
    expect(body(r)).toBe("sent");
    expect(r.background).toBeDefined();
    expect(notes.find((n) => n.key === "after-300")).toBeUndefined();
    const bg = await r.background!;
    expect(bg.outcome).toBe("ok");
    expect(notes.find((n) => n.key === "after-300")!.at - t0).toBeGreaterThanOrEqual(290);
    expect(r.logs).toEqual([{ level: "log", message: "answered" }]);
    expect(bg.durationMs).toBeGreaterThanOrEqual(290);
  });

  it("cuts work that never settles at the deadline, disposes the isolate, and the next run is fine", async () => {
    const t = target(`let runs = 0;
      export default async function (req, ctx) {
        runs++;
        if (req === "hang") { ctx.waitUntil(new Promise(() => {})); ctx.waitUntil(new Promise((r) => setInterval(() => {}, 5))); }
        return { runs };
      }`, { timeoutMs: 1000 });
    const t0 = performance.now();
    // (1 s: a cold isolate on a loaded host can take a third of 300 ms before it answers)
    const r = await sandbox.run(t, input({ req: "hang" }));
    expect(body(r)).toEqual({ runs: 1 });
    // the work never settles: that the background ends at all is the cut
    const bg = await r.background!;
    expect(bg.outcome).toBe("timeout");
    expect(performance.now() - t0).toBeGreaterThanOrEqual(990);
    expect(bg.logs[0]).toEqual({ level: "warn", message: expect.stringContaining("ctx.waitUntil work did not settle") });
    // a fresh isolate: the module's state started over
    const next = await sandbox.run(t, input());
    expect(body(next)).toEqual({ runs: 1 });
    expect(next.coldStart).toBe(true);
  });

  it("cuts a timer callback that spins after the response at the deadline; the isolate is not used again", async () => {
    const t = target(`let runs = 0;
      export default async function (req, ctx) {
        runs++;
        if (req === "spin") ctx.waitUntil(new Promise(() => setTimeout(() => { for (;;) {} }, 10)));
        return { runs };
      }`, { timeoutMs: 300 });
    await sandbox.run(t, input());
    const r = await sandbox.run(t, input({ req: "spin" }));
    expect(body(r)).toEqual({ runs: 2 });
    // the callback spins for ever: that the background ends at all is the cut
    const bg = await r.background!;
    expect(bg.outcome).toBe("timeout");
    const next = await sandbox.run(t, input());
    expect(body(next)).toEqual({ runs: 1 });
  });

  it("logs a rejected waitUntil promise and counts the limit", async () => {
    const t = target(`export default async function (req, ctx) {
      ctx.waitUntil(new Promise((_, no) => setTimeout(() => no(new Error("bg failed")), 5)));
      let error = null;
      try { for (let i = 0; i < 1000; i++) ctx.waitUntil(null); } catch (e) { error = e.name + ": " + e.message; }
      return { error };
    }`);
    const r = await sandbox.run(t, input());
    expect(body(r)).toEqual({ error: `RangeError: too many ctx.waitUntil calls: at most ${MAX_WAIT_UNTIL_PER_RUN} in one invocation` });
    const bg = await r.background!;
    expect(bg.outcome).toBe("ok");
    expect(bg.logs).toEqual([expect.objectContaining({ level: "error", message: expect.stringContaining("bg failed") })]);
  });

  it("a run without waitUntil has no background", async () => {
    const r = await sandbox.run(target(`export default () => 1`), input());
    expect(r.background).toBeUndefined();
  });
});
