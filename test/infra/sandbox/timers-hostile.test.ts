// Hostile function code against timers and ctx.waitUntil (docs/functions.md,
// "Timers and waitUntil"): storms that would keep the service's thread busy,
// string callbacks, odd ids, and a ctx.waitUntil kept from an earlier run.
import { afterAll, afterEach, describe, expect, it, vi } from "vitest";
import { createSandbox } from "../../../src/infra/sandbox/sandbox.js";
import type { HostCapability } from "../../../src/kernel/host-capability.js";
import type { RunInput, RunTarget } from "../../../src/infra/sandbox/types.js";
import { NESTED_MIN_MS, NESTING_LEVEL, RunWake } from "../../../src/infra/sandbox/timers.js";

const notes: string[] = [];
const note: HostCapability = {
  name: "note",
  busyCode: "unavailable",
  failureCode: "internal_error",
  methods: { put: async (_call, key) => (notes.push(String(key)), true) },
};
const sandbox = createSandbox({ capabilities: [note], limits: { maxIsolates: 16, isolatesPerVersion: 4 } });
afterAll(() => sandbox.close());

let nextVersion = 1;
const target = (code: string, over: Partial<RunTarget> = {}): RunTarget => ({ versionId: nextVersion++, appId: 1, code, memoryMb: 32, timeoutMs: 1000, ...over });
const input = (req: unknown = null): RunInput => ({ req, consumer: null, event: null, env: {}, trigger: "http", requestId: "r" });
const body = (r: { response?: { body: string } }) => JSON.parse(r.response!.body) as unknown;
/** Waits past the time something that must NOT happen would have happened (a negative check: no condition to wait for). */
const waitPast = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("the host's side of timers", () => {
  // RunWake's clock and timers (Date.now, setTimeout, setImmediate) on fake time.
  afterEach(() => {
    vi.useRealTimers();
  });

  it(`wakes a run at most once per ${NESTED_MIN_MS} ms after its first ${NESTING_LEVEL} wakes, however often timers fall due`, async () => {
    // the isolate telling the host "due now" again after every wake: what 1,000 setInterval(f, 0) do
    vi.useFakeTimers();
    let rings = 0;
    const w: RunWake = new RunWake(Date.now() + 200, () => {
      rings++;
      w.take();
      w.schedule(Date.now());
    });
    w.schedule(Date.now());
    await vi.advanceTimersByTimeAsync(250);
    w.stop();
    expect(rings).toBeGreaterThan(10);
    expect(rings).toBeLessThanOrEqual(NESTING_LEVEL + Math.ceil(200 / NESTED_MIN_MS) + 2);
  });

  it("still wakes for a timer due at the deadline", async () => {
    vi.useFakeTimers();
    let rang = 0;
    const end = Date.now() + 30;
    const w = new RunWake(end, () => (rang = Date.now()));
    w.schedule(end);
    await vi.advanceTimersByTimeAsync(29);
    expect(rang).toBe(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(rang).toBe(end);
  });
});

describe("hostile timers", () => {
  it("a 1,000-interval storm still fires every interval, many times, within the run", async () => {
    const r = await sandbox.run(target(`export default async () => {
      let ticks = 0;
      for (let i = 0; i < 999; i++) setInterval(() => { ticks++; }, 0);
      await new Promise((r) => setTimeout(r, 300));
      return ticks;
    }`), input());
    expect(r.outcome).toBe("ok");
    expect(body(r)).toBeGreaterThan(999);
  });

  it("never evaluates a string callback; odd ids to clearTimeout are ignored", async () => {
    const r = await sandbox.run(target(`export default async () => {
      const out = [];
      for (const f of [setTimeout, setInterval]) {
        try { f("globalThis.evaluated = true", 0); out.push("accepted"); } catch (e) { out.push(e.name); }
      }
      for (const id of [undefined, null, "1", {}, -1, NaN, "__proto__", 1e300, Symbol.iterator]) {
        try { clearTimeout(id); clearInterval(id); } catch (e) { out.push(e.name); }
      }
      await new Promise((r) => setTimeout(r, 10));
      return { out, evaluated: globalThis.evaluated ?? false };
    }`), input());
    expect(body(r)).toEqual({ out: ["TypeError", "TypeError", "TypeError"], evaluated: false });
  });
});

describe("a ctx kept from an earlier run", () => {
  it("its waitUntil, called in a later run, throws instead of taking work no one waits for", async () => {
    const t = target(`let saved;
      export default async function (req, ctx) {
        if (req === "keep") { saved = ctx.waitUntil; return "kept"; }
        if (req === "keep-bg") { saved = ctx.waitUntil; ctx.waitUntil(new Promise((r) => setTimeout(r, 5))); return "kept"; }
        try { saved(new Promise((r) => setTimeout(r, 50)).then(() => ctx.note.put("stale-work"))); return "accepted"; }
        catch (e) { return e.name + ": " + e.message; }
      }`);
    expect(body(await sandbox.run(t, input("keep")))).toBe("kept");
    const r = await sandbox.run(t, input("use"));
    expect(body(r)).toMatch(/^Error: ctx.waitUntil .*ended/);
    expect(r.background).toBeUndefined();
    // also when the earlier run had waitUntil work of its own (one isolate: the same one serves both)
    const one = createSandbox({ capabilities: [note], limits: { isolatesPerVersion: 1 } });
    try {
      const bg = await one.run(t, input("keep-bg"));
      expect((await bg.background!).outcome).toBe("ok");
      expect(body(await one.run(t, input("use")))).toMatch(/^Error: ctx.waitUntil .*ended/);
    } finally {
      one.close();
    }
    await waitPast(100); // the stale work, had it been taken, would have noted 50 ms after its run
    expect(notes).not.toContain("stale-work");
  });
});
