// The access log (one info line per request, whatever answered it) and the
// error lines of failing requests (cause and stack, no protobuf descriptors).
import { randomUUID } from "node:crypto";
import { Writable } from "node:stream";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { DatabaseService as AdminDatabaseService } from "../../gen/pulsebase/admin/v1/database_pb.js";
import { ObservedLogController } from "../../src/server/access-log.js";
import { buildAdminApp } from "../../src/server/admin-app.js";
import { withErrorSerializers } from "../../src/infra/logging/logger.js";
import { createMetrics } from "../../src/server/metrics.js";
import { appError } from "../../src/kernel/errors.js";
import { createModules } from "../../src/server/modules.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { until } from "../helpers/until.js";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Line = Record<string, any>;
const lines: Line[] = [];
const raw: string[] = [];
const sink = new Writable({
  write(chunk: Buffer, _enc, done) {
    for (const l of chunk.toString("utf8").split("\n")) {
      if (!l) continue;
      raw.push(l);
      lines.push(JSON.parse(l) as Line);
    }
    done();
  },
});

let s: TestServer;
let token: string;

const accessLines = (reqId: string) => lines.filter((l) => l.msg === "request" && l.reqId === reqId);

/** The one access line of a request (it is written when the response finishes, just after the client has it). */
async function accessLine(reqId: string, listener: "public" | "admin" = "public"): Promise<Line> {
  await until(async () => (accessLines(reqId).length > 0 ? true : undefined));
  // A second line for it would be recorded before the next request on the
  // listener is answered, and lines are written in the order recorded: once
  // a later request's line is in, a duplicate would be too.
  const barrier = randomUUID();
  const url = listener === "public" ? undefined : `${s.adminUrl}/metrics`;
  const res = url === undefined ? await s.fetch("/healthz", { headers: { "x-request-id": barrier } }) : await fetch(url, { headers: { "x-request-id": barrier } });
  await res.arrayBuffer();
  await until(async () => (accessLines(barrier).length > 0 ? true : undefined));
  const found = accessLines(reqId);
  expect(found).toHaveLength(1);
  return found[0]!;
}

const post = (path: string, body: unknown, reqId: string) =>
  s.fetch(path, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${token}`, "x-request-id": reqId },
    body: JSON.stringify(body),
  });

beforeAll(async () => {
  s = await startTestServer({ modules: createModules, logger: pino({ level: "info" }, sink) });
  const app = await s.createApp("access log");
  token = (await s.register(app.appKey)).token;
  const dbs = s.adminClient(AdminDatabaseService);
  const db = await dbs.createDatabase({ teamId: app.teamId, name: "main" });
  await dbs.linkDatabase({ databaseId: db.id, appId: app.appId });
  expect((await post("/api/db/query", { sql: "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)", params: [] }, randomUUID())).status).toBe(200);
  expect((await post("/api/db/query", { sql: "INSERT INTO notes (body) VALUES ('a')" }, randomUUID())).status).toBe(200);
});
afterAll(() => s?.close());

describe("access log", () => {
  it("writes one line for a PK read answered on the fast path: id, method, route, status, duration, bytes", async () => {
    const id = randomUUID();
    const sent = performance.now();
    const res = await post("/api/db/query", { sql: "SELECT body FROM notes WHERE id = ?", params: [1] }, id);
    expect(res.status).toBe(200);
    const body = await res.text();
    const roundTrip = performance.now() - sent;
    const line = await accessLine(id);
    expect(line).toMatchObject({ level: 30, listener: "public", method: "POST", route: "/api/db/query", status: 200, bytes: Buffer.byteLength(body) });
    // in milliseconds: the server's part of a round trip the client timed (not µs or ns, not since start-up)
    expect(line.ms).toBeGreaterThan(0);
    expect(line.ms).toBeLessThanOrEqual(roundTrip);
    // a matched route logs its template, not the path
    expect(line).not.toHaveProperty("path");
  });

  it("logs 404s with the path (without the query string), and body-parser 400s", async () => {
    const nf = randomUUID();
    expect((await s.fetch("/api/nothing/here?secret=x", { headers: { "x-request-id": nf } })).status).toBe(404);
    expect(await accessLine(nf)).toMatchObject({ method: "GET", route: "(unmatched)", path: "/api/nothing/here", status: 404 });
    expect(JSON.stringify(accessLines(nf))).not.toContain("secret");

    const bad = randomUUID();
    const res = await s.fetch("/api/consumer", { method: "POST", headers: { "content-type": "application/json", "x-request-id": bad }, body: "{oops" });
    expect(res.status).toBe(400);
    expect(await accessLine(bad)).toMatchObject({ method: "POST", route: "/api/consumer", status: 400 });
  });

  it("logs requests the router refuses before routing (malformed URL encoding)", async () => {
    const before = lines.filter((l) => l.msg === "request" && l.status === 400 && l.path === "/api/v1/%zz").length;
    const res = await s.fetch("/api/v1/%zz");
    expect(res.status).toBe(400);
    const id = res.headers.get("x-request-id")!;
    expect(await accessLine(id)).toMatchObject({ route: "(unmatched)", status: 400, path: "/api/v1/%zz" });
    expect(lines.filter((l) => l.msg === "request" && l.status === 400 && l.path === "/api/v1/%zz")).toHaveLength(before + 1);
  });

  it("logs Connect calls by procedure on the public and admin listeners", async () => {
    const id = randomUUID();
    const res = await s.fetch("/pulsebase.platform.v1.DatabaseService/Query", {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${token}`, "x-request-id": id },
      body: JSON.stringify({ sql: "SELECT 1" }),
    });
    expect(res.status).toBe(200);
    expect(await accessLine(id)).toMatchObject({ listener: "public", method: "POST", route: "/pulsebase.platform.v1.DatabaseService/Query", status: 200 });

    const adminId = randomUUID();
    const adminRes = await fetch(`${s.adminUrl}/pulsebase.admin.v1.IdentityService/ListApps`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${s.operatorToken}`, "x-request-id": adminId },
      body: "{}",
    });
    expect(adminRes.status).toBe(200);
    expect(await accessLine(adminId, "admin")).toMatchObject({ listener: "admin", route: "/pulsebase.admin.v1.IdentityService/ListApps", status: 200 });
  });
});

describe("error lines", () => {
  // Last in the file: breaks the identity tables of this file's schema.
  it("log a 500's driver error as cause with its stack, and never the protobuf descriptor", async () => {
    await s.db.sql.query("ALTER TABLE consumers RENAME TO consumers_gone");
    const app = await s.createApp("broken");

    const restId = randomUUID();
    const res = await s.fetch("/api/consumer", {
      method: "POST",
      headers: { "content-type": "application/json", "x-request-id": restId },
      body: JSON.stringify({ app_key: app.appKey, device_id: "d1", device_model: "m", user_id: "u", os: "android", country: "DE", language: "de" }),
    });
    expect(res.status).toBe(500);
    expect(await res.json()).toEqual({ error: "internal_error", message: "Internal error." });
    await accessLine(restId);
    const err = lines.find((l) => l.reqId === restId && l.level === 50)!;
    expect(err).toBeDefined();
    expect(err.msg).toBe("request failed");
    expect(err.err).toMatchObject({ type: "ConnectError", code: "Internal", appCode: "internal_error" });
    expect(err.err.stack).toMatch(/ConnectError/);
    // the PostgreSQL error that caused it, with its SQLSTATE and stack
    expect(err.err.cause).toMatchObject({ code: "42P01", message: expect.stringMatching(/consumers/) });
    expect(err.err.cause.stack).toEqual(expect.any(String));

    // the same failure over Connect is logged by the interceptor
    const rpcId = randomUUID();
    const rpc = await fetch(`${s.adminUrl}/pulsebase.admin.v1.IdentityService/ListConsumers`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${s.operatorToken}`, "x-request-id": rpcId },
      body: JSON.stringify({ appId: String(app.appId) }),
    });
    expect(rpc.status).toBe(500);
    await accessLine(rpcId);
    const rpcErr = lines.find((l) => l.reqId === rpcId && l.level === 50)!;
    expect(rpcErr).toMatchObject({ msg: "rpc failed", procedure: "pulsebase.admin.v1.IdentityService/ListConsumers", status: 500 });
    expect(rpcErr.err.cause).toMatchObject({ code: "42P01" });
    expect(rpcErr.err.cause.stack).toEqual(expect.any(String));

    if (process.env.SHOW_LOG_LINES) console.log(raw.filter((x) => x.includes(restId) || x.includes(rpcId)).join("\n"));
    for (const l of raw.filter((x) => x.includes(restId) || x.includes(rpcId))) {
      expect(l).not.toContain('"desc"');
      expect(l.length).toBeLessThan(6000);
    }
  });
});

describe("PULSEBASE_ACCESS_LOG=off", () => {
  it("writes no access lines but still counts requests", async () => {
    const quiet: Line[] = [];
    const q = await startTestServer({
      env: { PULSEBASE_ACCESS_LOG: "off" },
      logger: pino({ level: "info" }, new Writable({ write: (c: Buffer, _e, d) => (quiet.push(...c.toString().split("\n").filter(Boolean).map((l) => JSON.parse(l) as Line)), d()) })),
    });
    try {
      expect((await q.fetch("/healthz")).status).toBe(200);
      expect((await q.fetch("/nope")).status).toBe(404);
      // A line would be written by the writer's flush timer (FLUSH_MS, 20 ms,
      // in src/server/access-log.ts), set before the response reached us:
      // Node runs timers of one duration in the order they were set, so one
      // set now for 20 ms fires after it.
      await new Promise((r) => setTimeout(r, 20));
      expect(quiet.filter((l) => l.msg === "request")).toEqual([]);
      const text = await (await fetch(`${q.adminUrl}/metrics`)).text();
      expect(text).toMatch(/pulsebase_http_requests_total\{listener="public",method="GET",route="\/healthz",status="200"\} 1/);
    } finally {
      await q.close();
    }
  });
});

describe("listeners without their own error handler", () => {
  it("log a route's 5xx with its cause (Fastify's default handler would log nothing with request logging off)", async () => {
    const out: Line[] = [];
    const logger = withErrorSerializers(pino({ level: "info" }, new Writable({ write: (c: Buffer, _e, d) => (out.push(...c.toString().split("\n").filter(Boolean).map((l) => JSON.parse(l) as Line)), d()) })));
    const app = await buildAdminApp({
      logger,
      logController: new ObservedLogController({ listener: "admin", metrics: createMetrics().http, accessLog: logger }),
      operatorToken: "op_test_operator_token_0123456789",
      services: [],
      bodyLimitBytes: 1024,
      extraRoutes: [(a) => void a.get("/boom", async () => {
        throw appError("internal_error", undefined, { cause: Object.assign(new Error("disk full"), { code: "ENOSPC" }) });
      })],
    });
    try {
      const res = await app.inject({ method: "GET", url: "/boom" });
      expect(res.statusCode).toBe(500);
      const id = res.headers["x-request-id"];
      // the access line is written with its batch, up to 20 ms later
      await until(async () => (out.some((l) => l.msg === "request" && l.reqId === id) ? true : undefined));
      const err = out.find((l) => l.level === 50 && l.reqId === id)!;
      expect(err).toMatchObject({ msg: "request failed", status: 500, err: { type: "ConnectError", appCode: "internal_error", cause: { message: "disk full", code: "ENOSPC" } } });
      expect(JSON.stringify(err)).not.toContain('"desc"');
      expect(out.filter((l) => l.msg === "request" && l.reqId === id)).toMatchObject([{ route: "/boom", status: 500 }]);
    } finally {
      await app.close();
    }
  });
});

describe("writes to the log destination", () => {
  it("are batched: a run of requests costs a few writes, not one per request, and every line arrives", async () => {
    const writes: string[] = [];
    const logger = pino({ level: "info" }, new Writable({ write: (c: Buffer, _e, d) => (writes.push(c.toString()), d()) }));
    const controller = new ObservedLogController({ listener: "public", metrics: createMetrics().http, accessLog: logger });
    const app = (await import("fastify")).default({ loggerInstance: logger, logController: controller });
    app.get("/ping", async () => ({ ok: true }));
    await app.ready();
    // The batch window (the writer's timer) is held open by fake timers
    // while the requests run, however long the machine takes for them.
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    try {
      // one request after the other, at least one event-loop turn each (a flush per turn or per line: 100 writes)
      for (let i = 0; i < 100; i++) {
        const res = await app.inject({ method: "GET", url: "/ping" });
        expect(res.statusCode).toBe(200);
        await new Promise((r) => setImmediate(r));
      }
      expect(writes).toEqual([]);
      vi.advanceTimersByTime(20);
      expect(writes).toHaveLength(1);
      expect(writes.join("").split("\n").filter((l) => l.includes('"route":"/ping"'))).toHaveLength(100);
    } finally {
      vi.useRealTimers();
      await app.close();
    }
  });
});
