// An optional synchronous fast path for REST GET routes, for services that
// answer some requests from memory (the CMS's cache of rendered responses).
// The gateway asks it before the generic transcoding; when it answers, the
// response is written straight away (no request message, no handler context,
// no promise); when it returns undefined, the generic handler runs as if the
// fast path had not been asked. So a fast path must have no side effect
// unless it answers, and must answer exactly what the generic path would.
import type { IncomingHttpHeaders } from "node:http";

/** Key on a service implementation object: `{ [localMethodName]: RestFastPath }`. */
export const REST_FAST_PATH = Symbol.for("pulsebase.restFastPath");

export interface FastRequest {
  /** path variables, by proto field name */
  params: Readonly<Record<string, string>>;
  /**
   * The raw query (routes with rest_raw_query: what the generic path puts in
   * that field), else empty.
   */
  query: Readonly<Record<string, string>>;
  headers: IncomingHttpHeaders;
}

export interface FastAnswer {
  /**
   * The response message. Answer with the very same object for the same
   * cached response: the gateway keeps its REST encoding (as bytes) with it.
   */
  message: object;
  /** Response headers, as the service would set them on ctx.responseHeader (lower-case names). */
  headers: readonly (readonly [string, string])[];
  /** If-None-Match matched the ETag: 304 without a body. */
  notModified: boolean;
}

export type RestFastPath = (req: FastRequest) => FastAnswer | undefined;

export type RestFastPaths = Readonly<Record<string, RestFastPath>>;

/**
 * Key on a service implementation object: `{ [localMethodName]: RestJsonPath }`,
 * for POST routes with a JSON body and a consumer token. The gateway
 * authenticates as the generic path does (401 first), then asks the JSON
 * path with the parsed body; it answers the response's REST JSON text, or
 * undefined when the body is not of the plain shape it handles (then the
 * generic path runs and reports 422s exactly as it always does). Errors it
 * throws are written like the generic path's. It must answer byte for byte
 * what the generic path would, with no proto message in between.
 */
export const REST_JSON_PATH = Symbol.for("pulsebase.restJsonPath");

export interface JsonRequest {
  /** The parsed JSON body: a plain object. */
  body: Record<string, unknown>;
  appId: number;
  requestId: string;
}

/**
 * The answer as a string at once when the service has it without waiting
 * (a point read on a cached link), else a promise of it; undefined (or a
 * promise of undefined) sends the request down the generic path.
 */
export type RestJsonPath = (req: JsonRequest) => string | undefined | Promise<string | undefined>;

export type RestJsonPaths = Readonly<Record<string, RestJsonPath>>;
