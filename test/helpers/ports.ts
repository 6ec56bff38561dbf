// A port nothing listens on at the moment of asking: for child processes
// (servers, nats-server) that must be told their port on the command line,
// and for "nothing answers here" tests. Chosen at random below the kernel's
// ephemeral range (read from /proc, 32768 by default): a port from that
// range can be taken meanwhile by any outgoing connection of a parallel test
// (PostgreSQL, NATS, HTTP clients), and the child then fails with EADDRINUSE.
import { readFileSync } from "node:fs";
import { createServer } from "node:net";

const ephemeralLow = (() => {
  try {
    return Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]) || 32768;
  } catch {
    return 32768;
  }
})();
const LOW = 10_000;
const handedOut = new Set<number>();

const bindable = (port: number) =>
  new Promise<boolean>((resolve) => {
    const srv = createServer();
    srv.once("error", () => resolve(false));
    srv.listen(port, "127.0.0.1", () => srv.close(() => resolve(true)));
  });

export async function freePort(): Promise<number> {
  const span = Math.max(1000, ephemeralLow - LOW);
  for (let i = 0; i < 100; i++) {
    const port = LOW + Math.floor(Math.random() * span);
    if (port >= 65536 || handedOut.has(port)) continue;
    if (await bindable(port)) {
      handedOut.add(port);
      return port;
    }
  }
  throw new Error("no free port found below the ephemeral range");
}
