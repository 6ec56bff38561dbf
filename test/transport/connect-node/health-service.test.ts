// grpc.health.v1 in memory: the status follows the readiness probe (a
// failing or hanging storage is NOT_SERVING), names are checked, Watch
// reports changes and ends with NOT_SERVING on shutdown.
import { Code, ConnectError, createClient, createRouterTransport } from "@connectrpc/connect";
import { afterEach, expect, it, vi } from "vitest";
import { Health, HealthCheckResponse_ServingStatus as Status } from "../../../gen/health/v1/health_pb.js";
import { createHealthService, type HealthOptions } from "../../../src/transport/connect-node/health-service.js";

afterEach(() => {
  vi.useRealTimers();
});

function setup(opts: Partial<HealthOptions> & Pick<HealthOptions, "ready">) {
  const health = createHealthService({ services: ["pulsebase.platform.v1.ConsumerService"], ...opts });
  const transport = createRouterTransport((router) => router.service(health.binding.service, health.binding.impl as never));
  return { client: createClient(Health, transport), shutdown: health.shutdown };
}

it("is SERVING while the probe succeeds, for the server and each mounted service", async () => {
  const { client } = setup({ ready: async () => {} });
  expect((await client.check({ service: "" })).status).toBe(Status.SERVING);
  expect((await client.check({ service: "pulsebase.platform.v1.ConsumerService" })).status).toBe(Status.SERVING);
  expect((await client.check({ service: "grpc.health.v1.Health" })).status).toBe(Status.SERVING);
  const list = await client.list({});
  expect(Object.keys(list.statuses).sort()).toEqual(["", "grpc.health.v1.Health", "pulsebase.platform.v1.ConsumerService"]);
});

it("is NOT_SERVING when the storage fails or does not answer in time", async () => {
  const failing = setup({ ready: () => Promise.reject(new Error("connection refused")) });
  expect((await failing.client.check({ service: "" })).status).toBe(Status.NOT_SERVING);
  // (the probe never answers: that the check does is its timeout)
  const hanging = setup({ ready: () => new Promise(() => {}), checkTimeoutMs: 100 });
  expect((await hanging.client.check({ service: "" })).status).toBe(Status.NOT_SERVING);
});

it("answers NOT_FOUND for a service the listener does not serve", async () => {
  const { client } = setup({ ready: async () => {} });
  const err = await client.check({ service: "pulsebase.admin.v1.IdentityService" }).catch((e: unknown) => ConnectError.from(e));
  expect(err).toMatchObject({ code: Code.NotFound });
});

it("Watch sends the status, then each change, and NOT_SERVING at shutdown", async () => {
  let up = true;
  const { client, shutdown } = setup({
    ready: async () => {
      if (!up) throw new Error("down");
    },
    watchIntervalMs: 50,
  });
  const seen: Status[] = [];
  for await (const r of client.watch({ service: "" })) {
    seen.push(r.status);
    if (seen.length === 1) up = false;
    if (seen.length === 2) up = true;
    if (seen.length === 3) shutdown();
  }
  expect(seen).toEqual([Status.SERVING, Status.NOT_SERVING, Status.SERVING, Status.NOT_SERVING]);
  // After shutdown Check says so too.
  expect((await client.check({ service: "" })).status).toBe(Status.NOT_SERVING);
});

it("Watch of an unknown service says SERVICE_UNKNOWN without failing the call", async () => {
  const { client } = setup({ ready: async () => {} });
  const abort = new AbortController();
  const stream = client.watch({ service: "no.such.Service" }, { signal: abort.signal });
  const first = await stream[Symbol.asyncIterator]().next();
  expect(first.value?.status).toBe(Status.SERVICE_UNKNOWN);
  abort.abort();
});

it("Watch streams share one probe per interval, however many there are", async () => {
  // The service's interval and its probe cache's clock, on fake time.
  vi.useFakeTimers({ toFake: ["setInterval", "clearInterval", "performance"] });
  let probes = 0;
  const { client, shutdown } = setup({
    ready: async () => {
      probes++;
    },
    watchIntervalMs: 100,
  });
  const abort = new AbortController();
  const firsts = await Promise.all(
    Array.from({ length: 20 }, async () => {
      const it = client.watch({ service: "" }, { signal: abort.signal })[Symbol.asyncIterator]();
      return (await it.next()).value?.status;
    }),
  );
  expect(firsts).toEqual(Array(20).fill(Status.SERVING));
  const start = probes;
  expect(start).toBe(1);
  // One probe per interval, not one per stream (20 per interval).
  for (let i = 1; i <= 5; i++) {
    await vi.advanceTimersByTimeAsync(100);
    expect(probes - start).toBe(i);
  }
  abort.abort();
  shutdown();
});

it("refuses Watch streams beyond the cap with RESOURCE_EXHAUSTED, and takes new ones once some end", async () => {
  // Driven on the implementation: the in-memory transport does not pass a
  // client's cancel on to the handler (the HTTP server does).
  const health = createHealthService({ services: [], ready: async () => {}, maxWatchers: 3 });
  const impl = health.binding.impl as unknown as {
    watch(req: { service: string }, ctx: { signal: AbortSignal }): AsyncGenerator<{ status: Status }>;
  };
  const open = (service = "") => {
    const abort = new AbortController();
    return { abort, it: impl.watch({ service }, { signal: abort.signal }) };
  };
  const streams = [open(), open(), open("no.such.Service")];
  for (const s of streams) expect((await s.it.next()).value?.status).toBeDefined();
  const over = await open().it.next().catch((e: unknown) => ConnectError.from(e));
  expect(over).toMatchObject({ code: Code.ResourceExhausted });
  // A watcher goes away: its stream ends and frees its slot.
  streams[0]!.abort.abort();
  expect((await streams[0]!.it.next()).done).toBe(true);
  const next = open();
  expect((await next.it.next()).value?.status).toBe(Status.SERVING);
  // Still full.
  expect(await open().it.next().catch((e: unknown) => ConnectError.from(e))).toMatchObject({ code: Code.ResourceExhausted });
  health.shutdown();
  for (const s of [...streams, next]) await s.it.return(undefined);
});
