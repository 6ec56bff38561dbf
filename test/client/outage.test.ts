// A real outage of the server's queue (its NATS stopped): batch endpoints
// answer 503 with Retry-After; the SDK waits at least that long between
// tries, keeps the batch's key and body, and delivers everything exactly
// once by itself when NATS is back.
import { mkdtemp, rm } from "node:fs/promises";
import type { ChildProcess } from "node:child_process";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { createAnalytics, createClient, memoryStorage, PlatformError } from "../../packages/client/src/index.js";
import { startDevServer, type DevServer } from "../../examples/web/dev-server.js";
import { createModules } from "../../src/server/modules.js";
import { freePort } from "../helpers/ports.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { startNatsServer, stopProcess } from "../infra/queue/jetstream-helpers.js";
import { eventCounts, waitFor } from "./sdk-fixture.js";

let s: TestServer;
let dev: DevServer;
let nats: ChildProcess | undefined;
let natsPort: number;
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "pb-sdk-nats-"));
  natsPort = await freePort();
  nats = await startNatsServer(natsPort, join(dir, "store"));
  s = await startTestServer({ modules: createModules, env: { NATS_URL: `nats://127.0.0.1:${natsPort}` } });
  dev = await startDevServer({ upstream: s.httpsUrl, insecure: true });
}, 60_000);
afterAll(async () => {
  await dev?.close();
  await s?.close();
  if (nats) await stopProcess(nats);
  await rm(dir, { recursive: true, force: true });
});

/** The server's analytics consumer, as JetStream sees it. */
async function analyticsConsumer() {
  const nc = await connect({ servers: `nats://127.0.0.1:${natsPort}` });
  try {
    return await (await jetstreamManager(nc)).consumers.info(`${s.config.natsNamespace.toUpperCase()}_ANALYTICS`, "analytics-workers");
  } finally {
    await nc.close();
  }
}

describe("server outage", () => {
  it("503 + Retry-After: waits as told, then delivers everything once without being asked", async () => {
    const { appKey, appId } = await s.createApp("sdk outage");
    const errors: unknown[] = [];
    const client = createClient({ baseUrl: dev.url, appKey, storage: memoryStorage(), device: { country: "DE", language: "de" } });
    // Backoff alone would retry after 50-100 ms; the server's Retry-After (1 s) wins.
    const a = createAnalytics(client, { flushAt: 1000, flushInterval: 60_000, retryBase: 50, retryMax: 100, lifecycle: false, onError: (e) => errors.push(e) });
    a.track("before_outage", {});
    await a.flush();

    await stopProcess(nats!);
    nats = undefined;
    for (let i = 0; i < 20; i++) a.track("during_outage", { i: String(i) });
    const err = await a.flush().then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(PlatformError);
    expect(err).toMatchObject({ status: 503, code: "unavailable", retryAfter: 1 });

    await waitFor(async () => dev.log.filter((r) => r.path === "/api/events/batch" && r.status === 503).length, (n) => n >= 3, 15_000);
    const tries = dev.log.filter((r) => r.path === "/api/events/batch" && r.status === 503);
    for (let i = 1; i < tries.length; i++) expect(tries[i]!.at - tries[i - 1]!.at).toBeGreaterThanOrEqual(990);
    expect(new Set(tries.map((r) => r.idempotencyKey)).size).toBe(1);
    expect(new Set(tries.map((r) => r.body)).size).toBe(1);

    nats = await startNatsServer(natsPort, join(dir, "store"));
    await waitFor(() => eventCounts(s, appId, "during_outage"), (c) => c.occurrences >= 20, 30_000);
    await waitFor(async () => a.stats().queued.events, (n) => n === 0);
    // Nothing left to send twice: the SDK has nothing queued (a flush sends
    // nothing more), and the server's queue nothing pending or unacknowledged
    // (nothing can be redelivered).
    const sent = dev.log.filter((r) => r.path === "/api/events/batch").length;
    await a.flush();
    expect(dev.log.filter((r) => r.path === "/api/events/batch").length).toBe(sent);
    await waitFor(analyticsConsumer, (c) => c.num_pending === 0 && c.num_ack_pending === 0, 30_000);
    expect(await eventCounts(s, appId, "during_outage")).toEqual({ rows: 20, occurrences: 20 });
    expect(errors.length).toBeGreaterThanOrEqual(3);
    await a.shutdown();
  }, 90_000);
});
