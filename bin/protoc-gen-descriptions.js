#!/usr/bin/env node
// A buf plugin (buf.gen.yaml): writes the leading comments of pulsebase's
// device and content services, methods, messages and fields to gen/pulsebase/descriptions.ts,
// keyed by full name. protoc-gen-es embeds descriptors without comments; the
// OpenAPI document (src/transport/http/openapi.ts) takes its descriptions
// from here, so they are written once, in the .proto files.
import { nestedTypes } from "@bufbuild/protobuf/reflect";
import { createEcmaScriptPlugin, getComments, runNodeJs } from "@bufbuild/protoplugin";

// Paragraphs unwrapped: the .proto's line breaks are only its line length.
const text = (desc) => (getComments(desc).leading ?? "").trim().split(/\n\s*\n/).map((p) => p.split("\n").map((l) => l.trim()).join(" ")).join("\n\n");

runNodeJs(createEcmaScriptPlugin({
  name: "protoc-gen-descriptions",
  version: "v1",
  generateTs(schema) {
    // buf runs the plugin once per input (buf.gen.yaml): ours is proto/.
    const files = schema.files.filter((x) => /^pulsebase\/(platform|cms|common)\//.test(x.proto.name));
    if (files.length === 0) return;
    const out = {};
    for (const file of files) {
      for (const t of nestedTypes(file)) {
        if (t.kind === "extension") continue;
        const own = text(t);
        if (own) out[t.typeName] = own;
        const members = t.kind === "message" ? t.fields : t.kind === "service" ? t.methods : t.kind === "enum" ? t.values : [];
        for (const m of members) {
          const c = text(m);
          if (c) out[`${t.typeName}.${m.name}`] = c;
        }
      }
    }
    const f = schema.generateFile("pulsebase/descriptions.ts");
    f.preamble(files[0]);
    f.print("/** Leading comments of the .proto elements of the device and content API, by full name. */");
    f.print("export const descriptions: Readonly<Record<string, string>> = ", JSON.stringify(out, null, 2), ";");
  },
}));
