// Shared pieces of the bench runner: child servers pinned to one core (the
// load generator runs on the other), an HTTP/1.1 load (autocannon) and an
// HTTP/2 load (tools/load/h2-load.ts), and the result table.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import autocannon from "autocannon";
import { h2Load, type LoadResult } from "../tools/load/h2-load.js";

/** A load result with the server's CPU time per answered request, when known. */
export type BenchResult = LoadResult & { cpuUsPerReq?: number };

export interface Row {
  scenario: string;
  transport: string;
  result: BenchResult;
  /** Name of the baseline row this one is compared with. */
  baseline?: string;
  note?: string;
}

/** The V8 flags `npm start` passes (package.json): a 16 MB young generation. */
export const SERVER_NODE_FLAGS = ["--max-semi-space-size=16"];
const hasTaskset = spawnSync("taskset", ["--version"]).status === 0;

/**
 * Starts `node --import tsx <file>` on core 0; resolves with its first stdout
 * JSON line. With BENCH_CPU_PROF=<dir> the servers write V8 CPU profiles
 * there when they stop (open them in Chrome DevTools or speedscope).
 */
export async function startServer<T>(file: string, env: Record<string, string> = {}): Promise<{ info: T; child: ChildProcess }> {
  const prof = process.env.BENCH_CPU_PROF ? ["--cpu-prof", `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : [];
  // Both servers run with the flags of `npm start` (see README, "Node flags").
  const args = [...prof, ...SERVER_NODE_FLAGS, "--import", "tsx", file];
  const child = hasTaskset
    ? spawn("taskset", ["-c", "0", process.execPath, ...args], { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "inherit"] })
    : spawn(process.execPath, args, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "inherit"] });
  const rl = createInterface({ input: child.stdout! });
  const info = await new Promise<T>((resolve, reject) => {
    rl.once("line", (l) => resolve(JSON.parse(l) as T));
    child.once("exit", (code) => reject(new Error(`${file} exited with ${code}`)));
  });
  const port = (info as { https?: unknown }).https;
  if (typeof port === "number" && child.pid) serverPids.set(String(port), child.pid);
  return { info, child };
}

// Server CPU per request: this machine is shared, so requests/s move with
// other load while the CPU a request costs the server moves much less.
const serverPids = new Map<string, number>();
const TICK_MS = 1000 / (Number(spawnSync("getconf", ["CLK_TCK"]).stdout?.toString().trim()) || 100);

/** utime + stime of a process and all its descendants (engine processes, workers), in ms. */
export function treeCpuMs(root: number): number {
  const stats: { pid: number; ppid: number; ms: number }[] = [];
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const st = readFileSync(`/proc/${d}/stat`, "utf8");
      const f = st.slice(st.lastIndexOf(")") + 2).split(" ");
      stats.push({ pid: Number(d), ppid: Number(f[1]), ms: (Number(f[11]) + Number(f[12])) * TICK_MS });
    } catch {
      // gone meanwhile
    }
  }
  const tree = new Set([root]);
  let grew = true;
  while (grew) {
    grew = false;
    for (const p of stats) {
      if (!tree.has(p.pid) && tree.has(p.ppid)) {
        tree.add(p.pid);
        grew = true;
      }
    }
  }
  return stats.filter((p) => tree.has(p.pid)).reduce((a, p) => a + p.ms, 0);
}

/** Runs a load and adds the server's CPU per request (when the URL's server was started here, on Linux). */
async function withServerCpu(url: string, run: () => Promise<LoadResult>): Promise<BenchResult> {
  const pid = serverPids.get(new URL(url).port);
  if (!pid || !existsSync("/proc/self/stat")) return run();
  const before = treeCpuMs(pid);
  const r = await run();
  const ms = treeCpuMs(pid) - before;
  const answered = Object.values(r.statuses).reduce((a, n) => a + n, 0) || r.requests;
  return { ...r, cpuUsPerReq: answered ? (ms * 1000) / answered : undefined };
}

export async function stopServer(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  child.kill("SIGTERM");
  await new Promise((r) => child.once("exit", r));
}

/** Keeps the load generator off the server's core. */
export function pinSelf(): void {
  if (hasTaskset) spawnSync("taskset", ["-p", "-c", "1", String(process.pid)], { stdio: "ignore" });
}

export interface H1Options {
  url: string;
  method?: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  headers?: Record<string, string>;
  body?: string | Buffer;
  durationSec: number;
  connections?: number;
  ok?: (status: number) => boolean;
}

export function h1Load(o: H1Options): Promise<BenchResult> {
  return withServerCpu(o.url, () => h1LoadRaw(o));
}

async function h1LoadRaw(o: H1Options): Promise<LoadResult> {
  const ok = o.ok ?? ((s: number) => s >= 200 && s < 300);
  const statuses: Record<string, number> = {};
  const r = await autocannon({
    url: o.url,
    method: o.method ?? "GET",
    headers: o.headers,
    body: o.body,
    duration: o.durationSec,
    connections: o.connections ?? Number(process.env.BENCH_CONNECTIONS || 64),
    pipelining: 1,
    setupClient: (client: { on: (e: string, f: (status: number) => void) => void }) => {
      client.on("response", (status: number) => {
        statuses[status] = (statuses[status] ?? 0) + 1;
      });
    },
  } as autocannon.Options);
  const good = Object.entries(statuses).filter(([s]) => ok(Number(s))).reduce((a, [, n]) => a + n, 0);
  const total = Object.values(statuses).reduce((a, n) => a + n, 0);
  const durationMs = o.durationSec * 1000;
  return {
    requests: good,
    errors: total - good + r.errors + r.timeouts,
    durationMs,
    rps: (good / durationMs) * 1000,
    p50Ms: r.latency.p50,
    p99Ms: r.latency.p99,
    statuses,
  };
}

export async function h2(o: { url: string; path: string; method?: string; headers?: Record<string, string>; body?: Uint8Array; durationSec: number; ok?: (s: number) => boolean }): Promise<BenchResult> {
  return withServerCpu(o.url, () => h2Load({ url: o.url, path: o.path, method: o.method, headers: o.headers, body: o.body, connections: 4, streams: 16, durationMs: o.durationSec * 1000, insecure: true, ok: o.ok }));
}

export function printTable(rows: Row[]): void {
  const byName = new Map(rows.map((r) => [r.scenario + " " + r.transport, r]));
  const lines = rows.map((r) => {
    const base = r.baseline ? byName.get(r.baseline) : undefined;
    const ratio = base ? (r.result.rps / base.result.rps).toFixed(2) : "";
    const overheadUs = base ? ((r.result.p50Ms - base.result.p50Ms) * 1000).toFixed(0) : "";
    const cpu = r.result.cpuUsPerReq;
    return [
      r.scenario,
      r.transport,
      Math.round(r.result.rps).toString(),
      r.result.p50Ms.toFixed(2),
      r.result.p99Ms.toFixed(2),
      ratio,
      overheadUs,
      cpu === undefined ? "" : cpu.toFixed(0),
      String(r.result.errors),
      r.note ?? "",
    ];
  });
  const head = ["scenario", "transport", "req/s", "p50 ms", "p99 ms", "x baseline", "p50 +us", "cpu us/req", "errors", "note"];
  const widths = head.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i]!.length)));
  const fmt = (cols: string[]) => cols.map((c, i) => (i < 2 || i === 9 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ");
  console.log("\n" + fmt(head));
  console.log(widths.map((w) => "-".repeat(w)).join("  "));
  for (const l of lines) console.log(fmt(l));
}

/**
 * The note of a Connect binary row set beside the REST row of the same
 * operation (issue 18, docs/benchmarks.md): its server CPU per request as a
 * ratio of REST's, and optionally its req/s as a ratio of another row's.
 */
export function versusRest(connect: BenchResult, rest: BenchResult, restName: string, also?: { name: string; result: BenchResult }): string {
  const cpu = connect.cpuUsPerReq !== undefined && rest.cpuUsPerReq ? `cpu ${(connect.cpuUsPerReq / rest.cpuUsPerReq).toFixed(2)} x ${restName}` : `(no cpu figure for ${restName})`;
  return also ? `${cpu}; ${(connect.rps / also.result.rps).toFixed(2)} x ${also.name} req/s` : cpu;
}

/**
 * Two loads measured turn about, `rounds` times each (each turn a
 * `1 / rounds` share of the scenario's duration), merged per side: the
 * figures of a pair whose ratio is the point (Connect binary against REST,
 * a function against the bare POST) then come from the same minutes, so the
 * machine's neighbours weigh on both alike (docs/benchmarks.md). Each
 * `load` gets the turn's duration in seconds.
 */
export async function alternate(
  a: (durationSec: number) => Promise<BenchResult>,
  b: (durationSec: number) => Promise<BenchResult>,
  durationSec: number,
  rounds = Number(process.env.BENCH_ROUNDS || 4),
): Promise<[BenchResult, BenchResult]> {
  const [ra, rb] = await alternateAll([a, b], durationSec, rounds);
  return [ra!, rb!];
}

/** alternate() for any number of loads: each turn runs them all, in order. */
export async function alternateAll(
  loads: ((durationSec: number) => Promise<BenchResult>)[],
  durationSec: number,
  rounds = Number(process.env.BENCH_ROUNDS || 4),
): Promise<BenchResult[]> {
  const turn = Math.max(0.5, durationSec / rounds);
  const results: BenchResult[][] = loads.map(() => []);
  for (let i = 0; i < rounds; i++) {
    for (let k = 0; k < loads.length; k++) results[k]!.push(await loads[k]!(turn));
  }
  return results.map(merged);
}

/** Turns of one load as one result: totals, CPU per request over all of them, the median turn's p50 and p99. */
function merged(rs: BenchResult[]): BenchResult {
  const answered = (r: BenchResult) => Object.values(r.statuses).reduce((x, n) => x + n, 0) || r.requests;
  const statuses: Record<string, number> = {};
  for (const r of rs) for (const [k, n] of Object.entries(r.statuses)) statuses[k] = (statuses[k] ?? 0) + n;
  const requests = rs.reduce((x, r) => x + r.requests, 0);
  const durationMs = rs.reduce((x, r) => x + r.durationMs, 0);
  const all = rs.reduce((x, r) => x + answered(r), 0);
  const cpuMs = rs.every((r) => r.cpuUsPerReq !== undefined) ? rs.reduce((x, r) => x + (r.cpuUsPerReq! * answered(r)) / 1000, 0) : undefined;
  const median = (f: (r: BenchResult) => number) => rs.map(f).sort((x, y) => x - y)[rs.length >> 1]!;
  return {
    requests,
    errors: rs.reduce((x, r) => x + r.errors, 0),
    durationMs,
    rps: (requests / durationMs) * 1000,
    p50Ms: median((r) => r.p50Ms),
    p99Ms: median((r) => r.p99Ms),
    statuses,
    cpuUsPerReq: cpuMs !== undefined && all ? (cpuMs * 1000) / all : undefined,
  };
}

/** Calls fn with `inFlight` calls outstanding for the duration (an in-process baseline). */
export async function inProcessLoad(fn: () => Promise<unknown>, inFlight: number, durationSec: number): Promise<LoadResult> {
  const lat: number[] = [];
  let errors = 0;
  const start = performance.now();
  const end = start + durationSec * 1000;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (performance.now() < end) {
        const t0 = performance.now();
        try {
          await fn();
          lat.push((performance.now() - t0) * 1000);
        } catch {
          errors++;
        }
      }
    }),
  );
  const sorted = Float64Array.from(lat).sort();
  const q = (p: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]! / 1000 : 0);
  const durationMs = performance.now() - start;
  return { requests: lat.length, errors, durationMs, rps: (lat.length / durationMs) * 1000, p50Ms: q(0.5), p99Ms: q(0.99), statuses: {} };
}

/**
 * One request at a time on one keep-alive connection, timed in microseconds
 * (autocannon reports whole milliseconds): the per-request cost of a path.
 */
export function seqLoad(o: { url: string; method?: string; headers?: Record<string, string>; body?: string; durationSec: number }): Promise<BenchResult> {
  return withServerCpu(o.url, () => seqLoadRaw(o));
}

async function seqLoadRaw(o: { url: string; method?: string; headers?: Record<string, string>; body?: string; durationSec: number }): Promise<LoadResult> {
  const { Pool } = await import("undici");
  const u = new URL(o.url);
  const pool = new Pool(u.origin, { connections: 1, connect: { rejectUnauthorized: false } });
  const lat: number[] = [];
  let errors = 0;
  const statuses: Record<string, number> = {};
  const start = performance.now();
  const end = start + o.durationSec * 1000;
  try {
    while (performance.now() < end) {
      const t0 = performance.now();
      const r = await pool.request({ path: u.pathname + u.search, method: (o.method ?? "GET") as "GET", headers: o.headers, body: o.body });
      await r.body.arrayBuffer();
      statuses[r.statusCode] = (statuses[r.statusCode] ?? 0) + 1;
      if (r.statusCode < 300) lat.push((performance.now() - t0) * 1000);
      else errors++;
    }
  } finally {
    await pool.close();
  }
  const sorted = Float64Array.from(lat).sort();
  const q = (p: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]! / 1000 : 0);
  const durationMs = performance.now() - start;
  return { requests: lat.length, errors, durationMs, rps: (lat.length / durationMs) * 1000, p50Ms: q(0.5), p99Ms: q(0.99), statuses };
}

/** What a closed loop of requests saw: latencies (ms) of the 200s, the other answers, its length. */
export interface LoopResult {
  lat: number[];
  errors: number;
  ms: number;
  statuses: Record<number, number>;
}

/**
 * `inFlight` requests outstanding against `origin` for `ms` (each sent when
 * the previous answered): the victim's side of the noisy-neighbour scenarios.
 */
export async function closedLoop(origin: string, request: { path: string; method: "GET" | "POST"; headers: Record<string, string>; body?: string }, inFlight: number, ms: number): Promise<LoopResult> {
  const { Pool } = await import("undici");
  const pool = new Pool(origin, { connections: inFlight, connect: { rejectUnauthorized: false } });
  const lat: number[] = [];
  const statuses: Record<number, number> = {};
  let errors = 0;
  const t0 = performance.now();
  const end = t0 + ms;
  try {
    await Promise.all(
      Array.from({ length: inFlight }, async () => {
        while (performance.now() < end) {
          const s = performance.now();
          const r = await pool.request(request);
          await r.body.arrayBuffer();
          statuses[r.statusCode] = (statuses[r.statusCode] ?? 0) + 1;
          if (r.statusCode === 200) lat.push(performance.now() - s);
          else errors++;
        }
      }),
    );
  } finally {
    await pool.close();
  }
  return { lat, errors, ms: performance.now() - t0, statuses };
}
