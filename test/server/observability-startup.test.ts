// What building servers sets up for observability: prom-client's process
// metrics (event-loop delay monitor, GC observer) once per process however
// many servers are built and closed, still scraped by each; and the start-up
// self-check of the access log's Fastify internals.
import { createRequire } from "node:module";
import { PerformanceObserver } from "node:perf_hooks";
import { Writable } from "node:stream";
import Fastify, { type FastifyInstance } from "fastify";
import pino from "pino";
import { afterAll, expect, it, vi } from "vitest";
import { ObservedLogController } from "../../src/server/access-log.js";
import { createMetrics } from "../../src/server/metrics.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { until } from "../helpers/until.js";

// The module object prom-client calls monitorEventLoopDelay on.
const perfHooks = createRequire(import.meta.url)("perf_hooks") as typeof import("node:perf_hooks");
const monitors = vi.spyOn(perfHooks, "monitorEventLoopDelay");
const observe = vi.spyOn(PerformanceObserver.prototype, "observe");
const gcObservers = () => observe.mock.calls.filter(([o]) => JSON.stringify(o).includes('"gc"')).length;

const open: TestServer[] = [];
afterAll(async () => {
  await Promise.all(open.map((s) => s.close()));
  vi.restoreAllMocks();
});

it("building and closing several servers starts one event-loop monitor and one GC observer, and each still scrapes process metrics", async () => {
  for (let i = 0; i < 3; i++) {
    const s = await startTestServer();
    await s.close();
  }
  const last = await startTestServer();
  open.push(last);
  expect(monitors.mock.calls.length).toBe(1);
  expect(gcObservers()).toBe(1);
  const text = await (await fetch(`${last.adminUrl}/metrics`)).text();
  expect(text).toMatch(/^process_cpu_user_seconds_total \d/m);
  expect(text).toContain("nodejs_eventloop_lag_seconds");
  expect(text).toContain("# TYPE nodejs_gc_duration_seconds histogram");
  // one set of them, next to the server's own series
  expect(text.match(/^# TYPE process_cpu_user_seconds_total /gm)).toHaveLength(1);
  expect(text).toContain("# TYPE pulsebase_http_requests_total counter");
});

it("the access-log self-check passes on a known route without recording it, and fails loudly when the route is not recognised", async () => {
  const lines: string[] = [];
  const logger = pino({ level: "info" }, new Writable({ write: (c: Buffer, _e, d) => (lines.push(c.toString()), d()) }));
  const metrics = createMetrics();
  const controller = new ObservedLogController({ listener: "public", metrics: metrics.http, accessLog: logger });
  const app = Fastify({ loggerInstance: logger, logController: controller }) as unknown as FastifyInstance;
  app.get("/healthz", async () => ({ status: "ok" }));
  app.get("/later", async () => ({ status: "ok" }));
  try {
    await controller.selfCheck(app, "/healthz");
    expect(await metrics.scrape()).not.toContain('route="/healthz"');
    // A later request's line is in: the self-check's would have been
    // written before it (lines are written in the order recorded).
    await app.inject({ url: "/later" });
    await until(async () => (lines.join("").includes('"route":"/later"') ? true : undefined));
    expect(lines.join("").split("\n").filter((l) => l.includes('"msg":"request"'))).toHaveLength(1);
    // A route the recorder does not see as its template (what a Fastify whose internals moved would give).
    await expect(controller.selfCheck(app, "/no-such-route")).rejects.toThrow(/access log self-check failed: GET \/no-such-route was recorded as "\(unmatched\)"/);
    // Afterwards requests are recorded again.
    await app.inject({ url: "/healthz" });
    expect(await metrics.scrape()).toMatch(/pulsebase_http_requests_total\{listener="public",method="GET",route="\/healthz",status="200"\} 1/);
  } finally {
    await app.close();
  }
});
