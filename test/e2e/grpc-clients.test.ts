// Protocol details as third-party gRPC clients see them: grpc-message
// percent-encoded per the gRPC spec (@grpc/grpc-js shows ":" and ","),
// reflection descriptors that a protobufjs-based client loads
// (grpc-js-reflection-client), the gRPC-Web status headers exposed to
// browsers (CORS), and UNAUTHENTICATED for gRPC on the plain listener.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { create, toBinary } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import { GrpcReflection } from "grpc-js-reflection-client";
import { fetch } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CmsService } from "../../gen/pulsebase/admin/v1/cms_pb.js";
import { ListEntriesRequestSchema } from "../../gen/pulsebase/cms/v1/content_pb.js";
import { createModules } from "../../src/server/modules.js";
import { encodeGrpcMessage } from "../../src/transport/connect-node/grpc-message.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

let s: TestServer;
let publicAddr: string;
let credentials: grpc.ChannelCredentials;
let token: string;
let appKey: string;
const SORT_MESSAGE = "Cannot sort on nope; sortable: stars, published_at, created_at, updated_at.";
/** A ContentService.ListEntries request whose sort the service refuses (its message has ":" and ","). */
const badSort = () => toBinary(ListEntriesRequestSchema, create(ListEntriesRequestSchema, { contentType: "note", query: { sort: "nope" } }));

beforeAll(async () => {
  s = await startTestServer({ modules: createModules, env: { PULSEBASE_CORS_ORIGINS: "https://app.example.org" } });
  publicAddr = s.httpsUrl.replace("https://", "");
  const cert = await readFile(join(s.dataDir, "tls", "cert.pem"));
  credentials = grpc.credentials.createSsl(cert, null, null, { checkServerIdentity: () => undefined });
  const app = await s.createApp("grpc clients");
  token = (await s.register(app.appKey)).token;
  appKey = app.appKey;
  const cms = s.adminClient(CmsService);
  await cms.createContentType({ appId: app.appId, contentType: { slug: "note", name: "Note", fields: [{ name: "stars", type: "number" }], sortableFields: ["stars"] } });
  await cms.createEntry({ appId: app.appId, contentType: "note", publish: true, data: { stars: 3 } });
});
afterAll(async () => {
  await s?.close();
});

function unary(client: grpc.Client, path: string, body: Uint8Array, md = new grpc.Metadata()): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    client.makeUnaryRequest(path, (b: Uint8Array) => Buffer.from(b), (b: Buffer) => b, body, md, { deadline: Date.now() + 10_000 }, (err, res) =>
      err ? reject(err) : resolve(res!));
  });
}

describe("grpc-message", () => {
  it("percent-encodes only bytes outside printable ASCII, and %", () => {
    expect(encodeGrpcMessage("Missing, invalid: or expired token.")).toBe("Missing, invalid: or expired token.");
    expect(encodeGrpcMessage("100% grün\n")).toBe("100%25 gr%C3%BCn%0A");
  });

  it("reaches @grpc/grpc-js with ':' and ',' as written", async () => {
    const client = new grpc.Client(publicAddr, credentials);
    const md = new grpc.Metadata();
    md.set("x-app-key", appKey);
    const err = await unary(client, "/pulsebase.cms.v1.ContentService/ListEntries", badSort(), md).then(
      () => undefined,
      (e: grpc.ServiceError) => e,
    );
    expect(err?.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(err?.details).toBe(SORT_MESSAGE);
    client.close();
  });

  it("is spec-encoded in gRPC-Web trailers too", async () => {
    const body = badSort();
    const frame = Buffer.alloc(5 + body.length);
    frame.writeUInt32BE(body.length, 1);
    frame.set(body, 5);
    const res = await s.fetch("/pulsebase.cms.v1.ContentService/ListEntries", {
      method: "POST",
      headers: { "content-type": "application/grpc-web+proto", "x-grpc-web": "1", "x-app-key": appKey },
      body: frame,
    });
    const trailer = Buffer.from(await res.arrayBuffer()).toString("latin1");
    const message = res.headers.get("grpc-message") ?? /grpc-message: ?(.*)\r\n/i.exec(trailer)?.[1];
    expect(message).toBe(SORT_MESSAGE);
  });
});

describe("reflection with a protobufjs-based client", () => {
  it("loads the device services' descriptors (grpc-js-reflection-client)", async () => {
    const reflection = new GrpcReflection(publicAddr, credentials);
    const services = await reflection.listServices();
    expect(services).toEqual(expect.arrayContaining(["pulsebase.platform.v1.SessionService", "pulsebase.cms.v1.ContentService"]));
    for (const service of ["pulsebase.platform.v1.SessionService", "pulsebase.platform.v1.AnalyticsService", "pulsebase.cms.v1.ContentService"]) {
      const descriptor = await reflection.getDescriptorBySymbol(service);
      const pkg = descriptor.getPackageObject({ keepCase: true, longs: String, enums: String, defaults: true, oneofs: true }) as unknown as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
      const [ns, version, name] = service.split(".").slice(1);
      expect(typeof pkg.pulsebase[ns!][version!][name!]).toBe("function");
    }
    // A call through the loaded stub.
    const descriptor = await reflection.getDescriptorBySymbol("pulsebase.platform.v1.SessionService");
    const pkg = descriptor.getPackageObject({ keepCase: true, longs: String, defaults: true }) as unknown as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
    const stub = new pkg.pulsebase.platform.v1.SessionService(publicAddr, credentials);
    const md = new grpc.Metadata();
    md.set("authorization", `Bearer ${token}`);
    const session = await new Promise<Record<string, unknown>>((resolve, reject) =>
      stub.StartSession({}, md, (err: Error | null, res: Record<string, unknown>) => (err ? reject(err) : resolve(res))));
    expect(Number(session.session_id)).toBeGreaterThan(0);
    stub.close();
  });
});

describe("gRPC-Web from a browser origin", () => {
  it("exposes grpc-status, grpc-message and grpc-status-details-bin", async () => {
    const res = await s.fetch("/pulsebase.platform.v1.SessionService/StartSession", {
      method: "POST",
      headers: { origin: "https://app.example.org", "content-type": "application/grpc-web+proto", "x-grpc-web": "1" },
      body: Buffer.from([0, 0, 0, 0, 0]),
    });
    const exposed = (res.headers.get("access-control-expose-headers") ?? "").split(/,\s*/);
    expect(exposed).toEqual(expect.arrayContaining(["grpc-status", "grpc-message", "grpc-status-details-bin"]));
    await res.arrayBuffer();
  });
});

describe("the plain listener", () => {
  it("answers a gRPC h2c call with UNAUTHENTICATED, and HTTP/1.1 as before", async () => {
    const client = new grpc.Client(s.httpUrl.replace("http://", ""), grpc.credentials.createInsecure());
    const err = await unary(client, "/pulsebase.platform.v1.SessionService/StartSession", new Uint8Array()).then(
      () => undefined,
      (e: grpc.ServiceError) => e,
    );
    expect(err?.code).toBe(grpc.status.UNAUTHENTICATED);
    expect(err?.details).toBe("HTTPS is required.");
    client.close();
    const h1 = await fetch(`${s.httpUrl}/api/session/start`, { method: "POST" });
    expect(h1.status).toBe(401);
    expect(await h1.json()).toMatchObject({ error: "unauthenticated" });
  });
});
