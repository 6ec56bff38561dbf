// Validation and normalisation of event, log and breadcrumb items. Every
// problem is collected under its field path ("events.3.name", "file"), so one
// 422 lists them all; a valid item comes back as the row the store writes.
import { toJson, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { ValueSchema, type Value } from "@bufbuild/protobuf/wkt";
import type { File } from "../../../gen/pulsebase/common/v1/options_pb.js";
import type { Violations } from "../../kernel/errors.js";
import { parseIsoTime } from "../../kernel/iso-time.js";
import { setOwn } from "../../kernel/proto-wire.js";
import type { BreadcrumbRow, EventRow, LogRow } from "./batch-payload.js";
import { limits } from "./limits.js";
import { logHash } from "./log-hash.js";

export interface ItemContext {
  now: Date;
  clockSkewMs: number;
}

function chars(s: string): number {
  return s.length <= 1 ? s.length : [...s].length;
}

function requiredText(v: Violations, path: string, value: string, max: number, label: string): boolean {
  if (value.trim().length === 0) {
    v.add(path, `The ${label} field is required.`);
    return false;
  }
  return optionalText(v, path, value, max, label);
}

// PostgreSQL text and jsonb cannot hold U+0000: refuse it here (a 422 naming
// the field) instead of failing at the insert (a 500, or a queued batch the
// worker can never apply).
const NUL = "\u0000";

function hasNul(value: unknown): boolean {
  if (typeof value === "string") return value.includes(NUL);
  if (typeof value !== "object" || value === null) return false;
  return Object.entries(value).some(([k, x]) => k.includes(NUL) || hasNul(x));
}

function optionalText(v: Violations, path: string, value: string, max: number, label: string): boolean {
  if (value.includes(NUL)) {
    v.add(path, `The ${label} must not contain NUL characters.`);
    return false;
  }
  if (value.length > max && chars(value) > max) {
    v.add(path, `The ${label} may not be greater than ${max} characters.`);
    return false;
  }
  return true;
}

function createdAt(v: Violations, path: string, text: string, ctx: ItemContext): string | undefined {
  if (text.trim() === "") return ctx.now.toISOString();
  const d = parseIsoTime(text);
  if (!d) {
    v.add(path, "The created at is not a valid ISO 8601 date-time.");
    return undefined;
  }
  if (d.getTime() > ctx.now.getTime() + ctx.clockSkewMs) {
    v.add(path, "The created at must not be later than now.");
    return undefined;
  }
  if (d.getTime() < 0) {
    v.add(path, "The created at must not be before 1970-01-01.");
    return undefined;
  }
  return d.toISOString();
}

function sessionId(v: Violations, path: string, value: bigint | undefined, required: boolean): number | null | undefined {
  if (value === undefined) {
    if (required) {
      v.add(path, "The session id field is required.");
      return undefined;
    }
    return null;
  }
  if (value <= 0n || value > BigInt(Number.MAX_SAFE_INTEGER)) {
    v.add(path, "The session id must be a positive integer.");
    return undefined;
  }
  return Number(value);
}

function metadata(v: Violations, path: string, value: JsonObject | undefined): Record<string, string> | undefined {
  if (value === undefined) {
    v.add(path, "The metadata field is required.");
    return undefined;
  }
  const entries = Object.entries(value);
  if (entries.length > limits.metadataKeysMax) {
    v.add(path, `The metadata may not have more than ${limits.metadataKeysMax} keys.`);
    return undefined;
  }
  const out: Record<string, string> = {};
  let ok = true;
  for (const [key, val] of entries) {
    const p = `${path}.${key}`;
    if (key.length === 0 || chars(key) > limits.metadataKeyMax) {
      v.add(p, `Metadata keys must be 1 to ${limits.metadataKeyMax} characters.`);
      ok = false;
    } else if (key.includes(NUL) || (typeof val === "string" && val.includes(NUL))) {
      v.add(p, "Metadata keys and values must not contain NUL characters.");
      ok = false;
    } else if (typeof val !== "string") {
      v.add(p, "Metadata values must be strings.");
      ok = false;
    } else if (chars(val) > limits.metadataValueMax) {
      v.add(p, `Metadata values may not be greater than ${limits.metadataValueMax} characters.`);
      ok = false;
    } else setOwn(out, key, val); // "__proto__" is a key like any other
  }
  return ok ? out : undefined;
}

export interface EventInput {
  name: string;
  metadata?: JsonObject | undefined;
  sessionId?: bigint | undefined;
  createdAt?: string;
}

/** prefix is "" for the single endpoint, "events.3." in a batch. */
export function validateEvent(v: Violations, prefix: string, it: EventInput, ctx: ItemContext, requireSession: boolean): EventRow | undefined {
  const okName = requiredText(v, `${prefix}name`, it.name, limits.nameMax, "name");
  const md = metadata(v, `${prefix}metadata`, it.metadata);
  const sid = sessionId(v, `${prefix}session_id`, it.sessionId, requireSession);
  const at = createdAt(v, `${prefix}created_at`, it.createdAt ?? "", ctx);
  if (!okName || !md || sid === undefined || !at) return undefined;
  return { name: it.name, metadata: md, session_id: sid, created_at: at };
}

export interface BreadcrumbInput {
  name: string;
  createdAt: string;
  sessionId?: bigint | undefined;
}

export function validateBreadcrumb(v: Violations, prefix: string, it: BreadcrumbInput, ctx: ItemContext): BreadcrumbRow | undefined {
  const okName = requiredText(v, `${prefix}name`, it.name, limits.nameMax, "name");
  const sid = sessionId(v, `${prefix}session_id`, it.sessionId, false);
  const at = createdAt(v, `${prefix}created_at`, it.createdAt, ctx);
  if (!okName || sid === undefined || !at) return undefined;
  return { name: it.name, session_id: sid, created_at: at };
}

export interface LogInput {
  appVersion: string;
  classFqn: string;
  message: string;
  type: string;
  fileName?: string | undefined;
  lineNumber?: bigint | undefined;
  stackTrace?: string | undefined;
  context?: Value | undefined;
  file?: File | undefined;
  createdAt: string;
  sessionId?: bigint | undefined;
}

/** A validated log item; the attachment is filled in once the file is stored. */
export interface ValidLog {
  row: LogRow;
  file?: File;
}

function context(v: Violations, path: string, message: Value | undefined): Record<string, unknown> | null | undefined {
  if (message === undefined || message.kind.case === undefined) return null;
  const value: JsonValue = toJson(ValueSchema, message);
  if (value === null) return null;
  let obj: unknown = value;
  if (typeof value === "string") {
    if (value.trim() === "") return null;
    try {
      obj = JSON.parse(value);
    } catch {
      v.add(path, "The context must be an object.");
      return undefined;
    }
  }
  if (typeof obj !== "object" || obj === null || Array.isArray(obj)) {
    v.add(path, "The context must be an object.");
    return undefined;
  }
  if (Buffer.byteLength(JSON.stringify(obj)) > limits.contextBytesMax) {
    v.add(path, `The context may not be larger than ${limits.contextBytesMax} bytes.`);
    return undefined;
  }
  if (hasNul(obj)) {
    v.add(path, "The context must not contain NUL characters.");
    return undefined;
  }
  return obj as Record<string, unknown>;
}

/** The file part is treated as absent when it carries no name and no bytes. */
export function presentFile(f: File | undefined): File | undefined {
  return f && (f.data.byteLength > 0 || f.filename !== "") ? f : undefined;
}

export function validateLog(v: Violations, prefix: string, it: LogInput, ctx: ItemContext, requireSession: boolean): ValidLog | undefined {
  const before = Object.keys(v.fields).length;
  requiredText(v, `${prefix}app_version`, it.appVersion, limits.appVersionMax, "app version");
  requiredText(v, `${prefix}classFQN`, it.classFqn, limits.classFqnMax, "classFQN");
  requiredText(v, `${prefix}message`, it.message, limits.logMessageMax, "message");
  if (it.type === "") v.add(`${prefix}type`, "The type field is required.");
  else if (it.type !== "error" && it.type !== "crash") v.add(`${prefix}type`, "The type must be one of: error, crash.");
  if (it.fileName !== undefined) optionalText(v, `${prefix}file_name`, it.fileName, limits.fileNameMax, "file name");
  if (it.stackTrace !== undefined) optionalText(v, `${prefix}stack_trace`, it.stackTrace, limits.stackTraceMax, "stack trace");
  let line: number | null = null;
  if (it.lineNumber !== undefined) {
    if (it.lineNumber < 0n || it.lineNumber > 2_147_483_647n) v.add(`${prefix}line_number`, "The line number must be a non-negative integer.");
    else line = Number(it.lineNumber);
  }
  const ctxObj = context(v, `${prefix}context`, it.context);
  const file = presentFile(it.file);
  if (file && file.data.byteLength > limits.fileBytesMax) {
    v.add(`${prefix}file`, `The file may not be greater than 4 MiB (${limits.fileBytesMax} bytes).`);
  }
  const sid = sessionId(v, `${prefix}session_id`, it.sessionId, requireSession);
  const at = createdAt(v, `${prefix}created_at`, it.createdAt, ctx);
  if (Object.keys(v.fields).length !== before || ctxObj === undefined || sid === undefined || !at) return undefined;
  const type = it.type as "error" | "crash";
  return {
    row: {
      hash: logHash(it.appVersion, it.classFqn, it.message, type),
      app_version: it.appVersion,
      class_fqn: it.classFqn,
      message: it.message,
      type,
      file_name: it.fileName ?? null,
      line_number: line,
      stack_trace: it.stackTrace ?? null,
      context: ctxObj,
      session_id: sid,
      created_at: at,
      attachment: null,
    },
    file,
  };
}

/** 1..100 items; the error names the array field itself. */
export function checkBatchSize(v: Violations, field: string, count: number): boolean {
  if (count < limits.batchMin) {
    v.add(field, `The ${field} field must have at least ${limits.batchMin} item.`);
    return false;
  }
  if (count > limits.batchMax) {
    v.add(field, `The ${field} field may not have more than ${limits.batchMax} items.`);
    return false;
  }
  return true;
}
