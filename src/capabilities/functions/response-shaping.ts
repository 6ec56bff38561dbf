// Turns what a function returned into the HTTP response (docs/functions.md, "Response shaping").
// The raw shape comes out of the isolate as plain copied data; everything is
// validated here on the host: status range, header names and values, the
// headers a function may not set, and the body size.
import type { RawResponse } from "../../infra/sandbox/types.js";

export interface ShapedResponse {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

export type ShapeResult =
  | { ok: true; response: ShapedResponse; warnings: string[] }
  | { ok: false; error: string; warnings: string[] };

/**
 * Headers a function cannot set: hop-by-hop and framing headers (the server
 * owns the connection and the body length), cookies (the platform uses no
 * cookies), CORS (configured on the server), the request id,
 * the service's internal namespace, and what acts on the whole origin every
 * application shares rather than on this one answer: Clear-Site-Data (would
 * wipe other applications' browser storage), Service-Worker-Allowed (would
 * widen a service worker's scope), NEL and Report-To (would have browsers
 * report requests to other applications to the function's endpoint).
 */
const FORBIDDEN = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "transfer-encoding",
  "content-length",
  "te",
  "trailer",
  "upgrade",
  // HTTP/2 refuses it in a response (RFC 9113 8.2.2): the answer could not be written at all
  "http2-settings",
  "host",
  "set-cookie",
  "set-cookie2",
  "x-request-id",
  "content-encoding",
  "alt-svc",
  "strict-transport-security",
  "clear-site-data",
  "service-worker-allowed",
  "nel",
  "report-to",
]);

/** Statuses that have no body (RFC 9110 15.3.5, 15.3.6, 15.4.5): a function's body for them is dropped. */
const NO_BODY = new Set([204, 205, 304]);

/**
 * Every answer of a function is to a request with a consumer token: a shared
 * cache (a CDN, a proxy) must never keep it for another caller, whatever the
 * function says. `public` and `s-maxage` are removed and `private` added
 * unless the answer is `no-store` (RFC 9111 3.5: without them a shared cache
 * does not store an answer to a request with Authorization, but with
 * `must-revalidate` it may).
 */
export function privateCacheControl(value: string): string {
  const kept = value.split(",").map((d) => d.trim()).filter((d) => {
    const name = d.split("=")[0]!.trim().toLowerCase();
    return d !== "" && name !== "public" && name !== "s-maxage";
  });
  if (!kept.some((d) => /^(private|no-store)$/i.test(d))) kept.unshift("private");
  return kept.join(", ");
}
const FORBIDDEN_PREFIXES = ["x-pulsebase-", "access-control-", "proxy-", ":"];

/**
 * The policy every HTTP trigger answer carries unless the operator turns it
 * off (PULSEBASE_FUNCTION_SANDBOX_CSP=false). Without allow-same-origin a
 * page a function serves runs in an opaque origin: it cannot read or set the
 * cookies of the host name it shares with every application and, on
 * 127.0.0.1, with the console (issue #28, "cookie tossing"), nor use that
 * origin's storage. Scripts, forms, popups and downloads still work.
 */
export const FUNCTION_SANDBOX_CSP = "sandbox allow-scripts allow-forms allow-popups allow-downloads allow-modals";

/**
 * Adds the sandbox to a shaped answer's headers (in place). A function's
 * own Content-Security-Policy is kept and the sandbox appended as a second
 * policy (after a comma): browsers enforce both, so the function cannot
 * lift the sandbox, only narrow it further. Already there means a whole
 * policy of its own (between commas): text that merely ends with it after a
 * `;` is a directive of the function's policy, where an earlier
 * `sandbox allow-same-origin` wins over the duplicate (issue #28).
 */
export function withSandboxCsp(headers: Record<string, string>): void {
  const own = headers["content-security-policy"];
  if (own === undefined) headers["content-security-policy"] = FUNCTION_SANDBOX_CSP;
  else if (!own.split(",").some((p) => p.trim() === FUNCTION_SANDBOX_CSP)) headers["content-security-policy"] = `${own}, ${FUNCTION_SANDBOX_CSP}`;
}

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
// Visible ASCII, space, tab and obs-text; no CR, LF or NUL.
const VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
const MAX_HEADERS = 50;
const MAX_HEADER_VALUE = 8 * 1024;

export function shapeResponse(raw: RawResponse | undefined, maxBytes: number): ShapeResult {
  const warnings: string[] = [];
  if (!raw || typeof raw.body !== "string") return { ok: false, error: "the function returned no usable response", warnings };

  let status = 200;
  if (raw.status !== undefined) {
    const s = raw.status;
    if (typeof s !== "number" || !Number.isInteger(s) || s < 200 || s > 599) {
      return { ok: false, error: `invalid status ${JSON.stringify(s)}: a status must be an integer from 200 to 599`, warnings };
    }
    status = s;
  }

  const headers: Record<string, string> = Object.create(null) as Record<string, string>;
  let count = 0;
  for (const pair of Array.isArray(raw.headers) ? raw.headers : []) {
    const [name, value] = pair;
    if (typeof name !== "string" || typeof value !== "string") continue;
    const lower = name.toLowerCase();
    if (!TOKEN.test(name)) {
      warnings.push(`header ${JSON.stringify(name)} dropped: not a valid header name`);
      continue;
    }
    if (FORBIDDEN.has(lower) || FORBIDDEN_PREFIXES.some((p) => lower.startsWith(p))) {
      warnings.push(`header ${JSON.stringify(name)} dropped: functions cannot set it`);
      continue;
    }
    if (!VALUE.test(value) || value.length > MAX_HEADER_VALUE) {
      warnings.push(`header ${JSON.stringify(name)} dropped: invalid value`);
      continue;
    }
    if (++count > MAX_HEADERS) {
      warnings.push(`header ${JSON.stringify(name)} dropped: more than ${MAX_HEADERS} headers`);
      continue;
    }
    headers[lower] = value;
  }
  const cc = headers["cache-control"];
  if (cc !== undefined) {
    const forced = privateCacheControl(cc);
    if (forced !== cc) warnings.push(`header "cache-control" sent as ${JSON.stringify(forced)}: answers to a token are private`);
    headers["cache-control"] = forced;
  }
  if (NO_BODY.has(status)) {
    if (raw.body !== "" && !(raw.body === "null" && !raw.text)) warnings.push(`body dropped: a ${status} answer has none`);
    return { ok: true, response: { status, headers: { ...headers }, body: Buffer.alloc(0) }, warnings };
  }
  if (headers["content-type"] === undefined) {
    headers["content-type"] = raw.text ? "text/plain; charset=utf-8" : "application/json";
  }

  const body = Buffer.from(raw.body, "utf8");
  if (body.length > maxBytes) {
    return { ok: false, error: `response body of ${body.length} bytes is over the limit of ${maxBytes} bytes`, warnings };
  }
  return { ok: true, response: { status, headers: { ...headers }, body }, warnings };
}
