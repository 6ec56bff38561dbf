// Issue 28 point 1: application B's trivial function (GET /api/fn/{slug},
// REST h1, one call in flight: its isolate is idle between calls, as a
// function called now and then) alone, and while application A keeps 68
// calls in flight to 34 functions that only await a 2 s timer (no CPU), so
// A holds its whole isolate share throughout and queues the rest. (34: the
// server is pinned to one core, so a version has 2 isolates; 34 x 2 fill
// the process's 64, as the issue's 17 x 4 did on 2 cores.) Alone and
// attacked alternate twice (A's last calls drained in between) and each row
// pools both rounds, as the engines' fairness rows do (database-http.ts).
// The note gives the busy isolates and waiting calls seen on /metrics
// halfway through each attacked part.
import { FunctionService as AdminFunctionService } from "../../gen/pulsebase/admin/v1/functions_pb.js";
import { closedLoop, type BenchResult, type LoopResult, type Row } from "../lib.js";
import type { BenchContext } from "../run.js";

const SLEEPER = "export default async function () { await new Promise((r) => setTimeout(r, 2000)); return { slept: true }; }";
const TRIVIAL = "export default async function (req, ctx) { return { ok: true, consumer: ctx.consumer.id }; }";
const ATTACK_FUNCTIONS = 34;
const ATTACK_IN_FLIGHT = 68;

/** A new application with no invocation limit, its functions deployed with HTTP triggers. */
async function appWith(ctx: BenchContext, name: string, functions: Array<{ slug: string; code: string }>): Promise<Record<string, string>> {
  const { token, appId } = await ctx.newConsumer(name);
  const app = await ctx.admin.getApp({ key: { case: "id", value: appId } });
  await ctx.admin.setAppPlan({ appId, plan: { ...app.plan!, functionInvocationsPerMinute: 0 } });
  const fns = ctx.adminClient(AdminFunctionService);
  for (const f of functions) {
    const fn = await fns.createFunction({ appId, name: f.slug, invocationsPerMinute: 100_000_000 });
    await fns.deployVersion({ functionId: fn.id, code: f.code, activate: true });
    await fns.createHttpTrigger({ functionId: fn.id, slug: f.slug });
  }
  return { authorization: `Bearer ${token}` };
}

export async function hostileFunctionsScenarios(ctx: BenchContext): Promise<Row[]> {
  const sleepers = Array.from({ length: ATTACK_FUNCTIONS }, (_, i) => ({ slug: `sleep-${i}`, code: SLEEPER }));
  const a = await appWith(ctx, "fn-attacker", sleepers);
  const b = await appWith(ctx, "fn-victim", [{ slug: "trivial", code: TRIVIAL }]);
  const half = (ctx.durationSec * 1000) / 2;
  const { Pool } = await import("undici");
  const origin = new URL(ctx.https).origin;
  // warm B's isolate: the rows measure warm calls
  await (await fetch(`${ctx.https}/api/fn/trivial`, { headers: b })).arrayBuffer();

  const victim = (inFlight: number, ms: number) => closedLoop(origin, { path: "/api/fn/trivial", method: "GET", headers: b }, inFlight, ms);

  const answered: Record<number, number> = {};
  const seen: string[] = [];
  const gauge = (text: string, series: string) => text.split("\n").find((l) => l.startsWith(series + " "))?.split(" ")[1] ?? "?";
  async function attacked<T>(work: () => Promise<T>): Promise<T> {
    let on = true;
    const pool = new Pool(origin, { connections: ATTACK_IN_FLIGHT, connect: { rejectUnauthorized: false } });
    const flood = Array.from({ length: ATTACK_IN_FLIGHT }, async (_, i) => {
      while (on) {
        const r = await pool.request({ path: `/api/fn/sleep-${i % ATTACK_FUNCTIONS}`, method: "GET", headers: a }).catch(() => undefined);
        if (r) {
          answered[r.statusCode] = (answered[r.statusCode] ?? 0) + 1;
          await r.body.arrayBuffer();
        }
      }
    });
    await new Promise((r) => setTimeout(r, 500)); // A holds its share now
    const peek = new Promise((r) => setTimeout(r, half / 2))
      .then(() => fetch(`${ctx.adminUrl}/metrics`, { headers: { authorization: `Bearer ${ctx.operatorToken}` } }))
      .then((r) => r.text())
      .then((t) => seen.push(`${gauge(t, 'pulsebase_isolates{state="busy"}')} busy/${gauge(t, "pulsebase_isolate_waiting_calls")} waiting`))
      .catch(() => undefined);
    try {
      return await work();
    } finally {
      await peek;
      on = false;
      await Promise.all(flood); // A's last calls end before B is measured alone again
      await pool.close();
    }
  }

  const result = (parts: LoopResult[]): BenchResult => {
    const lat = Float64Array.from(parts.flatMap((p) => p.lat)).sort();
    const q = (p: number) => (lat.length ? lat[Math.min(lat.length - 1, Math.floor(p * lat.length))]! : 0);
    const ms = parts.reduce((x, p) => x + p.ms, 0);
    const statuses: Record<number, number> = {};
    for (const p of parts) for (const [st, n] of Object.entries(p.statuses)) statuses[Number(st)] = (statuses[Number(st)] ?? 0) + n;
    return { requests: lat.length, errors: parts.reduce((x, p) => x + p.errors, 0), durationMs: ms, rps: (lat.length / ms) * 1000, p50Ms: q(0.5), p99Ms: q(0.99), statuses };
  };
  const alone: LoopResult[] = [];
  const during: LoopResult[] = [];
  for (let round = 0; round < 2; round++) {
    alone.push(await victim(1, half));
    during.push(await attacked(() => victim(1, half)));
  }
  const base = "trivial function of app B, 1 in flight";
  const x = result(alone);
  const y = result(during);
  return [
    { scenario: base, transport: "REST h1", result: x },
    {
      scenario: `${base}, A holding its isolates`,
      transport: "REST h1",
      baseline: `${base} REST h1`,
      result: y,
      note: `B p99 ${x.p99Ms.toFixed(2)} -> ${y.p99Ms.toFixed(2)} ms, B errors ${y.errors} (${Object.entries(y.statuses).map(([st, n]) => `${n}x ${st}`).join(", ")}); isolates ${seen.join(", ")}; A answered ${Object.entries(answered).map(([st, n]) => `${n}x ${st}`).join(", ")}`,
    },
  ];
}
