// Server reflection in memory: every lookup the protocol has, the files a
// client needs to decode a service, and NOT_FOUND for what the listener
// does not serve.
import { create, fromBinary } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { Code, createClient, createRouterTransport } from "@connectrpc/connect";
import { expect, it } from "vitest";
import {
  ServerReflection,
  ServerReflectionRequestSchema,
  type ServerReflectionRequest,
  type ServerReflectionResponse,
} from "../../../gen/grpc/reflection/v1/reflection_pb.js";
import { ServerReflection as ServerReflectionAlpha } from "../../../gen/grpc/reflection/v1alpha/reflection_pb.js";
import { IdentityService } from "../../../gen/pulsebase/admin/v1/identity_pb.js";
import { ConsumerService } from "../../../gen/pulsebase/platform/v1/consumer_pb.js";
import { createReflectionBindings } from "../../../src/transport/connect-node/reflection-service.js";

const transport = createRouterTransport((router) => {
  for (const b of createReflectionBindings([ConsumerService])) router.service(b.service, b.impl as never);
});

type Req = Parameters<typeof create<typeof ServerReflectionRequestSchema>>[1];

async function ask(...reqs: Req[]): Promise<ServerReflectionResponse[]> {
  const client = createClient(ServerReflection, transport);
  async function* input(): AsyncIterable<ServerReflectionRequest> {
    for (const r of reqs) yield create(ServerReflectionRequestSchema, r);
  }
  const out: ServerReflectionResponse[] = [];
  for await (const r of client.serverReflectionInfo(input())) out.push(r);
  return out;
}

function fileNames(r: ServerReflectionResponse): string[] {
  if (r.messageResponse.case !== "fileDescriptorResponse") throw new Error(JSON.stringify(r.messageResponse));
  return r.messageResponse.value.fileDescriptorProto.map((b) => fromBinary(FileDescriptorProtoSchema, b).name);
}

it("lists the mounted services and reflection itself, no others", async () => {
  const [r] = await ask({ messageRequest: { case: "listServices", value: "" } });
  expect(r!.messageResponse.case).toBe("listServicesResponse");
  const names = (r!.messageResponse.value as { service: { name: string }[] }).service.map((s) => s.name);
  expect(names).toEqual([ConsumerService.typeName, ServerReflection.typeName, ServerReflectionAlpha.typeName].sort());
});

it("finds the file of a service, a method, a message, a field, an enum value and a nested type", async () => {
  const symbols = [
    "pulsebase.platform.v1.ConsumerService",
    "pulsebase.platform.v1.ConsumerService.CreateConsumer",
    ".pulsebase.platform.v1.ConsumerService",
    "pulsebase.platform.v1.CreateConsumerRequest",
    "pulsebase.platform.v1.CreateConsumerRequest.device_id",
  ];
  const answers = await ask(...symbols.map((value) => ({ messageRequest: { case: "fileContainingSymbol" as const, value } })));
  for (const a of answers) expect(fileNames(a)[0]).toBe("pulsebase/platform/v1/consumer.proto");
  const [auth, nested, nestedValue] = await ask(
    { messageRequest: { case: "fileContainingSymbol", value: "pulsebase.common.v1.AUTH_NONE" } },
    { messageRequest: { case: "fileContainingSymbol", value: "google.protobuf.FieldDescriptorProto.Type" } },
    { messageRequest: { case: "fileContainingSymbol", value: "google.protobuf.FieldDescriptorProto.TYPE_STRING" } },
  );
  expect(fileNames(auth!)[0]).toBe("pulsebase/common/v1/options.proto");
  expect(fileNames(nested!)[0]).toBe("google/protobuf/descriptor.proto");
  expect(fileNames(nestedValue!)[0]).toBe("google/protobuf/descriptor.proto");
});

it("sends each dependency once per stream, the asked-for file always", async () => {
  const [first, again] = await ask(
    { messageRequest: { case: "fileByFilename", value: "pulsebase/platform/v1/consumer.proto" } },
    { messageRequest: { case: "fileByFilename", value: "pulsebase/platform/v1/consumer.proto" } },
  );
  const names = fileNames(first!);
  expect(names[0]).toBe("pulsebase/platform/v1/consumer.proto");
  expect(names).toEqual(expect.arrayContaining(["google/api/annotations.proto", "google/api/http.proto", "google/protobuf/descriptor.proto"]));
  expect(new Set(names).size).toBe(names.length);
  expect(fileNames(again!)).toEqual(["pulsebase/platform/v1/consumer.proto"]);
  // A new stream starts afresh.
  const [fresh] = await ask({ messageRequest: { case: "fileByFilename", value: "pulsebase/platform/v1/consumer.proto" } });
  expect(fileNames(fresh!)).toEqual(names);
});

it("answers extension lookups from the files it knows; pulsebase's own options are not published", async () => {
  const [byNumber, numbers, own] = await ask(
    { messageRequest: { case: "fileContainingExtension", value: { containingType: "google.protobuf.MethodOptions", extensionNumber: 72295728 } } },
    { messageRequest: { case: "allExtensionNumbersOfType", value: "google.protobuf.MethodOptions" } },
    { messageRequest: { case: "fileContainingExtension", value: { containingType: "google.protobuf.MethodOptions", extensionNumber: 50101 } } },
  );
  expect(fileNames(byNumber!)[0]).toBe("google/api/annotations.proto");
  expect(numbers!.messageResponse).toMatchObject({
    case: "allExtensionNumbersResponse",
    value: { baseTypeName: "google.protobuf.MethodOptions", extensionNumber: [72295728] },
  });
  expect(own!.messageResponse).toMatchObject({ case: "errorResponse", value: { errorCode: Code.NotFound } });
  // options.proto is served (its messages are used), without its extensions.
  const [options] = await ask({ messageRequest: { case: "fileByFilename", value: "pulsebase/common/v1/options.proto" } });
  const file = fromBinary(FileDescriptorProtoSchema, (options!.messageResponse.value as { fileDescriptorProto: Uint8Array[] }).fileDescriptorProto[0]!);
  expect(file.extension).toEqual([]);
  expect(file.messageType.map((m) => m.name)).toContain("File");
});

it("says NOT_FOUND, on the stream, for what this listener does not serve", async () => {
  const answers = await ask(
    { messageRequest: { case: "fileContainingSymbol", value: IdentityService.typeName } },
    { messageRequest: { case: "fileByFilename", value: "pulsebase/admin/v1/identity.proto" } },
    { messageRequest: { case: "fileContainingExtension", value: { containingType: "google.protobuf.MethodOptions", extensionNumber: 1 } } },
    { messageRequest: { case: "allExtensionNumbersOfType", value: "no.such.Type" } },
  );
  expect(answers).toHaveLength(4);
  for (const a of answers) expect(a.messageResponse).toMatchObject({ case: "errorResponse", value: { errorCode: Code.NotFound } });
  // The request is echoed back, so clients can match answers to questions.
  expect(answers[0]!.originalRequest?.messageRequest).toEqual({ case: "fileContainingSymbol", value: IdentityService.typeName });
});
