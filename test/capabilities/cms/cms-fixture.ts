// Shared setup of the CMS tests: a migrated database, an application, the
// CMS wired with both services behind an in-memory Connect router, and small
// helpers for authoring and reading.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { toJson, type JsonObject, type JsonValue, type MessageInitShape } from "@bufbuild/protobuf";
import { createClient, createRouterTransport, ConnectError, type Client } from "@connectrpc/connect";
import { CmsService, type ContentFieldSchema } from "../../../gen/pulsebase/admin/v1/cms_pb.js";
import { ContentResponseSchema, ContentService, type ContentResponse } from "../../../gen/pulsebase/cms/v1/content_pb.js";
import { createCmsModule, type Cms, type CmsChange, type CmsConfig } from "../../../src/capabilities/cms/cms-module.js";
import { errorDetail } from "../../../src/kernel/errors.js";
import type { Sql } from "../../../src/infra/storage/sql.js";
import { createTestDb, type TestDb } from "../../helpers/db.js";

export const MEDIA_BASE = "https://media.test";

export interface Fixture {
  db: TestDb;
  sql: Sql;
  cms: Cms;
  admin: Client<typeof CmsService>;
  content: Client<typeof ContentService>;
  changes: { appId: number; change: CmsChange }[];
  mediaDir: string;
  close(): Promise<void>;
}

export async function createFixture(kind: "postgres" | "pglite" = "postgres", config: Partial<CmsConfig> = {}): Promise<Fixture> {
  const db = await createTestDb(kind);
  const mediaDir = await mkdtemp(join(tmpdir(), "pb-cms-"));
  const changes: Fixture["changes"] = [];
  const cms = createCmsModule({
    sql: db.sql,
    config: { mediaBaseUrl: MEDIA_BASE, mediaDir, ...config },
    onChange: (appId, change) => {
      changes.push({ appId, change });
    },
  });
  const transport = createRouterTransport((router) => {
    router.service(CmsService, cms.adminService);
    router.service(ContentService, cms.contentService);
  });
  return {
    db,
    sql: db.sql,
    cms,
    admin: createClient(CmsService, transport),
    content: createClient(ContentService, transport),
    changes,
    mediaDir,
    async close() {
      await cms.stop();
      await db.drop();
      await rm(mediaDir, { recursive: true, force: true });
    },
  };
}

export interface TestApp {
  id: number;
  key: string;
}

export async function createApp(sql: Sql, plan: Record<string, unknown> = {}): Promise<TestApp> {
  const { rows: t } = await sql.query<{ id: number }>("INSERT INTO teams (name) VALUES ('t') RETURNING id");
  const key = `ak_${randomBytes(12).toString("hex")}`;
  const { rows } = await sql.query<{ id: number }>(
    "INSERT INTO apps (team_id, name, app_key, plan) VALUES ($1, 'app', $2, $3::jsonb) RETURNING id",
    [t[0]!.id, key, JSON.stringify({ name: "free", ...plan })],
  );
  return { id: Number(rows[0]!.id), key };
}

export function field(
  name: string,
  type: string,
  extra: MessageInitShape<typeof ContentFieldSchema> = {},
): MessageInitShape<typeof ContentFieldSchema> {
  return { name, type, ...extra };
}

/** The REST-visible JSON of a read response plus its headers. */
export interface ReadResult {
  data: JsonValue;
  meta: Record<string, unknown> | undefined;
  headers: Headers;
}

/** The envelope as proto JSON with proto field names (what REST shows). */
export function jsonOf(res: ContentResponse): { data: JsonValue; meta: Record<string, unknown> | undefined } {
  const json = toJson(ContentResponseSchema, res, { useProtoFieldName: true }) as { data?: JsonValue; meta?: Record<string, unknown> };
  return { data: json.data ?? null, meta: json.meta };
}

export type Reader = ReturnType<typeof reader>;

/** Calls the read API as a device with an app key. */
export function reader(content: Client<typeof ContentService>, key: string | undefined, extraHeaders: Record<string, string> = {}) {
  const call = async (fn: (opts: { headers: Record<string, string>; onHeader: (h: Headers) => void }) => Promise<ContentResponse>): Promise<ReadResult> => {
    let headers = new Headers();
    const res = await fn({ headers: { ...(key !== undefined ? { "x-app-key": key } : {}), ...extraHeaders }, onHeader: (h) => (headers = h) });
    return { ...jsonOf(res), headers };
  };
  return {
    schemas: () => call((o) => content.listSchemas({}, o)),
    schema: (t: string) => call((o) => content.getSchema({ contentType: t }, o)),
    list: (t: string, query: Record<string, string> = {}) => call((o) => content.listEntries({ contentType: t, query }, o)),
    search: (t: string, query: Record<string, string> = {}) => call((o) => content.searchEntries({ contentType: t, query }, o)),
    show: (t: string, uuid: string, query: Record<string, string> = {}) => call((o) => content.getEntry({ contentType: t, uuid, query }, o)),
  };
}

/** The catalogue code of a rejected call. */
export async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    if (err instanceof ConnectError) return errorDetail(err)?.code ?? `connect:${err.code}`;
    throw err;
  }
  return "ok";
}

export function rows(r: ReadResult): JsonObject[] {
  return r.data as JsonObject[];
}
