// gRPC-Web unary calls (application/grpc-web, +proto, +json; not the -text
// variant, which connect-node refuses too) as connect-node's router answers
// them (@connectrpc/connect protocol-grpc-web/handler-factory.js): the
// request as in gRPC (grpc-codec.ts), the answer's trailers as a last frame
// flagged 0x80 ("name: value\r\n" lines), over HTTP/1.1 and HTTP/2 alike.
import { parseContentType, trailerFlag, trailerSerialize } from "@connectrpc/connect/protocol-grpc-web";
import type { OutgoingHttpHeaders } from "node:http";
import { COMPRESS_MIN_BYTES, serializerOf, type RpcCodec, type RpcResponse } from "./codec.js";
import { frame, readUnaryEnvelope } from "./envelope.js";
import { errorTrailers, grpcResponseHead, negotiateGrpc, okTrailers } from "./grpc-codec.js";

export const grpcWebCodec: RpcCodec = {
  protocol: "grpc_web",

  negotiate(contentType, headers) {
    const type = parseContentType(contentType);
    return type && !type.text ? negotiateGrpc(type, headers) : undefined;
  },

  read(m, n, body, readMaxBytes) {
    return readUnaryEnvelope(m, n, body, readMaxBytes, trailerFlag);
  },

  answer(res, head, m, n, ctx, output) {
    const data = serializerOf(m)(n.binary, output);
    grpcResponseHead(head, "application/grpc-web", n, ctx.setHeaders);
    const message = frame(0, data, n, COMPRESS_MIN_BYTES);
    const trailer = frame(trailerFlag, trailerSerialize(okTrailers(ctx.setTrailers)), n, COMPRESS_MIN_BYTES);
    if (message instanceof Promise || trailer instanceof Promise) {
      return Promise.all([message, trailer]).then(([a, b]) => end(res, head, a, b));
    }
    end(res, head, message, trailer);
  },

  fail(res, head, n, ctx, err) {
    grpcResponseHead(head, "application/grpc-web", n, ctx?.setHeaders);
    const trailer = frame(trailerFlag, trailerSerialize(errorTrailers(ctx?.setTrailers, err)), n, COMPRESS_MIN_BYTES);
    if (trailer instanceof Promise) return trailer.then((b) => end(res, head, undefined, b));
    end(res, head, undefined, trailer);
  },
};

function end(res: RpcResponse, head: OutgoingHttpHeaders, message: Uint8Array | undefined, trailer: Uint8Array): void {
  const body = message ? Buffer.concat([message, trailer]) : trailer;
  res.writeHead(200, head);
  res.end(body);
}
