// gRPC tooling over real sockets: server reflection (buf curl, a grpc-js
// reflection client) and grpc.health.v1 on the public (TLS, HTTP/2 by ALPN)
// and admin (cleartext, HTTP/1.1 and h2c on one port) listeners; admin gRPC
// calls over h2c with and without the operator token.
import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { create, createFileRegistry, fromBinary, toBinary, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fetch } from "undici";
import {
  ServerReflectionRequestSchema,
  ServerReflectionResponseSchema,
  type ServerReflectionResponse,
} from "../../gen/grpc/reflection/v1/reflection_pb.js";
import {
  ServerReflectionRequestSchema as AlphaRequestSchema,
  ServerReflectionResponseSchema as AlphaResponseSchema,
} from "../../gen/grpc/reflection/v1alpha/reflection_pb.js";
import {
  HealthCheckRequestSchema,
  HealthCheckResponseSchema,
  HealthCheckResponse_ServingStatus as Status,
} from "../../gen/health/v1/health_pb.js";
import { ListAppsRequestSchema, ListAppsResponseSchema } from "../../gen/pulsebase/admin/v1/identity_pb.js";
import { createModules } from "../../src/server/modules.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

const run = promisify(execFile);
let s: TestServer;
let publicAddr: string;
let adminAddr: string;
let cert: Buffer;

beforeAll(async () => {
  s = await startTestServer({ modules: createModules });
  publicAddr = s.httpsUrl.replace("https://", "");
  adminAddr = s.adminUrl.replace("http://", "");
  cert = await readFile(join(s.dataDir, "tls", "cert.pem"));
});
afterAll(async () => {
  await s?.close();
});

async function bufCurl(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    // `npx buf curl ...` as a user types it, without npm's own chatter.
    const { stdout, stderr } = await run("node_modules/.bin/buf", ["curl", ...args], { timeout: 30_000 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: e.code ?? 1, stdout: e.stdout ?? "", stderr: e.stderr ?? "" };
  }
}

function operatorMetadata(): grpc.Metadata {
  const md = new grpc.Metadata();
  md.set("authorization", `Bearer ${s.operatorToken}`);
  return md;
}

/** A grpc-js channel (no generated stubs: protobuf-es does the encoding). */
function grpcClient(listener: "public" | "admin"): grpc.Client {
  return listener === "admin"
    ? new grpc.Client(adminAddr, grpc.credentials.createInsecure())
    : new grpc.Client(publicAddr, grpc.credentials.createSsl(cert, null, null, { checkServerIdentity: () => undefined }));
}

function unary<I extends DescMessage, O extends DescMessage>(
  client: grpc.Client,
  path: string,
  input: I,
  output: O,
  req: MessageShape<I>,
  md = new grpc.Metadata(),
): Promise<MessageShape<O>> {
  return new Promise((resolve, reject) => {
    client.makeUnaryRequest(
      path,
      (m: MessageShape<I>) => Buffer.from(toBinary(input, m)),
      (b: Buffer) => fromBinary(output, b),
      req,
      md,
      { deadline: Date.now() + 10_000 },
      (err, res) => (err ? reject(err) : resolve(res!)),
    );
  });
}

const healthCheck = (client: grpc.Client, service: string) =>
  unary(client, "/grpc.health.v1.Health/Check", HealthCheckRequestSchema, HealthCheckResponseSchema, create(HealthCheckRequestSchema, { service }));

/** Sends reflection requests one by one on one stream; returns the answers. */
async function reflect(
  client: grpc.Client,
  requests: Parameters<typeof create<typeof ServerReflectionRequestSchema>>[1][],
  md = new grpc.Metadata(),
): Promise<ServerReflectionResponse[]> {
  const call = client.makeBidiStreamRequest(
    "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
    (m: ReturnType<typeof create<typeof ServerReflectionRequestSchema>>) => Buffer.from(toBinary(ServerReflectionRequestSchema, m)),
    (b: Buffer) => fromBinary(ServerReflectionResponseSchema, b),
    md,
    { deadline: Date.now() + 10_000 },
  );
  const out: ServerReflectionResponse[] = [];
  const done = new Promise<void>((resolve, reject) => {
    call.on("data", (r: ServerReflectionResponse) => out.push(r));
    call.on("error", reject);
    call.on("end", resolve);
  });
  for (const r of requests) call.write(create(ServerReflectionRequestSchema, r));
  call.end();
  await done;
  return out;
}

function servicesOf(r: ServerReflectionResponse): string[] {
  if (r.messageResponse.case !== "listServicesResponse") throw new Error(`not a list: ${r.messageResponse.case}`);
  return r.messageResponse.value.service.map((x) => x.name);
}

describe("buf curl --list-services", () => {
  it("lists the device services, health and reflection on the public listener, no admin service", async () => {
    const r = await bufCurl(["--protocol", "grpc", "--insecure", "--list-services", s.httpsUrl]);
    expect(r.stderr).toBe("");
    const names = r.stdout.trim().split("\n");
    expect(names).toEqual(expect.arrayContaining([
      "pulsebase.platform.v1.ConsumerService",
      "pulsebase.platform.v1.DatabaseService",
      "pulsebase.cms.v1.ContentService",
      "grpc.health.v1.Health",
      "grpc.reflection.v1.ServerReflection",
      "grpc.reflection.v1alpha.ServerReflection",
    ]));
    expect(names.filter((n) => n.startsWith("pulsebase.admin."))).toEqual([]);
  }, 60_000);

  it("lists the admin services over h2c with the operator token, and refuses without it", async () => {
    const base = ["--protocol", "grpc", "--http2-prior-knowledge", "--list-services"];
    const r = await bufCurl([...base, "--reflect-header", `Authorization: Bearer ${s.operatorToken}`, s.adminUrl]);
    expect(r.stderr).toBe("");
    const names = r.stdout.trim().split("\n");
    expect(names).toEqual(expect.arrayContaining([
      "pulsebase.admin.v1.IdentityService",
      "pulsebase.admin.v1.DatabaseService",
      "grpc.health.v1.Health",
      "grpc.reflection.v1.ServerReflection",
    ]));
    expect(names.filter((n) => n.startsWith("pulsebase.platform."))).toEqual([]);

    const refused = await bufCurl([...base, s.adminUrl]);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/authenticated/i);
  }, 60_000);

  it("calls an admin method over h2c with the schema it got from reflection", async () => {
    const { teamId } = await s.createApp("reflected");
    const r = await bufCurl([
      "--protocol", "grpc", "--http2-prior-knowledge",
      "-H", `Authorization: Bearer ${s.operatorToken}`,
      // Reflection on the admin listener needs the token too.
      "--reflect-header", "*",
      "-d", JSON.stringify({ team_id: String(teamId) }),
      `${s.adminUrl}/pulsebase.admin.v1.IdentityService/ListApps`,
    ]);
    expect(r.stderr).toBe("");
    expect(JSON.parse(r.stdout).apps).toEqual([expect.objectContaining({ name: "reflected" })]);
  }, 60_000);
});

describe("grpc.health.v1 with grpc-js", () => {
  for (const listener of ["public", "admin"] as const) {
    it(`answers Check on the ${listener} listener without credentials`, async () => {
      const client = grpcClient(listener);
      try {
        expect((await healthCheck(client, "")).status).toBe(Status.SERVING);
        expect((await healthCheck(client, "grpc.health.v1.Health")).status).toBe(Status.SERVING);
        const mounted = listener === "admin" ? "pulsebase.admin.v1.IdentityService" : "pulsebase.platform.v1.ConsumerService";
        expect((await healthCheck(client, mounted)).status).toBe(Status.SERVING);
        const other = listener === "admin" ? "pulsebase.platform.v1.ConsumerService" : "pulsebase.admin.v1.IdentityService";
        await expect(healthCheck(client, other)).rejects.toMatchObject({ code: grpc.status.NOT_FOUND });
        await expect(healthCheck(client, "no.such.Service")).rejects.toMatchObject({ code: grpc.status.NOT_FOUND });
      } finally {
        client.close();
      }
    });
  }
});

describe("reflection with grpc-js", () => {
  it("lists services and returns a service's file with every dependency, on the public listener", async () => {
    const client = grpcClient("public");
    try {
      const [list, bySymbol, unknown] = await reflect(client, [
        { host: "", messageRequest: { case: "listServices", value: "" } },
        { host: "", messageRequest: { case: "fileContainingSymbol", value: "pulsebase.cms.v1.ContentService" } },
        { host: "", messageRequest: { case: "fileContainingSymbol", value: "pulsebase.nope.v1.Nothing" } },
      ]);
      expect(servicesOf(list!)).toContain("pulsebase.cms.v1.ContentService");
      expect(bySymbol!.originalRequest?.messageRequest.value).toBe("pulsebase.cms.v1.ContentService");
      expect(bySymbol!.messageResponse.case).toBe("fileDescriptorResponse");
      const files = (bySymbol!.messageResponse.value as { fileDescriptorProto: Uint8Array[] }).fileDescriptorProto
        .map((b) => fromBinary(FileDescriptorProtoSchema, b));
      expect(files[0]!.name).toBe("pulsebase/cms/v1/content.proto");
      // Complete: a registry builds from what was sent (every import resolved),
      // and the REST annotations travel with it.
      const byName = new Map(files.map((f) => [f.name, f]));
      const registry = createFileRegistry(files[0]!, (name) => byName.get(name));
      expect(registry.getService("pulsebase.cms.v1.ContentService")?.methods.length).toBeGreaterThan(0);
      expect(files.map((f) => f.name)).toEqual(expect.arrayContaining(["google/api/annotations.proto", "google/protobuf/descriptor.proto"]));
      expect(unknown!.messageResponse).toMatchObject({ case: "errorResponse", value: { errorCode: grpc.status.NOT_FOUND } });
    } finally {
      client.close();
    }
  });

  it("answers v1alpha too (older grpcurl)", async () => {
    const client = grpcClient("public");
    try {
      const call = client.makeBidiStreamRequest(
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
        (m: ReturnType<typeof create<typeof AlphaRequestSchema>>) => Buffer.from(toBinary(AlphaRequestSchema, m)),
        (b: Buffer) => fromBinary(AlphaResponseSchema, b),
        new grpc.Metadata(),
      );
      const first = new Promise<ReturnType<typeof fromBinary<typeof AlphaResponseSchema>>>((resolve, reject) => {
        call.once("data", resolve);
        call.once("error", reject);
      });
      call.write(create(AlphaRequestSchema, { messageRequest: { case: "fileContainingSymbol", value: "grpc.health.v1.Health.Check" } }));
      const r = await first;
      call.end();
      expect(r.messageResponse.case).toBe("fileDescriptorResponse");
      const file = fromBinary(FileDescriptorProtoSchema, (r.messageResponse.value as { fileDescriptorProto: Uint8Array[] }).fileDescriptorProto[0]!);
      expect(file.package).toBe("grpc.health.v1");
    } finally {
      client.close();
    }
  });

  it("needs the operator token on the admin listener", async () => {
    const client = grpcClient("admin");
    try {
      await expect(reflect(client, [{ messageRequest: { case: "listServices", value: "" } }]))
        .rejects.toMatchObject({ code: grpc.status.UNAUTHENTICATED });
      const [list] = await reflect(client, [{ messageRequest: { case: "listServices", value: "" } }], operatorMetadata());
      expect(servicesOf(list!)).toContain("pulsebase.admin.v1.FunctionService");
    } finally {
      client.close();
    }
  });
});

describe("the admin listener over h2c and HTTP/1.1", () => {
  it("serves an admin gRPC call over h2c with the operator token and refuses it without", async () => {
    const client = grpcClient("admin");
    try {
      const { teamId } = await s.createApp("over h2c");
      const path = "/pulsebase.admin.v1.IdentityService/ListApps";
      const req = create(ListAppsRequestSchema, { teamId });
      const res = await unary(client, path, ListAppsRequestSchema, ListAppsResponseSchema, req, operatorMetadata());
      expect(res.apps.map((a) => a.name)).toEqual(["over h2c"]);
      await expect(unary(client, path, ListAppsRequestSchema, ListAppsResponseSchema, req))
        .rejects.toMatchObject({ code: grpc.status.UNAUTHENTICATED });
    } finally {
      client.close();
    }
  });

  it("still serves Connect and plain routes over HTTP/1.1", async () => {
    const { appKey } = await s.createApp("h1 still works");
    expect(appKey).toBeTruthy();
    const r = await fetch(`${s.adminUrl}/healthz`);
    expect(r.status).toBe(200);
    expect(await r.json()).toEqual({ status: "ok" });
  });
});
