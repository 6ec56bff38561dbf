// The fast RPC pipeline (rpc-routes.ts, the codecs and the dispatcher) over
// real sockets: Connect, gRPC and gRPC-Web framing, compression, deadlines,
// the gate before the body, limits, malformed input; and the same requests
// answered alike by PULSEBASE_RPC_PIPELINE=connect-node (connect-es's router).
import { gunzipSync, gzipSync } from "node:zlib";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { findTrailerError } from "@connectrpc/connect/protocol-grpc";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorDetailSchema } from "../../../gen/pulsebase/common/v1/error_pb.js";
import { CreateConsumerRequestSchema } from "../../../gen/pulsebase/platform/v1/consumer_pb.js";
import { QueryRequestSchema, QueryResponseSchema } from "../../../gen/pulsebase/platform/v1/database_pb.js";
import { frame, frames, GOOD, h1Call, h2Call, startRpcApp, webTrailers, type RpcApp, type WireAnswer } from "./rpc-app.js";
import { until } from "../../helpers/until.js";

const QUERY = "/pulsebase.platform.v1.DatabaseService/Query";
const CREATE = "/pulsebase.platform.v1.ConsumerService/CreateConsumer";
const query = (sql: string) => toBinary(QueryRequestSchema, create(QueryRequestSchema, { sql }));
const connectProto = { "content-type": "application/proto", "connect-protocol-version": "1", authorization: GOOD };
const connectJson = { "content-type": "application/json", "connect-protocol-version": "1", authorization: GOOD };
const grpc = { "content-type": "application/grpc", te: "trailers", authorization: GOOD };
const grpcWeb = { "content-type": "application/grpc-web+proto", authorization: GOOD };

let fast: RpcApp;
let node: RpcApp;

beforeAll(async () => {
  [fast, node] = await Promise.all([startRpcApp({ pipeline: "fast" }), startRpcApp({ pipeline: "connect-node" })]);
});

afterAll(async () => {
  await Promise.all([fast?.close(), node?.close()]);
});

function json(a: WireAnswer): Record<string, unknown> {
  return JSON.parse(a.body.toString("utf8")) as Record<string, unknown>;
}

/** grpc-status-details-bin as a gRPC client reads it. */
function detailOf(bin: string) {
  const err = findTrailerError(new Headers({ "grpc-status-details-bin": bin }))!;
  return { code: err.code, message: err.rawMessage, detail: err.findDetails(ErrorDetailSchema)[0]! };
}

describe("Connect unary", () => {
  it("calls the method with the request id, client address, consumer, protocol and deadline, over HTTP/2 (binary) and HTTP/1.1 (JSON)", async () => {
    const a = await h2Call(fast.url, QUERY, { ...connectProto, "connect-timeout-ms": "5000" }, query("context"));
    expect(a.status).toBe(200);
    expect(a.headers["content-type"]).toBe("application/proto");
    const seen = JSON.parse(fromBinary(QueryResponseSchema, a.body).requestId) as Record<string, unknown>;
    expect(seen).toMatchObject({ appId: 7, protocol: "connect", address: "127.0.0.1", requestId: a.headers["x-request-id"] });
    expect(seen.timeoutMs).toBeGreaterThan(4000);
    expect(seen.timeoutMs).toBeLessThanOrEqual(5000);

    const b = await h1Call(fast.url, QUERY, connectJson, Buffer.from(JSON.stringify({ sql: "context" })));
    expect(b.status).toBe(200);
    expect(b.headers["content-type"]).toBe("application/json");
    const seen1 = JSON.parse((json(b) as { requestId: string }).requestId) as Record<string, unknown>;
    expect(seen1).toMatchObject({ appId: 7, protocol: "connect", requestId: b.headers["x-request-id"] });
    expect(seen1.timeoutMs).toBeUndefined();
  });

  it("refuses a bad token before reading the body: the answer comes while the body is still unsent", async () => {
    const before = fast.calls.length;
    const a = await h2Call(fast.url, QUERY, { ...connectProto, authorization: "Bearer nope", "content-length": "200000" }, undefined, { send: false });
    expect(a.status).toBe(401);
    expect(json(a)).toMatchObject({ code: "unauthenticated", message: "Missing, invalid or expired token." });
    expect(fast.calls.length).toBe(before);
  });

  it("answers deadline_exceeded when the call runs past connect-timeout-ms, and aborts the handler's signal", async () => {
    const n = fast.slow.length;
    const a = await h2Call(fast.url, QUERY, { ...connectProto, "connect-timeout-ms": "50" }, query("slow"));
    // answered before the handler (300 ms) ended
    expect(fast.slow.length).toBe(n);
    expect(a.status).toBe(504);
    expect(json(a)).toMatchObject({ code: "deadline_exceeded", message: "The operation timed out." });
    await until(async () => fast.slow[n]);
    expect(fast.slow[n]).toMatchObject({ aborted: true });
    expect(fast.slow[n]!.timeoutMs).toBeLessThanOrEqual(50);
  });

  it("aborts the handler's signal when the client goes away before the answer", async () => {
    const n = fast.slow.length;
    await expect(h2Call(fast.url, QUERY, connectProto, query("slow"), { resetAfterMs: 50 })).rejects.toThrow();
    await until(async () => fast.slow[n]);
    expect(fast.slow[n]).toMatchObject({ aborted: true, timeoutMs: undefined });
  });

  it("takes a gzip request and gzips an answer of 1 KiB or more when Accept-Encoding allows; smaller answers go as they are", async () => {
    const big = await h2Call(fast.url, QUERY, { ...connectJson, "content-encoding": "gzip", "accept-encoding": "gzip" }, gzipSync(JSON.stringify({ sql: "big" })));
    expect(big.status).toBe(200);
    expect(big.headers["content-encoding"]).toBe("gzip");
    expect(JSON.parse(gunzipSync(big.body).toString())).toEqual({ requestId: "x".repeat(5000) });
    const small = await h2Call(fast.url, QUERY, { ...connectJson, "accept-encoding": "gzip" }, Buffer.from(JSON.stringify({ sql: "s" })));
    expect(small.headers["content-encoding"]).toBeUndefined();
    expect(json(small)).toEqual({ requestId: "sql:s" });
    const corrupt = await h2Call(fast.url, QUERY, { ...connectJson, "content-encoding": "gzip" }, Buffer.from("not gzip at all"));
    expect(corrupt.status).toBe(400);
    expect(json(corrupt)).toMatchObject({ code: "invalid_argument" });
  });

  it("refuses a body over the limit, declared or not, with resource_exhausted and the payload_too_large detail", async () => {
    const body = Buffer.alloc(300 * 1024, 1);
    const declared = await h2Call(fast.url, QUERY, { ...connectProto, "content-length": String(body.length) }, undefined, { send: false });
    expect(declared.status).toBe(429);
    expect(json(declared)).toMatchObject({ code: "resource_exhausted", details: [{ type: "pulsebase.common.v1.ErrorDetail", debug: { code: "payload_too_large", httpStatus: 413 } }] });
    const undeclared = await h2Call(fast.url, QUERY, connectProto, body);
    expect(undeclared.status).toBe(429);
    expect(json(undeclared)).toMatchObject({ code: "resource_exhausted" });
    // a method without a token takes 64 KiB at most
    const anon = await h2Call(fast.url, CREATE, { "content-type": "application/proto" }, toBinary(CreateConsumerRequestSchema, create(CreateConsumerRequestSchema, { deviceId: "d".repeat(70 * 1024) })));
    expect(anon.status).toBe(429);
    // and the listener serves on
    expect((await h2Call(fast.url, CREATE, { "content-type": "application/proto" }, toBinary(CreateConsumerRequestSchema, create(CreateConsumerRequestSchema, { deviceId: "ok" })))).status).toBe(200);
  });

  it("answers malformed messages with a clean error, never a crash", async () => {
    const badJson = await h2Call(fast.url, QUERY, connectJson, Buffer.from("{not json"));
    expect(badJson.status).toBe(400);
    expect(json(badJson)).toMatchObject({ code: "invalid_argument" });
    const badProto = await h2Call(fast.url, QUERY, connectProto, Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff]));
    expect(json(badProto)).toMatchObject({ code: "internal", message: expect.stringMatching(/^parse binary: /) });
    expect((await h2Call(fast.url, QUERY, connectProto, query("after"))).status).toBe(200);
  });

  it("415 for a content type no protocol takes; an unknown method is the listener's 404", async () => {
    const plain = await h2Call(fast.url, QUERY, { "content-type": "text/plain", authorization: GOOD }, Buffer.from("x"));
    expect(plain.status).toBe(415);
    // no RPC at all: the platform's envelope, like every other route of the listener
    expect(JSON.parse(plain.body.toString())).toEqual({ error: "unsupported_media_type", message: "Unsupported content type." });
    const unknown = await h2Call(fast.url, "/pulsebase.platform.v1.DatabaseService/Nope", connectProto, query("x"));
    expect(unknown.status).toBe(404);
  });

  it("logs a server fault once, with the procedure, and a client error not at all", async () => {
    const n = fast.errors.length;
    const a = await h2Call(fast.url, QUERY, connectJson, Buffer.from(JSON.stringify({ sql: "boom" })));
    expect(a.status).toBe(500);
    expect(json(a)).toEqual({ code: "internal", message: "internal error" });
    await h2Call(fast.url, QUERY, connectJson, Buffer.from(JSON.stringify({ sql: "denied" })));
    const lines = fast.errors.slice(n);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ msg: "rpc failed", procedure: "pulsebase.platform.v1.DatabaseService/Query", status: 500, reqId: a.headers["x-request-id"] });
  });
});

describe("gRPC", () => {
  it("answers one frame and grpc-status 0 in the trailers; the service's headers and trailers go along", async () => {
    const a = await h2Call(fast.url, QUERY, grpc, frame(query("headers")));
    expect(a.status).toBe(200);
    expect(a.headers["content-type"]).toBe("application/grpc+proto");
    expect(a.headers["x-custom"]).toBe("yes");
    expect(a.trailers).toMatchObject({ "grpc-status": "0", "x-trail": "end" });
    const [f] = frames(a.body);
    expect(fromBinary(QueryResponseSchema, f!.data).requestId).toBe("h");
  });

  it("puts status, spec-encoded message and the ErrorDetail in the trailers", async () => {
    const a = await h2Call(fast.url, QUERY, grpc, frame(query("denied")));
    expect(a.trailers["grpc-status"]).toBe("7");
    expect(a.trailers["grpc-message"]).toBe("Nope: not allowed, 100%25 sure.");
    expect(detailOf(a.trailers["grpc-status-details-bin"]!)).toMatchObject({ code: 7, message: "Nope: not allowed, 100% sure.", detail: { code: "forbidden_query", httpStatus: 403 } });
  });

  it("refuses a bad token before the body with UNAUTHENTICATED", async () => {
    const a = await h2Call(fast.url, QUERY, { ...grpc, authorization: "Bearer nope", "content-length": "100000" }, undefined, { send: false });
    expect(a.status).toBe(200);
    expect(a.trailers["grpc-status"]).toBe("16");
  });

  it("cuts a call at grpc-timeout with DEADLINE_EXCEEDED", async () => {
    const a = await h2Call(fast.url, QUERY, { ...grpc, "grpc-timeout": "50m" }, frame(query("slow")));
    expect(a.trailers["grpc-status"]).toBe("4");
  });

  it("takes a gzip frame and gzips a large answer's frame", async () => {
    const a = await h2Call(fast.url, QUERY, { ...grpc, "grpc-encoding": "gzip", "grpc-accept-encoding": "gzip" }, frame(gzipSync(query("big")), 1));
    expect(a.headers["grpc-encoding"]).toBe("gzip");
    const [f] = frames(a.body);
    expect(f!.flags).toBe(1);
    expect(fromBinary(QueryResponseSchema, gunzipSync(f!.data)).requestId).toBe("x".repeat(5000));
  });

  it.each([
    ["a truncated frame", Buffer.from([0, 0, 0, 0, 9, 1, 2]), "3", "protocol error: incomplete envelope"],
    ["no frame", Buffer.alloc(0), "12", "protocol error: missing input message for unary method"],
    ["two frames", Buffer.concat([frame(query("a")), frame(query("b"))]), "12", "protocol error: received extra input message for unary method"],
    ["a frame longer than the limit", Buffer.from([0, 0x7f, 0xff, 0xff, 0xff]), "8", undefined],
    ["a compressed frame without grpc-encoding", frame(gzipSync(query("a")), 1), "13", undefined],
  ])("answers %s with a clean protocol error", async (_what, body, status, message) => {
    const a = await h2Call(fast.url, QUERY, grpc, body);
    expect(a.status).toBe(200);
    expect(a.trailers["grpc-status"]).toBe(status);
    if (message) expect(decodeURIComponent(a.trailers["grpc-message"]!)).toBe(message);
    expect((await h2Call(fast.url, QUERY, grpc, frame(query("after")))).trailers["grpc-status"]).toBe("0");
  });
});

describe("gRPC-Web", () => {
  it.each([["HTTP/1.1", h1Call], ["HTTP/2", h2Call]] as const)("answers over %s with the trailers in the 0x80 frame", async (_v, call) => {
    const ok = await call(fast.url, QUERY, grpcWeb, frame(query("headers")));
    expect(ok.status).toBe(200);
    expect(ok.headers["content-type"]).toBe("application/grpc-web+proto");
    const [msg, trailer] = frames(ok.body);
    expect(fromBinary(QueryResponseSchema, msg!.data).requestId).toBe("h");
    expect(trailer!.flags).toBe(0x80);
    expect(webTrailers(trailer!.data)).toEqual({ "grpc-status": "0", "x-trail": "end" });

    const denied = await call(fast.url, QUERY, grpcWeb, frame(query("denied")));
    const only = frames(denied.body);
    expect(only).toHaveLength(1);
    const t = webTrailers(only[0]!.data);
    expect(t).toMatchObject({ "grpc-status": "7", "grpc-message": "Nope: not allowed, 100%25 sure." });
    expect(detailOf(t["grpc-status-details-bin"]!).detail.code).toBe("forbidden_query");
  });

  it("skips a request frame flagged as trailers, as connect-node does: alone it is no message, after the message it changes nothing", async () => {
    const alone = await h1Call(fast.url, QUERY, grpcWeb, frame(query("x"), 0x80));
    expect(webTrailers(frames(alone.body)[0]!.data)).toMatchObject({ "grpc-status": "12", "grpc-message": "protocol error: missing input message for unary method" });
    const after = await h1Call(fast.url, QUERY, grpcWeb, Buffer.concat([frame(query("after")), frame(Buffer.from("grpc-status: 0\r\n"), 0x80)]));
    const [msg, trailer] = frames(after.body);
    expect(fromBinary(QueryResponseSchema, msg!.data).requestId).toBe("sql:after");
    expect(webTrailers(trailer!.data)["grpc-status"]).toBe("0");
  });
});

/** What a client can tell apart: status, protocol headers, decoded body and trailers. */
function meaning(a: WireAnswer) {
  const type = a.headers["content-type"] ?? "";
  const pick = (h: Record<string, string>) => Object.fromEntries(Object.entries(h).filter(([k]) => /^(content-type|content-encoding|grpc-|x-custom|x-trail|trailer-|access-control-expose-headers)/.test(k)));
  const raw = a.headers["content-encoding"] === "gzip" ? gunzipSync(a.body) : a.body;
  let body: unknown = raw.toString("base64");
  if (type === "application/json" && raw.length) body = JSON.parse(raw.toString("utf8"));
  if (type.startsWith("application/grpc-web")) body = frames(a.body).map((f) => (f.flags & 0x80 ? webTrailers(f.data) : f.data.toString("base64")));
  if (type === "application/json; charset=utf-8") body = json(a);
  return { status: a.status, headers: pick(a.headers), body, trailers: pick(a.trailers) };
}

describe("fast and connect-node answer alike", () => {
  const json = (o: unknown) => Buffer.from(JSON.stringify(o));
  const cases: [string, "h1" | "h2", string, Record<string, string>, Uint8Array | undefined][] = [
    ["Connect proto", "h2", QUERY, connectProto, query("x")],
    ["Connect JSON over HTTP/1.1", "h1", QUERY, connectJson, json({ sql: "x" })],
    ["Connect JSON with unknown fields", "h2", QUERY, connectJson, json({ sql: "x", nope: 1 })],
    ["Connect error with details", "h2", QUERY, connectJson, json({ sql: "denied" })],
    ["Connect service headers and trailers", "h2", QUERY, connectProto, query("headers")],
    ["Connect server fault", "h2", QUERY, connectJson, json({ sql: "boom" })],
    ["Connect without a token", "h2", QUERY, { ...connectJson, authorization: "" }, json({ sql: "x" })],
    ["Connect gzip both ways", "h2", QUERY, { ...connectJson, "content-encoding": "gzip", "accept-encoding": "gzip" }, gzipSync(JSON.stringify({ sql: "big" }))],
    ["Connect unknown compression", "h2", QUERY, { ...connectJson, "content-encoding": "zstd" }, json({ sql: "x" })],
    ["Connect bad timeout header", "h2", QUERY, { ...connectJson, "connect-timeout-ms": "soon" }, json({ sql: "x" })],
    ["Connect malformed JSON", "h2", QUERY, connectJson, Buffer.from("{")],
    ["Connect anonymous method", "h2", CREATE, { "content-type": "application/json" }, json({ deviceId: "d1" })],
    ["streaming content type", "h2", QUERY, { ...connectProto, "content-type": "application/connect+proto" }, query("x")],
    ["no content type", "h2", QUERY, { authorization: GOOD }, query("x")],
    ["unknown method", "h2", "/pulsebase.platform.v1.DatabaseService/Nope", connectProto, query("x")],
    ["gRPC", "h2", QUERY, grpc, frame(query("headers"))],
    ["gRPC JSON", "h2", QUERY, { ...grpc, "content-type": "application/grpc+json" }, frame(json({ sql: "x" }))],
    ["gRPC error", "h2", QUERY, grpc, frame(query("denied"))],
    ["gRPC without a token", "h2", QUERY, { ...grpc, authorization: "Bearer no" }, frame(query("x"))],
    ["gRPC gzip", "h2", QUERY, { ...grpc, "grpc-encoding": "gzip", "grpc-accept-encoding": "gzip" }, frame(gzipSync(query("big")), 1)],
    ["gRPC unknown compression", "h2", QUERY, { ...grpc, "grpc-encoding": "snappy" }, frame(query("x"))],
    ["gRPC bad timeout", "h2", QUERY, { ...grpc, "grpc-timeout": "1x" }, frame(query("x"))],
    ["gRPC truncated frame", "h2", QUERY, grpc, Buffer.from([0, 0, 0, 0, 9, 1])],
    ["gRPC two frames", "h2", QUERY, grpc, Buffer.concat([frame(query("a")), frame(query("b"))])],
    ["gRPC garbage message", "h2", QUERY, grpc, frame(Buffer.from([0xff, 0xff, 0xff]))],
    ["gRPC-Web over HTTP/1.1", "h1", QUERY, grpcWeb, frame(query("headers"))],
    ["gRPC-Web error", "h2", QUERY, grpcWeb, frame(query("denied"))],
    ["gRPC-Web JSON", "h1", QUERY, { ...grpcWeb, "content-type": "application/grpc-web+json" }, frame(json({ sql: "y" }))],
    ["gRPC-Web text (not served)", "h1", QUERY, { ...grpcWeb, "content-type": "application/grpc-web-text" }, Buffer.from("AAAAAAA=")],
    // Malformed gRPC-Web calls (issue #28): over both HTTP versions, the status and code connect-node gives.
    ...(["h1", "h2"] as const).flatMap((v): typeof cases => [
      [`gRPC-Web end-of-stream frame only (${v})`, v, QUERY, grpcWeb, frame(new Uint8Array(0), 0x80)],
      [`gRPC-Web end-of-stream frame with trailers only (${v})`, v, QUERY, grpcWeb, frame(Buffer.from("grpc-status: 0\r\n"), 0x80)],
      [`gRPC-Web message then end-of-stream frame (${v})`, v, QUERY, grpcWeb, Buffer.concat([frame(query("a")), frame(new Uint8Array(0), 0x80)])],
      [`gRPC-Web end-of-stream frame then message (${v})`, v, QUERY, grpcWeb, Buffer.concat([frame(new Uint8Array(0), 0x80), frame(query("a"))])],
      [`gRPC-Web no body (${v})`, v, QUERY, grpcWeb, undefined],
      [`gRPC-Web truncated frame header (${v})`, v, QUERY, grpcWeb, Buffer.from([0, 0, 0])],
      [`gRPC-Web truncated frame (${v})`, v, QUERY, grpcWeb, Buffer.from([0, 0, 0, 0, 9, 1, 2])],
      [`gRPC-Web compressed flag without grpc-encoding (${v})`, v, QUERY, grpcWeb, frame(query("a"), 1)],
      [`gRPC-Web compressed flag, not gzip (${v})`, v, QUERY, { ...grpcWeb, "grpc-encoding": "gzip" }, frame(query("a"), 1)],
      [`gRPC-Web unknown flag bits (${v})`, v, QUERY, grpcWeb, frame(query("a"), 0x02)],
      [`gRPC-Web trailing garbage (${v})`, v, QUERY, grpcWeb, Buffer.concat([frame(query("a")), Buffer.from([1, 2, 3])])],
      [`gRPC-Web two messages (${v})`, v, QUERY, grpcWeb, Buffer.concat([frame(query("a")), frame(query("b"))])],
      [`gRPC-Web garbage message (${v})`, v, QUERY, grpcWeb, frame(Buffer.from([0xff, 0xff, 0xff]))],
      [`gRPC-Web wrong content type with a body (${v})`, v, QUERY, { ...grpcWeb, "content-type": "application/grpc-webby" }, frame(query("a"))],
      [`gRPC-Web wrong content type without a body (${v})`, v, QUERY, { ...grpcWeb, "content-type": "application/grpc-webby" }, undefined],
      [`gRPC-Web text with a body (${v})`, v, QUERY, { ...grpcWeb, "content-type": "application/grpc-web-text+proto" }, Buffer.from("AAAAAAA=")],
      [`gRPC-Web text without a body (${v})`, v, QUERY, { ...grpcWeb, "content-type": "application/grpc-web-text+proto" }, undefined],
      [`plain text with a body (${v})`, v, QUERY, { ...grpcWeb, "content-type": "text/plain" }, Buffer.from("SELECT 1")],
      [`plain text without a body (${v})`, v, QUERY, { ...grpcWeb, "content-type": "text/plain" }, undefined],
      [`no content type without a body (${v})`, v, QUERY, { authorization: GOOD }, undefined],
      [`no content type with a declared body (${v})`, v, QUERY, { authorization: GOOD, "content-length": "5" }, frame(new Uint8Array(0))],
      [`gRPC-Web content type in capitals (${v})`, v, QUERY, { ...grpcWeb, "content-type": "APPLICATION/GRPC-WEB" }, frame(query("denied"))],
      [`JSON with another charset (${v})`, v, QUERY, { ...grpcWeb, "content-type": "application/json; charset=latin1" }, Buffer.from("{}")],
      [`Connect streaming with a parameter (${v})`, v, QUERY, { ...grpcWeb, "content-type": "application/connect+proto; x=1" }, undefined],
      [`gRPC-Web text JSON with a charset (${v})`, v, QUERY, { ...grpcWeb, "content-type": "application/grpc-web-text+json; charset=utf-8" }, undefined],
    ]),
  ];
  it.each(cases)("%s", async (_name, version, path, headers, body) => {
    const call = version === "h1" ? h1Call : h2Call;
    const clean = Object.fromEntries(Object.entries(headers).filter(([, v]) => v !== ""));
    const [a, b] = await Promise.all([call(fast.url, path, clean, body), call(node.url, path, clean, body)]);
    expect(meaning(a)).toEqual(meaning(b));
  });
});
