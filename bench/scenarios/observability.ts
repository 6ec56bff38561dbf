// What observing a request costs: the same PK read through two fresh
// servers, one with the access log on (the default) and one with
// PULSEBASE_ACCESS_LOG=off, alternated four times on the same core so drift hits
// both (the run's main server is not used: it has served every other suite
// and would differ in more than the setting); and a Prometheus scrape of the
// main server's /metrics once the run has filled its request series.
import { h1Load, seqLoad, type Row } from "../lib.js";
import type { BenchContext } from "../run.js";
import { seedPkTable } from "./database-http.js";

const ROUNDS = 4;

export async function observabilityScenarios(ctx: BenchContext): Promise<Row[]> {
  const logged = await ctx.variant({ PULSEBASE_ACCESS_LOG: "true" });
  const off = await ctx.variant({ PULSEBASE_ACCESS_LOG: "false" });
  const rows: Row[] = [];
  try {
    const on = await seedPkTable(logged.ctx, "observability-on");
    const quiet = await seedPkTable(off.ctx, "observability-off");
    const d = ctx.durationSec;
    const read = (c: BenchContext, t: typeof on) =>
      h1Load({ url: `${c.https}/api/db/query`, method: "POST", headers: t.auth, body: JSON.stringify(t.select), durationSec: d });
    const cpu: Record<string, number[]> = { on: [], off: [] };
    // Both warmed first (JIT, caches), then ABBA order so a trend over the
    // rounds (warm-up, a neighbour's load) does not favour either server.
    await read(logged.ctx, on);
    await read(off.ctx, quiet);
    for (let round = 1; round <= ROUNDS; round++) {
      const order = round % 2 === 1 ? (["on", "off"] as const) : (["off", "on"] as const);
      for (const which of order) {
        const r = which === "on" ? await read(logged.ctx, on) : await read(off.ctx, quiet);
        cpu[which]!.push(r.cpuUsPerReq ?? NaN);
        rows.push({ scenario: `SELECT by PK, access log ${which} (round ${round})`, transport: "REST h1", baseline: "bare Fastify POST REST h1", result: r });
      }
    }
    // The median of the rounds' differences: one round hit by a neighbour's
    // burst on this shared machine does not decide the figure.
    const diffs = cpu.on!.map((x, i) => x - cpu.off![i]!).sort((a, b) => a - b);
    const median = (diffs[(diffs.length - 1) >> 1]! + diffs[diffs.length >> 1]!) / 2;
    const last = rows[rows.length - 1]!;
    last.note = `access log: ${median.toFixed(1)} us CPU per request (median of ${ROUNDS} rounds' differences: ${diffs.map((d) => d.toFixed(0)).join(", ")})`;
    // A scrape with the whole run's series (every route and status so far).
    const text = await (await fetch(`${ctx.adminUrl}/metrics`)).text();
    rows.push({
      scenario: "GET /metrics scrape, 1 in flight", transport: "HTTP/1.1 admin",
      result: await seqLoad({ url: `${ctx.adminUrl}/metrics`, durationSec: Math.min(d, 3) }),
      note: `${text.split("\n").filter((l) => l && !l.startsWith("#")).length} samples, ${(text.length / 1024).toFixed(0)} KiB`,
    });
  } finally {
    await logged.stop();
    await off.stop();
  }
  return rows;
}
