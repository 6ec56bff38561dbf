// What a capability contributes to the server: Connect services for the
// device (public) and operator (admin) listeners, extra raw routes, and
// background work that starts and stops with the process.
import type { DescService } from "@bufbuild/protobuf";
import type { FastifyInstance } from "fastify";
import type { Registry } from "prom-client";
import type { AnyImpl } from "../transport/http/gateway.js";

export interface ServiceBinding {
  service: DescService;
  impl: AnyImpl;
}

export interface PulsebaseModule {
  name: string;
  device?: ServiceBinding[];
  admin?: ServiceBinding[];
  /** Raw routes on the public listener (media files, ...). */
  publicRoutes?(app: FastifyInstance): Promise<void> | void;
  start?(): Promise<void>;
  stop?(): Promise<void>;
  /** Adds the module's scrape-time gauges (queue lag, pool sizes) to the server's registry. */
  registerMetrics?(registry: Registry): void;
}

export function binding<S extends DescService>(service: S, impl: unknown): ServiceBinding {
  return { service, impl: impl as AnyImpl };
}
