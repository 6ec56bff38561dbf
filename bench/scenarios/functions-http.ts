// Functions through the whole server: a warm trivial function via
// GET /api/fn/{slug} (REST h1, 64 connections and 1 connection) and via
// Connect binary (h2), against the same handler called straight on an
// isolated-vm context in this process (the baseline), and in the note against
// the bare Fastify POST of the run; cold start = the first call after a deploy.
import { create, toBinary } from "@bufbuild/protobuf";
import ivm from "isolated-vm";
import { FunctionService as AdminFunctionService } from "../../gen/pulsebase/admin/v1/functions_pb.js";
import { HttpRequestSchema } from "../../gen/pulsebase/common/v1/options_pb.js";
import { alternate, h1Load, h2, inProcessLoad, seqLoad, versusRest, type BenchResult, type Row } from "../lib.js";
import type { BenchContext } from "../run.js";

const HANDLER = "export default async function (req, ctx) { return { ok: true, n: req.query.n ?? null, consumer: ctx.consumer.id }; }";
// Timers (docs/functions.md, "Timers and waitUntil"): the same answer after
// awaiting setTimeout(0), and after a 10 ms timer.
const TIMER_HANDLER = (ms: number) =>
  `export default async function (req, ctx) { await new Promise((r) => setTimeout(r, ${ms})); return { ok: true, n: req.query.n ?? null, consumer: ctx.consumer.id }; }`;

/**
 * The target of a warm invocation is read against the bare Fastify POST of
 * the same run (docs/benchmarks.md): req/s and server CPU per request as
 * ratios (0.5 x: half the bare POST's rate, twice its CPU).
 */
function againstBare(r: BenchResult, bare: BenchResult): string {
  const rps = (r.rps / bare.rps).toFixed(2);
  const cpu = r.cpuUsPerReq && bare.cpuUsPerReq ? (bare.cpuUsPerReq / r.cpuUsPerReq).toFixed(2) : "?";
  return `${rps} x bare POST req/s, ${cpu} x by CPU`;
}

export async function functionsScenarios(ctx: BenchContext): Promise<Row[]> {
  const { token, appId } = await ctx.newConsumer("functions");
  const app = await ctx.admin.getApp({ key: { case: "id", value: appId } });
  await ctx.admin.setAppPlan({ appId, plan: { ...app.plan!, functionInvocationsPerMinute: 0 } });
  const fns = ctx.adminClient(AdminFunctionService);
  const fn = await fns.createFunction({ appId, name: "hello", invocationsPerMinute: 100_000_000 });
  await fns.deployVersion({ functionId: fn.id, code: HANDLER, activate: true });
  await fns.createHttpTrigger({ functionId: fn.id, slug: "hello" });
  for (const ms of [0, 10]) {
    const t = await fns.createFunction({ appId, name: `timer-${ms}`, invocationsPerMinute: 100_000_000 });
    await fns.deployVersion({ functionId: t.id, code: TIMER_HANDLER(ms), activate: true });
    await fns.createHttpTrigger({ functionId: t.id, slug: `timer-${ms}` });
  }
  const auth = { authorization: `Bearer ${token}` };
  const d = ctx.durationSec;

  // Cold start: the first call after each deploy.
  const cold: number[] = [];
  for (let i = 0; i < 5; i++) {
    await fns.deployVersion({ functionId: fn.id, code: HANDLER + `\n// v${i}`, activate: true });
    await new Promise((r) => setTimeout(r, 1100)); // past the trigger resolution cache
    const t0 = performance.now();
    const r = await fetch(`${ctx.https}/api/fn/hello?n=1`, { headers: auth });
    await r.text();
    cold.push(performance.now() - t0);
  }
  cold.sort((a, b) => a - b);

  const isolate = new ivm.Isolate({ memoryLimit: 64 });
  const context = await isolate.createContext();
  const mod = await isolate.compileModule(HANDLER);
  const rows: Row[] = [];
  try {
    await mod.instantiate(context, () => {
      throw new Error("no imports");
    });
    await mod.evaluate();
    const handler = await mod.namespace.get("default", { reference: true });
    const callBare = () =>
      handler.apply(undefined, [{ method: "GET", slug: "hello", query: { n: "1" }, headers: {}, body: null }, { consumer: { id: 1 } }], {
        arguments: { copy: true },
        result: { promise: true, copy: true },
        timeout: 1000,
      });
    rows.push({ scenario: "trivial function, 1 in flight", transport: "isolated-vm in process", result: await inProcessLoad(callBare, 1, d) });
    rows.push({ scenario: "trivial function", transport: "isolated-vm in process", result: await inProcessLoad(callBare, 16, d) });
    handler.release();
  } finally {
    mod.release();
    context.release();
    isolate.dispose();
  }
  const one = await seqLoad({ url: `${ctx.https}/api/fn/hello?n=1`, headers: auth, durationSec: d });
  rows.push({
    scenario: "trivial function, 1 in flight", transport: "REST h1", baseline: "trivial function, 1 in flight isolated-vm in process",
    result: one, note: againstBare(one, ctx.baseline("bare Fastify POST, 1 in flight REST h1")),
  });
  // Turn about with the bare POST (two turns each: every turn opens its 64
  // connections anew), so the target's ratio comes from the same minutes.
  const [warm, bare] = await alternate(
    (t) => h1Load({ url: `${ctx.https}/api/fn/hello?n=1`, headers: auth, durationSec: t }),
    (t) => h1Load({ url: ctx.bareUrl, method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ x: 1 }), durationSec: t }),
    d,
    2,
  );
  rows.push({
    scenario: "GET /api/fn/hello (warm)", transport: "REST h1", baseline: "trivial function isolated-vm in process", result: warm,
    note: `${againstBare(warm, bare)} (turn about); cold start p50 ${cold[2]!.toFixed(1)} ms, max ${cold[4]!.toFixed(1)} ms`,
  });
  rows.push({ scenario: "bare Fastify POST, turn about with the function", transport: "REST h1", result: bare });
  // REST and Connect turn about (alternate): their ratio is the point.
  const [restH2, connect] = await alternate(
    (t) => h2({ url: ctx.https, path: "/api/fn/hello?n=1", method: "GET", headers: auth, durationSec: t }),
    (t) => h2({
      url: ctx.https,
      path: "/pulsebase.platform.v1.FunctionService/Invoke",
      headers: { ...auth, "content-type": "application/proto", "connect-protocol-version": "1" },
      body: toBinary(HttpRequestSchema, create(HttpRequestSchema, { method: "GET", pathParams: { slug: "hello" }, query: { n: "1" } })),
      durationSec: t,
    }),
    d,
  );
  rows.push({ scenario: "GET /api/fn/hello (warm)", transport: "REST h2", baseline: "trivial function isolated-vm in process", result: restH2 });
  rows.push({ scenario: "FunctionService/Invoke (warm)", transport: "Connect binary h2", baseline: "trivial function isolated-vm in process", result: connect, note: versusRest(connect, restH2, "REST h2") });
  for (const ms of [0, 10]) {
    rows.push({
      scenario: `setTimeout(${ms}) function, 1 in flight`, transport: "REST h1", baseline: "trivial function, 1 in flight REST h1",
      result: await seqLoad({ url: `${ctx.https}/api/fn/timer-${ms}?n=1`, headers: auth, durationSec: d }),
    });
    rows.push({
      scenario: `setTimeout(${ms}) function (warm)`, transport: "REST h1", baseline: "GET /api/fn/hello (warm) REST h1",
      result: await h1Load({ url: `${ctx.https}/api/fn/timer-${ms}?n=1`, headers: auth, durationSec: d }),
    });
  }
  return rows;
}
