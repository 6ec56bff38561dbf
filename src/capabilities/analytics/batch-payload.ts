// The queued batch message: versioned JSON. Items are already validated and
// normalised (timestamps resolved, files replaced by blob references), so a
// worker only applies them. A payload of an unknown version is dead-lettered.
export const PAYLOAD_VERSION = 1;

export type BatchKind = "events" | "logs" | "breadcrumbs";

export interface EventRow {
  name: string;
  metadata: Record<string, string>;
  session_id: number | null;
  /** ISO 8601 (UTC). */
  created_at: string;
}

export interface AttachmentRef {
  key: string;
  filename: string;
  content_type: string;
  size: number;
}

export interface LogRow {
  hash: string;
  app_version: string;
  class_fqn: string;
  message: string;
  type: "error" | "crash";
  file_name: string | null;
  line_number: number | null;
  stack_trace: string | null;
  context: Record<string, unknown> | null;
  session_id: number | null;
  created_at: string;
  attachment: AttachmentRef | null;
}

export interface BreadcrumbRow {
  name: string;
  session_id: number | null;
  created_at: string;
}

/** Who recorded the batch (the caller at acceptance time). */
export interface Recorder {
  appId: number;
  consumerId: number;
  userId: string;
}

interface PayloadBase extends Recorder {
  v: typeof PAYLOAD_VERSION;
  batchId: string;
  acceptedAt: string;
}

export type BatchPayload =
  | (PayloadBase & { kind: "events"; items: EventRow[] })
  | (PayloadBase & { kind: "logs"; items: LogRow[] })
  | (PayloadBase & { kind: "breadcrumbs"; items: BreadcrumbRow[] });

export function encodePayload(p: BatchPayload): Uint8Array {
  return new TextEncoder().encode(JSON.stringify(p));
}

/** Throws on anything that is not a payload this version understands. */
export function decodePayload(data: Uint8Array): BatchPayload {
  const p = JSON.parse(new TextDecoder().decode(data)) as Partial<BatchPayload>;
  if (!p || typeof p !== "object") throw new Error("payload is not an object");
  if (p.v !== PAYLOAD_VERSION) throw new Error(`unsupported payload version ${String(p.v)}`);
  if (p.kind !== "events" && p.kind !== "logs" && p.kind !== "breadcrumbs") throw new Error("unknown batch kind");
  if (typeof p.batchId !== "string" || !Array.isArray(p.items)) throw new Error("malformed payload");
  if (!Number.isSafeInteger(p.appId) || !Number.isSafeInteger(p.consumerId) || typeof p.userId !== "string") {
    throw new Error("malformed payload recorder");
  }
  return p as BatchPayload;
}
