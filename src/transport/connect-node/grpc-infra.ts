// gRPC health checking and server reflection on a listener, in a Fastify
// scope of their own: the listener's own Connect plugin authenticates every
// call (consumer or operator token), while load balancers probe health
// without credentials. Reflection may be given interceptors of its own.
import { createContextValues, type Interceptor, type UnaryRequest, type StreamRequest } from "@connectrpc/connect";
import { fastifyConnectPlugin } from "@connectrpc/connect-fastify";
import type { FastifyInstance } from "fastify";
import { Health } from "../../../gen/health/v1/health_pb.js";
import type { ServiceBinding } from "../../kernel/module.js";
import { kRequestId } from "../../kernel/principal.js";
import { grpcMessageEncoding } from "./grpc-message.js";
import { createHealthService } from "./health-service.js";
import { createReflectionBindings, reflectionServices } from "./reflection-service.js";

export interface GrpcInfraOptions {
  /** The services the listener mounts (health and reflection describe them). */
  services: ServiceBinding[];
  /** The readiness probe: health is SERVING while it resolves. */
  ready(): Promise<void>;
  /** Run on reflection calls only (e.g. the operator token on the admin listener). */
  reflectionInterceptors?: Interceptor[];
  readMaxBytes: number;
  /** Installs per-route hooks in the scope before the routes are added (the public listener's body gate). */
  gate?: (scope: FastifyInstance) => void;
}

export async function registerGrpcInfra(app: FastifyInstance, opts: GrpcInfraOptions): Promise<void> {
  const mounted = opts.services.map((s) => s.service);
  const health = createHealthService({
    services: [...mounted, ...reflectionServices].map((s) => s.typeName),
    ready: opts.ready,
  });
  const reflection = createReflectionBindings([...mounted, Health]);
  // Watch streams report NOT_SERVING and end before the server drains.
  app.addHook("preClose", (done) => {
    health.shutdown();
    done();
  });
  const guarded = new Set(reflectionServices.map((s) => s.typeName));
  const guard: Interceptor = (next) => {
    const inner = (opts.reflectionInterceptors ?? []).reduceRight((n, i) => i(n), next);
    return (req: UnaryRequest | StreamRequest) => (guarded.has(req.service.typeName) ? inner(req) : next(req));
  };
  await app.register(async (scope) => {
    // The Connect plugin installs its own parser for application/json.
    if (scope.hasContentTypeParser("application/json")) scope.removeContentTypeParser("application/json");
    opts.gate?.(scope);
    grpcMessageEncoding(scope);
    await scope.register(fastifyConnectPlugin, {
      routes: (router) => {
        for (const b of [health.binding, ...reflection]) b.mount(router);
      },
      interceptors: [guard],
      contextValues: (req) => createContextValues().set(kRequestId, String(req.id)),
      readMaxBytes: opts.readMaxBytes,
    });
  });
}
