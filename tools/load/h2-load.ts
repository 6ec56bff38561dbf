// A small HTTP/2 load generator (node:http2): a few connections, several
// streams in flight on each, fixed request bytes, latencies recorded per
// request. Used by the bench runner (REST baseline and Connect binary alike,
// so the generator's own cost is the same on both sides) and by
// `pulsebase load`.
import http2 from "node:http2";
import { sleep } from "../../src/kernel/retry.js";

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
  /** A request without a complete answer after this long fails; also bounds connecting (default 10 s). */
  requestTimeoutMs?: number;
  /** Called once a second with the counts so far. */
  onTick?: (s: { elapsedMs: number; done: number; failed: number; unsent: number }) => void;
  /** Accept a response status as success (default 200). */
  ok?: (status: number) => boolean;
}

export interface LoadResult {
  /** Successful requests (the latencies are theirs). */
  requests: number;
  errors: number;
  durationMs: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  statuses: Record<string, number>;
}

export interface H2LoadResult extends LoadResult {
  /** Sent but not successful: a status `ok` refuses, a stream error or reset, or no answer in time. */
  failed: number;
  /** Never sent: the connection could not be made (or was gone), one per stream slot and attempt. */
  unsent: number;
  /** Why requests failed or were not sent ("status 500", "timeout", "ECONNREFUSED", ...) and how often. */
  reasons: Record<string, number>;
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

const reasonOf = (err: unknown): string => {
  const e = err as { code?: unknown; message?: unknown };
  return typeof e?.code === "string" ? e.code : typeof e?.message === "string" ? e.message : String(err);
};

export async function h2Load(o: H2LoadOptions): Promise<H2LoadResult> {
  const ok = o.ok ?? ((s: number) => s === 200);
  const timeoutMs = o.requestTimeoutMs ?? 10_000;
  const lat: number[] = [];
  const statuses: Record<string, number> = {};
  const reasons: Record<string, number> = {};
  let failed = 0;
  let unsent = 0;
  const fail = (reason: string) => {
    failed++;
    reasons[reason] = (reasons[reason] ?? 0) + 1;
  };
  const notSent = (reason: string, n: number) => {
    unsent += n;
    reasons[reason] = (reasons[reason] ?? 0) + n;
  };
  const start = performance.now();
  const end = start + o.durationMs;
  const headers = { ":method": o.method ?? "POST", ":path": o.path, ...o.headers };
  const ticker = o.onTick
    ? setInterval(() => o.onTick!({ elapsedMs: performance.now() - start, done: lat.length, failed, unsent }), 1000)
    : undefined;

  const connect = () =>
    new Promise<http2.ClientHttp2Session>((resolve, reject) => {
      const session = http2.connect(o.url, { rejectUnauthorized: !o.insecure });
      const timer = setTimeout(() => {
        session.destroy();
        reject(Object.assign(new Error("connect timeout"), { code: "connect timeout" }));
      }, Math.max(1, Math.min(timeoutMs, end - performance.now())));
      session.once("connect", () => {
        clearTimeout(timer);
        // Later session errors surface on the streams (counted there).
        session.on("error", () => {});
        resolve(session);
      });
      session.once("error", (err) => {
        clearTimeout(timer);
        session.destroy();
        reject(err);
      });
    });

  /** One request; false when it could not be sent because the session is gone. */
  const request = (session: http2.ClientHttp2Session) =>
    new Promise<boolean>((resolve) => {
      const t0 = performance.now();
      let req: http2.ClientHttp2Stream;
      try {
        req = session.request(headers);
      } catch (err) {
        notSent(reasonOf(err), 1);
        return resolve(false);
      }
      let status = 0;
      let settled = false;
      const settle = (reason?: string) => {
        if (settled) return;
        settled = true;
        if (reason === undefined) lat.push((performance.now() - t0) * 1000);
        else fail(reason);
        resolve(true);
      };
      req.setTimeout(timeoutMs, () => {
        settle("timeout");
        req.close(http2.constants.NGHTTP2_CANCEL);
      });
      req.on("response", (h) => {
        status = Number(h[":status"]);
      });
      req.on("data", () => {});
      req.on("end", () => {
        statuses[status] = (statuses[status] ?? 0) + 1;
        settle(ok(status) ? undefined : `status ${status}`);
      });
      req.on("error", (err) => settle(reasonOf(err)));
      // A reset stream may close without an error event.
      req.on("close", () => settle(status ? `status ${status} (incomplete)` : "stream closed"));
      req.end(o.body ? Buffer.from(o.body) : undefined);
    });

  async function connection(): Promise<void> {
    // Reconnects when the connection fails or is lost, until the time is up.
    while (performance.now() < end) {
      let session: http2.ClientHttp2Session;
      try {
        session = await connect();
      } catch (err) {
        notSent(reasonOf(err), o.streams);
        await sleep(Math.max(0, Math.min(250, end - performance.now())));
        continue;
      }
      const stream = async () => {
        while (performance.now() < end && !session.closed && !session.destroyed) {
          if (!(await request(session))) return;
        }
      };
      await Promise.all(Array.from({ length: o.streams }, stream));
      session.close();
    }
  }

  try {
    await Promise.all(Array.from({ length: o.connections }, connection));
  } finally {
    if (ticker) clearInterval(ticker);
  }
  return { ...summarise(lat, failed + unsent, performance.now() - start, statuses), failed, unsent, reasons };
}
