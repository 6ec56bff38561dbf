// A function's fetch (docs/functions.md, "Calling other services: fetch"):
// one request at a time, a function doing one `fetch` of a small JSON
// document from a local HTTP server (started here) over GET /api/fn/{slug}
// (REST h1), against the same trivial function without the fetch, and
// Node's own fetch of the same document from this process, all in the same
// run. What fetch adds to an invocation is the first row's p50 less the
// trivial function's; the target is at most 0.5 ms more than Node's own
// fetch (the note says it).
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { FunctionService as AdminFunctionService } from "../../gen/pulsebase/admin/v1/functions_pb.js";
import { inProcessLoad, seqLoad, type Row } from "../lib.js";
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
    // the local server is on loopback: the application opts in to private addresses
    await fns.setEgressPolicy({ appId, allowPrivate: true });
    for (const [name, code] of [["trivial", TRIVIAL], ["fetcher", FETCHER]] as const) {
      const fn = await fns.createFunction({ appId, name, invocationsPerMinute: 100_000_000 });
      await fns.setSecret({ functionId: fn.id, name: "UPSTREAM", value: url });
      await fns.deployVersion({ functionId: fn.id, code, activate: true });
      await fns.createHttpTrigger({ functionId: fn.id, slug: name });
    }
    const auth = { authorization: `Bearer ${token}` };
    const d = ctx.durationSec;
    const rows: Row[] = [];
    const node = await inProcessLoad(async () => (await fetch(url)).json(), 1, d);
    rows.push({ scenario: "Node fetch of a local JSON document, 1 in flight", transport: "in process", result: node });
    const trivial = await seqLoad({ url: `${ctx.https}/api/fn/trivial`, headers: auth, durationSec: d });
    rows.push({ scenario: "trivial function, 1 in flight", transport: "REST h1", result: trivial });
    const fetcher = await seqLoad({ url: `${ctx.https}/api/fn/fetcher`, headers: auth, durationSec: d });
    const addedMs = fetcher.p50Ms - trivial.p50Ms;
    rows.push({
      scenario: "function doing one fetch, 1 in flight", transport: "REST h1", baseline: "trivial function, 1 in flight REST h1", result: fetcher,
      note: `fetch adds ${addedMs.toFixed(2)} ms p50 to the invocation; Node's own fetch p50 ${node.p50Ms.toFixed(2)} ms: +${(addedMs - node.p50Ms).toFixed(2)} ms (target <= 0.5)`,
    });
    return rows;
  } finally {
    upstream.closeAllConnections();
    await new Promise((r) => upstream.close(r));
  }
}
