// Real RPC clients nobody here wrote, against a real server: connect-es
// (Connect JSON and binary over HTTP/1.1 and h2, gRPC, gRPC-Web over h1 and
// h2, gzip), @grpc/grpc-js, and `buf curl` with each of its protocols. Each
// calls a success, a validation error whose ErrorDetail (field violations)
// the client decodes, and an unauthenticated call. The byte-level comparison
// of every method is test/transport/rpc/conformance.test.ts; the README's
// snippets are test/e2e/readme-clients.test.ts.
import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { create, fromBinary, toBinary, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { BinaryReader } from "@bufbuild/protobuf/wire";
import { Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { compressionGzip, createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DatabaseService as AdminDatabaseService } from "../../gen/pulsebase/admin/v1/database_pb.js";
import { IdentityService } from "../../gen/pulsebase/admin/v1/identity_pb.js";
import { SqlService } from "../../gen/pulsebase/admin/v1/sql_pb.js";
import { ErrorDetailSchema, type ErrorDetail } from "../../gen/pulsebase/common/v1/error_pb.js";
import { AnalyticsService, RecordEventRequestSchema, EventSchema } from "../../gen/pulsebase/platform/v1/analytics_pb.js";
import { DatabaseService } from "../../gen/pulsebase/platform/v1/database_pb.js";
import { SessionService, StartSessionRequestSchema, SessionSchema } from "../../gen/pulsebase/platform/v1/session_pb.js";
import { createModules } from "../../src/server/modules.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

const run = promisify(execFile);
const repo = resolve(import.meta.dirname, "../..");
let s: TestServer;
let token: string;
let cert: Buffer;

beforeAll(async () => {
  s = await startTestServer({ modules: createModules });
  cert = await readFile(join(s.dataDir, "tls", "cert.pem"));
  const app = await s.createApp("rpc clients");
  token = (await s.register(app.appKey)).token;
  const dbs = s.adminClient(AdminDatabaseService);
  const db = await dbs.createDatabase({ teamId: app.teamId, name: "main" });
  await dbs.linkDatabase({ databaseId: db.id, appId: app.appId });
  await s.adminClient(SqlService).runSql({ appId: app.appId, sql: "CREATE TABLE notes (id INTEGER PRIMARY KEY, title TEXT); INSERT INTO notes VALUES (1, 'hello')" });
});
afterAll(async () => {
  await s?.close();
});

const nodeOptions = () => ({ ca: cert, checkServerIdentity: () => undefined });

const TRANSPORTS: Record<string, () => Transport> = {
  "Connect JSON, HTTP/1.1": () => createConnectTransport({ baseUrl: s.httpsUrl, httpVersion: "1.1", nodeOptions: nodeOptions() }),
  "Connect JSON, h2, gzip": () =>
    createConnectTransport({ baseUrl: s.httpsUrl, httpVersion: "2", nodeOptions: nodeOptions(), sendCompression: compressionGzip, compressMinBytes: 0 }),
  "Connect binary, HTTP/1.1, gzip": () =>
    createConnectTransport({ baseUrl: s.httpsUrl, httpVersion: "1.1", useBinaryFormat: true, nodeOptions: nodeOptions(), sendCompression: compressionGzip, compressMinBytes: 0 }),
  "Connect binary, h2": () => createConnectTransport({ baseUrl: s.httpsUrl, httpVersion: "2", useBinaryFormat: true, nodeOptions: nodeOptions() }),
  "gRPC (h2), gzip": () => createGrpcTransport({ baseUrl: s.httpsUrl, nodeOptions: nodeOptions(), sendCompression: compressionGzip, compressMinBytes: 0 }),
  "gRPC-Web, HTTP/1.1": () => createGrpcWebTransport({ baseUrl: s.httpsUrl, httpVersion: "1.1", nodeOptions: nodeOptions() }),
  "gRPC-Web, h2, gzip": () =>
    createGrpcWebTransport({ baseUrl: s.httpsUrl, httpVersion: "2", nodeOptions: nodeOptions(), sendCompression: compressionGzip, compressMinBytes: 0 }),
};

describe("connect-es clients (@connectrpc/connect-node)", () => {
  for (const [name, make] of Object.entries(TRANSPORTS)) {
    it(name, async () => {
      const transport = make();
      const headers = { authorization: `Bearer ${token}` };
      const session = await createClient(SessionService, transport).startSession({}, { headers });
      expect(session.sessionId).toBeGreaterThan(0n);

      const db = createClient(DatabaseService, transport);
      const q = await db.query({ sql: "SELECT title FROM notes WHERE id = ?", params: { kind: { case: "listValue", value: { values: [{ kind: { case: "numberValue", value: 1 } }] } } } }, { headers });
      expect(q.results[0]?.rows[0]?.values.map((v) => v.kind.value)).toEqual(["hello"]);

      // A validation error: the client reads the field violations from the error details.
      const invalid = await createClient(AnalyticsService, transport).recordEvent({ name: "" }, { headers }).catch((e: unknown) => ConnectError.from(e));
      expect(invalid).toBeInstanceOf(ConnectError);
      const err = invalid as ConnectError;
      expect(err.code).toBe(Code.InvalidArgument);
      const [detail] = err.findDetails(ErrorDetailSchema);
      expect(detail?.httpStatus).toBe(422);
      expect(detail?.fieldViolations.map((f) => f.field)).toContain("name");

      // No token: unauthenticated, with the platform's code in the details.
      const anonymous = await createClient(SessionService, transport).startSession({}).catch((e: unknown) => ConnectError.from(e));
      expect((anonymous as ConnectError).code).toBe(Code.Unauthenticated);
      expect((anonymous as ConnectError).findDetails(ErrorDetailSchema)[0]?.code).toBe("unauthenticated");
    });
  }
});

describe("connect-es clients on the admin listener (cleartext: HTTP/1.1 and h2c)", () => {
  const operator = () => ({ authorization: `Bearer ${s.operatorToken}` });
  const ADMIN: Record<string, () => Transport> = {
    "gRPC over h2c": () => createGrpcTransport({ baseUrl: s.adminUrl }),
    "Connect binary over h2c": () => createConnectTransport({ baseUrl: s.adminUrl, httpVersion: "2", useBinaryFormat: true }),
    "gRPC-Web over HTTP/1.1": () => createGrpcWebTransport({ baseUrl: s.adminUrl, httpVersion: "1.1" }),
  };
  for (const [name, make] of Object.entries(ADMIN)) {
    it(name, async () => {
      const transport = make();
      const sql = createClient(SqlService, transport);
      const apps = await createClient(IdentityService, transport).listApps({}, { headers: operator() });
      const appId = apps.apps.find((a) => a.name === "rpc clients")!.id;
      const r = await sql.runSql({ appId, sql: "SELECT count(*) AS n FROM notes" }, { headers: operator() });
      expect(r.results[0]?.columns).toEqual(["n"]);

      const missing = await createClient(IdentityService, transport).getApp({ key: { case: "id", value: 999_999_999n } }, { headers: operator() }).catch((e: unknown) => ConnectError.from(e));
      expect((missing as ConnectError).code).toBe(Code.NotFound);
      expect((missing as ConnectError).findDetails(ErrorDetailSchema)[0]?.httpStatus).toBe(404);

      const anonymous = await sql.runSql({ appId, sql: "SELECT 1" }).catch((e: unknown) => ConnectError.from(e));
      expect((anonymous as ConnectError).code).toBe(Code.Unauthenticated);
    });
  }
});

/** google.rpc.Status from grpc-status-details-bin, its ErrorDetail decoded (grpc-js leaves details to the application). */
function errorDetailOf(md: grpc.Metadata): ErrorDetail | undefined {
  const bin = md.get("grpc-status-details-bin")[0];
  if (!bin) return undefined;
  const r = new BinaryReader(bin as Buffer);
  while (r.pos < r.len) {
    const [no, wt] = r.tag();
    if (no !== 3) {
      r.skip(wt);
      continue;
    }
    const any = new BinaryReader(r.bytes());
    let type = "";
    let value: Uint8Array | undefined;
    while (any.pos < any.len) {
      const [n, w] = any.tag();
      if (n === 1) type = any.string();
      else if (n === 2) value = any.bytes();
      else any.skip(w);
    }
    if (type.endsWith(`/${ErrorDetailSchema.typeName}`) && value) return fromBinary(ErrorDetailSchema, value);
  }
  return undefined;
}

describe("@grpc/grpc-js", () => {
  function unary<I extends DescMessage, O extends DescMessage>(client: grpc.Client, path: string, input: I, output: O, req: MessageShape<I>, md: grpc.Metadata): Promise<MessageShape<O>> {
    return new Promise((resolve, reject) => {
      client.makeUnaryRequest(path, (m: MessageShape<I>) => Buffer.from(toBinary(input, m)), (b: Buffer) => fromBinary(output, b), req, md, { deadline: Date.now() + 20_000 }, (e, r) =>
        e ? reject(e) : resolve(r!));
    });
  }

  for (const compression of ["identity", "gzip"] as const) {
    it(`calls, and reads an error's details from grpc-status-details-bin (${compression})`, async () => {
      const client = new grpc.Client(s.httpsUrl.replace("https://", ""), grpc.credentials.createSsl(cert, null, null, { checkServerIdentity: () => undefined }), {
        // 2 = gzip in grpc-js's compression algorithms.
        ...(compression === "gzip" ? { "grpc.default_compression_algorithm": 2 } : {}),
      });
      try {
        const md = new grpc.Metadata();
        md.set("authorization", `Bearer ${token}`);
        const session = await unary(client, "/pulsebase.platform.v1.SessionService/StartSession", StartSessionRequestSchema, SessionSchema, create(StartSessionRequestSchema), md);
        expect(session.sessionId).toBeGreaterThan(0n);

        const err = await unary(client, "/pulsebase.platform.v1.AnalyticsService/RecordEvent", RecordEventRequestSchema, EventSchema, create(RecordEventRequestSchema, { name: "" }), md)
          .then(() => undefined, (e: grpc.ServiceError) => e);
        expect(err?.code).toBe(grpc.status.INVALID_ARGUMENT);
        const detail = errorDetailOf(err!.metadata);
        expect(detail?.httpStatus).toBe(422);
        expect(detail?.fieldViolations.map((f) => f.field)).toContain("name");

        const anonymous = await unary(client, "/pulsebase.platform.v1.SessionService/StartSession", StartSessionRequestSchema, SessionSchema, create(StartSessionRequestSchema), new grpc.Metadata())
          .then(() => undefined, (e: grpc.ServiceError) => e);
        expect(anonymous?.code).toBe(grpc.status.UNAUTHENTICATED);
        expect(errorDetailOf(anonymous!.metadata)?.code).toBe("unauthenticated");
      } finally {
        client.close();
      }
    });
  }
});

describe("buf curl", () => {
  async function bufCurl(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
    try {
      const { stdout, stderr } = await run(join(repo, "node_modules/.bin/buf"), ["curl", "--insecure", ...args], { cwd: repo, timeout: 60_000 });
      return { code: 0, stdout, stderr };
    } catch (e) {
      const x = e as { code?: number; stdout?: string; stderr?: string };
      return { code: typeof x.code === "number" ? x.code : 1, stdout: x.stdout ?? "", stderr: x.stderr ?? "" };
    }
  }

  // connect and grpcweb with the schema from proto/ (offline), grpc by reflection.
  for (const [protocol, schema] of [["connect", ["--schema", "proto"]], ["grpc", []], ["grpcweb", ["--schema", "proto"]]] as const) {
    it(`--protocol ${protocol}${schema.length ? " --schema proto" : " (reflection)"}`, async () => {
      const base = ["--protocol", protocol, ...schema, "-H", `Authorization: Bearer ${token}`];
      const ok = await bufCurl([...base, "-d", "{}", `${s.httpsUrl}/pulsebase.platform.v1.SessionService/StartSession`]);
      expect(ok.stderr).toBe("");
      expect(Number(JSON.parse(ok.stdout).sessionId)).toBeGreaterThan(0);

      const bad = await bufCurl([...base, "-d", '{"name":""}', `${s.httpsUrl}/pulsebase.platform.v1.AnalyticsService/RecordEvent`]);
      expect(bad.code).not.toBe(0);
      // buf curl prints the error as JSON, each detail's bytes in base64 (plus, over
      // Connect, the server's own JSON rendering of it, "debug").
      const error = JSON.parse(bad.stderr) as { code: string; details: { type: string; value: string; debug?: unknown }[] };
      expect(error.code).toBe("invalid_argument");
      const raw = error.details.find((d) => d.type === ErrorDetailSchema.typeName);
      const detail = fromBinary(ErrorDetailSchema, Buffer.from(raw!.value, "base64"));
      expect(detail.httpStatus).toBe(422);
      expect(detail.fieldViolations.map((f) => f.field)).toContain("name");
      if (protocol === "connect") expect(raw!.debug).toMatchObject({ code: "validation_failed", httpStatus: 422 });
    }, 120_000);
  }
});
