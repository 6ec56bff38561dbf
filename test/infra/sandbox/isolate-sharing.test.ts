// Hostile tenants and the isolate pool (issue #28, points 1 and 2): each
// application gets a share of the isolates, counted by runs holding one
// (a run awaiting a timer or a host call holds its isolate), with its own
// queue served in turn; and the heap warm isolates keep between runs is
// bounded per isolate, per application and per process.
import { afterEach, describe, expect, it } from "vitest";
import type { Sandbox } from "../../../src/infra/sandbox/sandbox.js";
import type { RunInput, RunResult, RunTarget } from "../../../src/infra/sandbox/types.js";
import { until } from "../../helpers/until.js";
import { gatedSandboxes } from "./gated-sandboxes.js";

// ctx.gate.hold(): a call the test answers when it wants (a run waiting on a
// fetch, as far as the pool can tell), in arrival order with its app.
const { held, sandbox, closeAll } = gatedSandboxes();
afterEach(() => {
  closeAll();
  for (const h of held.splice(0)) h.open();
});

let nextVersion = 1;
function target(appId: number, code: string, over: Partial<RunTarget> = {}): RunTarget {
  return { versionId: nextVersion++, appId, code, memoryMb: 64, timeoutMs: 10_000, ...over };
}
function input(req: unknown = null): RunInput {
  return { req, consumer: null, event: null, env: {}, trigger: "http", requestId: "r1" };
}
const run = (s: Sandbox, t: RunTarget, req?: unknown): Promise<RunResult> => Promise.resolve(s.run(t, input(req)));
const app = (s: Sandbox, id: number) => s.stats().apps.find((a) => a.app === id);
/** Until every run's isolate is back (a run's result can come before its isolate is released). */
const released = (s: Sandbox) => until(async () => (s.stats().apps.every((a) => a.busy === 0) ? true : undefined), 10_000, 5);

const TRIVIAL = `export default () => "hi"`;
const MiB = 1024 * 1024;

describe("isolate share per application", () => {
  it("an application awaiting timers in all its runs holds only its share: another's trivial function still answers", async () => {
    // 4 isolates, 2 per version: 2 versions of app 1 x 2 runs would hold them all
    const s = sandbox({ maxIsolates: 4, isolatesPerVersion: 2, appIsolates: 2 });
    const sleepy = Array.from({ length: 2 }, () => target(1, `export default async () => { await new Promise((r) => setTimeout(r, 1500)); return "slept"; }`));
    const floods = sleepy.flatMap((t) => [run(s, t), run(s, t)]);
    await until(async () => (s.stats().total >= 2 ? true : undefined));
    // app 2 waits at most 1 s for an isolate; app 1's runs hold theirs for 1.5 s
    const r = await run(s, target(2, TRIVIAL, { timeoutMs: 1000 }));
    expect(r.outcome).toBe("ok");
    expect(r.response?.body).toBe('"hi"');
    expect(app(s, 1)).toMatchObject({ busy: 2 });
    expect(app(s, 1)!.waiting).toBeGreaterThan(0);
    // app 1's extra runs waited their turn within their own timeout, none refused
    const results = await Promise.all(floods);
    expect(results.map((x) => x.outcome)).toEqual(results.map(() => "ok"));
  });

  it("queued runs of two applications are served in turn, not all of the first comer's first", async () => {
    const s = sandbox({ maxIsolates: 2, isolatesPerVersion: 2, appIsolates: 2 });
    const code = `export default async (req, ctx) => { await ctx.gate.hold(req); return req; }`;
    const a = target(1, code);
    const b = target(2, code);
    const runs = [run(s, a, "a0"), run(s, a, "a1")];
    await until(async () => (held.length === 2 ? true : undefined));
    // the pool is full: three more of app 1, then three of app 2, queue
    for (const tag of ["a2", "a3", "a4"]) runs.push(run(s, a, tag));
    await until(async () => (s.stats().waiting === 3 ? true : undefined));
    for (const tag of ["b0", "b1", "b2"]) runs.push(run(s, b, tag));
    await until(async () => (s.stats().waiting === 6 ? true : undefined));
    // free one isolate at a time and see who gets it
    const order: unknown[] = [];
    for (let i = 2; i < 8; i++) {
      held[i - 2]!.open();
      await until(async () => (held.length > i ? true : undefined));
      order.push(held[i]!.tag);
    }
    expect(order).toEqual(["a2", "b0", "a3", "b1", "a4", "b2"]);
    for (let i = 6; i < 8; i++) held[i]!.open();
    const out = await Promise.all(runs);
    expect(out.map((x) => x.outcome)).toEqual(out.map(() => "ok"));
  });

  it("a queued run still times out at its own timeout, and the default share is a quarter of maxIsolates", async () => {
    const s = sandbox({ maxIsolates: 8, isolatesPerVersion: 8 });
    const t = target(1, `export default async (req, ctx) => { await ctx.gate.hold(req); return req; }`);
    const first = [run(s, t, 1), run(s, t, 2)];
    await until(async () => (held.length === 2 ? true : undefined));
    const late = await run(s, { ...t, timeoutMs: 300 }, 3);
    expect(late.outcome).toBe("timeout");
    expect(late.error).toMatch(/waiting for a free isolate/);
    expect(held.length).toBe(2);
    for (const h of held) h.open();
    await Promise.all(first);
  });
});

describe("isolate heap bounds", () => {
  // (syncSliceMs 0: a run filling megabytes may pass the fast path's slice and be run again in a new isolate, which would hide warm reuse)
  // keeps `mb` MiB in globalThis across runs (an ArrayBuffer: external memory, counted in the heap sample)
  const keeper = (mb: number) => `export default () => { (globalThis.kept ??= []).push(new Uint8Array(${mb} * 1024 * 1024).fill(7)); return globalThis.kept.length; }`;

  it("an isolate holding more than keepHeapBytes after its run is disposed, not pooled", async () => {
    const s = sandbox({ maxIsolates: 8, isolatesPerVersion: 2, keepHeapBytes: 16 * MiB, syncSliceMs: 0 });
    const big = target(1, keeper(24));
    const r1 = await run(s, big);
    expect(r1.outcome).toBe("ok");
    await until(async () => (s.stats().total === 0 ? true : undefined));
    await released(s);
    const r2 = await run(s, big);
    // a fresh isolate: nothing of the first run's heap was kept
    expect(r2.coldStart).toBe(true);
    expect(r2.response?.body).toBe("1");
    // a small one stays warm
    const small = target(1, TRIVIAL);
    await run(s, small);
    await released(s);
    expect((await run(s, small)).coldStart).toBe(false);
    await released(s);
    expect(s.stats().disposedOverHeap).toBe(2);
  });

  it("a warm isolate that grew past keepHeapBytes in runs close together is disposed once idle", async () => {
    const s = sandbox({ maxIsolates: 8, isolatesPerVersion: 1, keepHeapBytes: 16 * MiB, syncSliceMs: 0 });
    const t = target(1, keeper(7));
    // back to back (a warm isolate's heap is sampled at most every 50 ms, and
    // shortly after a skipped sample): the third run takes it past 16 MiB
    for (let i = 1; i <= 3; i++) expect((await run(s, t)).response?.body).toBe(String(i));
    await until(async () => (s.stats().total === 0 ? true : undefined), 10_000, 10);
    expect(s.stats().disposedOverHeap).toBe(1);
  });

  it("an application over its heap share pins no more: its own idle isolates go first, another's stay warm", async () => {
    const s = sandbox({ maxIsolates: 16, isolatesPerVersion: 2, keepHeapBytes: 64 * MiB, appHeapBytes: 40 * MiB, syncSliceMs: 0 });
    const other = target(2, TRIVIAL);
    await run(s, other);
    const versions = Array.from({ length: 6 }, () => target(1, keeper(12)));
    for (const t of versions) {
      expect((await run(s, t)).outcome).toBe("ok");
      await released(s);
      // what app 1 keeps between runs stays within its share
      expect(app(s, 1)!.heapBytes).toBeLessThanOrEqual(40 * MiB);
    }
    expect(app(s, 1)!.isolates).toBeLessThan(6);
    // the other application's isolate was not evicted for it
    expect((await run(s, other)).coldStart).toBe(false);
    await released(s);
    // the most recently used of app 1 is the one kept warm
    expect((await run(s, versions[5]!)).coldStart).toBe(false);
  });

  it("the process heap budget bounds what all applications keep; a new application still gets an isolate", async () => {
    const s = sandbox({ maxIsolates: 16, isolatesPerVersion: 2, keepHeapBytes: 64 * MiB, heapBudgetBytes: 48 * MiB, appHeapBytes: 30 * MiB, syncSliceMs: 0 });
    for (const appId of [1, 2, 3]) {
      for (let i = 0; i < 2; i++) expect((await run(s, target(appId, keeper(12)))).outcome).toBe("ok");
      await released(s);
      expect(s.stats().heapBytes).toBeLessThanOrEqual(48 * MiB);
    }
    expect((await run(s, target(4, TRIVIAL))).outcome).toBe("ok");
    await released(s);
    expect(s.stats().heapBytes).toBeLessThanOrEqual(48 * MiB);
  });
});
