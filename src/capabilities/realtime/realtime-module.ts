// The realtime capability (docs/realtime.md): the WebSocket at
// /api/realtime, Server-Sent Events at /api/realtime/sse, RealtimeService
// (Subscribe stream, Broadcast also as POST /api/realtime/broadcast), over
// one hub per process; across processes through NATS when configured.
// A deleted consumer or a changed app key (change bus) ends the consumer's
// connections.
import { RealtimeService } from "../../../gen/pulsebase/platform/v1/realtime_pb.js";
import type { ChangeBus } from "../../infra/cluster/change-bus.js";
import type { NatsLink } from "../../infra/nats/nats-link.js";
import { binding, type PulsebaseModule } from "../../kernel/module.js";
import type { ConsumerPrincipal } from "../../kernel/principal.js";
import { localFanout, natsFanout } from "./fanout.js";
import { Hub } from "./hub.js";
import type { RealtimeLimits } from "./limits.js";
import { createRealtimeServiceImpl } from "./realtime-service.js";
import { sseRoute } from "./sse-route.js";
import { webSocketRoute } from "./ws-gateway.js";

export interface RealtimeModuleDeps {
  limits: RealtimeLimits;
  changes: ChangeBus;
  authenticate(authorization: string | undefined): ConsumerPrincipal | Promise<ConsumerPrincipal>;
  /** The process's NATS link (NATS_URL set): channels reach the other servers. */
  nats?: NatsLink;
  natsNamespace: string;
  onError(err: unknown): void;
}

export interface RealtimeModule extends PulsebaseModule {
  hub: Hub;
}

export function createRealtimeModule(deps: RealtimeModuleDeps): RealtimeModule {
  const fanout = deps.nats ? natsFanout(deps.nats, deps.natsNamespace, deps.onError) : localFanout;
  const hub = new Hub({ limits: deps.limits, fanout, authenticate: deps.authenticate, onError: deps.onError });
  const ws = webSocketRoute(hub, deps.authenticate);
  const stops: Array<() => void> = [];
  let stopped = false;
  const stopAll = () => {
    if (stopped) return;
    stopped = true;
    hub.stop();
    ws.close();
  };
  return {
    name: "realtime",
    hub,
    device: [binding(RealtimeService, createRealtimeServiceImpl(hub))],
    routes: [sseRoute(hub, deps.authenticate)],
    upgrades: [ws],
    gauges: { realtime: () => hub.stats() },
    async start() {
      // The identity module's own listeners ran first (its cache forgot the consumer or app).
      stops.push(deps.changes.subscribe("consumer", (c) => hub.recheck(c.appId, c.itemId)));
      stops.push(deps.changes.subscribe("app", (c) => hub.recheck(c.appId)));
      hub.start();
    },
    closing: stopAll,
    async stop() {
      for (const s of stops.splice(0)) s();
      stopAll();
    },
  };
}
