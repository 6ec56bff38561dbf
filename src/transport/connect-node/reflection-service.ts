// gRPC server reflection (grpc.reflection.v1 and v1alpha: grpcurl and
// buf curl use either) over the services one listener mounts. The
// descriptors are the ones compiled into gen/ (protobuf-es embeds every file
// with its imports), serialized as FileDescriptorProtos on demand.
//
// Pulsebase's own options (pulsebase/common/v1/options.proto: REST gateway and
// access settings, read by the server only) are not published as extensions:
// protobufjs-based clients (grpc-js-reflection-client, @grpc/proto-loader)
// re-serialize what they load with each scalar extension also as a field of
// its extendee, then fail with "duplicate id 50001 in Type
// .google.protobuf.FieldOptions". The options' values stay in the
// descriptors as unknown fields, which every client skips.
import { clone, create, toBinary, type DescFile, type DescService } from "@bufbuild/protobuf";
import { nestedTypes } from "@bufbuild/protobuf/reflect";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";
import type { ServiceImpl } from "@connectrpc/connect";
import {
  ServerReflection as ReflectionV1,
  ServerReflectionResponseSchema as ResponseV1Schema,
  type ServerReflectionRequest as RequestV1,
} from "../../../gen/grpc/reflection/v1/reflection_pb.js";
import {
  ServerReflection as ReflectionV1alpha,
  ServerReflectionResponseSchema as ResponseV1alphaSchema,
  type ServerReflectionRequest as RequestV1alpha,
} from "../../../gen/grpc/reflection/v1alpha/reflection_pb.js";
import { binding, type ServiceBinding } from "../../kernel/module.js";

/** The reflection services themselves, to add to what a listener mounts. */
export const reflectionServices: DescService[] = [ReflectionV1, ReflectionV1alpha];

/** Files and symbols reachable from a set of services, for lookups by name. */
export class DescriptorIndex {
  readonly serviceNames: string[];
  private readonly files = new Map<string, DescFile>();
  private readonly symbols = new Map<string, DescFile>();
  private readonly messages = new Set<string>();
  /** "extendee type name" -> extension number -> file declaring it. */
  private readonly extensions = new Map<string, Map<number, DescFile>>();
  private readonly bytes = new Map<DescFile, Uint8Array>();

  constructor(services: DescService[]) {
    this.serviceNames = [...new Set(services.map((s) => s.typeName))].sort();
    for (const s of services) this.addFile(s.file);
  }

  private addFile(file: DescFile): void {
    if (this.files.has(file.proto.name)) return;
    this.files.set(file.proto.name, file);
    for (const dep of file.dependencies) this.addFile(dep);
    for (const t of nestedTypes(file)) {
      this.symbols.set(t.typeName, file);
      switch (t.kind) {
        case "message":
          this.messages.add(t.typeName);
          for (const f of t.fields) this.symbols.set(`${t.typeName}.${f.name}`, file);
          for (const o of t.oneofs) this.symbols.set(`${t.typeName}.${o.name}`, file);
          break;
        case "enum": {
          // Enum values are scoped like their enum's siblings (C++ rules).
          const scope = t.typeName.slice(0, t.typeName.length - t.name.length);
          for (const v of t.values) this.symbols.set(scope + v.name, file);
          break;
        }
        case "service":
          for (const m of t.methods) this.symbols.set(`${t.typeName}.${m.name}`, file);
          break;
        case "extension": {
          if (ownFile(file)) break;
          let byNumber = this.extensions.get(t.extendee.typeName);
          if (!byNumber) this.extensions.set(t.extendee.typeName, (byNumber = new Map()));
          byNumber.set(t.number, file);
          break;
        }
      }
    }
  }

  fileByName(name: string): DescFile | undefined {
    return this.files.get(name);
  }

  fileContainingSymbol(symbol: string): DescFile | undefined {
    return this.symbols.get(symbol.startsWith(".") ? symbol.slice(1) : symbol);
  }

  fileContainingExtension(typeName: string, number: number): DescFile | undefined {
    return this.extensions.get(typeName)?.get(number);
  }

  /** Undefined when the type is not a known message. */
  extensionNumbersOf(typeName: string): number[] | undefined {
    if (!this.messages.has(typeName)) return undefined;
    return [...(this.extensions.get(typeName)?.keys() ?? [])].sort((a, b) => a - b);
  }

  serialized(file: DescFile): Uint8Array {
    let b = this.bytes.get(file);
    if (!b) {
      let proto = file.proto;
      if (ownFile(file) && proto.extension.length > 0) {
        proto = clone(FileDescriptorProtoSchema, proto);
        proto.extension = [];
      }
      this.bytes.set(file, (b = toBinary(FileDescriptorProtoSchema, proto)));
    }
    return b;
  }
}

/** A file of ours, whose extensions are the server's own (see the top of this file). */
function ownFile(file: DescFile): boolean {
  return file.proto.name.startsWith("pulsebase/");
}

type AnyRequest = RequestV1 | RequestV1alpha;

/** What one request is answered with (the message_response oneof). */
type Answer =
  | { case: "fileDescriptorResponse"; value: { fileDescriptorProto: Uint8Array[] } }
  | { case: "allExtensionNumbersResponse"; value: { baseTypeName: string; extensionNumber: number[] } }
  | { case: "listServicesResponse"; value: { service: { name: string }[] } }
  | { case: "errorResponse"; value: { errorCode: number; errorMessage: string } };

function notFound(message: string): Answer {
  return { case: "errorResponse", value: { errorCode: Code.NotFound, errorMessage: message } };
}

/**
 * One stream's answers. Like the reference (Go) server, a file is always
 * sent when asked for, and with it each of its transitive dependencies not
 * yet sent on this stream: clients keep what they received.
 */
class ReflectionSession {
  private readonly sent = new Set<string>();
  constructor(private readonly index: DescriptorIndex) {}

  answer(req: AnyRequest): Answer {
    const r = req.messageRequest;
    switch (r.case) {
      case "listServices":
        return { case: "listServicesResponse", value: { service: this.index.serviceNames.map((name) => ({ name })) } };
      case "fileByFilename": {
        const file = this.index.fileByName(r.value);
        return file ? this.files(file) : notFound(`File not found: ${r.value}`);
      }
      case "fileContainingSymbol": {
        const file = this.index.fileContainingSymbol(r.value);
        return file ? this.files(file) : notFound(`Symbol not found: ${r.value}`);
      }
      case "fileContainingExtension": {
        const file = this.index.fileContainingExtension(r.value.containingType, r.value.extensionNumber);
        return file
          ? this.files(file)
          : notFound(`Extension not found: ${r.value.containingType} ${r.value.extensionNumber}`);
      }
      case "allExtensionNumbersOfType": {
        const numbers = this.index.extensionNumbersOf(r.value);
        return numbers
          ? { case: "allExtensionNumbersResponse", value: { baseTypeName: r.value, extensionNumber: numbers } }
          : notFound(`Type not found: ${r.value}`);
      }
      default:
        return { case: "errorResponse", value: { errorCode: Code.InvalidArgument, errorMessage: "No request was set." } };
    }
  }

  private files(file: DescFile): Answer {
    const out: Uint8Array[] = [this.index.serialized(file)];
    this.sent.add(file.proto.name);
    const visit = (f: DescFile) => {
      for (const dep of f.dependencies) {
        if (this.sent.has(dep.proto.name)) continue;
        this.sent.add(dep.proto.name);
        out.push(this.index.serialized(dep));
        visit(dep);
      }
    };
    visit(file);
    return { case: "fileDescriptorResponse", value: { fileDescriptorProto: out } };
  }
}

/**
 * Bindings of both reflection versions over `services` (give every service
 * the listener mounts; the reflection services are added here).
 */
export function createReflectionBindings(services: DescService[]): ServiceBinding[] {
  const index = new DescriptorIndex([...services, ...reflectionServices]);
  const v1: ServiceImpl<typeof ReflectionV1> = {
    async *serverReflectionInfo(requests) {
      const session = new ReflectionSession(index);
      for await (const req of requests) {
        yield create(ResponseV1Schema, { validHost: req.host, originalRequest: req, messageResponse: session.answer(req) });
      }
    },
  };
  const v1alpha: ServiceImpl<typeof ReflectionV1alpha> = {
    async *serverReflectionInfo(requests) {
      const session = new ReflectionSession(index);
      for await (const req of requests) {
        yield create(ResponseV1alphaSchema, { validHost: req.host, originalRequest: req, messageResponse: session.answer(req) });
      }
    },
  };
  return [binding(ReflectionV1, v1), binding(ReflectionV1alpha, v1alpha)];
}
