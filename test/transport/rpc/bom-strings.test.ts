// Strings that start with U+FEFF over every protocol of a real server
// (issue #28): the hand-written binary readers once dropped the character
// (a TextDecoder without ignoreBOM), so over Connect binary, gRPC and
// gRPC-Web "\uFEFFSELECT 1" ran where REST and Connect JSON refuse it, a
// parameter "\uFEFFbin" was stored as "bin", and an Invoke with method
// "\uFEFFDELETE" ran the function as DELETE. Each protocol must now read the
// text the client sent, as fromBinary and JSON do.
import { create, fromBinary, toBinary, toJson, type DescMessage, type MessageInitShape } from "@bufbuild/protobuf";
import { findTrailerError } from "@connectrpc/connect/protocol-grpc";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DatabaseService as AdminDatabaseService } from "../../../gen/pulsebase/admin/v1/database_pb.js";
import { SqlService } from "../../../gen/pulsebase/admin/v1/sql_pb.js";
import { ErrorDetailSchema } from "../../../gen/pulsebase/common/v1/error_pb.js";
import { HttpRequestSchema, HttpResponseSchema } from "../../../gen/pulsebase/common/v1/options_pb.js";
import { QueryRequestSchema, QueryResponseSchema } from "../../../gen/pulsebase/platform/v1/database_pb.js";
import { jsonToValue } from "../../../src/capabilities/database/proto-values.js";
import { createModules } from "../../../src/server/modules.js";
import { deployHttpFunction, startTestServer, type TestServer } from "../../helpers/server.js";
import { frame, frames, h1Call, h2Call, webTrailers, type WireAnswer } from "./rpc-app.js";

const BOM = "\uFEFF";
const QUERY = "/pulsebase.platform.v1.DatabaseService/Query";
const INVOKE = "/pulsebase.platform.v1.FunctionService/Invoke";

let s: TestServer;
let token: string;

beforeAll(async () => {
  s = await startTestServer({ modules: createModules });
  const app = await s.createApp("bom");
  token = (await s.register(app.appKey)).token;
  const dbs = s.adminClient(AdminDatabaseService);
  const db = await dbs.createDatabase({ teamId: app.teamId, name: "main" });
  await dbs.linkDatabase({ databaseId: db.id, appId: app.appId });
  await s.adminClient(SqlService).runSql({ appId: app.appId, sql: "CREATE TABLE notes (v TEXT NOT NULL)" });
  await deployHttpFunction(s, app.appId, "echo", "export default async function (req) { return { status: 200, body: { method: req.method } }; }");
}, 120_000);

afterAll(async () => {
  await s?.close();
});

type Via = "connect-json" | "connect-proto h1" | "connect-proto h2" | "grpc-web h1" | "grpc";
const BINARY: Via[] = ["connect-proto h1", "connect-proto h2", "grpc-web h1", "grpc"];

/** What a client can tell of an answer: ok and the message's JSON, or the error's catalogue code. */
interface Seen {
  ok: boolean;
  /** The platform's error code (REST's `error`, the ErrorDetail of Connect and gRPC). */
  code?: string;
  message?: string;
  json?: unknown;
}

function fromConnect(a: WireAnswer, decode: (b: Buffer) => unknown): Seen {
  if (a.status === 200) return { ok: true, json: decode(a.body) };
  const e = JSON.parse(a.body.toString("utf8")) as { message: string; details?: { debug?: { code?: string } }[] };
  return { ok: false, code: e.details?.[0]?.debug?.code, message: e.message };
}

function fromGrpc(status: Record<string, string>, message: Buffer | undefined, decode: (b: Buffer) => unknown): Seen {
  const err = findTrailerError(new Headers(status));
  if (!err) return { ok: true, json: decode(message!) };
  return { ok: false, code: err.findDetails(ErrorDetailSchema)[0]?.code, message: err.rawMessage };
}

const auth = () => ({ authorization: `Bearer ${token}` });

/** The call over one protocol; `json` is the request as Connect JSON sends it (the message's proto3 JSON by default). */
async function call<I extends DescMessage>(via: Via, path: string, input: I, output: DescMessage, msg: MessageInitShape<I>, json?: unknown): Promise<Seen> {
  const message = create(input, msg);
  const bin = Buffer.from(toBinary(input, message));
  // An answer as proto3 JSON, whichever format it came in.
  const answer = (b: Buffer): unknown => toJson(output, fromBinary(output, b));
  switch (via) {
    case "connect-json": {
      const a = await h2Call(s.httpsUrl, path, { "content-type": "application/json", ...auth() }, Buffer.from(JSON.stringify(json ?? toJson(input, message))));
      return fromConnect(a, (b) => JSON.parse(b.toString("utf8")));
    }
    case "connect-proto h1":
    case "connect-proto h2": {
      const a = await (via.endsWith("h1") ? h1Call : h2Call)(s.httpsUrl, path, { "content-type": "application/proto", ...auth() }, bin);
      return fromConnect(a, answer);
    }
    case "grpc-web h1": {
      const a = await h1Call(s.httpsUrl, path, { "content-type": "application/grpc-web+proto", ...auth() }, frame(bin));
      const fs = frames(a.body);
      return fromGrpc(webTrailers(fs.find((f) => f.flags & 0x80)!.data), fs.find((f) => !(f.flags & 0x80))?.data, answer);
    }
    case "grpc": {
      const a = await h2Call(s.httpsUrl, path, { "content-type": "application/grpc+proto", te: "trailers", ...auth() }, frame(bin));
      return fromGrpc({ ...a.headers, ...a.trailers }, frames(a.body)[0]?.data, answer);
    }
    default:
      throw new Error(via);
  }
}

const rows = (v: unknown) => (v as { results?: { rows?: unknown[] }[] }).results?.[0]?.rows ?? [];

describe("a leading U+FEFF is text on every protocol", () => {
  it("\\uFEFFSELECT 1: Connect binary, gRPC and gRPC-Web answer what REST and Connect JSON answer", async () => {
    const sql = `${BOM}SELECT 1`;
    const rest = await s.fetch("/api/db/query", { method: "POST", headers: { "content-type": "application/json", ...auth() }, body: JSON.stringify({ sql }) });
    const restBody = (await rest.json()) as { error?: string };
    const viaRest: Seen = rest.status === 200 ? { ok: true } : { ok: false, code: restBody.error };
    const viaJson = await call("connect-json", QUERY, QueryRequestSchema, QueryResponseSchema, { sql });
    // REST and Connect JSON refuse it: the guard sees the character the client sent.
    expect(viaRest.ok).toBe(false);
    expect(viaJson).toMatchObject({ ok: false, code: viaRest.code });
    for (const via of BINARY) {
      expect(await call(via, QUERY, QueryRequestSchema, QueryResponseSchema, { sql }), via).toEqual(viaJson);
    }
  });

  it("a parameter \\uFEFFbin is stored with its U+FEFF over every binary protocol", async () => {
    for (const via of BINARY) {
      const value = `${BOM}bin ${via}`;
      const w = await call(via, QUERY, QueryRequestSchema, QueryResponseSchema, { sql: "INSERT INTO notes (v) VALUES (?)", params: jsonToValue([value]) });
      expect(w.ok, `${via}: ${JSON.stringify(w)}`).toBe(true);
      const read = await call("connect-json", QUERY, QueryRequestSchema, QueryResponseSchema, { sql: "SELECT v FROM notes WHERE v LIKE ?" }, { sql: "SELECT v FROM notes WHERE v LIKE ?", params: [`%bin ${via}`] });
      expect(rows(read.json), via).toEqual([[value]]);
    }
  });

  it("Invoke with method \\uFEFFDELETE is not run as DELETE: every binary protocol answers what Connect JSON answers", async () => {
    const req = { method: `${BOM}DELETE`, pathParams: { slug: "echo" } };
    // The function echoes the method it ran with; a plain DELETE runs.
    const plain = await call("connect-json", INVOKE, HttpRequestSchema, HttpResponseSchema, { ...req, method: "DELETE" });
    expect(plain.ok).toBe(true);
    expect(Buffer.from((plain.json as { body: string }).body, "base64").toString()).toContain('"DELETE"');
    const viaJson = await call("connect-json", INVOKE, HttpRequestSchema, HttpResponseSchema, req);
    expect(viaJson).toMatchObject({ ok: false, code: "method_not_allowed" });
    for (const via of BINARY) {
      expect(await call(via, INVOKE, HttpRequestSchema, HttpResponseSchema, req), via).toEqual(viaJson);
    }
  });
});
