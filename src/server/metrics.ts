// Prometheus metrics. One Registry per build() (never prom-client's global
// one: tests build several servers in one process), merged at scrape time
// with the process-wide default metrics, and scraped at GET /metrics
// on the admin listener. Request counts and latencies are recorded on the
// hot path by HttpMetrics (a few additions into a cached series); everything
// else is a gauge read by a collect() callback when Prometheus scrapes, so
// nothing is polled between scrapes.
import { Counter, Gauge, Registry, collectDefaultMetrics, type MetricValueWithName } from "prom-client";
import type { FastifyInstance } from "fastify";
import { sendError } from "../transport/http/envelopes.js";
import { withTimeout } from "../kernel/deadlines.js";
import { appError } from "../kernel/errors.js";
import { bearerToken, sameToken } from "../kernel/principal.js";
import type { EngineMetricsSource, IsolateStats, ModuleGauges, QueueStatsSource, RealtimeStats } from "../kernel/module.js";

export type { QueueStatsSource };

/** Request latency buckets, in seconds: a PK read answers well under a millisecond. */
export const DURATION_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** Route label of a request no route matched (404s, malformed URLs): raw paths would be unbounded. */
export const UNMATCHED_ROUTE = "(unmatched)";

interface Series {
  labels: { listener: string; method: string; route: string; status: string };
  count: number;
  sum: number;
  /** Per-bucket (not cumulative) counts; the last slot is +Inf. */
  buckets: Float64Array;
}

/**
 * pulsebase_http_requests_total and pulsebase_http_request_duration_seconds
 * by listener, method, route template and status. prom-client's own Counter
 * and Histogram build a key string from the label object and validate it on
 * every call; here a request costs two Map lookups (route, then status and
 * method packed in a number) and a bucket scan (about 30 ns), and the text is
 * built only when scraped.
 */
export class HttpMetrics {
  private readonly all: Series[] = [];

  constructor(registry: Registry) {
    const counterName = "pulsebase_http_requests_total";
    const histName = "pulsebase_http_request_duration_seconds";
    const all = this.all;
    registry.registerMetric({
      name: counterName,
      get: async () => ({
        name: counterName,
        help: "HTTP requests answered, by listener, method, route template and status.",
        type: "counter",
        aggregator: "sum",
        values: all.map((s) => ({ labels: s.labels, value: s.count, metricName: counterName })),
      }),
    } as never);
    registry.registerMetric({
      name: histName,
      get: async () => ({
        name: histName,
        help: "HTTP request duration (routing to the last byte written), in seconds.",
        type: "histogram",
        aggregator: "sum",
        values: all.flatMap((s) => histogramValues(histName, s)),
      }),
    } as never);
  }

  /** The recorder of one listener (public, admin, http). */
  forListener(listener: string): ListenerHttpMetrics {
    return new ListenerHttpMetrics(listener, this.all);
  }
}

/**
 * Series by route template, then by status and method packed in one number
 * (no string is built per request).
 */
export class ListenerHttpMetrics {
  private readonly byRoute = new Map<string, Map<number, Series>>();
  private readonly methodIds = new Map<string, number>();

  constructor(private readonly listener: string, private readonly all: Series[]) {}

  /** Records one answered request; `ms` is its duration in milliseconds. */
  observe(method: string, route: string, status: number, ms: number): void {
    let byCode = this.byRoute.get(route);
    if (byCode === undefined) {
      byCode = new Map();
      this.byRoute.set(route, byCode);
    }
    let m = this.methodIds.get(method);
    if (m === undefined) {
      // Fastify answers only the methods it knows (a few dozen): bounded.
      m = this.methodIds.size;
      this.methodIds.set(method, m);
    }
    const code = status * 256 + m;
    let s = byCode.get(code);
    if (s === undefined) {
      s = { labels: { listener: this.listener, method, route, status: String(status) }, count: 0, sum: 0, buckets: new Float64Array(DURATION_BUCKETS.length + 1) };
      byCode.set(code, s);
      this.all.push(s);
    }
    const sec = ms / 1000;
    s.count++;
    s.sum += sec;
    let i = 0;
    while (i < DURATION_BUCKETS.length && sec > DURATION_BUCKETS[i]!) i++;
    s.buckets[i]!++;
  }
}

function histogramValues(name: string, s: Series): MetricValueWithName<string>[] {
  const out: MetricValueWithName<string>[] = [];
  let acc = 0;
  for (let i = 0; i < DURATION_BUCKETS.length; i++) {
    acc += s.buckets[i]!;
    out.push({ labels: { ...s.labels, le: DURATION_BUCKETS[i]! }, value: acc, metricName: `${name}_bucket` });
  }
  out.push({ labels: { ...s.labels, le: "+Inf" }, value: s.count, metricName: `${name}_bucket` });
  out.push({ labels: s.labels, value: s.sum, metricName: `${name}_sum` });
  out.push({ labels: s.labels, value: s.count, metricName: `${name}_count` });
  return out;
}

export interface Metrics {
  /** The server's own metrics (request counts, pools, queues, isolates). */
  readonly registry: Registry;
  readonly http: HttpMetrics;
  /** The Prometheus text of a scrape: the process defaults plus the server's registry. */
  scrape(): Promise<string>;
  readonly contentType: string;
}

let processRegistry: Registry | undefined;

/**
 * prom-client's default metrics (CPU, memory, event loop lag, GC), collected
 * once per process: each collectDefaultMetrics call enables an event-loop
 * delay monitor and a GC observer that nothing can stop, so a per-server
 * call would pile them up in a process that builds many servers.
 */
export function processMetricsRegistry(): Registry {
  if (processRegistry === undefined) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}

/** The registry of one server: request metrics, plus the process defaults at scrape time. */
export function createMetrics(): Metrics {
  const registry = new Registry();
  const shared = processMetricsRegistry();
  return {
    registry,
    http: new HttpMetrics(registry),
    // A merged registry holds references to the same metric objects: made per scrape, nothing is copied.
    scrape: () => Registry.merge([shared, registry]).metrics(),
    contentType: registry.contentType,
  };
}

/** Scrape-time reads must not hang a scrape on a dead backend. */
const COLLECT_TIMEOUT_MS = 2000;

/**
 * One read shared by the gauges of a scrape: the registry asks every metric
 * at once, so the first gauge's collect() starts the read and the others
 * await the same promise (each would otherwise read again, or show the
 * previous scrape's values).
 */
function perScrape<T>(read: () => Promise<T>): () => Promise<T> {
  let current: Promise<T> | undefined;
  return () => {
    if (current) return current;
    const p = read().finally(() => {
      current = undefined;
    });
    current = p;
    return p;
  };
}

/**
 * pulsebase_queue_{lag,in_flight,dead_letter}_messages of a durable queue
 * (the embedded table: one COUNT per scrape; JetStream: consumer and stream
 * info), labelled by queue (analytics, function-events) and backend. A read
 * that fails or hangs leaves the series out of that scrape (Prometheus then
 * sees them as absent, not as a stale 0), and pulsebase_queue_stats_up says
 * so. Each queue is read once per scrape, all of them at once.
 */
export function registerQueueMetrics(registry: Registry, queue: string, source: QueueStatsSource, onError?: (err: unknown) => void): void {
  const read = perScrape(async () => {
    try {
      return await withTimeout(source.stats(), COLLECT_TIMEOUT_MS, () => new Error(`timed out after ${COLLECT_TIMEOUT_MS} ms`));
    } catch (err) {
      onError?.(err);
      return undefined;
    }
  });
  let queues = queueSources.get(registry);
  if (!queues) {
    queueSources.set(registry, (queues = []));
    registerQueueGauges(registry, queues);
  }
  queues.push({ labels: { queue, backend: source.backend }, read });
}

type QueueStats = Awaited<ReturnType<QueueStatsSource["stats"]>>;
type QueueReader = { labels: { queue: string; backend: string }; read: () => Promise<QueueStats | undefined> };
/** The queues of a registry: one set of gauges per registry, one series per queue. */
const queueSources = new WeakMap<Registry, QueueReader[]>();

function registerQueueGauges(registry: Registry, queues: QueueReader[]): void {
  const labelNames = ["queue", "backend"] as const;
  const gauge = (name: string, help: string, value: (s: QueueStats) => number) =>
    new Gauge({
      name,
      help,
      labelNames,
      registers: [registry],
      async collect() {
        this.reset();
        const all = await Promise.all(queues.map((q) => q.read()));
        queues.forEach((q, i) => {
          const s = all[i];
          if (s) this.set(q.labels, value(s));
        });
      },
    });
  gauge("pulsebase_queue_lag_messages", "Messages accepted and not yet processed (waiting or in flight).", (s) => s.lag);
  gauge("pulsebase_queue_in_flight_messages", "Messages delivered to a worker and not yet acknowledged.", (s) => s.inFlight);
  gauge("pulsebase_queue_dead_letter_messages", "Messages moved to the dead-letter store.", (s) => s.deadLetters);
  new Gauge({
    name: "pulsebase_queue_stats_up",
    help: "1 when the queue's statistics could be read at this scrape, else 0.",
    labelNames,
    registers: [registry],
    async collect() {
      const all = await Promise.all(queues.map((q) => q.read()));
      queues.forEach((q, i) => this.set(q.labels, all[i] ? 1 : 0));
    },
  });
}

export interface PoolStats {
  total: number;
  idle: number;
  waiting: number;
}

/** pulsebase_pg_pool_* of a node-postgres pool (PGlite has none). */
export function registerPgPoolMetrics(registry: Registry, stats: () => PoolStats): void {
  new Gauge({
    name: "pulsebase_pg_pool_connections",
    help: "Connections of the PostgreSQL pool, by state (idle or busy).",
    labelNames: ["state"],
    registers: [registry],
    collect() {
      const s = stats();
      this.set({ state: "idle" }, s.idle);
      this.set({ state: "busy" }, Math.max(0, s.total - s.idle));
    },
  });
  new Gauge({
    name: "pulsebase_pg_pool_waiting_requests",
    help: "Queries waiting for a free PostgreSQL connection.",
    registers: [registry],
    collect() {
      this.set(stats().waiting);
    },
  });
}

/** pulsebase_isolates* of the functions sandbox's pool of warm isolates. */
export function registerIsolateMetrics(registry: Registry, stats: () => IsolateStats): void {
  // One read per scrape shared by the gauges (the heap sum walks every isolate).
  const read = perScrape(async () => stats());
  const gauge = (name: string, help: string, value: (s: IsolateStats) => number) =>
    new Gauge({
      name,
      help,
      registers: [registry],
      async collect() {
        this.set(value(await read()));
      },
    });
  new Gauge({
    name: "pulsebase_isolates",
    help: "Isolates alive in the functions sandbox, by state (idle, or busy: running or being created).",
    labelNames: ["state"],
    registers: [registry],
    async collect() {
      const s = await read();
      this.set({ state: "idle" }, s.idle);
      this.set({ state: "busy" }, Math.max(0, s.total - s.idle));
    },
  });
  gauge("pulsebase_isolate_waiting_calls", "Invocations waiting for a free isolate.", (s) => s.waiting);
  gauge("pulsebase_isolate_versions", "Function versions with at least one isolate.", (s) => s.keys);
  gauge("pulsebase_isolate_heap_bytes", "Heap used by the sandbox's isolates, as sampled when each was last idle (a scrape never calls into an isolate).", (s) => s.heapBytes);
  // Per application: only those holding isolates (at most the process's
  // isolates) or waiting for one at this scrape are listed, as for the engines.
  new Gauge({
    name: "pulsebase_isolate_app_isolates",
    help: "Isolates per application with any at this scrape, by state (busy: held by its runs, counted against its share; idle; waiting: its runs waiting for one).",
    labelNames: ["app", "state"],
    registers: [registry],
    async collect() {
      this.reset();
      for (const a of (await read()).apps ?? []) {
        const app = String(a.app);
        this.set({ app, state: "busy" }, a.busy);
        this.set({ app, state: "idle" }, Math.max(0, a.isolates - a.busy));
        this.set({ app, state: "waiting" }, a.waiting);
      }
    },
  });
  new Gauge({
    name: "pulsebase_isolate_app_heap_bytes",
    help: "Heap kept by each application's isolates (those with any at this scrape), as last sampled; bounded by its heap share.",
    labelNames: ["app"],
    registers: [registry],
    async collect() {
      this.reset();
      for (const a of (await read()).apps ?? []) if (a.isolates > 0) this.set({ app: String(a.app) }, a.heapBytes);
    },
  });
  new Counter({
    name: "pulsebase_isolate_heap_disposals_total",
    help: "Isolates disposed after a run rather than kept warm, for keeping more heap than the threshold.",
    registers: [registry],
    async collect() {
      this.reset();
      this.inc((await read()).disposedOverHeap ?? 0);
    },
  });
}

/**
 * pulsebase_engine_* of the linked databases' engine pool (processes, and
 * requests queued and in flight, in total and per application: only
 * applications with requests at the scrape are listed) and
 * pulsebase_remote_db_* of the requests to remote libSQL servers. Plain
 * counters read from the pool; nothing calls into an engine.
 */
export function registerEngineMetrics(registry: Registry, source: EngineMetricsSource): void {
  const read = perScrape(async () => ({ engines: source.engines(), remote: source.remote() }));
  new Gauge({
    name: "pulsebase_engine_processes",
    help: "Engine processes of the linked databases, by state (busy, idle, or starting after a kill or crash).",
    labelNames: ["state"],
    registers: [registry],
    async collect() {
      const e = (await read()).engines;
      this.set({ state: "busy" }, e.busy);
      this.set({ state: "starting" }, e.starting);
      this.set({ state: "idle" }, Math.max(0, e.processes - e.busy - e.starting));
    },
  });
  new Gauge({
    name: "pulsebase_engine_requests",
    help: "Requests for the engine processes, by state (queued, or in_flight: running, or holding their application's slot while their killed process restarts).",
    labelNames: ["state"],
    registers: [registry],
    async collect() {
      const e = (await read()).engines;
      this.set({ state: "queued" }, e.queued);
      this.set({ state: "in_flight" }, e.running);
    },
  });
  new Gauge({
    name: "pulsebase_engine_app_requests",
    help: "Requests for the engine processes per application with any at this scrape, by state (queued, in_flight).",
    labelNames: ["app", "state"],
    registers: [registry],
    async collect() {
      this.reset();
      for (const o of (await read()).engines.owners) {
        const app = String(o.owner);
        this.set({ app, state: "queued" }, o.queued);
        this.set({ app, state: "in_flight" }, o.running);
      }
    },
  });
  new Counter({
    name: "pulsebase_engine_refused_requests_total",
    help: "Engine requests that never ran: queue_full (the application's queue was full), queue_timeout (waited too long), cancelled (their function run ended).",
    labelNames: ["reason"],
    registers: [registry],
    async collect() {
      this.reset();
      for (const [reason, n] of Object.entries((await read()).engines.refused)) if (reason !== "shutdown") this.inc({ reason }, n);
    },
  });
  new Counter({
    name: "pulsebase_engine_restarts_total",
    help: "Engine processes replaced: timeout (a query ran past the time limit), cancelled (a run that ended left a query running), memory (a query passed the engine memory limit), crash.",
    labelNames: ["cause"],
    registers: [registry],
    async collect() {
      this.reset();
      for (const [cause, n] of Object.entries((await read()).engines.restarts)) this.inc({ cause }, n);
    },
  });
  new Gauge({
    name: "pulsebase_remote_db_requests",
    help: "Requests for remote libSQL servers, by state (queued, in_flight).",
    labelNames: ["state"],
    registers: [registry],
    async collect() {
      const r = (await read()).remote;
      this.set({ state: "queued" }, r.queued);
      this.set({ state: "in_flight" }, r.running);
    },
  });
  new Counter({
    name: "pulsebase_remote_db_refused_requests_total",
    help: "Requests for remote libSQL servers that never started, by reason (queue_full, queue_timeout, cancelled).",
    labelNames: ["reason"],
    registers: [registry],
    async collect() {
      this.reset();
      for (const [reason, n] of Object.entries((await read()).remote.refused)) if (reason !== "shutdown") this.inc({ reason }, n);
    },
  });
}

/**
 * GET /metrics in the Prometheus text format. The admin listener is bound to
 * 127.0.0.1 by default and a scraper rarely holds the operator token, so the
 * endpoint is open unless a metrics token is configured; then it takes that
 * bearer (or the operator token).
 */
export function registerMetricsRoute(app: FastifyInstance, metrics: Metrics, auth: { metricsToken?: string; operatorToken: string }): void {
  app.get("/metrics", async (req, reply) => {
    if (auth.metricsToken) {
      const token = bearerToken(req.headers.authorization);
      if (!token || !(sameToken(token, auth.metricsToken) || sameToken(token, auth.operatorToken))) {
        return sendError(reply, "platform", appError("unauthenticated", "A valid metrics token is required."));
      }
    }
    const text = await metrics.scrape();
    return reply.type(metrics.contentType).send(text);
  });
}

/** What the NATS gauges read (queue/nats-link.ts). */
export interface NatsStateSource {
  readonly connected: boolean;
  readonly reconnects: number;
}

/** pulsebase_nats_connected and pulsebase_nats_reconnects_total of the process's NATS connection. */
export function registerNatsMetrics(registry: Registry, link: NatsStateSource): void {
  new Gauge({
    name: "pulsebase_nats_connected",
    help: "1 while this process's NATS connection is up; 0 while it is being opened (NATS unreachable since start) or re-established.",
    registers: [registry],
    collect() {
      this.set(link.connected ? 1 : 0);
    },
  });
  new Counter({
    name: "pulsebase_nats_reconnects_total",
    help: "Times the NATS connection was re-established after being lost.",
    registers: [registry],
    collect() {
      this.reset();
      this.inc(link.reconnects);
    },
  });
}

/** pulsebase_change_bus_read_age_seconds: how far behind the PostgreSQL side of the change bus this process may be. */
export function registerChangeBusMetrics(registry: Registry, bus: { secondsSinceRead(): number | undefined }): void {
  new Gauge({
    name: "pulsebase_change_bus_read_age_seconds",
    help: "Seconds since this process last read the change table (cache invalidation's fallback when NATS messages are missed); absent with the embedded database.",
    registers: [registry],
    collect() {
      this.reset();
      const age = bus.secondsSinceRead();
      if (age !== undefined) this.set(age);
    },
  });
}

/** The gauges a capability module describes (src/kernel/module.ts). */
export function registerModuleGauges(registry: Registry, gauges: ModuleGauges, onError: (what: string) => (err: unknown) => void): void {
  for (const [name, q] of Object.entries(gauges.queues ?? {})) registerQueueMetrics(registry, name, q, onError(`${name} queue`));
  if (gauges.isolates) registerIsolateMetrics(registry, gauges.isolates);
  if (gauges.engines) registerEngineMetrics(registry, gauges.engines);
  if (gauges.realtime) registerRealtimeMetrics(registry, gauges.realtime);
}

/** The realtime gateway (docs/realtime.md, "Metrics"). */
export function registerRealtimeMetrics(registry: Registry, stats: () => RealtimeStats): void {
  const read = perScrape(async () => stats());
  new Gauge({
    name: "pulsebase_realtime_connections",
    help: "Open realtime connections of this process, by transport (websocket, sse, stream).",
    labelNames: ["transport"],
    registers: [registry],
    async collect() {
      for (const [transport, n] of Object.entries((await read()).connections)) this.set({ transport }, n);
    },
  });
  const gauge = (name: string, help: string, value: (s: RealtimeStats) => number) =>
    new Gauge({
      name,
      help,
      registers: [registry],
      async collect() {
        this.set(value(await read()));
      },
    });
  gauge("pulsebase_realtime_subscriptions", "Subscriptions of this process's realtime connections.", (s) => s.subscriptions);
  gauge("pulsebase_realtime_channels", "Channels with a subscriber on this process.", (s) => s.channels);
  gauge("pulsebase_realtime_presence_members", "Presence members (of every server) of the channels with a subscriber on this process.", (s) => s.presenceMembers);
  new Counter({
    name: "pulsebase_realtime_delivered_total",
    help: "Realtime messages (broadcasts, presence changes, table changes) written to this process's connections.",
    registers: [registry],
    async collect() {
      this.reset();
      this.inc((await read()).delivered);
    },
  });
  new Counter({
    name: "pulsebase_realtime_dropped_total",
    help: "Realtime messages not delivered: slow_consumer (the connection's send buffer was full; it was closed), rate_limited, too_large (broadcasts refused).",
    labelNames: ["reason"],
    registers: [registry],
    async collect() {
      this.reset();
      for (const [reason, n] of Object.entries((await read()).dropped)) this.inc({ reason }, n);
    },
  });
  new Counter({
    name: "pulsebase_realtime_changes_total",
    help: "Table changes delivered to this process's realtime subscriptions.",
    registers: [registry],
    async collect() {
      this.reset();
      this.inc((await read()).changes ?? 0);
    },
  });
  gauge(
    "pulsebase_realtime_change_lag_seconds",
    "Realtime table changes: from the change's capture (its commit) to its delivery, of the last change delivered by this process.",
    (s) => s.changeLagSeconds ?? 0,
  );
  new Counter({
    name: "pulsebase_realtime_closed_total",
    help: "Realtime connections the server ended: revoked, slow_consumer, heartbeat_timeout, limit, shutdown.",
    labelNames: ["reason"],
    registers: [registry],
    async collect() {
      this.reset();
      for (const [reason, n] of Object.entries((await read()).closed)) this.inc({ reason }, n);
    },
  });
}
