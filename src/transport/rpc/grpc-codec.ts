// gRPC unary calls (application/grpc, +proto, +json) as connect-node's
// router answers them (@connectrpc/connect protocol-grpc/handler-factory.js):
// the body is one length-prefixed frame (envelope.ts), compressed as
// grpc-encoding says (gzip or br); the answer is one frame (compressed from
// 1 KiB when grpc-accept-encoding allows) and HTTP trailers grpc-status,
// grpc-message (percent-encoded as the gRPC spec says, grpc-message.ts) and
// grpc-status-details-bin (a google.rpc.Status with the error's details).
import { parseContentType, parseTimeout, setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import { compressionNegotiate } from "@connectrpc/connect/protocol";
import type { OutgoingHttpHeaders } from "node:http";
import { encodeGrpcMessage } from "../connect-node/grpc-message.js";
import { ACCEPT_COMPRESSION, COMPRESS_MIN_BYTES, connectErrorOf, deadlineOf, header, putHeaders, serializerOf, type Negotiated, type RpcCodec, type RpcResponse } from "./codec.js";
import { frame, readUnaryEnvelope } from "./envelope.js";

/** gRPC's and gRPC-Web's negotiation: the same headers, another content type. */
export function negotiateGrpc(type: { binary: boolean }, headers: Parameters<RpcCodec["negotiate"]>[1]): Negotiated {
  const compression = compressionNegotiate(ACCEPT_COMPRESSION, header(headers, "grpc-encoding"), header(headers, "grpc-accept-encoding"), "Grpc-Accept-Encoding");
  const timeout = parseTimeout(header(headers, "grpc-timeout"), Number.MAX_SAFE_INTEGER);
  return { binary: type.binary, request: compression.request, response: compression.response, error: compression.error ?? timeout.error, deadlineAt: deadlineOf(timeout) };
}

/** The trailers of a call: those the service set, and grpc-status 0. */
export function okTrailers(set: Headers | undefined): Headers {
  const t = new Headers(set);
  t.set("grpc-status", "0");
  return t;
}

/** The trailers of a failed call: those the service set, then status, spec-encoded message, details. */
export function errorTrailers(set: Headers | undefined, err: unknown): Headers {
  const trailers = okTrailers(set);
  const error = connectErrorOf(err);
  setTrailerStatus(trailers, error);
  trailers.set("grpc-message", encodeGrpcMessage(error.rawMessage));
  return trailers;
}

/** The response headers of gRPC ("application/grpc") and gRPC-Web ("application/grpc-web"). */
export function grpcResponseHead(head: OutgoingHttpHeaders, type: string, n: Negotiated, set: Headers | undefined): void {
  head["content-type"] = n.binary ? `${type}+proto` : `${type}+json`;
  if (n.response) head["grpc-encoding"] = n.response.name;
  putHeaders(head, set);
}

export const grpcCodec: RpcCodec = {
  protocol: "grpc",

  negotiate(contentType, headers) {
    const type = parseContentType(contentType);
    return type ? negotiateGrpc(type, headers) : undefined;
  },

  read(m, n, body, readMaxBytes) {
    return readUnaryEnvelope(m, n, body, readMaxBytes);
  },

  answer(res, head, m, n, ctx, output) {
    const data = serializerOf(m)(n.binary, output);
    grpcResponseHead(head, "application/grpc", n, ctx.setHeaders);
    const trailers: OutgoingHttpHeaders = { "grpc-status": "0" };
    putHeaders(trailers, ctx.setTrailers);
    const body = frame(0, data, n, COMPRESS_MIN_BYTES);
    if (body instanceof Promise) return body.then((b) => end(res, head, trailers, b));
    end(res, head, trailers, body);
  },

  fail(res, head, n, ctx, err) {
    grpcResponseHead(head, "application/grpc", n, ctx?.setHeaders);
    const trailers: OutgoingHttpHeaders = {};
    putHeaders(trailers, errorTrailers(ctx?.setTrailers, err));
    end(res, head, trailers, undefined);
  },
};

function end(res: RpcResponse, head: OutgoingHttpHeaders, trailers: OutgoingHttpHeaders, body: Uint8Array | undefined): void {
  res.writeHead(200, head);
  res.addTrailers(trailers);
  if (body) res.end(body);
  else res.end();
}
