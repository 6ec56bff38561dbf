// The CMS as a server module: the content API on the public listener, the
// authoring API on the admin listener, media files served at
// {media_base_url}/<APP_KEY>/cms/media/<file_id>, and cached reads invalidated
// in every process through the change bus (cluster/change-bus.ts: NATS when
// connected, PostgreSQL always).
import { CmsService } from "../../../gen/pulsebase/admin/v1/cms_pb.js";
import { ContentService } from "../../../gen/pulsebase/cms/v1/content_pb.js";
import { binding, type PulsebaseModule } from "../../kernel/module.js";
import { sendError } from "../../transport/http/envelopes.js";
import { appError } from "../../kernel/errors.js";
import type { Sql } from "../../infra/storage/sql.js";
import type { Logger } from "pino";
import type { ChangeBus } from "../../infra/cluster/change-bus.js";
import { createCms, type CmsChangeHook, type CmsConfig } from "./index.js";

export interface CmsModuleDeps {
  sql: Sql;
  config: CmsConfig;
  /** Content changes go out (kind cms) and come in (kinds cms and app) here. */
  changes: ChangeBus;
  logger: Logger;
  onChange?: CmsChangeHook;
}

export function createCmsModule(deps: CmsModuleDeps): PulsebaseModule & { invalidate(appId: number): void } {
  const cms = createCms({
    sql: deps.sql,
    config: deps.config,
    onChange: deps.onChange,
    broadcastInvalidation: (appId) => deps.changes.publish("cms", appId),
    onHookError: (err) => deps.logger.error({ err }, "cms change hook failed"),
    onIndexError: (err, info) =>
      deps.logger[info.willRetry ? "warn" : "error"]({ err, ...info }, "cms per-field index build failed"),
  });
  deps.changes.subscribe("cms", (c) => cms.invalidate(c.appId));
  // The plan's CMS limits and the key itself are read with the app key.
  deps.changes.subscribe("app", (c) => cms.appChanged(c.appId));
  const mediaPath = new URL(deps.config.mediaBaseUrl).pathname.replace(/\/$/, "");
  return {
    name: "cms",
    device: [binding(ContentService, cms.contentService)],
    admin: [binding(CmsService, cms.adminService)],
    invalidate: (appId) => cms.invalidate(appId),
    publicRoutes(app) {
      app.get(`${mediaPath}/:appKey/cms/media/:fileId`, async (req, reply) => {
        const { appKey, fileId } = req.params as { appKey: string; fileId: string };
        const res = await cms.serveMedia(appKey, fileId, req.headers["if-none-match"]);
        if (res.status === 404) return sendError(reply, "cms", appError("NOT_FOUND", "Media file not found."));
        reply.headers(res.headers).code(res.status);
        return res.body ? reply.send(res.body) : reply.send();
      });
    },
    async start() {
      cms.start();
    },
    async stop() {
      await cms.stop();
    },
  };
}
