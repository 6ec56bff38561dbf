// The admin listener's unary calls on both pipelines (PULSEBASE_RPC_PIPELINE
// fast and connect-node), over its plain port (HTTP/1.1 and h2c): the one
// access policy sees every call with its message and how it ended, its
// refusal is the answer, a service's Set-Cookie headers reach the client,
// and a server fault is logged once.
import http from "node:http";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import type { FastifyInstance } from "fastify";
import { Writable } from "node:stream";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RunSqlRequestSchema, RunSqlResponseSchema, SqlService } from "../../gen/pulsebase/admin/v1/sql_pb.js";
import type { CallPolicy } from "../../src/kernel/call-policy.js";
import { appError, errorDetail } from "../../src/kernel/errors.js";
import { binding } from "../../src/kernel/module.js";
import { buildAdminApp } from "../../src/server/admin-app.js";
import { frame, frames, h2Call } from "../transport/rpc/rpc-app.js";

const TOKEN = "Bearer op_admin_app_test";

function h1Post(url: string, headers: Record<string, string>, body: string): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: "POST", headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString("utf8") }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

describe.each(["fast", "connect-node"] as const)("the admin listener, PULSEBASE_RPC_PIPELINE=%s", (pipeline) => {
  let app: FastifyInstance;
  let base: string;
  const errors: Record<string, unknown>[] = [];
  const seen: { method: string; sql: string | undefined; agent: unknown }[] = [];
  const settled: { error: string | undefined; results: number | undefined }[] = [];

  beforeAll(async () => {
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const l of chunk.toString("utf8").split("\n")) if (l) errors.push(JSON.parse(l) as Record<string, unknown>);
        done();
      },
    });
    const policy: CallPolicy = async ({ method, header, message }) => {
      seen.push({ method: method.name, sql: (message as { sql?: string } | undefined)?.sql, agent: header.get("user-agent") });
      if (header.get("authorization") !== TOKEN) throw appError("unauthenticated", "A valid operator token is required.");
      return async (error, response) => {
        settled.push({ error: error === undefined ? undefined : (errorDetail(error as never)?.code ?? String(error)), results: (response as { results?: unknown[] } | undefined)?.results?.length });
      };
    };
    app = await buildAdminApp({
      logger: pino({ level: "error" }, sink),
      operatorToken: "unused",
      bodyLimitBytes: 64 * 1024,
      rpcPipeline: pipeline,
      policy,
      services: [
        binding(SqlService, {
          runSql: (req, ctx) => {
            if (req.sql === "boom") throw Object.assign(new Error("disk on fire"), { code: "ENOSPC" });
            ctx.responseHeader.append("set-cookie", "a=1; Path=/");
            ctx.responseHeader.append("set-cookie", "b=2; Path=/");
            return { results: [{ columns: ["x"] }], durationMs: 1 };
          },
          getSchema: () => ({}),
          browseTable: () => ({}),
          readSqlPage: () => ({}),
          insertRow: () => ({}),
          updateRow: () => ({}),
          deleteRow: () => ({}),
          listSqlHistory: () => ({}),
          listSavedQueries: () => ({}),
          saveQuery: () => ({}),
          deleteSavedQuery: () => ({}),
        }),
      ],
    });
    await app.listen({ host: "127.0.0.1", port: 0 });
    base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
  });
  afterAll(async () => {
    await app.close();
  });

  it("runs the policy on the message (Connect JSON, HTTP/1.1), tells it the answer, and sends every Set-Cookie the service set", async () => {
    const res = await h1Post(`${base}/pulsebase.admin.v1.SqlService/RunSql`, { "content-type": "application/json", authorization: TOKEN, "user-agent": "t/1" }, JSON.stringify({ appId: "3", sql: "select 1" }));
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toEqual({ results: [{ columns: ["x"] }], durationMs: 1 });
    expect(res.headers["set-cookie"]).toEqual(["a=1; Path=/", "b=2; Path=/"]);
    expect(seen.at(-1)).toEqual({ method: "RunSql", sql: "select 1", agent: "t/1" });
    expect(settled.at(-1)).toEqual({ error: undefined, results: 1 });
  });

  it("answers the policy's refusal (gRPC over h2c) without calling the method", async () => {
    const before = settled.length;
    const body = frame(toBinary(RunSqlRequestSchema, create(RunSqlRequestSchema, { appId: 3n, sql: "select 2" })));
    const res = await h2Call(base, "/pulsebase.admin.v1.SqlService/RunSql", { "content-type": "application/grpc", te: "trailers" }, body);
    expect(res.status).toBe(200);
    expect(res.trailers["grpc-status"] ?? res.headers["grpc-status"]).toBe("16");
    expect(res.trailers["grpc-message"] ?? res.headers["grpc-message"]).toBe("A valid operator token is required.");
    expect(seen.at(-1)).toMatchObject({ method: "RunSql", sql: "select 2" });
    expect(settled.length).toBe(before);
  });

  it("answers with the token over gRPC h2c, and logs a server fault once with its procedure; the policy hears of it", async () => {
    const ok = await h2Call(base, "/pulsebase.admin.v1.SqlService/RunSql", { "content-type": "application/grpc", te: "trailers", authorization: TOKEN }, frame(toBinary(RunSqlRequestSchema, create(RunSqlRequestSchema, { sql: "select 3" }))));
    expect(ok.trailers["grpc-status"]).toBe("0");
    expect(fromBinary(RunSqlResponseSchema, frames(ok.body)[0]!.data).durationMs).toBe(1);
    const failed = await h1Post(`${base}/pulsebase.admin.v1.SqlService/RunSql`, { "content-type": "application/json", authorization: TOKEN }, JSON.stringify({ sql: "boom" }));
    expect(failed.status).toBe(500);
    expect(JSON.parse(failed.body)).toMatchObject({ code: "internal" });
    const lines = errors.filter((l) => l.procedure === "pulsebase.admin.v1.SqlService/RunSql");
    expect(lines).toHaveLength(1);
    expect(lines[0]!.msg).toBe("rpc failed");
    expect(settled.at(-1)?.error).toBeDefined();
  });
});
