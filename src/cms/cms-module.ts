// The CMS as a server module: the content API on the public listener, the
// authoring API on the admin listener, media files served at
// {media_base_url}/<APP_KEY>/cms/media/<file_id>, and cached reads invalidated
// in every process through NATS (subject <namespace>.cms.invalidate) when
// NATS_URL is set; without NATS there is one process and nothing to tell.
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { CmsService } from "../../gen/pulsebase/admin/v1/cms_pb.js";
import { ContentService } from "../../gen/pulsebase/cms/v1/content_pb.js";
import { binding, type PulsebaseModule } from "../app/module.js";
import { sendError } from "../http/envelopes.js";
import { appError } from "../internal/errors.js";
import type { Sql } from "../storage/sql.js";
import type { Logger } from "pino";
import { createCms, type CmsChangeHook, type CmsConfig } from "./index.js";


export interface CmsModuleDeps {
  sql: Sql;
  config: CmsConfig;
  natsUrl?: string;
  natsNamespace: string;
  logger: Logger;
  onChange?: CmsChangeHook;
}

export function createCmsModule(deps: CmsModuleDeps): PulsebaseModule & { invalidate(appId: number): void; planChanged(appId: number): void } {
  let nc: NatsConnection | undefined;
  const SUBJECT = `${deps.natsNamespace}.cms.invalidate`;
  const cms = createCms({
    sql: deps.sql,
    config: deps.config,
    onChange: deps.onChange,
    broadcastInvalidation: (appId) => {
      // Best effort: other processes fall back to the cache TTL if NATS is down.
      if (nc && !nc.isClosed()) nc.publish(SUBJECT, String(appId));
    },
    onHookError: (err) => deps.logger.error({ err }, "cms change hook failed"),
    onIndexError: (err, info) =>
      deps.logger[info.willRetry ? "warn" : "error"]({ err, ...info }, "cms per-field index build failed"),
  });
  const mediaPath = new URL(deps.config.mediaBaseUrl).pathname.replace(/\/$/, "");
  return {
    name: "cms",
    device: [binding(ContentService, cms.contentService)],
    admin: [binding(CmsService, cms.adminService)],
    invalidate: (appId) => cms.invalidate(appId),
    // The plan's CMS limits are read with the app key: drop that entry now.
    planChanged: (appId) => cms.apps.forgetApp(appId),
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
      if (!deps.natsUrl) return;
      try {
        nc = await connect({ servers: deps.natsUrl, maxReconnectAttempts: -1, name: "pulsebase-cms" });
        const sub = nc.subscribe(SUBJECT);
        void (async () => {
          for await (const m of sub) {
            const id = Number(m.string());
            if (Number.isInteger(id)) cms.invalidate(id);
          }
        })();
      } catch (err) {
        deps.logger.warn({ err }, "CMS cache invalidation over NATS unavailable; relying on the cache TTL");
      }
    },
    async stop() {
      await cms.stop();
      await nc?.drain().catch(() => {});
    },
  };
}
