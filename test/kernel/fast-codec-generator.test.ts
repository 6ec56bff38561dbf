// The generated codecs cannot drift from the .proto: every message with the
// fast_codec option has its codec in gen/fastcodec/, modelling every field
// number of every message it contains (so a field added to the .proto and
// not generated fails here, and CI's `buf generate` diff), and the plugin
// refuses a field of a kind it does not model instead of leaving it out.
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { create, getOption, hasOption, setExtension, toBinary, type DescFile, type DescMessage } from "@bufbuild/protobuf";
import { nestedTypes } from "@bufbuild/protobuf/reflect";
import {
  CodeGeneratorRequestSchema,
  type CodeGeneratorResponse,
  type CodeGeneratorRequest,
  DescriptorProtoSchema,
  FieldDescriptorProto_Label,
  FieldDescriptorProto_Type,
  file_google_protobuf_descriptor,
  file_google_protobuf_wrappers,
  FileDescriptorProtoSchema,
  MessageOptionsSchema,
} from "@bufbuild/protobuf/wkt";
import { describe, expect, it } from "vitest";
import { fast_codec, file_pulsebase_common_v1_options } from "../../gen/pulsebase/common/v1/options_pb.js";

const root = resolve(import.meta.dirname, "../..");
const PLUGIN = join(root, "bin/protoc-gen-fastcodec.js");

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(join(dir, e.name)) : [join(dir, e.name)]));
}

/** The messages a codec covers: the opted-in one and every message its fields hold. */
function closure(m: DescMessage, seen = new Map<string, DescMessage>()): Map<string, DescMessage> {
  if (seen.has(m.typeName)) return seen;
  seen.set(m.typeName, m);
  for (const f of m.fields) if (f.message) closure(f.message, seen);
  return seen;
}

describe("gen/fastcodec against the descriptors", () => {
  it("has a codec for every message with the option, covering every field of every message it contains", async () => {
    let optedIn = 0;
    for (const path of files(join(root, "gen/pulsebase")).filter((p) => p.endsWith("_pb.ts"))) {
      const mod = (await import(pathToFileURL(path).href)) as Record<string, unknown>;
      const file = Object.values(mod).find((x): x is DescFile => (x as DescFile | undefined)?.kind === "file")!;
      const roots = [...nestedTypes(file)].filter((t): t is DescMessage => t.kind === "message" && hasOption(t, fast_codec) && getOption(t, fast_codec));
      if (roots.length === 0) continue;
      const codecPath = join(root, "gen/fastcodec", relative(join(root, "gen"), path).replace(/_pb\.ts$/, ".ts"));
      const codec = (await import(pathToFileURL(codecPath).href)) as Record<string, unknown>;
      const table = codec.fastCodecFields as Record<string, number[]>;
      const want = new Map<string, DescMessage>();
      for (const m of roots) {
        optedIn++;
        const name = m.typeName.slice(file.proto.package.length + 1).replace(/\./g, "_");
        expect(typeof codec[`encode${name}`], `${codecPath}: encode${name}`).toBe("function");
        expect(typeof codec[`decode${name}`], `${codecPath}: decode${name}`).toBe("function");
        closure(m, want);
      }
      expect(Object.keys(table).sort(), codecPath).toEqual([...want.keys()].sort());
      for (const [typeName, m] of want) expect(table[typeName], `${typeName} in ${codecPath}`).toEqual(m.fields.map((f) => f.number).sort((a, b) => a - b));
    }
    // QueryRequest, QueryResponse, HttpRequest, HttpResponse, RecordEventRequest, Event
    expect(optedIn).toBeGreaterThanOrEqual(6);
  });
});

interface FieldInit {
  name: string;
  type: FieldDescriptorProto_Type;
  number?: number;
  label?: FieldDescriptorProto_Label;
  typeName?: string;
}

/** A request for one file, fctest.proto, with message M of the given fields (fast_codec set). */
function request(fields: readonly FieldInit[], nested: { name: string; fields: FieldInit[]; mapEntry?: boolean }[] = []): CodeGeneratorRequest {
  const options = create(MessageOptionsSchema);
  setExtension(options, fast_codec, true);
  const field = (f: FieldInit, i: number) => ({ label: FieldDescriptorProto_Label.OPTIONAL, number: i + 1, jsonName: f.name, ...f });
  const msg = create(DescriptorProtoSchema, {
    name: "M",
    field: fields.map(field),
    options,
    nestedType: nested.map((n) => ({ name: n.name, field: n.fields.map(field), ...(n.mapEntry ? { options: { mapEntry: true } } : {}) })),
  });
  // (wrappers.proto for the wrapper case)
  const file = create(FileDescriptorProtoSchema, { name: "fctest.proto", package: "fctest", syntax: "proto3", dependency: ["google/protobuf/descriptor.proto", "google/protobuf/wrappers.proto", "pulsebase/common/v1/options.proto"], messageType: [msg] });
  return create(CodeGeneratorRequestSchema, { fileToGenerate: ["fctest.proto"], parameter: "target=ts,import_extension=js", protoFile: [file_google_protobuf_descriptor.proto, file_google_protobuf_wrappers.proto, file_pulsebase_common_v1_options.proto, file] });
}

const T = FieldDescriptorProto_Type;

async function plugin(): Promise<{ run(req: CodeGeneratorRequest): CodeGeneratorResponse }> {
  return ((await import(pathToFileURL(PLUGIN).href)) as { plugin: { run(req: CodeGeneratorRequest): CodeGeneratorResponse } }).plugin;
}

describe("bin/protoc-gen-fastcodec.js", () => {
  it("generates a codec that models every field of an opted-in message", async () => {
    const res = (await plugin()).run(request([
      { name: "s", type: T.STRING },
      { name: "n", type: T.INT64 },
      { name: "e", type: T.BYTES, label: FieldDescriptorProto_Label.REPEATED },
      { name: "x", type: T.BOOL, number: 20 },
    ]));
    expect(res.file.map((f) => f.name)).toEqual(["fastcodec/fctest.ts"]);
    const code = res.file[0]!.content;
    expect(code).toContain(`"fctest.M": [1, 2, 3, 20],`);
    expect(code).toMatch(/export function encodeM\(msg: M\): Uint8Array/);
    expect(code).toMatch(/export function decodeM\(bytes: Uint8Array\): M \| undefined/);
    // Field 20's tag takes two bytes (160, 1), read as the varint 160.
    expect(code).toContain("b[o++] = 160; b[o++] = 1;");
    expect(code).toContain("case 160:");
    expect(code).toContain(`from "../../src/kernel/proto-wire.js"`);
  });

  it.each([
    ["a float", [{ name: "f", type: T.FLOAT }], /fctest\.M\.f \(field 1\) has the scalar type FLOAT/],
    ["a sint32", [{ name: "z", type: T.SINT32 }], /fctest\.M\.z \(field 1\) has the scalar type SINT32/],
    ["a packed repeated int32", [{ name: "p", type: T.INT32, label: FieldDescriptorProto_Label.REPEATED }], /fctest\.M\.p \(field 1\) is a repeated number/],
    ["a wrapper", [{ name: "w", type: T.MESSAGE, typeName: ".google.protobuf.StringValue" }], /fctest\.M\.w \(field 1\) is a wrapper type/],
  ] as const)("refuses %s, naming the field, instead of leaving it out", async (_what, fields, message) => {
    const req = request(fields);
    await expect(plugin().then((p) => p.run(req))).rejects.toThrow(message);
  });

  it("refuses a map with int32 keys", async () => {
    const req = request(
      [{ name: "m", type: T.MESSAGE, typeName: ".fctest.M.MEntry", label: FieldDescriptorProto_Label.REPEATED }],
      [{ name: "MEntry", mapEntry: true, fields: [{ name: "key", type: T.INT32 }, { name: "value", type: T.STRING }] }],
    );
    await expect(plugin().then((p) => p.run(req))).rejects.toThrow(/fctest\.M\.m \(field 1\) is a map with INT32 keys/);
  });

  it("fails the buf run: a non-zero exit and the field on stderr", () => {
    const run = spawnSync(process.execPath, [PLUGIN], { input: toBinary(CodeGeneratorRequestSchema, request([{ name: "f", type: T.FLOAT }])) });
    expect(run.status).toBe(1);
    expect(run.stderr.toString()).toMatch(/fctest\.M\.f \(field 1\) has the scalar type FLOAT/);
  });
});
