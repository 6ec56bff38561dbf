// grpc.health.v1.Health for load balancers and orchestrators (grpc-health-
// probe, Kubernetes gRPC probes, Envoy): SERVING while the storage answers
// (the same probe as /readyz), NOT_SERVING otherwise and once the listener
// is shutting down. The service name "" is the whole server; each service
// the listener mounts may be asked for by name; any other is NOT_FOUND
// (Check) or SERVICE_UNKNOWN (Watch), as the protocol says.
import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import {
  Health,
  HealthCheckResponse_ServingStatus as Status,
  HealthCheckResponseSchema,
  HealthListResponseSchema,
  type HealthCheckResponse,
} from "../../../gen/health/v1/health_pb.js";
import { binding, type ServiceBinding } from "../../kernel/module.js";
import { appError } from "../../kernel/errors.js";

export interface HealthOptions {
  /** Every service the listener mounts (Health itself is added). */
  services: string[];
  /** Resolves when the server can serve (the readiness probe). */
  ready(): Promise<void>;
  /** A probe slower than this counts as NOT_SERVING. */
  checkTimeoutMs?: number;
  /** How often the Watch streams' shared probe runs again. */
  watchIntervalMs?: number;
  /** A Watch probe result is reused for this long (joining watchers, ticks). */
  watchCacheMs?: number;
  /** Concurrent Watch streams on the listener; more are refused with RESOURCE_EXHAUSTED. */
  maxWatchers?: number;
}

export interface HealthService {
  binding: ServiceBinding;
  /** Everything is NOT_SERVING from now on; Watch streams are told and end. */
  shutdown(): void;
}

export function createHealthService(opts: HealthOptions): HealthService {
  const names = new Set(["", Health.typeName, ...opts.services]);
  const checkTimeoutMs = opts.checkTimeoutMs ?? 5_000;
  const watchIntervalMs = opts.watchIntervalMs ?? 5_000;
  const watchCacheMs = Math.min(opts.watchCacheMs ?? 1_000, watchIntervalMs);
  const maxWatchers = opts.maxWatchers ?? 100;
  const stopping = new AbortController();

  const probe = async (signal: AbortSignal): Promise<Status> => {
    if (stopping.signal.aborted) return Status.NOT_SERVING;
    const timeout = AbortSignal.any([signal, stopping.signal, AbortSignal.timeout(checkTimeoutMs)]);
    try {
      await new Promise<void>((resolve, reject) => {
        if (timeout.aborted) return reject(new Error("health probe aborted"));
        timeout.addEventListener("abort", () => reject(new Error("health probe timed out")), { once: true });
        opts.ready().then(resolve, reject);
      });
      return stopping.signal.aborted ? Status.NOT_SERVING : Status.SERVING;
    } catch {
      return Status.NOT_SERVING;
    }
  };
  const response = (status: Status): HealthCheckResponse => create(HealthCheckResponseSchema, { status });

  // Watch: the listener is open without credentials and HTTP/2 carries
  // thousands of streams per connection, so watchers share one probe
  // (reused for watchCacheMs) and one timer that fans its result out,
  // instead of a storage query and a timer per stream.
  const watchers = new Set<(s: Status) => void>();
  let unknownWatchers = 0;
  let lastProbe: { at: number; status: Promise<Status> } | undefined;
  const sharedProbe = (): Promise<Status> => {
    const now = performance.now();
    if (lastProbe === undefined || now - lastProbe.at >= watchCacheMs) lastProbe = { at: now, status: probe(stopping.signal) };
    return lastProbe.status;
  };
  let timer: NodeJS.Timeout | undefined;
  const tick = async () => {
    const status = await sharedProbe();
    for (const w of watchers) w(status);
  };
  const watch = (w: (s: Status) => void): (() => void) => {
    watchers.add(w);
    if (timer === undefined) {
      timer = setInterval(() => void tick(), watchIntervalMs);
      timer.unref();
    }
    return () => {
      watchers.delete(w);
      if (watchers.size === 0 && timer !== undefined) {
        clearInterval(timer);
        timer = undefined;
      }
    };
  };

  const impl: ServiceImpl<typeof Health> = {
    async check(req, ctx) {
      if (!names.has(req.service)) throw appError("not_found", `Unknown service "${req.service}".`);
      return response(await probe(ctx.signal));
    },
    async list(_req, ctx) {
      const status = await probe(ctx.signal);
      const statuses: Record<string, HealthCheckResponse> = {};
      for (const n of names) statuses[n] = response(status);
      return create(HealthListResponseSchema, { statuses });
    },
    async *watch(req, ctx) {
      if (watchers.size + unknownWatchers >= maxWatchers) {
        throw appError("rate_limited", `Too many health Watch streams on this listener (at most ${maxWatchers}).`);
      }
      const ended = AbortSignal.any([ctx.signal, stopping.signal]);
      if (!names.has(req.service)) {
        // Not an error (the protocol): the client may keep watching.
        unknownWatchers++;
        try {
          yield response(Status.SERVICE_UNKNOWN);
          await abortion(ended);
        } finally {
          unknownWatchers--;
        }
        return;
      }
      // The latest status from the shared timer not yet looked at (a slow
      // reader sees the current state, not a backlog).
      let next: Status | undefined;
      let wake: (() => void) | undefined;
      const unwatch = watch((status) => {
        next = status;
        wake?.();
      });
      const onEnd = () => wake?.();
      ended.addEventListener("abort", onEnd, { once: true });
      try {
        let last = await sharedProbe();
        yield response(last);
        while (!ended.aborted) {
          if (next === undefined) {
            await new Promise<void>((resolve) => (wake = resolve));
            wake = undefined;
            continue;
          }
          const status = next;
          next = undefined;
          if (status !== last) yield response((last = status));
        }
        // Shutting down: watchers learn it before the connection goes away.
        if (!ctx.signal.aborted && last !== Status.NOT_SERVING) yield response(Status.NOT_SERVING);
      } finally {
        ended.removeEventListener("abort", onEnd);
        unwatch();
      }
    },
  };
  return { binding: binding(Health, impl), shutdown: () => stopping.abort() };
}

function abortion(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    signal.addEventListener("abort", () => resolve(), { once: true });
  });
}
