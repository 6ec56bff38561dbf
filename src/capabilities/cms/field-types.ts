// The CMS field types (docs/cms.md): what each type may be used
// for, and how a value of that type is validated and normalised for storage.
import { parseIsoTime } from "../../kernel/iso-time.js";

export const FIELD_TYPES = [
  "text", "rich_text", "number", "boolean", "date", "date_time",
  "email", "url", "select", "media", "relation", "json",
] as const;
export type FieldType = (typeof FIELD_TYPES)[number];

interface TypeRules {
  searchable: boolean;
  filterable: boolean;
  sortable: boolean;
}

export const TYPE_RULES: Record<FieldType, TypeRules> = {
  text: { searchable: true, filterable: true, sortable: true },
  rich_text: { searchable: true, filterable: false, sortable: false },
  number: { searchable: false, filterable: true, sortable: true },
  boolean: { searchable: false, filterable: true, sortable: false },
  date: { searchable: false, filterable: true, sortable: true },
  date_time: { searchable: false, filterable: true, sortable: true },
  email: { searchable: true, filterable: true, sortable: false },
  url: { searchable: true, filterable: true, sortable: false },
  select: { searchable: false, filterable: true, sortable: false },
  media: { searchable: false, filterable: false, sortable: false },
  relation: { searchable: false, filterable: true, sortable: false },
  json: { searchable: false, filterable: false, sortable: false },
};

export function isFieldType(t: string): t is FieldType {
  return (FIELD_TYPES as readonly string[]).includes(t);
}

export interface FieldDef {
  name: string;
  type: FieldType;
  required: boolean;
  label: string;
  /** select: allowed values */
  options?: string[];
  /** select, relation: array value */
  multi?: boolean;
  /** relation: target content type slug */
  target?: string;
}

export const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const MEDIA_ID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.[a-z0-9]{1,10}$/;
export const DATE_RE = /^\d{4}-\d{2}-\d{2}$/;
const DATE_TIME_RE = /^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})?$/i;
const EMAIL_RE = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

export const MAX_TEXT_LENGTH = 1_000_000;
/** text, email and url values of filterable or sortable fields (btree-indexed) */
export const MAX_INDEXED_TEXT_LENGTH = 600;
export const MAX_PLAIN_TEXT_LENGTH = 10_000;

/** A valid calendar date YYYY-MM-DD. */
export function isIsoDate(s: string): boolean {
  return DATE_RE.test(s) && parseIsoTime(s) !== undefined;
}

export function isIsoDateTime(s: string): boolean {
  return DATE_TIME_RE.test(s) && parseIsoTime(s) !== undefined;
}

export function isUrl(s: string): boolean {
  try {
    const u = new URL(s);
    return u.protocol === "http:" || u.protocol === "https:";
  } catch {
    return false;
  }
}

/**
 * Validates one value for storage; returns the normalised value or an error
 * message. Relation targets and media files are checked against the database
 * by the caller (set-based).
 */
export function normaliseValue(
  f: FieldDef,
  v: unknown,
  indexed = false,
): { ok: true; value: unknown } | { ok: false; error: string } {
  const bad = (error: string) => ({ ok: false as const, error });
  const ok = (value: unknown) => ({ ok: true as const, value });
  const max = f.type === "rich_text" ? MAX_TEXT_LENGTH : indexed ? MAX_INDEXED_TEXT_LENGTH : MAX_PLAIN_TEXT_LENGTH;
  if (typeof v === "string" && v.length > max && (f.type === "text" || f.type === "rich_text" || f.type === "email" || f.type === "url")) {
    return bad(`${f.name} must be at most ${max} characters${indexed ? " (it is filterable or sortable)" : ""}.`);
  }
  switch (f.type) {
    case "text":
    case "rich_text":
      if (typeof v !== "string") return bad(`${f.name} must be a string.`);
      return ok(v);
    case "email":
      if (typeof v !== "string" || !EMAIL_RE.test(v)) return bad(`${f.name} must be an email address.`);
      return ok(v);
    case "url":
      if (typeof v !== "string" || !isUrl(v)) return bad(`${f.name} must be an http(s) URL.`);
      return ok(v);
    case "number": {
      const n = typeof v === "string" && v.trim() !== "" ? Number(v) : v;
      if (typeof n !== "number" || !Number.isFinite(n)) return bad(`${f.name} must be a number.`);
      return ok(n);
    }
    case "boolean":
      if (v === true || v === "true") return ok("true");
      if (v === false || v === "false") return ok("false");
      return bad(`${f.name} must be true or false.`);
    case "date":
      if (typeof v !== "string" || !isIsoDate(v)) return bad(`${f.name} must be an ISO 8601 date (YYYY-MM-DD).`);
      return ok(v);
    case "date_time":
      if (typeof v !== "string" || !isIsoDateTime(v)) return bad(`${f.name} must be an ISO 8601 date-time.`);
      return ok(v);
    case "select": {
      const opts = f.options ?? [];
      if (f.multi) {
        if (!Array.isArray(v) || v.some((x) => typeof x !== "string")) return bad(`${f.name} must be an array of options.`);
        const wrong = (v as string[]).find((x) => !opts.includes(x));
        if (wrong !== undefined) return bad(`${f.name}: "${wrong}" is not one of ${opts.join(", ")}.`);
        return ok([...new Set(v as string[])]);
      }
      if (typeof v !== "string" || !opts.includes(v)) return bad(`${f.name} must be one of ${opts.join(", ")}.`);
      return ok(v);
    }
    case "relation":
      if (f.multi) {
        if (!Array.isArray(v) || v.some((x) => typeof x !== "string" || !UUID_RE.test(x))) {
          return bad(`${f.name} must be an array of entry UUIDs.`);
        }
        return ok([...new Set((v as string[]).map((x) => x.toLowerCase()))]);
      }
      if (typeof v !== "string" || !UUID_RE.test(v)) return bad(`${f.name} must be an entry UUID.`);
      return ok(v.toLowerCase());
    case "media":
      if (typeof v !== "string" || !MEDIA_ID_RE.test(v)) return bad(`${f.name} must be a media file id (<uuid>.<ext>).`);
      return ok(v);
    case "json":
      return ok(v);
  }
}
