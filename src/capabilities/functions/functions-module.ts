// The functions capability's module definition: sandbox, stores, rate
// limiter, recorder, runtime, the HTTP trigger on the public listener, the
// operator API, schedules and event triggers (JetStream with NATS, else a
// PostgreSQL table). Created once per process; stop() on shutdown flushes
// records and releases isolates.
import type { ServiceImpl } from "@connectrpc/connect";
import { FunctionService as AdminFunctionService } from "../../../gen/pulsebase/admin/v1/functions_pb.js";
import { FunctionService as DeviceFunctionService } from "../../../gen/pulsebase/platform/v1/functions_pb.js";
import type { ChangeBus } from "../../infra/cluster/change-bus.js";
import { binding, type PulsebaseModule } from "../../kernel/module.js";
import type { CmsChange as CmsAuthoringChange } from "../cms/cms-module.js";
import { createSandbox, type Sandbox } from "../../infra/sandbox/sandbox.js";
import type { HostCapability } from "../../kernel/host-capability.js";
import type { Sql } from "../../infra/storage/sql.js";
import { createAdminFunctionServiceImpl } from "./admin-function-service.js";
import { DEFAULT_FUNCTIONS_CONFIG, type FunctionsConfig } from "./config.js";
import type { NatsSource } from "../../infra/nats/nats-link.js";
import type { ChangeCaptureDb } from "./events/change-capture.js";
import { createEventWorker, type CmsChange, type EventWorker, type EventWorkerConfig } from "./events/event-worker.js";
import { createFunctionRuntime, createInvocationLimiter, type FunctionRuntime, type UserErrorLog } from "./function-runtime.js";
import { createKvStore, kvCapability, type KvStore } from "./kv-store.js";
import { createEgressPolicyStore, type EgressPolicyStore } from "./egress-policy-store.js";
import { createFetchHost } from "../../infra/sandbox/fetch-host.js";
import { createScheduler, type Scheduler } from "./scheduler.js";
import { createFunctionStore, type FunctionStore } from "./function-store.js";
import { createInvocationRecorder, DEFAULT_RECORDER_OPTIONS, type InvocationRecorder } from "./invocation-recorder.js";
import { createFunctionInvokeServiceImpl } from "./invoke-service.js";
// (generated from the fast_codec option: bin/protoc-gen-fastcodec.js)
import { decodeHttpRequest, encodeHttpResponse } from "../../../gen/fastcodec/pulsebase/common/v1/options.js";
import type { RateLimiter } from "../../infra/rate-limit/leased-limiter.js";

export interface FunctionsModuleDeps {
  /** The service database (PostgreSQL or PGlite) with migrations applied. */
  sql: Sql;
  /** The other modules' host APIs (ctx.db, ...; docs/functions-internals.md, "Host capabilities"); the sandbox adds this module's own (ctx.kv). */
  hostCapabilities?: readonly HostCapability[];
  config?: Partial<FunctionsConfig>;
  /** Called when background work (invocation records, event delivery, schedules) fails. */
  onError?: (err: unknown) => void;
  /** A user's failed invocation (throw, timeout), logged at warn with app, function and version. */
  logUserError?: UserErrorLog;
  /** Function changes go out to, and come in from, the other processes (kinds functions and app). */
  changes?: ChangeBus;
  /** Event triggers; without it event triggers can be configured but never fire. */
  events?: {
    /** JetStream (a connection, or the process's link, waited for); unset = the PostgreSQL table transport (embedded default). */
    nats?: NatsSource;
    /** Privileged access to the app databases for change capture (src/capabilities/database). */
    capture: ChangeCaptureDb;
    config?: Partial<EventWorkerConfig>;
    /** Other consumers of the capture (realtime): tables they need captured, and every drained change (event-worker.ts). */
    extraWatch?: Parameters<typeof createEventWorker>[0]["extraWatch"];
    changeSink?: Parameters<typeof createEventWorker>[0]["changeSink"];
  };
}

export interface FunctionsModule extends PulsebaseModule {
  /** pulsebase.platform.v1.FunctionService (device API, HTTP trigger). */
  invokeService: ServiceImpl<typeof DeviceFunctionService>;
  /** pulsebase.admin.v1.FunctionService (operator API). */
  adminService: ServiceImpl<typeof AdminFunctionService>;
  runtime: FunctionRuntime;
  store: FunctionStore;
  sandbox: Sandbox;
  recorder: InvocationRecorder;
  limiter: RateLimiter;
  config: FunctionsConfig;
  /** The key-value store of ctx.kv. */
  kv: KvStore;
  /** The applications' egress policies (fetch). */
  egress: EgressPolicyStore;
  /** Runs schedule triggers; start() it with the process. */
  scheduler: Scheduler;
  /** The event-trigger worker (when deps.events is given); start() it with the process. */
  events?: EventWorker;
  /**
   * For the CMS authoring side: a change of a collection's entry. Resolves
   * once the change is stored in JetStream (no-op when no trigger watches it
   * or event triggers are not configured).
   */
  emitCmsChange(appId: number, change: CmsChange): Promise<void>;
  /**
   * The application's plan changed (SetAppPlan in this process): cached
   * resolutions are dropped (also those of lookups in flight), so the next
   * invocation runs under the new plan; rate-limit tokens leased under the
   * old limit are not spent under the new one.
   */
  planChanged(appId: number): void;
  /** A CMS entry changed (cms triggers). */
  onCmsChange(appId: number, c: CmsAuthoringChange): Promise<void>;
  /** Stops the event worker, flushes invocation records and releases every isolate. */
  close(): Promise<void>;
}

/**
 * CMS authoring operations onto the trigger operations: created is insert,
 * deleted is delete; updated, published and unpublished are update (before
 * and after show what changed, `published` included).
 */
const CMS_OPS = { created: "insert", updated: "update", published: "update", unpublished: "update", deleted: "delete" } as const;

export function createFunctionsModule(deps: FunctionsModuleDeps): FunctionsModule {
  const config: FunctionsConfig = { ...DEFAULT_FUNCTIONS_CONFIG, ...deps.config };
  const store = createFunctionStore(deps.sql);
  const kv = createKvStore(deps.sql, config.kv);
  const hostCapabilities = [kvCapability(kv)];
  // fetch (docs/functions.md, "Calling other services: fetch"): the global, not a ctx capability
  const egress = createEgressPolicyStore(deps.sql);
  const fetchHost = createFetchHost({ policyOf: (appId) => egress.policyOf(appId), limits: config.fetch });
  const sandbox = createSandbox({ limits: config.sandbox, capabilities: [...(deps.hostCapabilities ?? []), ...hostCapabilities, ...fetchHost.capabilities] });
  const limiter = createInvocationLimiter(deps.sql);
  const recorder = createInvocationRecorder(deps.sql, { ...config.recorder, onError: deps.onError });
  const runtime = createFunctionRuntime({ store, sandbox, limiter, recorder, config, logUserError: deps.logUserError });
  const scheduler = createScheduler({
    sql: deps.sql,
    runtime,
    options: { retentionDays: config.recorder.retentionDays ?? DEFAULT_RECORDER_OPTIONS.retentionDays, ...config.scheduler },
    onError: deps.onError,
    // Expired keys go once a minute (they are invisible from the moment they expire).
    housekeeping: () => kv.sweep(),
  });
  const events = deps.events
    ? createEventWorker({ sql: deps.sql, store, runtime, capture: deps.events.capture, nats: deps.events.nats, config: deps.events.config, onError: deps.onError, extraWatch: deps.events.extraWatch, changeSink: deps.events.changeSink })
    : undefined;
  const changes = deps.changes;
  changes?.subscribe("functions", (c) => {
    runtime.invalidate();
    egress.invalidate(c.appId);
  });
  // The plan is part of every cached resolution.
  changes?.subscribe("app", () => runtime.planChanged());
  const invokeService = createFunctionInvokeServiceImpl({ runtime, sandboxCsp: config.sandboxCsp });
  const adminService = createAdminFunctionServiceImpl({
    sql: deps.sql, store, sandbox, runtime, recorder, config, kv, egress, deadLetters: events, capture: events, onError: deps.onError,
    announce: changes && ((appId) => changes.publish("functions", appId)),
  });
  const close = async () => {
    await scheduler.stop();
    await events?.stop();
    deps.events?.capture.close?.();
    await recorder.close();
    sandbox.close();
    await fetchHost.close();
  };
  return {
    name: "functions",
    device: [
      binding(DeviceFunctionService, invokeService, {
        invoke: { decode: decodeHttpRequest, encode: encodeHttpResponse },
        invokePublic: { decode: decodeHttpRequest, encode: encodeHttpResponse },
      }),
    ],
    admin: [binding(AdminFunctionService, adminService)],
    gauges: { isolates: () => sandbox.stats(), queues: events ? { "function-events": events.queue } : {} },
    hostCapabilities,
    invokeService,
    adminService,
    runtime,
    store,
    sandbox,
    recorder,
    limiter,
    config,
    events,
    kv,
    egress,
    scheduler,
    emitCmsChange: (appId, change) => (events ? events.emitCmsChange(appId, change) : Promise.resolve()),
    planChanged: () => runtime.planChanged(),
    onCmsChange: (appId, c) =>
      events ? events.emitCmsChange(appId, { collection: c.collection, operation: CMS_OPS[c.operation], before: c.before, after: c.after }) : Promise.resolve(),
    async start() {
      await events?.start();
      scheduler.start();
    },
    stop: close,
    close,
  };
}
