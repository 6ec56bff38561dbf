// Media files: uploads stored as <blobDir>/<app id>/<uuid>.<ext> with a row in
// cms_media, and the public GET handler for
// {media_base_url}/<APP_KEY>/cms/media/<file_id>. File ids are never reused,
// so responses are cacheable forever (immutable).
import { randomUUID } from "node:crypto";
import { createReadStream } from "node:fs";
import { mkdir, rename, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { appError } from "../internal/errors.js";
import type { Sql } from "../storage/sql.js";
import type { AppResolver } from "./app-resolver.js";
import { MEDIA_ID_RE } from "./field-types.js";

/** Content types accepted for upload, and the extension stored. */
export const MEDIA_TYPES: Readonly<Record<string, string>> = {
  "image/jpeg": "jpg",
  "image/png": "png",
  "image/gif": "gif",
  "image/webp": "webp",
  "image/avif": "avif",
  "image/svg+xml": "svg",
  "video/mp4": "mp4",
  "video/webm": "webm",
  "audio/mpeg": "mp3",
  "audio/ogg": "ogg",
  "audio/wav": "wav",
  "application/pdf": "pdf",
  "application/json": "json",
  "text/plain": "txt",
  "text/csv": "csv",
};
const TYPE_OF_EXT = new Map(Object.entries(MEDIA_TYPES).map(([t, e]) => [e, t]));

export const DEFAULT_MAX_MEDIA_BYTES = 10 * 1024 * 1024;

export interface MediaFileRecord {
  fileId: string;
  contentType: string;
  size: number;
  filename: string;
  createdAt: Date;
}

export interface MediaOptions {
  sql: Sql;
  /** directory of the blob store (config) */
  blobDir: string;
  maxBytes?: number;
}

export class MediaStore {
  readonly maxBytes: number;
  constructor(private readonly opts: MediaOptions) {
    this.maxBytes = opts.maxBytes ?? DEFAULT_MAX_MEDIA_BYTES;
  }

  pathOf(appId: number, fileId: string): string {
    return join(this.opts.blobDir, String(appId), fileId);
  }

  async upload(appId: number, filename: string, contentType: string, data: Uint8Array): Promise<MediaFileRecord> {
    const type = contentType.split(";")[0]!.trim().toLowerCase();
    const ext = MEDIA_TYPES[type];
    if (!ext) {
      throw appError("unsupported_media_type", `Unsupported media type ${type || "(none)"}; allowed: ${Object.keys(MEDIA_TYPES).join(", ")}.`);
    }
    if (data.byteLength === 0) throw appError("validation_failed", "data: the file is empty.", { fields: { data: ["the file is empty."] } });
    if (data.byteLength > this.maxBytes) {
      throw appError("payload_too_large", `The file is ${data.byteLength} bytes; at most ${this.maxBytes} bytes are allowed.`);
    }
    const { rows: apps } = await this.opts.sql.query("SELECT 1 FROM apps WHERE id = $1", [appId]);
    if (!apps[0]) throw appError("not_found", `Application ${appId} does not exist.`);
    const fileId = `${randomUUID()}.${ext}`;
    const dir = join(this.opts.blobDir, String(appId));
    await mkdir(dir, { recursive: true });
    // write then rename, so a reader never sees a partial file
    const tmp = join(dir, `.${fileId}.tmp`);
    await writeFile(tmp, data);
    await rename(tmp, join(dir, fileId));
    const { rows } = await this.opts.sql.query<{ created_at: Date }>(
      "INSERT INTO cms_media (file_id, app_id, content_type, size, filename) VALUES ($1, $2, $3, $4, $5) RETURNING created_at",
      [fileId, appId, type, data.byteLength, filename.slice(0, 255)],
    );
    return { fileId, contentType: type, size: data.byteLength, filename: filename.slice(0, 255), createdAt: new Date(rows[0]!.created_at) };
  }
}

export interface MediaResponse {
  status: 200 | 304 | 404;
  headers: Record<string, string>;
  /** the file (status 200 only) */
  body?: Readable;
}

/**
 * The handler the lead mounts at GET {media_base_url}/<APP_KEY>/cms/media/<file_id>.
 * Unknown keys and files are 404 (no body; the caller writes its envelope).
 */
export function createMediaHandler(deps: { media: MediaStore; apps: AppResolver }) {
  return async (appKey: string, fileId: string, ifNoneMatch?: string): Promise<MediaResponse> => {
    if (!MEDIA_ID_RE.test(fileId)) return { status: 404, headers: {} };
    const app = await deps.apps.byKey(appKey);
    if (!app) return { status: 404, headers: {} };
    const path = deps.media.pathOf(app.id, fileId);
    let size: number;
    try {
      size = (await stat(path)).size;
    } catch {
      return { status: 404, headers: {} };
    }
    const ext = fileId.slice(fileId.lastIndexOf(".") + 1);
    const etag = `"${fileId}"`;
    const headers: Record<string, string> = {
      "cache-control": "public, max-age=31536000, immutable",
      etag,
      "x-content-type-options": "nosniff",
    };
    if (ifNoneMatch && ifNoneMatch.split(",").some((t) => t.trim().replace(/^W\//, "") === etag || t.trim() === "*")) {
      return { status: 304, headers };
    }
    const type = TYPE_OF_EXT.get(ext) ?? "application/octet-stream";
    headers["content-type"] = type;
    headers["content-length"] = String(size);
    // SVG can carry scripts: never render it inline as a page of our origin.
    if (type === "image/svg+xml") headers["content-security-policy"] = "default-src 'none'; style-src 'unsafe-inline'";
    return { status: 200, headers, body: createReadStream(path) };
  };
}
