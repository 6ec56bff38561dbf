// HTTP/1.1 Upgrade requests (WebSocket) of a listener: Node hands them to the
// server's 'upgrade' event, never to Fastify. Each goes to the module route
// of its exact path; anything else is answered with a plain HTTP status and
// its socket closed. Once the listener starts closing, upgrades are refused
// (503) and the modules are told to end their long-lived connections.
import type { IncomingMessage, Server } from "node:http";
import type { Duplex } from "node:stream";
import type { UpgradeRoute } from "../../kernel/module.js";

export interface UpgradeOptions {
  routes: readonly UpgradeRoute[];
  /** False for a request that must be refused as plain HTTP (the listener's HTTPS rule). */
  secure(req: IncomingMessage): boolean;
  /** Request id header value for the refusal. */
  requestId(req: IncomingMessage): string;
}

export interface UpgradeLane {
  /** Refuse upgrades from now on. */
  close(): void;
}

export function installUpgrades(server: Pick<Server, "on">, opts: UpgradeOptions): UpgradeLane {
  const byPath = new Map(opts.routes.map((r) => [r.path, r]));
  let closing = false;
  server.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on("error", () => socket.destroy());
    const path = (req.url ?? "/").split("?", 1)[0]!;
    const route = byPath.get(path);
    const refuse = (status: number, text: string, body: object) => {
      const json = JSON.stringify(body);
      socket.end(
        `HTTP/1.1 ${status} ${text}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(json)}\r\nX-Request-Id: ${opts.requestId(req)}\r\nConnection: close\r\n\r\n${json}`,
      );
    };
    if (!route) return refuse(404, "Not Found", { error: "not_found", message: "No such endpoint." });
    if (closing) return refuse(503, "Service Unavailable", { error: "unavailable", message: "The server is shutting down." });
    if (!opts.secure(req)) return refuse(401, "Unauthorized", { error: "unauthenticated", message: "HTTPS is required." });
    try {
      route.handle(req, socket, head);
    } catch {
      socket.destroy();
    }
  });
  return {
    close() {
      closing = true;
    },
  };
}
