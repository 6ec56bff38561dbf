// The host side of a function's `fetch` (docs/functions.md, "Calling other
// services: fetch"). The isolate's fetch (fetch-api.ts) hands a copy of the
// request to the `fetch` host capability; this module performs it with
// undici and answers a copy of the response, the body read whole.
//
// Egress: every connection goes through one application's undici Agent whose
// `lookup` resolves the name, checks EVERY resolved address against the
// application's policy (egress-address.ts) and hands only checked addresses
// to the socket, so the socket connects to what was checked (no DNS
// rebinding between a check and the connect). A URL naming an IP literal is
// checked before the request (the socket does no lookup then). Loopback,
// link-local, metadata and the server's own listeners are never reached,
// whatever the policy (issue #28); the lookup is made per destination port so
// that an address is checked together with the port it is for. Redirects are
// followed here, hop by hop, each hop checked the same way, so a redirect
// cannot escape the policy. Per run: a number of subrequests, bytes of
// responses, requests at once, each request's time; the run's AbortSignal
// aborts what is still running when the run ends.
import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import { isIP } from "node:net";
import { createBrotliDecompress, createGunzip, createInflate } from "node:zlib";
import type { Readable } from "node:stream";
import { Agent, buildConnector, errors as undiciErrors } from "undici";
import { deadline } from "../../kernel/deadlines.js";
import { appError, errorDetail } from "../../kernel/errors.js";
import type { HostCall, HostCapability } from "../../kernel/host-capability.js";
import { isOwnListener, METADATA_HOSTS, refusedAddress } from "./egress-address.js";

/** An application's egress policy: an empty allowlist means any public host. */
export interface EgressPolicy {
  /** Hosts the application may fetch: "api.example.com" exactly, "*.example.com" any subdomain of it. Empty: any host. */
  allowHosts: readonly string[];
  /** Also private addresses (RFC 1918, fc00::/7, CGNAT); never loopback, link-local, cloud metadata or the server's own listeners. */
  allowPrivate: boolean;
}

export const DEFAULT_EGRESS_POLICY: EgressPolicy = { allowHosts: [], allowPrivate: false };

/** Per-invocation limits of fetch (PULSEBASE_FUNCTION_FETCH_*, src/kernel/config.ts). */
export interface FetchLimits {
  /** Requests one invocation may start (redirect hops not counted). */
  subrequests: number;
  /** Requests of one invocation in flight at once; more wait for one to finish. */
  concurrent: number;
  /** Bytes of one response body (after decompression). */
  responseBytes: number;
  /** Bytes of all response bodies of one invocation. */
  runResponseBytes: number;
  /** Bytes of one request body. */
  requestBytes: number;
  /** Bytes of one request's headers (names and values): servers refuse more than a few KiB anyway, and the body limit must not be bypassed through them. */
  requestHeaderBytes: number;
  /** Redirects one request may follow. */
  redirects: number;
  /** One request's time, headers and body, redirects included (the invocation's own timeout cuts it earlier). */
  timeoutMs: number;
  /** Bytes of responses being read or handed in, all invocations of the process together. */
  processBytes: number;
  /**
   * For tests only (PULSEBASE_FUNCTION_EGRESS_ALLOW_LOOPBACK, the operator's
   * environment): loopback counts as private, so an application allowed
   * private addresses reaches a local test server. Never the server's own listeners.
   */
  allowLoopback: boolean;
}

export const DEFAULT_FETCH_LIMITS: FetchLimits = {
  subrequests: 50,
  concurrent: 6,
  responseBytes: 10 * 1024 * 1024,
  runResponseBytes: 32 * 1024 * 1024,
  requestBytes: 10 * 1024 * 1024,
  requestHeaderBytes: 64 * 1024,
  redirects: 10,
  timeoutMs: 30_000,
  processBytes: 256 * 1024 * 1024,
  allowLoopback: false,
};

export const USER_AGENT = "Pulsebase-Functions/1";

/** Resolves a host name to all its addresses (dns.lookup by default; tests inject their own). */
export type Resolver = (hostname: string) => Promise<LookupAddress[]>;

/** A request as it comes out of the isolate (a copy: untrusted, checked here). */
export interface FetchRequestIn {
  url: string;
  method: string;
  headers: Array<[string, string]>;
  body?: string | Uint8Array | ArrayBuffer | null;
  redirect: "follow" | "manual" | "error";
}

/**
 * The response as it goes into the isolate. The body goes in as bytes, copied
 * beside the JSON of the answers (function-isolate.ts): a 10 MiB body as a
 * JSON string cost the service's thread about 150 ms (base64 and escaping).
 */
export interface FetchResponseOut {
  status: number;
  statusText: string;
  headers: Array<[string, string]>;
  url: string;
  redirected: boolean;
  bytes: Uint8Array;
}

export interface FetchHostOptions {
  /** The application's policy (cached by the caller). */
  policyOf(appId: number): Promise<EgressPolicy>;
  limits?: Partial<FetchLimits>;
  resolve?: Resolver;
}

export interface FetchHost {
  /** The capabilities the sandbox registers: `fetch` (send) and `fetchAbort` (abort), used by the isolate's global fetch, never on ctx. */
  capabilities: HostCapability[];
  limits: FetchLimits;
  /** Performs one request of a run (what `fetch.send` does). */
  send(call: HostCall, id: number, req: FetchRequestIn): Promise<FetchResponseOut>;
  /** Closes every connection. */
  close(): Promise<void>;
}

/** Sent only by the client itself, never from a function's headers (hop-by-hop, framing, routing). */
const DROPPED_HEADERS = new Set([
  "connection", "keep-alive", "proxy-connection", "proxy-authorization", "proxy-authenticate", "te", "trailer", "transfer-encoding",
  "upgrade", "host", "content-length", "expect", "http2-settings", "accept-encoding",
]);
/** Not carried to another origin by a redirect (like browsers do with Authorization). */
const CROSS_ORIGIN_DROPPED = new Set(["authorization", "cookie", "cookie2"]);
const REDIRECTS = new Set([301, 302, 303, 307, 308]);
const METHODS = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const MAX_AGENTS = 256;
/** One application holds at most processBytes / APP_SHARE of fetched responses at once. */
export const APP_SHARE = 4;

class EgressRefused extends Error {}

function refusal(what: string, why: string) {
  return appError("egress_refused", `fetch to ${what} refused: ${why}`);
}

/** Whether `host` (lower-case, no trailing dot) is on the allowlist; an empty list allows any. */
export function hostAllowed(host: string, allow: readonly string[]): boolean {
  if (allow.length === 0) return true;
  // "*.0.0.1" is no subdomain pattern for 127.0.0.1: a wildcard matches names only
  const literal = isIP(host) !== 0;
  for (const a of allow) {
    if (a.startsWith("*.")) {
      if (!literal && host.endsWith(a.slice(1)) && host.length > a.length - 1) return true;
    } else if (a === host) return true;
  }
  return false;
}

/** Why a connection to `ip`:`port` (for the URL host `host`) is refused under `policy`, or undefined when it may go. */
export function egressRefusal(host: string, ip: string, port: number, policy: EgressPolicy, opts: { allowLoopback?: boolean } = {}): string | undefined {
  const at = host === ip ? `${ip}:${port}` : `${host}:${port} (${ip})`;
  // first: the test switch opens loopback, never these
  if (isOwnListener(ip, port)) return `${at} is one of this server's own listeners, which functions never reach`;
  const kind = refusedAddress(ip);
  if (kind === undefined || (kind === "private" && policy.allowPrivate)) return undefined;
  if (kind === "loopback" && policy.allowPrivate && opts.allowLoopback) return undefined;
  if (kind === "metadata") return `${at} is a cloud metadata address, which functions never reach`;
  if (kind === "reserved") return `${at} is not a routable address`;
  if (kind === "loopback") return `${at} is a loopback address (this machine), which functions never reach, even with private addresses allowed`;
  if (kind === "link-local") return `${at} is a link-local address, which functions never reach, even with private addresses allowed`;
  return `${at} is a private address; the application's egress policy does not allow private addresses`;
}

/** The port a URL connects to. */
function portOf(u: URL): number {
  return u.port ? Number(u.port) : u.protocol === "https:" ? 443 : 80;
}

const defaultResolver: Resolver = (hostname) =>
  new Promise((resolve, reject) => dnsLookup(hostname, { all: true, verbatim: true }, (err, addrs) => (err ? reject(err) : resolve(addrs))));

function bareHost(u: URL): string {
  let h = u.hostname.toLowerCase();
  if (h.startsWith("[") && h.endsWith("]")) h = h.slice(1, -1);
  if (h.endsWith(".")) h = h.slice(0, -1);
  return h;
}

interface RunState {
  started: number;
  bytes: number;
  /** Requests in flight by the isolate's fetch id: aborting one cancels it. */
  inflight: Map<number, AbortController>;
  policy?: Promise<EgressPolicy>;
}

export function createFetchHost(opts: FetchHostOptions): FetchHost {
  const limits: FetchLimits = { ...DEFAULT_FETCH_LIMITS, ...opts.limits };
  const resolve = opts.resolve ?? defaultResolver;
  const runs = new WeakMap<HostCall, RunState>();
  // One Agent (its own connection pools) per application and policy: a
  // connection opened under one application's policy never serves another.
  const agents = new Map<number, { key: string; agent: Agent }>();
  // Response bytes held by the process (read, not yet handed to the isolate): many invocations at
  // their own limits at once cannot take the server's memory.
  let held = 0;
  // ... and by application: one application may hold at most 1/APP_SHARE of the bound, so
  // responses it keeps stalled (a slow upstream of its own) cannot refuse every other one's fetches.
  const heldByApp = new Map<number, number>();

  function agentFor(appId: number, policy: EgressPolicy): Agent {
    const key = `${policy.allowPrivate ? 1 : 0}|${policy.allowHosts.join(",")}`;
    const have = agents.get(appId);
    if (have) {
      agents.delete(appId);
      if (have.key === key) {
        agents.set(appId, have);
        return have.agent;
      }
      void have.agent.close().catch(() => {});
    }
    if (agents.size >= MAX_AGENTS) {
      const [oldest, a] = agents.entries().next().value!;
      agents.delete(oldest);
      void a.agent.close().catch(() => {});
    }
    // node:net calls the lookup for every connection to a name (never for an
    // IP literal, checked here and before the request); it connects only to
    // what it gets back, and every address was checked with the port it is for.
    const lookupFor = (port: number) => (hostname: string, o: { all?: boolean }, cb: (err: Error | null, addr: string | LookupAddress[], family?: number) => void) => {
      resolve(hostname).then(
        (addrs) => {
          if (addrs.length === 0) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" });
          for (const a of addrs) {
            const why = egressRefusal(hostname, a.address, port, policy, limits);
            if (why) throw new EgressRefused(why);
          }
          if (o.all) cb(null, addrs);
          else cb(null, addrs[0]!.address, addrs[0]!.family);
        },
      ).catch((err: Error) => cb(err, ""));
    };
    // One connector (its TLS session cache) per destination port, a few at most.
    const connectors = new Map<number, buildConnector.connector>();
    const connect: buildConnector.connector = (o, cb) => {
      const port = Number(o.port) || (o.protocol === "https:" ? 443 : 80);
      const bare = o.hostname.startsWith("[") ? o.hostname.slice(1, -1) : o.hostname;
      if (isIP(bare)) {
        const why = egressRefusal(bare, bare, port, policy, limits);
        if (why) return void cb(new EgressRefused(why), null);
      }
      let c = connectors.get(port);
      if (!c) {
        if (connectors.size >= 16) connectors.delete(connectors.keys().next().value!);
        c = buildConnector({ lookup: lookupFor(port) as never, timeout: Math.min(10_000, limits.timeoutMs) });
        connectors.set(port, c);
      }
      c(o, cb);
    };
    const agent = new Agent({ connect, keepAliveTimeout: 4_000, connections: 16 });
    agents.set(appId, { key, agent });
    return agent;
  }

  function stateOf(call: HostCall): RunState {
    let s = runs.get(call);
    if (!s) {
      const state: RunState = (s = { started: 0, bytes: 0, inflight: new Map() });
      runs.set(call, s);
      call.signal.addEventListener("abort", () => {
        for (const c of state.inflight.values()) c.abort();
        state.inflight.clear();
      }, { once: true });
    }
    return s;
  }

  async function send(call: HostCall, id: number, req: FetchRequestIn): Promise<FetchResponseOut> {
    const state = stateOf(call);
    if (call.signal.aborted) throw appError("unavailable", "the invocation has ended");
    if (++state.started > limits.subrequests) {
      throw appError("fetch_limit", `too many fetch calls: at most ${limits.subrequests} per invocation`);
    }
    const r = checkRequest(req);
    const policy = await (state.policy ??= opts.policyOf(call.appId));
    // the run may have ended while the policy was read (a store miss): its abort has fired and found no request to cancel
    if (call.signal.aborted) throw appError("unavailable", "the invocation has ended");
    const agent = agentFor(call.appId, policy);
    // One controller per request: the isolate's abort, the run's end (stateOf) and the time limit all fire it.
    const own = new AbortController();
    state.inflight.set(id, own);
    const timeout = { fired: false };
    const cancelTimer = deadline(limits.timeoutMs, () => {
      timeout.fired = true;
      own.abort();
    });
    const signal = own.signal;
    const hold = { bytes: 0 };
    let url = r.url;
    try {
      let { method, body } = r;
      const headers = r.headers;
      for (let hop = 0; ; hop++) {
        const host = checkUrl(url, policy);
        let res;
        try {
          res = await agent.request({
            origin: url.origin, path: url.pathname + url.search, method, headers, body,
            signal, headersTimeout: limits.timeoutMs, bodyTimeout: limits.timeoutMs,
          });
        } catch (err) {
          throw failure(err, url, host, timeout.fired);
        }
        const location = res.headers.location;
        if (REDIRECTS.has(res.statusCode) && typeof location === "string" && r.redirect !== "manual") {
          discard(res.body);
          if (r.redirect === "error") throw appError("fetch_failed", `fetch to ${url.origin} was redirected (${res.statusCode}) and its redirect mode is "error"`);
          if (hop >= limits.redirects) throw appError("fetch_limit", `fetch to ${r.url.origin} followed more than ${limits.redirects} redirects`);
          const next = URL.parse(location, url.href);
          if (!next) throw appError("fetch_failed", `fetch to ${url.origin} was redirected to an invalid URL`);
          if (res.statusCode === 303 ? method !== "HEAD" : (res.statusCode === 301 || res.statusCode === 302) && method === "POST") {
            method = "GET";
            body = undefined;
            for (const k of ["content-type", "content-encoding", "content-language", "content-location"]) delete headers[k];
          }
          if (next.origin !== url.origin) for (const k of CROSS_ORIGIN_DROPPED) delete headers[k];
          url = next;
          continue;
        }
        let bytes: Buffer;
        try {
          bytes = await readBody(res.body, res.headers["content-encoding"], state, url, hold, call.appId);
        } catch (err) {
          discard(res.body);
          throw failure(err, url, host, timeout.fired);
        }
        return {
          status: res.statusCode,
          statusText: res.statusText ?? "",
          headers: headerPairs(res.headers),
          url: url.href,
          redirected: hop > 0,
          bytes,
        };
      }
    } finally {
      // given back once the copy is on its way into the isolate (or the request failed)
      held -= hold.bytes;
      if (hold.bytes > 0) {
        const left = (heldByApp.get(call.appId) ?? 0) - hold.bytes;
        if (left > 0) heldByApp.set(call.appId, left);
        else heldByApp.delete(call.appId);
      }
      cancelTimer();
      state.inflight.delete(id);
    }
  }

  async function readBody(body: Readable, encoding: string | string[] | undefined, state: RunState, url: URL, hold: { bytes: number }, appId: number): Promise<Buffer> {
    let stream: Readable = body;
    const enc = typeof encoding === "string" ? encoding.trim().toLowerCase() : "";
    // decoded here, so the limits count what the function gets
    if (enc === "gzip" || enc === "x-gzip") stream = body.pipe(createGunzip());
    else if (enc === "deflate") stream = body.pipe(createInflate());
    else if (enc === "br") stream = body.pipe(createBrotliDecompress());
    if (stream !== body) body.on("error", (e) => stream.destroy(e));
    const chunks: Buffer[] = [];
    let size = 0;
    return new Promise<Buffer>((resolve, reject) => {
      const fail = (err: unknown) => {
        stream.removeAllListeners("data");
        if (stream !== body) stream.destroy();
        reject(err);
      };
      stream.on("data", (chunk: Buffer) => {
        size += chunk.byteLength;
        state.bytes += chunk.byteLength;
        held += chunk.byteLength;
        hold.bytes += chunk.byteLength;
        const appHeld = (heldByApp.get(appId) ?? 0) + chunk.byteLength;
        heldByApp.set(appId, appHeld);
        if (held > limits.processBytes) return fail(appError("unavailable", `the server is holding too many fetched responses at once (${limits.processBytes} bytes); try again`));
        if (appHeld > limits.processBytes / APP_SHARE) return fail(appError("unavailable", `this application's functions are holding too many fetched responses at once (${Math.floor(limits.processBytes / APP_SHARE)} bytes); try again`));
        if (size > limits.responseBytes) return fail(appError("fetch_limit", `the response of ${url.origin} is larger than ${limits.responseBytes} bytes (the limit of one response)`));
        if (state.bytes > limits.runResponseBytes) return fail(appError("fetch_limit", `the responses of this invocation are larger than ${limits.runResponseBytes} bytes in all`));
        chunks.push(chunk);
      });
      stream.on("error", fail);
      stream.on("end", () => resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size)));
    });
  }

  function checkRequest(req: FetchRequestIn): { url: URL; method: string; headers: Record<string, string>; body: string | Buffer | undefined; redirect: FetchRequestIn["redirect"] } {
    if (req === null || typeof req !== "object") throw appError("validation_failed", "invalid fetch request");
    const url = typeof req.url === "string" ? URL.parse(req.url) : null;
    if (!url) throw appError("validation_failed", "fetch needs an absolute URL");
    const method = typeof req.method === "string" && METHODS.test(req.method) ? req.method.toUpperCase() : undefined;
    if (!method || method === "CONNECT" || method === "TRACE" || method === "TRACK") throw appError("validation_failed", `fetch cannot send the method ${String(req.method)}`);
    const redirect = req.redirect === "manual" || req.redirect === "error" ? req.redirect : "follow";
    const headers: Record<string, string> = Object.create(null) as Record<string, string>;
    const pairs = Array.isArray(req.headers) ? req.headers : [];
    let headerBytes = 0;
    for (const p of pairs.slice(0, 200)) {
      if (!Array.isArray(p) || typeof p[0] !== "string" || typeof p[1] !== "string") continue;
      headerBytes += p[0].length + p[1].length + 4;
      if (headerBytes > limits.requestHeaderBytes) throw appError("fetch_limit", `the request headers are larger than ${limits.requestHeaderBytes} bytes`);
      const k = p[0].toLowerCase();
      // the client's own, and the platform's: never from a function
      if (DROPPED_HEADERS.has(k) || k.startsWith("x-pulsebase-") || k.startsWith("proxy-")) continue;
      if (!METHODS.test(k) || /[\0\r\n]/.test(p[1])) throw appError("validation_failed", `invalid header ${JSON.stringify(p[0])}`);
      headers[k] = headers[k] === undefined ? p[1] : `${headers[k]}, ${p[1]}`;
    }
    headers["user-agent"] ??= USER_AGENT;
    headers["accept-encoding"] = "gzip, deflate, br";
    let body: string | Buffer | undefined;
    const b = req.body;
    if (typeof b === "string") body = b;
    else if (b instanceof Uint8Array) body = Buffer.from(b.buffer, b.byteOffset, b.byteLength);
    else if (b instanceof ArrayBuffer) body = Buffer.from(b);
    else if (b !== undefined && b !== null) throw appError("validation_failed", "unsupported fetch body");
    if (body !== undefined) {
      if (method === "GET" || method === "HEAD") throw appError("validation_failed", `a ${method} request cannot have a body`);
      const n = typeof body === "string" ? Buffer.byteLength(body) : body.byteLength;
      if (n > limits.requestBytes) throw appError("fetch_limit", `the request body is larger than ${limits.requestBytes} bytes`);
    }
    return { url, method, headers, body, redirect };
  }

  /** Scheme, allowlist, metadata names and IP literals; returns the host. */
  function checkUrl(url: URL, policy: EgressPolicy): string {
    if (url.protocol !== "http:" && url.protocol !== "https:") throw refusal(url.protocol, "only http: and https: URLs can be fetched");
    if (url.username || url.password) throw appError("validation_failed", "fetch URLs cannot carry credentials (user:password@); send an Authorization header");
    const host = bareHost(url);
    if (METADATA_HOSTS.has(host)) throw refusal(url.origin, `${host} is a cloud metadata address, which functions never reach`);
    // loopback by definition (RFC 6761), whatever a resolver answers
    if ((host === "localhost" || host.endsWith(".localhost")) && !(limits.allowLoopback && policy.allowPrivate)) {
      throw refusal(url.origin, `${host} is a loopback name (this machine), which functions never reach, even with private addresses allowed`);
    }
    if (isIP(host)) {
      const why = egressRefusal(host, host, portOf(url), policy, limits);
      if (why) throw refusal(url.origin, why);
    }
    if (!hostAllowed(host, policy.allowHosts)) throw refusal(url.origin, `${host} is not on the application's egress allowlist`);
    return host;
  }

  const fetchCap: HostCapability = {
    name: "fetch",
    busyCode: "fetch_limit",
    failureCode: "fetch_failed",
    callLimits: {
      running: limits.concurrent,
      queued: limits.subrequests,
      busyMessage: `too many fetch calls: at most ${limits.subrequests} per invocation, ${limits.concurrent} at once`,
    },
    methods: { send: (call, id, req) => send(call, id as number, req as FetchRequestIn) },
  };
  const abortCap: HostCapability = {
    name: "fetchAbort",
    busyCode: "fetch_limit",
    failureCode: "fetch_failed",
    methods: {
      abort: (call, id) => {
        runs.get(call)?.inflight.get(id as number)?.abort();
        return Promise.resolve(null);
      },
    },
  };
  return {
    capabilities: [fetchCap, abortCap],
    limits,
    send,
    async close() {
      const all = [...agents.values()];
      agents.clear();
      await Promise.all(all.map((a) => a.agent.destroy().catch(() => {})));
    },
  };
}

/** What a failed request tells the function: a refusal, a timeout, or the network's error. */
function failure(err: unknown, url: URL, host: string, timedOut: boolean): unknown {
  if (errorDetail(err)) return err; // already a catalogue error
  let e: unknown = err;
  for (let i = 0; i < 4 && e instanceof Error; i++, e = e.cause) {
    if (e instanceof EgressRefused) return refusal(url.origin, e.message);
  }
  if (timedOut || err instanceof undiciErrors.HeadersTimeoutError || err instanceof undiciErrors.BodyTimeoutError) {
    return appError("timeout", `fetch to ${url.origin} timed out`);
  }
  if (err instanceof Error && err.name === "AbortError") return appError("fetch_failed", `fetch to ${url.origin} was aborted`);
  const code = err instanceof Error ? ((err as { code?: string }).code ?? err.message) : String(err);
  return appError("fetch_failed", `fetch to ${url.origin} failed: ${code === "ENOTFOUND" ? `${host} not found` : code}`);
}

/** Drops a body not read (its connection closes unless the rest is short). */
function discard(body: Readable & { dump?: (o?: { limit: number }) => Promise<void> }): void {
  body.on("error", () => {});
  if (body.dump) void body.dump({ limit: 64 * 1024 }).catch(() => {});
  else body.destroy();
}

function headerPairs(h: Record<string, string | string[] | undefined>): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (const k of Object.keys(h)) {
    const v = h[k];
    if (Array.isArray(v)) for (const x of v) out.push([k, x]);
    else if (v !== undefined) out.push([k, v]);
  }
  return out;
}
