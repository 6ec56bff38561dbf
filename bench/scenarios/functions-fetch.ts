// A function's fetch (docs/functions.md, "Calling other services: fetch"):
// one request at a time, a function doing one `fetch` of a small JSON
// document from a local HTTP server (started here) over GET /api/fn/{slug}
// (REST h1), against the same trivial function without the fetch, and
// Node's own fetch of the same document from this process, all in the same
// run, request by request in turn. What fetch adds to an invocation is the
// fetching function's p50 less the trivial function's; the target is at
// most 0.5 ms more than Node's own fetch (the note says it).
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { FunctionService as AdminFunctionService } from "../../gen/pulsebase/admin/v1/functions_pb.js";
import { Pool } from "undici";
import type { LoadResult } from "../../tools/load/h2-load.js";
import type { Row } from "../lib.js";
import type { BenchContext } from "../run.js";

const DOC = JSON.stringify({ id: 1, name: "item", tags: ["a", "b"], price: 12.5 });
const TRIVIAL = "export default async function (req, ctx) { return { ok: true }; }";
const FETCHER = "export default async function (req, ctx) { const r = await fetch(ctx.env.UPSTREAM); return { ok: r.ok, item: await r.json() }; }";

export async function functionsFetchScenarios(ctx: BenchContext): Promise<Row[]> {
  const upstream = createServer((req, res) => {
    res.setHeader("content-type", "application/json");
    res.end(DOC);
  });
  upstream.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => upstream.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/item`;
  try {
    const { token, appId } = await ctx.newConsumer("functions-fetch");
    const app = await ctx.admin.getApp({ key: { case: "id", value: appId } });
    await ctx.admin.setAppPlan({ appId, plan: { ...app.plan!, functionInvocationsPerMinute: 0 } });
    const fns = ctx.adminClient(AdminFunctionService);
    // the local server is on loopback: the application opts in to private addresses (and bench/run.ts sets
    // PULSEBASE_FUNCTION_EGRESS_ALLOW_LOOPBACK, the operator's test switch)
    await fns.setEgressPolicy({ appId, allowPrivate: true });
    for (const [name, code] of [["trivial", TRIVIAL], ["fetcher", FETCHER]] as const) {
      const fn = await fns.createFunction({ appId, name, invocationsPerMinute: 100_000_000 });
      await fns.setSecret({ functionId: fn.id, name: "UPSTREAM", value: url });
      await fns.deployVersion({ functionId: fn.id, code, activate: true });
      await fns.createHttpTrigger({ functionId: fn.id, slug: name });
    }
    const auth = { authorization: `Bearer ${token}` };
    // The three are measured in turn, request by request, so that the
    // machine's drift (a shared machine) weighs on each alike.
    const [node, trivial, fetcher] = await interleaved(ctx.durationSec, [
      async () => void (await (await fetch(url)).json()),
      request(ctx.https, "/api/fn/trivial", auth),
      request(ctx.https, "/api/fn/fetcher", auth),
    ]);
    const rows: Row[] = [];
    rows.push({ scenario: "Node fetch of a local JSON document, 1 in flight", transport: "in process", result: node! });
    rows.push({ scenario: "trivial function, 1 in flight", transport: "REST h1", result: trivial! });
    const addedMs = fetcher!.p50Ms - trivial!.p50Ms;
    rows.push({
      scenario: "function doing one fetch, 1 in flight", transport: "REST h1", baseline: "trivial function, 1 in flight REST h1", result: fetcher!,
      note: `fetch adds ${addedMs.toFixed(2)} ms p50 to the invocation; Node's own fetch p50 ${node!.p50Ms.toFixed(2)} ms: +${(addedMs - node!.p50Ms).toFixed(2)} ms (target <= 0.5)`,
    });
    return rows;
  } finally {
    for (const p of pools) await p.close();
    pools.length = 0;
    upstream.closeAllConnections();
    await new Promise((r) => upstream.close(r));
  }
}

const pools: Pool[] = [];

/** One GET over its own HTTP/1.1 connection, the body read. */
function request(origin: string, path: string, headers: Record<string, string>): () => Promise<void> {
  const pool = new Pool(origin, { connections: 1, connect: { rejectUnauthorized: false } });
  pools.push(pool);
  return async () => {
    const r = await pool.request({ path, method: "GET", headers });
    await r.body.arrayBuffer();
    if (r.statusCode >= 300) throw new Error(`status ${r.statusCode}`);
  };
}

/** Calls each function in turn, one at a time, for the duration: the latency of each. */
async function interleaved(durationSec: number, fns: Array<() => Promise<void>>): Promise<LoadResult[]> {
  const lat = fns.map(() => [] as number[]);
  const errors = fns.map(() => 0);
  const start = performance.now();
  const end = start + durationSec * 1000;
  while (performance.now() < end) {
    for (let i = 0; i < fns.length; i++) {
      const t0 = performance.now();
      try {
        await fns[i]!();
        lat[i]!.push(performance.now() - t0);
      } catch {
        errors[i]!++;
      }
    }
  }
  const durationMs = performance.now() - start;
  return lat.map((l, i) => {
    const sorted = Float64Array.from(l).sort();
    const q = (p: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]! : 0);
    return { requests: l.length, errors: errors[i]!, durationMs, rps: (l.length / durationMs) * 1000, p50Ms: q(0.5), p99Ms: q(0.99), statuses: {} };
  });
}
