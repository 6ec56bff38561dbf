// JetStream test helpers: unique stream names per test, clean-up, and a
// private nats-server for the outage tests.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { connect } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { uniqueName } from "../../helpers/db.js";

export const NATS_SERVER_BIN = ["/usr/sbin/nats-server", "/usr/bin/nats-server", "/usr/local/bin/nats-server"].find((p) => existsSync(p));

export function uniqueStream() {
  const base = uniqueName("pbq").toUpperCase();
  return { stream: base, subjectPrefix: `test.${base.toLowerCase()}` };
}

export async function deleteStreams(servers: string, stream: string): Promise<void> {
  const nc = await connect({ servers, timeout: 2000 }).catch(() => undefined);
  if (!nc) return;
  try {
    const jsm = await jetstreamManager(nc);
    await jsm.streams.delete(stream).catch(() => {});
    await jsm.streams.delete(`${stream}_DLQ`).catch(() => {});
  } finally {
    await nc.close();
  }
}

export { freePort } from "../../helpers/ports.js";

/** Starts `nats-server -js -p port -sd dir` and waits until it accepts connections. */
export async function startNatsServer(port: number, storeDir: string): Promise<ChildProcess> {
  const proc = spawn(NATS_SERVER_BIN!, ["-js", "-a", "127.0.0.1", "-p", String(port), "-sd", storeDir], { stdio: "ignore" });
  const end = Date.now() + 10_000;
  for (;;) {
    const nc = await connect({ servers: `nats://127.0.0.1:${port}`, timeout: 500 }).catch(() => undefined);
    if (nc) {
      await nc.close();
      return proc;
    }
    if (Date.now() > end) throw new Error("nats-server did not start");
    await new Promise((r) => setTimeout(r, 100));
  }
}

export async function stopProcess(proc: ChildProcess, signal: NodeJS.Signals = "SIGTERM"): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  await new Promise<void>((resolve) => {
    proc.once("exit", () => resolve());
    proc.kill(signal);
  });
}
