// The realtime capability (docs/realtime.md): the WebSocket at
// /api/realtime, Server-Sent Events at /api/realtime/sse, RealtimeService
// (Subscribe stream, Broadcast also as POST /api/realtime/broadcast), over
// one hub per process; across processes through NATS when configured.
// A deleted consumer or a changed app key (change bus) ends the consumer's
// connections. Table subscriptions (tables.ts) need the change capture of
// the functions' event triggers and the database capability's rules and
// service connection: src/server/modules.ts wires them in (deps.tables) and
// hands the capture this module's captureWatch and changeSink. CMS
// subscriptions (cms.ts) get the CMS capability's reads (deps.cms) and its
// authoring changes through cmsSink, wired there too.
import { randomUUID } from "node:crypto";
import { RealtimeService } from "../../../gen/pulsebase/platform/v1/realtime_pb.js";
import { RealtimeAdminService } from "../../../gen/pulsebase/admin/v1/realtime_pb.js";
import { createRealtimeAdminServiceImpl } from "./admin-realtime-service.js";
import { OperatorWatch, sharedInterest } from "./admin-watch.js";
import type { ChangeBus } from "../../infra/cluster/change-bus.js";
import type { NatsLink } from "../../infra/nats/nats-link.js";
import type { Sql } from "../../infra/storage/sql.js";
import type { AccessRules } from "../../infra/libsql/access-rules.js";
import { jetStreamChangeLog, memoryChangeLog, type TableChange } from "./change-log.js";
import { createInterest } from "./interest.js";
import { CMS_FEED, CmsFeed, type AuthoredChange, type CmsLogChange } from "./cms.js";
import type { Caller, Statement } from "./rules-filter.js";
import { TableFeed, type ServiceResult } from "./tables.js";
import { binding, type PulsebaseModule } from "../../kernel/module.js";
import type { ConsumerPrincipal } from "../../kernel/principal.js";
import { localFanout, natsFanout } from "./fanout.js";
import { Hub } from "./hub.js";
import { ChannelAccess } from "./channel-access.js";
import type { RealtimeLimits } from "./limits.js";
import { createRealtimeServiceImpl } from "./realtime-service.js";
import { sseRoute } from "./sse-route.js";
import { webSocketRoute } from "./ws-gateway.js";

export interface RealtimeModuleDeps {
  limits: RealtimeLimits;
  changes: ChangeBus;
  /** The service's database (channel access entries, channel-access.ts). */
  sql: Sql;
  authenticate(authorization: string | undefined): ConsumerPrincipal | Promise<ConsumerPrincipal>;
  /** The process's NATS link (NATS_URL set): channels reach the other servers. */
  nats?: NatsLink;
  natsNamespace: string;
  onError(err: unknown): void;
  /** Table subscriptions; unset: they are answered "not available". */
  tables?: {
    sql: Sql;
    /** Makes the application's change capture follow the interest now. */
    ensureCaptured(appId: number): Promise<void>;
    /** The application's rules in `rules` mode, else undefined. */
    access(appId: number): Promise<AccessRules | undefined>;
    /** Read-only service statements on the application's linked database. */
    query(appId: number, statements: Statement[]): Promise<ServiceResult[]>;
    /** One read-only statement as the caller's device runs it (select rules that read other tables). */
    queryAs?(appId: number, caller: Caller, statement: Statement): Promise<ServiceResult>;
  };
  /** CMS subscriptions (the CMS capability's reads, wired by src/server/modules.ts); unset: "not available". */
  cms?: {
    /** Whether the application has the content type. */
    hasContentType(appId: number, slug: string): Promise<boolean>;
    /** The published entry as the read API renders it (GET /api/v1/<type>/<uuid>); undefined when not published. */
    render(appId: number, id: string): Promise<Record<string, unknown> | undefined>;
  };
}

export interface RealtimeModule extends PulsebaseModule {
  hub: Hub;
  /** The tables subscribers need captured, by application (read on q: the capture lock's connection). */
  captureWatch(q: Sql, onlyApp?: number): Promise<Map<number, Set<string>>>;
  /** Drained changes of an application, in order: to the subscribers of every server. */
  changeSink(appId: number, changes: TableChange[]): Promise<void>;
  /** A CMS entry change committed on this server (the authoring API): rendered once, to the subscribers of every server. */
  cmsSink(appId: number, change: AuthoredChange): Promise<void>;
}

export function createRealtimeModule(deps: RealtimeModuleDeps): RealtimeModule {
  const fanout = deps.nats ? natsFanout(deps.nats, deps.natsNamespace, deps.onError) : localFanout;
  const t = deps.tables;
  const log = t && (deps.nats ? jetStreamChangeLog(deps.nats, deps.natsNamespace, deps.limits.resumeWindowMs, deps.onError) : memoryChangeLog(deps.limits.resumeWindowMs));
  const serverId = randomUUID();
  const interest = t && createInterest(t.sql, serverId, deps.onError);
  // devices' subscriptions and operators' watches (admin-watch.ts) keep a table's interest together
  const shared = interest && sharedInterest(interest);
  const tables =
    t && log && shared
      ? new TableFeed({ log, interest: shared.view(), ensureCaptured: t.ensureCaptured, access: t.access, query: t.query, ...(t.queryAs && { queryAs: t.queryAs }), onError: deps.onError })
      : undefined;
  const watch =
    t && log && shared
      ? new OperatorWatch({ log, interest: shared.view(), ensureCaptured: t.ensureCaptured, query: t.query, onError: deps.onError }, deps.limits.sendBufferBytes)
      : undefined;
  const cmsLog =
    deps.cms &&
    (deps.nats
      ? jetStreamChangeLog<CmsLogChange>(deps.nats, deps.natsNamespace, deps.limits.resumeWindowMs, deps.onError, CMS_FEED)
      : memoryChangeLog<CmsLogChange>(deps.limits.resumeWindowMs));
  const cms = deps.cms && cmsLog && new CmsFeed({ log: cmsLog, hasContentType: deps.cms.hasContentType, render: deps.cms.render, onError: deps.onError });
  const access = new ChannelAccess({ sql: deps.sql, changes: deps.changes, onError: deps.onError });
  const hub = new Hub({
    limits: deps.limits,
    fanout,
    authenticate: deps.authenticate,
    onError: deps.onError,
    tables,
    cms,
    channelAccess: (p, channel) => access.check(p, channel),
  });
  const ws = webSocketRoute(hub, deps.authenticate);
  const stops: Array<() => void> = [];
  let stopped = false;
  const stopAll = () => {
    if (stopped) return;
    stopped = true;
    hub.stop();
    watch?.stop();
    ws.close();
  };
  return {
    name: "realtime",
    hub,
    captureWatch: (q, onlyApp) => (interest ? interest.watched(q, onlyApp) : Promise.resolve(new Map())),
    changeSink: async (appId, changes) => {
      if (log && changes.length) await log.append(appId, changes);
    },
    cmsSink: (appId, change) => (cms ? cms.authored(appId, change) : Promise.resolve()),
    device: [binding(RealtimeService, createRealtimeServiceImpl(hub))],
    admin: [binding(RealtimeAdminService, createRealtimeAdminServiceImpl({ hub, watch, access }))],
    routes: [sseRoute(hub, deps.authenticate)],
    upgrades: [ws],
    gauges: { realtime: () => hub.stats() },
    async start() {
      // The identity module's own listeners ran first (its cache forgot the consumer or app).
      stops.push(deps.changes.subscribe("consumer", (c) => hub.recheck(c.appId, c.itemId)));
      stops.push(deps.changes.subscribe("app", (c) => hub.recheck(c.appId)));
      // channel access entries saved (on any server)
      stops.push(deps.changes.subscribe("realtime", (c) => access.invalidate(c.appId)));
      // rules saved, databases linked (the database capability's changes)
      if (tables) stops.push(deps.changes.subscribe("database", () => tables.invalidate()));
      tables?.start();
      cms?.start();
      watch?.start();
      interest?.start();
      hub.start();
    },
    closing: stopAll,
    async stop() {
      for (const s of stops.splice(0)) s();
      stopAll();
      tables?.stop();
      cms?.stop();
      await interest?.stop();
      await log?.stop();
      await cmsLog?.stop();
      access.close();
    },
  };
}
