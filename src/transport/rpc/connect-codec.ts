// The Connect protocol's unary POST (application/proto and application/json)
// as connect-node's router speaks it (@connectrpc/connect
// protocol-connect/handler-factory.js): the body is the message, possibly
// compressed (Content-Encoding, gzip or br); the answer is the message
// (compressed from 1 KiB when Accept-Encoding allows), trailers as
// "trailer-" headers; an error is the Connect error JSON (code, message,
// details with pulsebase.common.v1.ErrorDetail) with the HTTP status
// connect-es maps its code to. Connect-Protocol-Version is not required
// (connect-node's default). Connect GET stays on connect-node
// (docs/architecture.md).
import { errorToJsonBytes, codeToHttpStatus, parseContentType, parseTimeout } from "@connectrpc/connect/protocol-connect";
import { compressionNegotiate, mergeNonProtocolHeaders } from "@connectrpc/connect/protocol";
import type { OutgoingHttpHeaders } from "node:http";
import { ACCEPT_COMPRESSION, COMPRESS_MIN_BYTES, connectErrorOf, deadlineOf, header, parseMessage, putHeaders, serializerOf, type Negotiated, type RpcCodec, type RpcResponse } from "./codec.js";

export const connectCodec: RpcCodec = {
  protocol: "connect",

  negotiate(contentType, headers): Negotiated | undefined {
    const type = parseContentType(contentType);
    if (!type || type.stream) return undefined;
    const compression = compressionNegotiate(ACCEPT_COMPRESSION, header(headers, "content-encoding"), header(headers, "accept-encoding"), "Accept-Encoding");
    const timeout = parseTimeout(header(headers, "connect-timeout-ms"), Number.MAX_SAFE_INTEGER);
    return { binary: type.binary, request: compression.request, response: compression.response, error: compression.error ?? timeout.error, deadlineAt: deadlineOf(timeout) };
  },

  read(m, n, body, readMaxBytes) {
    if (!n.request || body.byteLength === 0) return parseMessage(m, n.binary, body, readMaxBytes);
    return n.request.decompress(body, readMaxBytes).then((b) => parseMessage(m, n.binary, b, readMaxBytes));
  },

  answer(res, head, m, n, ctx, output) {
    const body = serializerOf(m)(n.binary, output);
    head["content-type"] = n.binary ? "application/proto" : "application/json";
    putHeaders(head, ctx.setHeaders);
    putHeaders(head, ctx.setTrailers, "trailer-");
    return send(res, 200, head, n, body);
  },

  fail(res, head, n, ctx, err) {
    const error = connectErrorOf(err);
    const h = new Headers(ctx?.setHeaders);
    h.set("content-type", "application/json");
    // Copy any metadata the error carries, as connect-node does (not for errors read from the wire).
    if (!error.isWireError) mergeNonProtocolHeaders(h, error.metadata);
    putHeaders(head, h);
    putHeaders(head, ctx?.setTrailers, "trailer-");
    return send(res, codeToHttpStatus(error.code), head, n, errorToJsonBytes(error, {}));
  },
};

function send(res: RpcResponse, status: number, head: OutgoingHttpHeaders, n: Negotiated, body: Uint8Array): void | Promise<void> {
  if (n.response && body.byteLength >= COMPRESS_MIN_BYTES) {
    const encoding = n.response.name;
    return n.response.compress(body).then((z) => {
      head["content-encoding"] = encoding;
      end(res, status, head, z);
    });
  }
  end(res, status, head, body);
}

function end(res: RpcResponse, status: number, head: OutgoingHttpHeaders, body: Uint8Array): void {
  head["content-length"] = body.byteLength;
  res.writeHead(status, head);
  res.end(body);
}
