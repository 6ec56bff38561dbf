// The process's NATS connection when NATS is not there at start: waiting for
// it is bounded (503 `unavailable`), it connects as soon as a nats-server
// answers, and it follows the server going away and coming back.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ChildProcess } from "node:child_process";
import { afterAll, describe, expect, it } from "vitest";
import { errorDetail } from "../../../src/kernel/errors.js";
import { NatsLink, type NatsLinkState } from "../../../src/infra/nats/nats-link.js";
import { until } from "../../helpers/until.js";
import { freePort, NATS_SERVER_BIN, startNatsServer, stopProcess } from "../queue/jetstream-helpers.js";

let server: ChildProcess | undefined;
let dir: string | undefined;
let link: NatsLink | undefined;

afterAll(async () => {
  await link?.close();
  if (server) await stopProcess(server, "SIGKILL");
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe.skipIf(!NATS_SERVER_BIN)("NatsLink", () => {
  it("opens once NATS answers, however late, and follows it going away and coming back", async () => {
    const port = await freePort();
    dir = await mkdtemp(join(tmpdir(), "pb-natslink-"));
    const retries: number[] = [];
    link = new NatsLink({ servers: `nats://127.0.0.1:${port}`, name: "link-test", onRetry: (_e, n) => retries.push(n) });
    const states: NatsLinkState[] = [];
    link.onChange((s) => states.push(s));
    expect(link.state).toBe("connecting");
    const err = await link.connection(300).catch((e: unknown) => e);
    expect(errorDetail(err)?.code).toBe("unavailable");
    await until(async () => (retries.length > 0 ? true : undefined), 5000);

    server = await startNatsServer(port, dir);
    const nc = await link.connection(10_000);
    expect(link.connected).toBe(true);
    expect(link.current).toBe(nc);

    await stopProcess(server, "SIGKILL");
    await until(async () => (link!.state === "reconnecting" ? true : undefined), 10_000);
    server = await startNatsServer(port, dir);
    await until(async () => (link!.connected ? true : undefined), 10_000);
    expect(link.reconnects).toBe(1);
    expect(states).toEqual(["connected", "reconnecting", "connected"]);
    // The same connection throughout: its users (subscriptions) carry on.
    expect(await link.connection()).toBe(nc);
  });
});
