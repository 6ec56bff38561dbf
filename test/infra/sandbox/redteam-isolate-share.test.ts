// Issue #28, point 1, more cases (red team):
// - deploy-time checks (Sandbox.check) ran throwaway isolates outside the
//   pool, any number at once: whoever may deploy to one application started
//   as many isolates (each up to the plan's memory limit) as it sent deploys;
// - an application's queue of waiting runs had no bound: each waiting run
//   holds its input (a request body) after its client has gone (nothing
//   cancels a queued run, and the body budget's reservation is returned when
//   the response closes), so the queue grew with the request rate.
import { afterEach, describe, expect, it, vi } from "vitest";
import { FunctionIsolate } from "../../../src/infra/sandbox/function-isolate.js";
import type { RunInput, RunResult, RunTarget } from "../../../src/infra/sandbox/types.js";
import { until } from "../../helpers/until.js";
import { gatedSandboxes } from "./gated-sandboxes.js";

const { held, sandbox, closeAll } = gatedSandboxes();
afterEach(() => {
  vi.restoreAllMocks();
  for (const h of held.splice(0)) h.open();
  closeAll();
});
const input = (): RunInput => ({ req: { body: "x".repeat(1024) }, consumer: null, event: null, env: {}, trigger: "http", requestId: "r1" });
const target = (appId: number, code: string): RunTarget => ({ versionId: 1, appId, code, memoryMb: 64, timeoutMs: 20_000 });

describe("deploy-time checks", () => {
  it("run at most an application's share of isolates at once, however many deploys come in", async () => {
    const s = sandbox({ maxIsolates: 8, appIsolates: 2 });
    let live = 0;
    let peak = 0;
    const create = FunctionIsolate.create.bind(FunctionIsolate);
    vi.spyOn(FunctionIsolate, "create").mockImplementation(async (...args: Parameters<typeof FunctionIsolate.create>) => {
      live++;
      peak = Math.max(peak, live);
      try {
        const fi = await create(...args);
        const dispose = fi.dispose.bind(fi);
        let once = false;
        fi.dispose = () => {
          if (!once) live--;
          once = true;
          dispose();
        };
        return fi;
      } catch (err) {
        live--;
        throw err;
      }
    });
    // top-level work, so that the checks overlap
    const code = `let x = 0; for (let i = 0; i < 3e6; i++) x += i; export default () => x;`;
    const results = await Promise.allSettled(Array.from({ length: 12 }, () => s.check(code, 64)));
    expect(peak).toBeLessThanOrEqual(2);
    // within the queue's bound (4 per slot) all pass
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(8 + 2);
    expect(results.filter((r) => r.status === "rejected").map((r) => String((r as PromiseRejectedResult).reason))).toEqual([
      expect.stringMatching(/Too many function versions are being checked/),
      expect.stringMatching(/Too many function versions are being checked/),
    ]);
  });
});

describe("an application's queue of waiting runs", () => {
  it("is bounded: runs past it are refused at once, the waiting ones still run", async () => {
    const s = sandbox({ maxIsolates: 8, appIsolates: 1 });
    const t = target(1, `export default async (req, ctx) => { await ctx.gate.hold(); return "held"; }`);
    const first = Promise.resolve(s.run(t, input()));
    await until(async () => (held.length === 1 ? true : undefined), 10_000, 5);
    const rest: Array<Promise<RunResult>> = [];
    for (let i = 0; i < 300; i++) rest.push(Promise.resolve(s.run(t, input())));
    const waiting = s.stats().apps.find((a) => a.app === 1)!.waiting;
    expect(waiting).toBeLessThanOrEqual(256);
    // the refused ones answer without an isolate
    const refused = rest.slice(256);
    for (const r of await Promise.all(refused)) {
      expect(r.outcome).toBe("error");
      // the platform's refusal (503 to an HTTP caller), not the function's failure (500)
      expect(r.busy).toBe(true);
      expect(r.error).toMatch(/too many runs of this application are waiting/);
    }
    // another application is not refused
    const other = await Promise.resolve(s.run(target(2, `export default () => "other"`), input()));
    expect(other.outcome).toBe("ok");
    // the queued ones run in turn once the isolate is free
    const drain = setInterval(() => held.splice(0).forEach((h) => h.open()), 5);
    try {
      expect((await first).outcome).toBe("ok");
      for (const r of await Promise.all(rest.slice(0, 256))) expect(r.outcome).toBe("ok");
    } finally {
      clearInterval(drain);
    }
  }, 30_000);
});
