// Every catalogue entry over every protocol: a method that throws it is
// answered with the entry's REST status and envelope over REST, the HTTP
// status connect-es's protocol table gives its Connect code over Connect,
// its grpc-status over gRPC and gRPC-Web, and the same ErrorDetail (code,
// REST status) and message everywhere; with the default RPC pipeline (the
// Fastify routes over HTTP/1.1, the stream lane over HTTP/2) and with
// connect-node's router. The CMS envelope of every entry is checked too.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create, toJson, type JsonValue } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { codeToHttpStatus, codeToString } from "@connectrpc/connect/protocol-connect";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorDetailSchema } from "../../../gen/pulsebase/common/v1/error_pb.js";
import { DatabaseService, QueryRequestSchema, QueryResponseSchema } from "../../../gen/pulsebase/platform/v1/database_pb.js";
import { appError, catalogue, cmsCodeFor, codeFallback, type CatalogueEntry, type ErrorCode } from "../../../src/kernel/errors.js";
import { binding } from "../../../src/kernel/module.js";
import type { ConsumerPrincipal } from "../../../src/kernel/principal.js";
import { buildPublicApp } from "../../../src/server/public-app.js";
import { loadOrCreateTls } from "../../../src/server/tls.js";
import { errorBody } from "../../../src/transport/http/envelopes.js";
import { build, Endpoint, observe, type HttpVersion, type Protocol, type WireRequest } from "./wire.js";

const TOKEN = "Bearer good";
const principal: ConsumerPrincipal = { consumerId: 1, appId: 7, appKey: "k", userId: "u", deviceId: "d" };
const entries = Object.entries(catalogue) as [ErrorCode, CatalogueEntry][];
const codes = Object.values(Code).filter((c): c is Code => typeof c === "number" && c !== Code.Canceled);
const QUERY = "/pulsebase.platform.v1.DatabaseService/Query";
const internalMessage = catalogue.internal_error.message;

interface Server {
  endpoint: Endpoint;
  close(): Promise<void>;
}

/** A public listener whose Query throws the catalogue error its sql names ("code:N": a bare ConnectError of code N). */
async function start(pipeline: "fast" | "connect-node"): Promise<Server> {
  const dataDir = await mkdtemp(join(tmpdir(), "pulsebase-catalogue-"));
  const tls = await loadOrCreateTls({ dataDir });
  const db = binding(DatabaseService, {
    query(req) {
      if (req.sql.startsWith("code:")) throw new ConnectError(`bare ${req.sql}`, Number(req.sql.slice(5)) as Code);
      throw appError(req.sql as ErrorCode);
    },
    batch: () => ({}),
  });
  const { app } = await buildPublicApp({
    logger: pino({ level: "silent" }),
    tls,
    bodyLimitBytes: 64 * 1024,
    bodyBudget: { limitBytes: 16 * 1024 * 1024, shareBytes: 8 * 1024 * 1024, timeoutMs: 30_000, minBytesPerSecond: 1 },
    http2MaxStreams: 100,
    maxFileBytes: 1024 * 1024,
    trustedProxies: [],
    corsOrigins: ["*"],
    rpcPipeline: pipeline,
    services: [db],
    authenticate: (h) => {
      if (h === TOKEN) return principal;
      throw appError("unauthenticated");
    },
    ready: () => Promise.resolve(),
  });
  await app.listen({ host: "127.0.0.1", port: 0 });
  const endpoint = new Endpoint(`https://127.0.0.1:${(app.server.address() as { port: number }).port}`);
  return {
    endpoint,
    async close() {
      endpoint.close();
      await app.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

const RPC: [Protocol, HttpVersion][] = [["connect-proto", "h1"], ["connect-proto", "h2"], ["connect-json", "h1"], ["connect-json", "h2"], ["grpc", "h2"], ["grpc-web", "h1"], ["grpc-web", "h2"]];

async function rpc(s: Server, protocol: Protocol, http: HttpVersion, sql: string) {
  const r: WireRequest = { path: QUERY, protocol, http, variant: "plain", json: { sql }, input: QueryRequestSchema, output: QueryResponseSchema, headers: { authorization: TOKEN } };
  return observe(r, await s.endpoint.send(http, QUERY, build(r)));
}

async function rest(s: Server, http: HttpVersion, sql: string): Promise<{ status: number; body: unknown }> {
  const res = await s.endpoint.send(http, "/api/db/query", { headers: { "content-type": "application/json", authorization: TOKEN }, body: Buffer.from(JSON.stringify({ sql })) });
  return { status: res.status, body: JSON.parse(res.body.toString("utf8")) };
}

/** What every protocol must agree on for a thrown error that reads as entry `name`, with Connect code `code`. */
async function expectEverywhere(s: Server, sql: string, name: ErrorCode, code: Code, message: string, bare = false): Promise<void> {
  const e = catalogue[name];
  const detail = toJson(ErrorDetailSchema, create(ErrorDetailSchema, { code: name, httpStatus: e.rest })) as JsonValue;
  const restMessage = e.rest >= 500 && (name === "internal_error" || name === "INTERNAL_ERROR") ? internalMessage : message;
  for (const http of ["h1", "h2"] as const) {
    const r = await rest(s, http, sql);
    const label = `REST ${http} ${sql}`;
    expect(r.status, label).toBe(e.rest);
    if (e.rest === 422) expect(r.body, label).toEqual(name === "validation_failed" ? { message: restMessage, errors: {} } : { error: name, message: restMessage, errors: {} });
    else expect(r.body, label).toEqual({ error: name, message: restMessage });
  }
  for (const [protocol, http] of RPC) {
    const o = await rpc(s, protocol, http, sql);
    const label = `${protocol} ${http} ${sql}`;
    expect(o.problem, label).toBeUndefined();
    if (protocol.startsWith("connect")) {
      // Connect's HTTP status is the protocol's for the code (connect-es's table), never the REST one.
      expect(o.status, label).toBe(codeToHttpStatus(code));
      expect(o.error?.code, label).toBe(codeToString(code));
    } else {
      expect(o.status, label).toBe(200);
      expect(o.error?.code, label).toBe(code);
    }
    expect(o.error?.message, label).toBe(message);
    expect(o.error?.details.map((d) => (d as { value: JsonValue }).value), label).toEqual(bare ? [] : [detail]);
  }
}

describe.each(["fast", "connect-node"] as const)("every catalogue entry over every protocol (%s pipeline)", (pipeline) => {
  let s: Server;
  beforeAll(async () => {
    s = await start(pipeline);
  });
  afterAll(async () => {
    await s?.close();
  });

  it.each(entries)("%s", async (name, e) => {
    await expectEverywhere(s, name, name, e.code, e.message);
  });

  // A ConnectError without a detail (a library's): the catalogue entry its
  // code names over REST; its own code, as thrown (no detail), over the RPC
  // protocols (Canceled is the client's own going away, never answered).
  it.each(codes.filter((c) => codeFallback[c] !== "internal_error").map((c) => [Code[c], c] as const))("a bare %s", async (_n, c) => {
    await expectEverywhere(s, `code:${c}`, codeFallback[c], c, `bare code:${c}`, true);
  });
});

describe("the CMS envelope of every catalogue entry", () => {
  it.each(entries)("%s", (name, e) => {
    const { status, body } = errorBody("cms", appError(name));
    expect(status).toBe(e.rest);
    const code = /^[A-Z_]+$/.test(name) ? name : cmsCodeFor(e.rest);
    const message = e.rest >= 500 && (name === "internal_error" || name === "INTERNAL_ERROR") ? internalMessage : e.message;
    // (the 429 has no code: cms-api.md)
    expect(body).toEqual({ error: e.rest === 429 ? { status, message } : { status, code, message } });
  });
});
