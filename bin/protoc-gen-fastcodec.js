#!/usr/bin/env node
// A buf plugin (buf.gen.yaml): for every message with the option
// `(pulsebase.common.v1.fast_codec) = true` (and the messages it contains),
// writes gen/fastcodec/<file>.ts with `encode<Message>` (sizes first, then
// one write into one buffer: the bytes toBinary writes) and
// `decode<Message>` (the message fromBinary reads, or undefined for anything
// it does not model: unknown fields, another wire type, a message or oneof
// given twice, invalid UTF-8, a truncated or too deep message; the caller
// then runs fromBinary). The wire helpers are src/kernel/proto-wire.ts.
// A field of a kind it does not model fails the generation, naming the
// field: a codec never silently drops a field (docs/architecture.md).
import { realpathSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { getOption, ScalarType } from "@bufbuild/protobuf";
import { createEcmaScriptPlugin, runNodeJs } from "@bufbuild/protoplugin";

const OPTION = "pulsebase.common.v1.fast_codec";
const RUNTIME = "src/kernel/proto-wire.js";
const RUNTIME_NAMES = ["EMPTY_BYTES", "int64Size", "isZero64", "lenSize", "MAX_DEPTH", "NOT_SIMPLE", "setOwn", "strSize", "structFromJson", "structToJson", "unknownSize", "varintSize", "WireReader", "writeBytes", "writeDouble", "writeInt64", "writeStr", "writeUnknown", "writeVarint"];
const VARINT = 0;
const I64 = 1;
const LEN = 2;
const IMPLICIT = 2;
const LEGACY_REQUIRED = 3;
const WRAPPERS = /^google\.protobuf\.(Double|Float|Int64|UInt64|Int32|UInt32|Bool|String|Bytes)Value$/;

/** The scalars the codecs model: wire type, reader, size and writer of a value `v`, its zero test and zero. */
const SCALARS = {
  [ScalarType.STRING]: { wt: LEN, read: "r.string()", size: (v) => `strSize(${v})`, write: (v) => `o = writeStr(b, o, ${v});`, nonZero: (v) => `${v} !== ""`, zero: `""` },
  [ScalarType.BYTES]: { wt: LEN, read: "r.bytes()", size: (v) => `lenSize(${v}.byteLength)`, write: (v) => `o = writeBytes(b, o, ${v});`, nonZero: (v) => `${v}.byteLength > 0`, zero: "EMPTY_BYTES" },
  [ScalarType.BOOL]: { wt: VARINT, read: "r.varint() !== 0", size: () => "1", write: (v) => `b[o++] = ${v} ? 1 : 0;`, nonZero: (v) => `${v} !== false`, zero: "false" },
  [ScalarType.INT32]: { wt: VARINT, read: "r.int32()", size: (v) => `varintSize(${v})`, write: (v) => `o = writeVarint(b, o, ${v});`, nonZero: (v) => `${v} !== 0`, zero: "0" },
  [ScalarType.INT64]: { wt: VARINT, read: "r.int64()", size: (v) => `int64Size(${v})`, write: (v) => `o = writeInt64(b, o, ${v});`, nonZero: (v) => `!isZero64(${v})`, zero: "0n" },
  [ScalarType.DOUBLE]: { wt: I64, read: "r.double()", size: () => "8", write: (v) => `o = writeDouble(b, o, ${v});`, nonZero: (v) => `!Object.is(${v}, 0)`, zero: "0" },
};

function unsupported(field, why) {
  return new Error(`protoc-gen-fastcodec: ${field.parent.typeName}.${field.name} (field ${field.number}) ${why}; extend bin/protoc-gen-fastcodec.js or drop the fast_codec option`);
}

/** The scalar model of a scalar or enum (as int32) value, or an error naming the field. */
function scalarOf(field, scalar, enumDesc) {
  if (enumDesc) {
    if (!enumDesc.open) throw unsupported(field, "is a closed enum");
    return { ...SCALARS[ScalarType.INT32], nonZero: (v) => `${v} !== ${enumDesc.values[0].number}`, zero: String(enumDesc.values[0].number) };
  }
  const s = SCALARS[scalar];
  if (!s) throw unsupported(field, `has the scalar type ${ScalarType[scalar]}, which the generator does not model`);
  return s;
}

function varintBytes(n) {
  const out = [];
  while (n >= 0x80) {
    out.push((n % 128) | 0x80);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return out;
}

/** A field's tag: its value (a `case` label) and the statement writing its bytes. */
function tag(no, wt) {
  if (no >= 1 << 25) throw new Error(`protoc-gen-fastcodec: field number ${no} is beyond the readers' 28-bit tags`);
  const value = no * 8 + wt;
  const bytes = varintBytes(value);
  return { value, size: bytes.length, write: bytes.map((x) => `b[o++] = ${x};`).join(" ") };
}

const ident = (m) => m.typeName.replace(/\./g, "_");
/** A Struct field outside Value is a JsonObject in protobuf-es, not a message. */
const isJsonStruct = (field) => field.message?.typeName === "google.protobuf.Struct" && field.parent.typeName !== "google.protobuf.Value";

/** The field's model, checked: everything the generated code needs to size, write and read it. */
function model(field) {
  if (field.presence === LEGACY_REQUIRED) throw unsupported(field, "is a required field");
  if (field.delimitedEncoding) throw unsupported(field, "is a group (delimited encoding)");
  if (field.message && WRAPPERS.test(field.message.typeName)) throw unsupported(field, "is a wrapper type (protobuf-es unwraps it)");
  switch (field.fieldKind) {
    case "scalar":
      return { kind: "scalar", s: scalarOf(field, field.scalar) };
    case "enum":
      return { kind: "scalar", s: scalarOf(field, undefined, field.enum) };
    case "message":
      return { kind: isJsonStruct(field) ? "json" : "message", m: field.message };
    case "list":
      if (field.listKind === "message") {
        if (isJsonStruct(field)) throw unsupported(field, "is a repeated Struct (JsonObject in protobuf-es)");
        return { kind: "list", m: field.message };
      }
      if (field.listKind === "scalar" && (field.scalar === ScalarType.STRING || field.scalar === ScalarType.BYTES)) return { kind: "list", s: scalarOf(field, field.scalar) };
      throw unsupported(field, "is a repeated number, bool or enum (packed), which the generator does not model");
    case "map":
      if (field.mapKey !== ScalarType.STRING) throw unsupported(field, `is a map with ${ScalarType[field.mapKey]} keys`);
      if (field.mapKind === "message") {
        if (isJsonStruct(field)) throw unsupported(field, "is a map of Struct (JsonObject in protobuf-es)");
        return { kind: "map", m: field.message };
      }
      return { kind: "map", s: scalarOf(field, field.scalar, field.mapKind === "enum" ? field.enum : undefined) };
  }
  throw unsupported(field, `is of kind ${field.fieldKind}`);
}

/** The opted-in messages and every message they contain, in a stable order. */
function closure(roots) {
  const out = [];
  const seen = new Set();
  const visit = (m) => {
    if (seen.has(m.typeName)) return;
    seen.add(m.typeName);
    out.push(m);
    for (const f of m.fields) {
      const fm = model(f);
      if (fm.m) visit(fm.m);
      if (fm.kind === "json") visit(f.message);
    }
  };
  roots.forEach(visit);
  return out;
}

function generateMessage(p, desc, T) {
  const id = ident(desc);
  const fields = desc.fields.concat().sort((a, b) => a.number - b.number);
  const size = [];
  const write = [];
  // toBinary writes fields in number order; a run of members of one oneof is one switch.
  for (let i = 0; i < fields.length; ) {
    const field = fields[i];
    if (field.oneof) {
      const run = [];
      while (i < fields.length && fields[i].oneof === field.oneof) run.push(fields[i++]);
      const o = field.oneof.localName;
      size.push(`  switch (m.${o}.case) {`);
      write.push(`  switch (m.${o}.case) {`);
      for (const mf of run) {
        const fm = model(mf);
        const t = tag(mf.number, fm.kind === "scalar" ? fm.s.wt : LEN);
        size.push(`    case "${mf.localName}":`, `      s += ${t.size} + ${valueSize(fm, `m.${o}.value`)};`, "      break;");
        write.push(`    case "${mf.localName}":`, `      ${t.write}`, `      ${valueWrite(fm, `m.${o}.value`)}`, "      break;");
      }
      size.push("  }");
      write.push("  }");
      continue;
    }
    i++;
    const fm = model(field);
    const v = `m.${field.localName}`;
    switch (fm.kind) {
      case "scalar": {
        const t = tag(field.number, fm.s.wt);
        const cond = field.presence === IMPLICIT ? fm.s.nonZero(v) : `${v} !== undefined`;
        size.push(`  if (${cond}) s += ${t.size} + ${fm.s.size(v)};`);
        write.push(`  if (${cond}) {`, `    ${t.write}`, `    ${fm.s.write(v)}`, "  }");
        break;
      }
      case "message":
      case "json": {
        const t = tag(field.number, LEN);
        size.push(`  if (${v} !== undefined) s += ${t.size} + ${valueSize(fm, v)};`);
        write.push(`  if (${v} !== undefined) {`, `    ${t.write}`, `    ${valueWrite(fm, v)}`, "  }");
        break;
      }
      case "list": {
        const t = tag(field.number, LEN);
        const item = fm.m ? { kind: "message", m: fm.m } : { kind: "scalar", s: fm.s };
        size.push(`  for (const x of ${v}) s += ${t.size} + ${valueSize(item, "x")};`);
        write.push(`  for (const x of ${v}) {`, `    ${t.write}`, `    ${valueWrite(item, "x")}`, "  }");
        break;
      }
      case "map": {
        const t = tag(field.number, LEN);
        const item = fm.m ? { kind: "message", m: fm.m } : { kind: "scalar", s: fm.s };
        const vt = tag(2, fm.m ? LEN : fm.s.wt);
        // An entry: the key (field 1) and the value (field 2), both always written, as toBinary does.
        size.push(`  for (const k of Object.keys(${v})) s += ${t.size} + lenSize(1 + strSize(k) + ${vt.size} + ${valueSize(item, `${v}[k]!`)});`);
        const entry = fm.m ? `1 + strSize(k) + ${vt.size} + lenSize(vs)` : `1 + strSize(k) + ${vt.size} + ${valueSize(item, `${v}[k]!`)}`;
        write.push(
          `  for (const k of Object.keys(${v})) {`,
          ...(fm.m ? ["    const vs = S[sk]!;"] : []),
          `    ${t.write}`,
          `    o = writeVarint(b, o, ${entry});`,
          "    b[o++] = 10;",
          "    o = writeStr(b, o, k);",
          `    ${vt.write}`,
          `    ${valueWrite(item, `${v}[k]!`)}`,
          "  }",
        );
        break;
      }
    }
  }

  p("function size_", id, "(m: ", T(desc), "): number {");
  p("  let s = 0;");
  size.forEach((l) => p(l));
  p("  if (m.$unknown !== undefined) s += unknownSize(m.$unknown);");
  p("  return s;");
  p("}");
  p();
  p("function write_", id, "(b: Buffer, o: number, m: ", T(desc), "): number {");
  write.forEach((l) => p(l));
  p("  if (m.$unknown !== undefined) o = writeUnknown(b, o, m.$unknown);");
  p("  return o;");
  p("}");
  p();

  // The reader: a message as create() makes it (implicit fields, lists,
  // maps and oneofs as own properties in declaration order), then the fields.
  const init = [`$typeName: "${desc.typeName}"`];
  for (const member of desc.members) {
    if (member.kind === "oneof") init.push(`${member.localName}: { case: undefined }`);
    else if (member.fieldKind === "list") init.push(`${member.localName}: []`);
    else if (member.fieldKind === "map") init.push(`${member.localName}: {}`);
    else if ((member.fieldKind === "scalar" || member.fieldKind === "enum") && member.presence === IMPLICIT) init.push(`${member.localName}: ${model(member).s.zero}`);
  }
  p("function read_", id, "(r: WireReader, end: number, depth: number): ", T(desc), " {");
  p("  if (depth > MAX_DEPTH) throw NOT_SIMPLE;");
  p("  const m: ", T(desc), " = { ", init.join(", "), " };");
  p("  while (r.pos < end) {");
  p("    switch (r.varint()) {");
  for (const field of fields) {
    const fm = model(field);
    const t = tag(field.number, fm.kind === "scalar" ? fm.s.wt : LEN);
    const v = `m.${field.localName}`;
    p(`      case ${t.value}:`);
    if (field.oneof) {
      // (fromBinary merges a message given twice and keeps the last scalar: left to it)
      p(`        if (m.${field.oneof.localName}.case !== undefined) throw NOT_SIMPLE;`);
      p(`        m.${field.oneof.localName} = { case: "${field.localName}", value: ${valueRead(fm)} };`);
    } else if (fm.kind === "scalar") {
      p(`        ${v} = ${fm.s.read};`);
    } else if (fm.kind === "message" || fm.kind === "json") {
      p(`        if (${v} !== undefined) throw NOT_SIMPLE;`);
      p(`        ${v} = ${valueRead(fm)};`);
    } else if (fm.kind === "list") {
      p(`        ${v}.push(${fm.m ? valueRead({ kind: "message", m: fm.m }) : fm.s.read});`);
    } else {
      const vt = tag(2, fm.m ? LEN : fm.s.wt);
      p("        {");
      p("          const stop = r.end();");
      p(`          let k = "";`);
      p(fm.m ? ["          let x: ", T(fm.m), " | undefined;"] : `          let x = ${fm.s.zero};`);
      p("          while (r.pos < stop) {");
      p("            switch (r.varint()) {");
      p("              case 10:");
      p("                k = r.string();");
      p("                break;");
      p(`              case ${vt.value}:`);
      if (fm.m) p("                if (x !== undefined) throw NOT_SIMPLE;");
      p(`                x = ${fm.m ? valueRead({ kind: "message", m: fm.m }) : fm.s.read};`);
      p("                break;");
      p("              default:");
      p("                throw NOT_SIMPLE;");
      p("            }");
      p("          }");
      p("          if (r.pos !== stop) throw NOT_SIMPLE;");
      // (a missing key or scalar value is its zero, as in fromBinary; a missing message value is left to it)
      if (fm.m) p("          if (x === undefined) throw NOT_SIMPLE;");
      p(`          setOwn(${v}, k, x);`);
      p("        }");
    }
    p("        break;");
  }
  p("      default:");
  p("        throw NOT_SIMPLE;");
  p("    }");
  p("  }");
  p("  if (r.pos !== end) throw NOT_SIMPLE;");
  p("  return m;");
  p("}");
  p();
}

// A nested message's size is computed once: the size pass records it in S
// (slot taken before its own nested messages: pre-order), the write pass
// reads S in the same order, both visiting fields in number order.
function valueSize(fm, v) {
  if (fm.kind === "scalar") return fm.s.size(v);
  if (fm.kind === "json") return `lenSize(sized(sn++, size_google_protobuf_Struct(structFromJson(${v}))))`;
  return `lenSize(sized(sn++, size_${ident(fm.m)}(${v})))`;
}

function valueWrite(fm, v) {
  if (fm.kind === "scalar") return fm.s.write(v);
  if (fm.kind === "json") return `o = write_google_protobuf_Struct(b, writeVarint(b, o, S[sk++]!), structFromJson(${v}));`;
  return `o = write_${ident(fm.m)}(b, writeVarint(b, o, S[sk++]!), ${v});`;
}

function valueRead(fm) {
  if (fm.kind === "scalar") return fm.s.read;
  if (fm.kind === "json") return "structToJson(read_google_protobuf_Struct(r, r.end(), depth + 1))";
  return `read_${ident(fm.m)}(r, r.end(), depth + 1)`;
}

export const plugin = createEcmaScriptPlugin({
  name: "protoc-gen-fastcodec",
  version: "v1",
  generateTs(schema) {
    const option = schema.allFiles.flatMap((file) => file.extensions).find((e) => e.typeName === OPTION);
    if (!option) return;
    for (const file of schema.files) {
      const roots = [];
      const walk = (messages) => {
        for (const m of messages) {
          if (getOption(m, option) === true) roots.push(m);
          walk(m.nestedMessages);
        }
      };
      walk(file.messages);
      if (roots.length === 0) continue;
      const messages = closure(roots);
      // (a tree of its own: gen/pulsebase/common/v1 is imported by src/kernel, which these import)
      const f = schema.generateFile(`fastcodec/${file.name}.ts`);
      f.preamble(file);
      const shapes = new Map();
      const T = (m) => {
        if (!shapes.has(m.typeName)) shapes.set(m.typeName, f.importShape(m));
        return shapes.get(m.typeName);
      };
      const out = [];
      const p = (...parts) => out.push(parts);
      p("// The sizes of nested messages, recorded by the size pass for the write pass (see valueSize in the generator).");
      p("const S: number[] = [];");
      p("let sn = 0;");
      p("let sk = 0;");
      p("function sized(slot: number, size: number): number {");
      p("  S[slot] = size;");
      p("  return size;");
      p("}");
      p();
      for (const m of roots) {
        const name = m.typeName.slice(file.proto.package ? file.proto.package.length + 1 : 0).replace(/\./g, "_");
        p("/** ", m.typeName, " in the protobuf binary format: the bytes toBinary writes. */");
        p("export function encode", name, "(msg: ", T(m), "): Uint8Array {");
        p("  sn = 0;");
        p("  const out = Buffer.allocUnsafe(size_", ident(m), "(msg));");
        p("  sk = 0;");
        p("  const end = write_", ident(m), "(out, 0, msg);");
        p("  // (a large message's sizes are not kept)");
        p("  if (sn > 4096) S.length = 0;");
        p("  return end === out.length ? out : out.subarray(0, end);");
        p("}");
        p();
        p("/** ", m.typeName, " read from the protobuf binary format, as fromBinary reads it; undefined: leave the bytes to fromBinary. */");
        p("export function decode", name, "(bytes: Uint8Array): ", T(m), " | undefined {");
        p("  try {");
        p("    return read_", ident(m), "(new WireReader(bytes), bytes.length, 1);");
        p("  } catch {");
        p("    // NOT_SIMPLE, or invalid UTF-8");
        p("    return undefined;");
        p("  }");
        p("}");
        p();
      }
      p("/** The field numbers each codec of this file models, by message (a test checks them against the descriptors). */");
      p("export const fastCodecFields: Readonly<Record<string, readonly number[]>> = {");
      for (const m of messages) p(`  "${m.typeName}": [${m.fields.map((x) => x.number).sort((a, b) => a - b).join(", ")}],`);
      p("};");
      p();
      for (const m of messages) generateMessage(p, m, T);
      // The wire helpers this file uses, imported by name (src/kernel/proto-wire.ts, from gen/).
      const text = JSON.stringify(out.flat(3).filter((x) => typeof x === "string"));
      const used = RUNTIME_NAMES.filter((n) => new RegExp(`\\b${n}\\b`).test(text));
      f.print("// Generated by bin/protoc-gen-fastcodec.js from the fast_codec option: edit the .proto, then run `npx buf generate`.");
      f.print("import { ", used.join(", "), " } from \"", "../".repeat(file.name.split("/").length + 1), RUNTIME, "\";");
      f.print();
      for (const parts of out) f.print(...parts);
    }
  },
});

// Run by buf; imported by the tests, which run it on requests of their own.
if (process.argv[1] && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href) runNodeJs(plugin);
