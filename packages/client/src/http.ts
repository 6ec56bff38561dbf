// The one HTTP path of the SDK: fetch with a timeout, JSON in and out, the
// error envelope turned into a typed error, and the retry delay rule.
import { errorFromResponse, NetworkError } from "./errors.js";

/** What the SDK needs of `fetch` (the global one of browsers, React Native and Node 18+). */
export type FetchLike = (url: string, init: {
  method: string;
  headers: Record<string, string>;
  body?: string;
  signal?: unknown;
  keepalive?: boolean;
}) => Promise<{
  status: number;
  headers: { get(name: string): string | null };
  text(): Promise<string>;
}>;

export interface HttpConfig {
  baseUrl: string;
  fetch?: FetchLike;
  /** Per request, in milliseconds (default 15,000). */
  timeoutMs?: number;
}

export interface RequestOptions {
  method?: string;
  query?: Record<string, string | number | boolean | undefined>;
  /** Sent as JSON; or `raw`, an already encoded JSON string sent byte for byte. */
  body?: unknown;
  raw?: string;
  headers?: Record<string, string>;
  timeoutMs?: number;
  /** Let the request outlive the page (small bodies only, browsers). */
  keepalive?: boolean;
}

export interface HttpResponse<T> {
  status: number;
  data: T;
  headers: { get(name: string): string | null };
  requestId: string | undefined;
}

export function queryString(q: Record<string, string | number | boolean | undefined> | undefined): string {
  const parts: string[] = [];
  for (const k in q) if (q[k] !== undefined) parts.push(`${encodeURIComponent(k)}=${encodeURIComponent(String(q[k]))}`);
  return parts.length ? `?${parts.join("&")}` : "";
}

/** Retry-After in seconds (a number or an HTTP date), if present. */
function retryAfterOf(h: { get(name: string): string | null }): number | undefined {
  const v = h.get("retry-after");
  if (!v) return undefined;
  const n = Number(v);
  if (!Number.isNaN(n)) return Math.max(0, n);
  const d = Date.parse(v);
  return Number.isNaN(d) ? undefined : Math.max(0, (d - Date.now()) / 1000);
}

/** Sends one request; a non-2xx answer rejects with its envelope's error, no answer with NetworkError. */
export async function send<T>(cfg: HttpConfig, path: string, o: RequestOptions = {}): Promise<HttpResponse<T>> {
  const f = cfg.fetch ?? (globalThis.fetch as unknown as FetchLike);
  const headers: Record<string, string> = { accept: "application/json", ...o.headers };
  const body = o.raw ?? (o.body === undefined ? undefined : JSON.stringify(o.body));
  if (body !== undefined) headers["content-type"] = "application/json";
  const ctl = typeof AbortController === "function" ? new AbortController() : undefined;
  const timer = setTimeout(() => ctl?.abort(), o.timeoutMs ?? cfg.timeoutMs ?? 15_000);
  let res: Awaited<ReturnType<FetchLike>>;
  let text: string;
  try {
    res = await f(cfg.baseUrl.replace(/\/+$/, "") + path + queryString(o.query), {
      method: o.method ?? (body === undefined ? "GET" : "POST"),
      headers,
      body,
      signal: ctl?.signal,
      keepalive: o.keepalive,
    });
    text = await res.text();
  } catch (e) {
    throw new NetworkError(`Could not reach ${cfg.baseUrl}: ${(e as Error)?.message ?? e}`, e);
  } finally {
    clearTimeout(timer);
  }
  let data: unknown = text;
  if (/json/.test(res.headers.get("content-type") ?? "")) {
    try {
      data = JSON.parse(text);
    } catch {
      /* keep the text */
    }
  }
  const requestId = res.headers.get("x-request-id") ?? undefined;
  if (res.status >= 300) throw errorFromResponse(res.status, data, requestId, retryAfterOf(res.headers));
  return { status: res.status, data: data as T, headers: res.headers, requestId };
}

/**
 * Delay before retry `attempt` (0-based): exponential from `base`, capped at
 * `max`, with "equal jitter" (half fixed, half random) so a fleet of devices
 * coming back online does not retry in step; never shorter than Retry-After.
 */
export function backoff(attempt: number, base: number, max: number, retryAfterSeconds?: number): number {
  const exp = Math.min(max, base * 2 ** Math.min(attempt, 30));
  const d = exp / 2 + Math.random() * (exp / 2);
  return Math.max(d, (retryAfterSeconds ?? 0) * 1000);
}
