// The host-capability channel on its own: a capability registered by name is
// ctx.<name> with its methods, arguments and results cross as copies, errors
// keep their catalogue code, each capability has its own per-run limits, and
// a run's end cancels what its calls wait for or run on.
import { afterAll, expect, it } from "vitest";
import { until } from "../../helpers/until.js";
import { appError } from "../../../src/kernel/errors.js";
import { createSandbox } from "../../../src/infra/sandbox/sandbox.js";
import type { HostCall, HostCapability } from "../../../src/kernel/host-capability.js";
import type { RunInput, RunTarget } from "../../../src/infra/sandbox/types.js";

const seen: Array<{ appId: number; args: unknown[] }> = [];
const held = { started: 0, aborted: 0, finished: 0 };
const shared = { list: [1, 2] };

/** Resolves after `ms`, or when the run's signal fires (counted). */
function hold(call: HostCall, ms: number): Promise<string> {
  held.started++;
  return new Promise((resolve) => {
    const t = setTimeout(() => {
      held.finished++;
      resolve("held");
    }, ms);
    call.signal.addEventListener("abort", () => {
      clearTimeout(t);
      held.aborted++;
      resolve("aborted");
    });
  });
}

const echo: HostCapability = {
  name: "echo",
  busyCode: "rate_limited",
  failureCode: "internal_error",
  methods: {
    async say(call, ...args) {
      seen.push({ appId: call.appId, args });
      return { args, shared };
    },
    async refuse() {
      throw appError("quota_exceeded", "no room left", { fields: { value: ["too big"] } });
    },
    async crash() {
      throw new Error("host secret");
    },
    hold: (call, ms) => hold(call, Number(ms)),
  },
};
const other: HostCapability = { name: "other", busyCode: "unavailable", failureCode: "unavailable", methods: { hold: (call, ms) => hold(call, Number(ms)) } };

const sandbox = createSandbox({ capabilities: [echo, other], limits: { hostCallsRunning: 2, hostCallsQueued: 1 } });
afterAll(() => sandbox.close());

let nextVersion = 9000;
const target = (code: string, over: Partial<RunTarget> = {}): RunTarget => ({ versionId: nextVersion++, appId: 7, code, memoryMb: 32, timeoutMs: 1000, ...over });
const input: RunInput = { req: null, consumer: null, event: null, env: {}, trigger: "manual", requestId: "r" };
const body = (r: Awaited<ReturnType<typeof sandbox.run>>) => JSON.parse(r.response!.body);

it("offers each capability as ctx.<name> with its methods; arguments and results cross as copies", async () => {
  const r = await sandbox.run(target(`export default async (req, ctx) => {
    const arg = { n: 1, nested: [1, 2] };
    const out = await ctx.echo.say("a", arg, undefined, null);
    arg.n = 2;
    out.shared.list.push(3);
    return { out, methods: Object.keys(ctx.echo), frozen: Object.isFrozen(ctx.echo), other: typeof ctx.other.hold, db: typeof ctx.db };
  }`), input);
  expect(body(r)).toEqual({
    out: { args: ["a", { n: 1, nested: [1, 2] }, null, null], shared: { list: [1, 2, 3] } },
    methods: ["say", "refuse", "crash", "hold"],
    frozen: true,
    other: "function",
    db: "undefined",
  });
  expect(seen.at(-1)).toEqual({ appId: 7, args: ["a", { n: 1, nested: [1, 2] }, undefined, null] });
  // the host's object was not touched by the function
  expect(shared.list).toEqual([1, 2]);
});

it("rejects a call with the catalogue code and message, and hides anything else behind the capability's failure code", async () => {
  const r = await sandbox.run(target(`export default async (req, ctx) => {
    const out = [];
    for (const m of ["refuse", "crash"]) {
      try { await ctx.echo[m](); } catch (e) { out.push([e instanceof Error, e.code, e.message]); }
    }
    try { await ctx.echo.say(() => 1); } catch (e) { out.push(["uncopyable", e instanceof Error]); }
    return out;
  }`), input);
  expect(body(r)).toEqual([
    [true, "quota_exceeded", "no room left (value: too big)"],
    [true, "internal_error", "Internal error."],
    ["uncopyable", true],
  ]);
});

it("bounds the calls of one run per capability: running, then queued, then refused with the capability's busy code", async () => {
  const r = await sandbox.run(target(`export default async (req, ctx) => {
    const calls = [];
    for (let i = 0; i < 5; i++) calls.push(ctx.echo.hold(10));
    for (let i = 0; i < 3; i++) calls.push(ctx.other.hold(10));
    const settled = await Promise.allSettled(calls);
    return settled.map((s) => s.status === "fulfilled" ? s.value : s.reason.code);
  }`), input);
  expect(body(r)).toEqual(["held", "held", "held", "rate_limited", "rate_limited", "held", "held", "held"]);
});

it("cancels the calls a run leaves behind: the running ones see the run's signal, the queued ones never start", async () => {
  Object.assign(held, { started: 0, aborted: 0, finished: 0 });
  const r = await sandbox.run(target(`export default async (req, ctx) => {
    await ctx.echo.say("first");
    ctx.echo.hold(5000); ctx.echo.hold(5000); ctx.echo.hold(5000);
    return "left";
  }`), input);
  expect(body(r)).toBe("left");
  expect(r.logs.map((l) => l.message)).toContainEqual(expect.stringMatching(/3 ctx\.echo calls were still pending .* cancelled/));
  await until(async () => (held.aborted >= 2 ? true : undefined), 5_000, 5);
  expect(held).toEqual({ started: 2, aborted: 2, finished: 0 });
});

it("refuses a capability named like a field of ctx", () => {
  expect(() => createSandbox({ capabilities: [{ ...echo, name: "env" }] })).toThrow(/ctx\.env/);
});
