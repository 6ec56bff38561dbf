// Calls of functions behind HTTP triggers (/api/fn/{slug}).
import type { PulsebaseClient } from "./client.js";
import type { HttpResponse } from "./http.js";

export interface FunctionCall {
  /** Default: GET without a body, POST with one. */
  method?: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  query?: Record<string, string | number | boolean | undefined>;
  /** Sent as JSON. */
  body?: unknown;
  headers?: Record<string, string>;
}

export interface Functions {
  /** `data` is the function's JSON answer (or its text); a non-2xx status rejects with a PlatformError. */
  call<T = unknown>(slug: string, o?: FunctionCall): Promise<HttpResponse<T>>;
}

export function createFunctions(client: PulsebaseClient): Functions {
  return {
    call: (slug, o = {}) =>
      client.request(`/api/fn/${encodeURIComponent(slug)}`, {
        method: o.method ?? (o.body === undefined ? "GET" : "POST"),
        query: o.query,
        body: o.body,
        headers: o.headers,
      }),
  };
}
