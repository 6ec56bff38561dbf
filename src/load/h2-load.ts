// A small HTTP/2 load generator (node:http2): a few connections, several
// streams in flight on each, fixed request bytes, latencies recorded per
// request. Used by the bench runner (REST baseline and Connect binary alike,
// so the generator's own cost is the same on both sides) and by
// `pulsebase load`.
import http2 from "node:http2";

export interface H2LoadOptions {
  url: string;
  path: string;
  method?: string;
  headers?: Record<string, string>;
  body?: Uint8Array;
  connections: number;
  /** Streams in flight per connection. */
  streams: number;
  durationMs: number;
  insecure?: boolean;
  /** Called once a second with the requests completed so far. */
  onTick?: (s: { elapsedMs: number; done: number; errors: number }) => void;
  /** Accept a response status as success (default 200). */
  ok?: (status: number) => boolean;
}

export interface LoadResult {
  requests: number;
  errors: number;
  durationMs: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  statuses: Record<string, number>;
}

export function summarise(latenciesUs: number[], errors: number, durationMs: number, statuses: Record<string, number>): LoadResult {
  const sorted = Float64Array.from(latenciesUs).sort();
  const q = (p: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]! / 1000 : 0);
  return {
    requests: sorted.length,
    errors,
    durationMs,
    rps: (sorted.length / durationMs) * 1000,
    p50Ms: q(0.5),
    p99Ms: q(0.99),
    statuses,
  };
}

export async function h2Load(o: H2LoadOptions): Promise<LoadResult> {
  const ok = o.ok ?? ((s: number) => s === 200);
  const lat: number[] = [];
  const statuses: Record<string, number> = {};
  let errors = 0;
  const start = performance.now();
  const end = start + o.durationMs;
  const headers = { ":method": o.method ?? "POST", ":path": o.path, ...o.headers };
  const ticker = o.onTick
    ? setInterval(() => o.onTick!({ elapsedMs: performance.now() - start, done: lat.length, errors }), 1000)
    : undefined;

  async function connection(): Promise<void> {
    const session = http2.connect(o.url, { rejectUnauthorized: !o.insecure });
    session.on("error", () => {});
    await new Promise<void>((res, rej) => {
      session.once("connect", () => res());
      session.once("error", rej);
    });
    const stream = () =>
      new Promise<void>((resolve) => {
        const loop = () => {
          if (performance.now() >= end || session.closed || session.destroyed) return resolve();
          const t0 = performance.now();
          const req = session.request(headers);
          let status = 0;
          req.on("response", (h) => {
            status = Number(h[":status"]);
          });
          req.on("data", () => {});
          req.on("end", () => {
            statuses[status] = (statuses[status] ?? 0) + 1;
            if (ok(status)) lat.push((performance.now() - t0) * 1000);
            else errors++;
            loop();
          });
          req.on("error", () => {
            errors++;
            loop();
          });
          req.end(o.body ? Buffer.from(o.body) : undefined);
        };
        loop();
      });
    await Promise.all(Array.from({ length: o.streams }, stream));
    session.close();
  }

  try {
    await Promise.all(Array.from({ length: o.connections }, connection));
  } finally {
    if (ticker) clearInterval(ticker);
  }
  return summarise(lat, errors, performance.now() - start, statuses);
}
