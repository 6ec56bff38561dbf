// What every answer of the public listener carries whoever writes it: the
// request id and the CORS headers. Fastify's routes get them from
// `requestIdOf` (genReqId) and @fastify/cors configured by `corsPolicy`;
// the HTTP/2 stream lane (transport/rpc/stream-lane.ts), which answers
// outside Fastify, from the same two functions.
import { randomUUID } from "node:crypto";
import type { OutgoingHttpHeaders } from "node:http";
import type { FastifyCorsOptions } from "@fastify/cors";

const REQUEST_ID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A well-formed incoming X-Request-Id (a UUID) is kept; otherwise a new one. */
export function requestIdOf(header: string | string[] | undefined): string {
  return typeof header === "string" && REQUEST_ID_RE.test(header) ? header.toLowerCase() : randomUUID();
}

// gRPC-Web clients in a browser read the status from grpc-status and friends.
export const EXPOSED_HEADERS = ["x-request-id", "retry-after", "ratelimit-limit", "ratelimit-remaining", "ratelimit-reset", "etag", "grpc-status", "grpc-message", "grpc-status-details-bin"];

export interface CorsPolicy {
  /** @fastify/cors's options (registered on the listener). */
  readonly plugin: FastifyCorsOptions;
  /**
   * The CORS headers @fastify/cors adds to an actual (non-preflight) answer
   * for this Origin, when they do not depend on checking it against the list:
   * the origin "*" for any origin, or (with a list) Vary: Origin for a request
   * without Origin; undefined when the plugin must check the origin.
   */
  headFor(origin: string | undefined): Readonly<OutgoingHttpHeaders> | undefined;
}

/**
 * The listener's CORS. Any origin is the static "*" (no credentials: the
 * same answer for every origin, so no Vary), and the header lists are joined
 * once: @fastify/cors otherwise resolves the origin and joins the lists on
 * every request, about a tenth of a PK read's server CPU.
 */
export function corsPolicy(origins: string[]): CorsPolicy {
  const exposed = EXPOSED_HEADERS.join(", ");
  const any = origins.includes("*");
  const anyHead = Object.freeze({ "access-control-allow-origin": "*", "access-control-expose-headers": exposed });
  const noOriginHead = Object.freeze({ vary: "Origin", "access-control-expose-headers": exposed });
  return {
    plugin: {
      origin: any ? "*" : origins,
      credentials: false,
      exposedHeaders: exposed,
      methods: "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS",
      maxAge: 600,
    },
    headFor: (origin) => (any ? anyHead : origin === undefined ? noOriginHead : undefined),
  };
}
