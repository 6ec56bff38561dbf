// What observing a request costs: the same PK read through a server with the
// access log on (the default, as every other row of the run) and through a
// second server with PULSEBASE_ACCESS_LOG=off, alternated twice on the same
// core so drift hits both; and a Prometheus scrape of /metrics once the run
// has filled the request series.
import { h1Load, seqLoad, type Row } from "../lib.js";
import type { BenchContext } from "../run.js";
import { seedPkTable } from "./database-http.js";

export async function observabilityScenarios(ctx: BenchContext): Promise<Row[]> {
  const off = await ctx.variant({ PULSEBASE_ACCESS_LOG: "false" });
  const rows: Row[] = [];
  try {
    const on = await seedPkTable(ctx, "observability-on");
    const quiet = await seedPkTable(off.ctx, "observability-off");
    const d = ctx.durationSec;
    const read = (c: BenchContext, t: typeof on) =>
      h1Load({ url: `${c.https}/api/db/query`, method: "POST", headers: t.auth, body: JSON.stringify(t.select), durationSec: d });
    const cpu: Record<string, number[]> = { on: [], off: [] };
    for (let round = 1; round <= 2; round++) {
      const a = await read(ctx, on);
      const b = await read(off.ctx, quiet);
      cpu.on!.push(a.cpuUsPerReq ?? NaN);
      cpu.off!.push(b.cpuUsPerReq ?? NaN);
      rows.push({ scenario: `SELECT by PK, access log on (round ${round})`, transport: "REST h1", baseline: "bare Fastify POST REST h1", result: a });
      rows.push({ scenario: `SELECT by PK, access log off (round ${round})`, transport: "REST h1", baseline: "bare Fastify POST REST h1", result: b });
    }
    const mean = (xs: number[]) => xs.reduce((x, y) => x + y, 0) / xs.length;
    const last = rows[rows.length - 1]!;
    last.note = `access log: ${(mean(cpu.on!) - mean(cpu.off!)).toFixed(1)} us CPU per request (mean of 2 rounds)`;
    // A scrape with the whole run's series (every route and status so far).
    const text = await (await fetch(`${ctx.adminUrl}/metrics`)).text();
    rows.push({
      scenario: "GET /metrics scrape, 1 in flight", transport: "HTTP/1.1 admin",
      result: await seqLoad({ url: `${ctx.adminUrl}/metrics`, durationSec: Math.min(d, 3) }),
      note: `${text.split("\n").filter((l) => l && !l.startsWith("#")).length} samples, ${(text.length / 1024).toFixed(0)} KiB`,
    });
  } finally {
    await off.stop();
  }
  return rows;
}
