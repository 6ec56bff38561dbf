// CMS calls of the console beyond the plain list/get ones: media URLs on
// the console's own origin, media names, content type choices.
import type { App } from "../../../../../gen/pulsebase/admin/v1/identity_pb.js";
import { api } from "../../api";

/**
 * A media file on the admin listener (same origin as the console): the
 * public listener's self-signed certificate, which the browser refuses,
 * never breaks a preview.
 */
export function mediaUrl(app: App, fileId: string): string {
  return `/media/${encodeURIComponent(app.appKey)}/${encodeURIComponent(fileId)}`;
}

/** file id → the name it was uploaded with. */
export async function mediaNames(appId: bigint, fileIds: string[]): Promise<Record<string, string>> {
  if (fileIds.length === 0) return {};
  const r = await api.cms.listMedia({ appId, fileIds: fileIds.slice(0, 100), pageSize: 100 });
  return Object.fromEntries(r.media.map((m) => [m.fileId, m.filename]));
}

export async function listTypeSlugs(appId: bigint): Promise<{ slug: string; name: string }[]> {
  const r = await api.cms.listContentTypes({ appId });
  return r.contentTypes.map((t) => ({ slug: t.slug, name: t.name }));
}
