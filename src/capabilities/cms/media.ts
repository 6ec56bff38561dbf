// Media files: uploads stored as <blobDir>/<app id>/<uuid>.<ext> with a row in
// cms_media, and the public GET handler for
// {media_base_url}/<APP_KEY>/cms/media/<file_id>. File ids are never reused,
// so responses are cacheable forever (immutable). Deleting a file is refused
// while entry media fields reference it.
import { randomUUID } from "node:crypto";
import { createReadStream } from "node:fs";
import { mkdir, rename, rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { appError } from "../../kernel/errors.js";
import type { Sql } from "../../infra/storage/sql.js";
import type { AppResolver } from "./app-resolver.js";
import { MEDIA_ID_RE, type FieldDef } from "./field-types.js";

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
/** Content type by file extension (lower case, no dot), for stored files and uploads from a path. */
export const TYPE_OF_EXT: ReadonlyMap<string, string> = new Map([...Object.entries(MEDIA_TYPES).map(([t, e]) => [e, t] as const), ["jpeg", "image/jpeg"]]);

export const DEFAULT_MAX_MEDIA_BYTES = 10 * 1024 * 1024;

export interface MediaFileRecord {
  fileId: string;
  contentType: string;
  size: number;
  filename: string;
  createdAt: Date;
}

/** An entry whose media field holds a file. */
export interface MediaReference {
  contentType: string;
  entryId: string;
  field: string;
}

/** References named in a refusal; the message says how many more there are. */
const REFERENCES_NAMED = 20;

interface MediaRow {
  file_id: string;
  content_type: string;
  size: number;
  filename: string;
  created_at: Date;
}

const toRecord = (r: MediaRow): MediaFileRecord => ({
  fileId: r.file_id,
  contentType: r.content_type,
  size: Number(r.size),
  filename: r.filename,
  createdAt: new Date(r.created_at),
});

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

  /** The application's files, newest first (only `fileIds` when given). */
  async list(appId: number, limit: number, offset: number, fileIds?: readonly string[]): Promise<MediaFileRecord[]> {
    const { rows } = await this.opts.sql.query<MediaRow>(
      `SELECT file_id, content_type, size, filename, created_at FROM cms_media WHERE app_id = $1
        AND ($4::text[] IS NULL OR file_id = ANY($4::text[]))
        ORDER BY created_at DESC, file_id DESC LIMIT $2 OFFSET $3`,
      [appId, limit, offset, fileIds?.length ? fileIds : null],
    );
    return rows.map(toRecord);
  }

  /** Entries (any state) whose media fields hold the file, at most `limit`. */
  async references(tx: Sql, appId: number, fileId: string, limit: number): Promise<MediaReference[]> {
    const { rows: types } = await tx.query<{ id: number; slug: string; fields: FieldDef[] }>(
      "SELECT id, slug, fields FROM cms_content_types WHERE app_id = $1 ORDER BY slug",
      [appId],
    );
    // field names are validated identifiers (^[a-z][a-z0-9_]*$), safe to inline
    const arms = types.flatMap((t) =>
      t.fields
        .filter((f) => f.type === "media")
        .map(
          (f) =>
            `SELECT ${Number(t.id)}::bigint AS type_id, '${f.name}' AS field, id FROM cms_entries
              WHERE content_type_id = ${Number(t.id)} AND data->>'${f.name}' = $1`,
        ),
    );
    if (arms.length === 0) return [];
    const { rows } = await tx.query<{ type_id: number; field: string; id: string }>(
      `SELECT type_id, field, id FROM (${arms.join(" UNION ALL ")}) r LIMIT $2`,
      [fileId, limit],
    );
    const slugOf = new Map(types.map((t) => [Number(t.id), t.slug]));
    return rows.map((r) => ({ contentType: slugOf.get(Number(r.type_id)) ?? "", entryId: r.id, field: r.field }));
  }

  /**
   * Deletes the record and the blob, or refuses (failed_precondition) while
   * entries reference the file. The blob is removed before the record's
   * deletion commits, so once this returns the file is never served again.
   */
  async delete(appId: number, fileId: string): Promise<MediaFileRecord> {
    if (!MEDIA_ID_RE.test(fileId)) throw appError("not_found", `Media file ${fileId} does not exist.`);
    return this.opts.sql.transaction(async (tx) => {
      // FOR UPDATE waits for entry writes that validated this file (FOR KEY
      // SHARE), so their references are visible to the check below.
      const { rows } = await tx.query<MediaRow>(
        "SELECT file_id, content_type, size, filename, created_at FROM cms_media WHERE file_id = $1 AND app_id = $2 FOR UPDATE",
        [fileId, appId],
      );
      if (!rows[0]) throw appError("not_found", `Media file ${fileId} does not exist.`);
      const refs = await this.references(tx, appId, fileId, REFERENCES_NAMED + 1);
      if (refs.length > 0) {
        const named = refs.slice(0, REFERENCES_NAMED).map((r) => `${r.contentType} ${r.entryId} (${r.field})`);
        const more = refs.length > REFERENCES_NAMED ? " and more" : "";
        throw appError(
          "failed_precondition",
          `Media file ${fileId} is referenced by ${named.join(", ")}${more}; clear those fields or delete those entries first.`,
        );
      }
      await tx.query("DELETE FROM cms_media WHERE file_id = $1", [fileId]);
      await rm(this.pathOf(appId, fileId), { force: true });
      return toRecord(rows[0]);
    });
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
