// The one translation of Fastify's errors (its body reader, router and
// content-type parsers, and @fastify/multipart's) into catalogue errors.
// Every place that meets one goes through `fromFastify`: the REST error
// handler and the URL refusals (transport/http/fastify-errors.ts,
// server/public-app.ts), the multipart reader (transport/http/multipart-body.ts),
// the RPC routes (transport/rpc/rpc-routes.ts) and the HTTP/2 stream lane,
// which meets the same conditions outside Fastify and builds Fastify's own
// error for them (transport/rpc/stream-lane.ts). Here, not in
// transport/http, because transport/http imports transport/rpc.
import { Code, ConnectError } from "@connectrpc/connect";
import { errorCodes } from "fastify";
import { appError } from "../../kernel/errors.js";

interface FastifyLikeError {
  code?: unknown;
  statusCode?: unknown;
  message?: unknown;
}

/**
 * The catalogue error for an error Fastify (or a Fastify plugin) raised. A
 * ConnectError is ours already (the body budget failing a request stream,
 * whatever status Fastify's body reader stamped on it); an error Fastify
 * stamped with no client status is the request going away mid-body.
 * `form`: the multipart reader's part limits, named in the refusal.
 */
export function fromFastify(err: unknown, form?: { maxFiles: number; maxFields: number }): ConnectError {
  if (err instanceof ConnectError) return err;
  const e = (err ?? {}) as FastifyLikeError;
  switch (e.code) {
    case "FST_ERR_CTP_BODY_TOO_LARGE":
    case "FST_REQ_FILE_TOO_LARGE":
      return appError("payload_too_large", undefined, { cause: err });
    case "FST_PARTS_LIMIT":
    case "FST_FILES_LIMIT":
    case "FST_FIELDS_LIMIT":
      return appError("payload_too_large", form ? `Too many form parts (at most ${form.maxFiles} files and ${form.maxFields} fields).` : "Too many form parts.", { cause: err });
    case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
    case "FST_ERR_CTP_INVALID_TYPE":
    case "FST_INVALID_MULTIPART_CONTENT_TYPE":
      return appError("unsupported_media_type", undefined, { cause: err });
    case "FST_ERR_CTP_EMPTY_JSON_BODY":
    case "FST_ERR_CTP_INVALID_JSON_BODY":
      return appError("bad_request", "Malformed JSON body.", { cause: err });
    case "FST_ERR_CTP_INVALID_CONTENT_LENGTH":
      return appError("bad_request", "Invalid Content-Length.", { cause: err });
    case "FST_ERR_BAD_URL":
      return appError("bad_request", "Malformed URL.", { cause: err });
    // An over-long path segment names nothing that exists (slugs, UUIDs and ids are shorter).
    case "FST_ERR_MAX_PARAM_LENGTH":
      return appError("not_found", "No such resource.", { cause: err });
    case "FST_PROTO_VIOLATION":
      return appError("bad_request", "Malformed multipart body: a field name is not allowed.", { cause: err });
    case "FST_INVALID_JSON_FIELD_ERROR":
      return appError("bad_request", "Malformed multipart body: a part declared as application/json is not valid JSON.", { cause: err });
    case "FST_MP_PREMATURE_CLOSE":
      return appError("bad_request", "Malformed multipart body: the request ended before the closing boundary.", { cause: err });
  }
  if (err instanceof SyntaxError) return appError("bad_request", "Malformed JSON body.", { cause: err });
  const status = typeof e.statusCode === "number" ? e.statusCode : undefined;
  if (status === 413) return appError("payload_too_large", undefined, { cause: err });
  if (status !== undefined && status >= 400 && status < 500) return appError("bad_request", typeof e.message === "string" ? e.message : undefined, { cause: err });
  // A client that went away mid-body is not a server fault (as connect-node's body reader says).
  return new ConnectError("the request was aborted", Code.Aborted, undefined, undefined, err);
}

/** A body past the route's limit, as Fastify's body reader refuses it. */
export function bodyTooLarge(): ConnectError {
  return fromFastify(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE());
}

/** A body whose length is not its declared Content-Length, as Fastify's body reader refuses it. */
export function contentLengthMismatch(): ConnectError {
  return fromFastify(new errorCodes.FST_ERR_CTP_INVALID_CONTENT_LENGTH());
}
