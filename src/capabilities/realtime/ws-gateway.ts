// The WebSocket transport: GET /api/realtime upgraded on the public
// listener (HTTP/1.1), the token from the Authorization header or, for
// browsers, the `bearer.<token>` subprotocol beside `pulsebase.v1`; never
// from the URL. One connection carries many subscriptions (protocol.ts).
import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import { WebSocketServer, type RawData, type WebSocket } from "ws";
import { errorDetail, toAppError } from "../../kernel/errors.js";
import type { ConsumerPrincipal } from "../../kernel/principal.js";
import type { UpgradeRoute } from "../../kernel/module.js";
import { RealtimeConnection, type CloseReason } from "./connection.js";
import type { Hub } from "./hub.js";
import { HARD_FRAME_FACTOR } from "./limits.js";
import { BEARER_PROTOCOL_PREFIX, errorMessage, SUBPROTOCOL } from "./protocol.js";

export const REALTIME_PATH = "/api/realtime";
/** Query parameters that would carry a token in the URL (refused: URLs land in access logs). */
const TOKEN_PARAMS = ["token", "access_token", "bearer", "authorization", "apikey", "jwt"];
/** Client messages of one connection waiting to be handled before its socket is read no further. */
const MAX_PENDING = 32;
/** How long a close frame may take before the socket is dropped. */
const CLOSE_GRACE_MS = 1000;

class WsConnection extends RealtimeConnection {
  private alive = true;

  constructor(private readonly ws: WebSocket, principal: ConsumerPrincipal, authorization: string, maxBuffered: number) {
    super("websocket", principal, authorization, maxBuffered);
    ws.on("pong", () => (this.alive = true));
  }

  /** The client showed it is there (any frame). */
  heard(): void {
    this.alive = true;
  }

  protected buffered(): number {
    return this.ws.bufferedAmount;
  }

  protected write(_type: string, text: string): void {
    this.ws.send(text);
  }

  beat(): boolean {
    if (!this.alive) return false;
    this.alive = false;
    this.ws.ping();
    this.send("heartbeat", '{"type":"heartbeat"}');
    return true;
  }

  protected end(code: number, reason: CloseReason): void {
    if (reason === "slow_consumer") {
      // Its buffer is full: the close frame would queue behind it. Dropped at once, memory freed.
      this.ws.terminate();
      return;
    }
    this.ws.close(code, reason);
    setTimeout(() => this.ws.terminate(), CLOSE_GRACE_MS).unref();
  }
}

function refuse(socket: Duplex, status: number, text: string, code: string, message: string): void {
  const body = JSON.stringify({ error: code, message });
  socket.end(`HTTP/1.1 ${status} ${text}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
}

/** The Authorization header to check: the header itself, else the `bearer.<token>` subprotocol. */
export function authorizationOf(req: IncomingMessage): string | undefined {
  if (req.headers.authorization) return req.headers.authorization;
  const protos = (req.headers["sec-websocket-protocol"] ?? "").split(",").map((p) => p.trim());
  const bearer = protos.find((p) => p.startsWith(BEARER_PROTOCOL_PREFIX));
  return bearer ? `Bearer ${bearer.slice(BEARER_PROTOCOL_PREFIX.length)}` : undefined;
}

export function webSocketRoute(hub: Hub, authenticate: (h: string) => ConsumerPrincipal | Promise<ConsumerPrincipal>): UpgradeRoute & { close(): void } {
  const limits = hub.limits;
  const wss = new WebSocketServer({
    noServer: true,
    // Frames beyond the message limit are answered with an error; far beyond it, ws closes with 1009.
    maxPayload: limits.messageBytes * HARD_FRAME_FACTOR,
    perMessageDeflate: false,
    handleProtocols: (protocols) => (protocols.has(SUBPROTOCOL) ? SUBPROTOCOL : false),
  });
  return {
    path: REALTIME_PATH,
    close() {
      wss.close();
    },
    handle(req, socket, head) {
      const url = new URL(req.url ?? "/", "http://x");
      if (TOKEN_PARAMS.some((p) => url.searchParams.has(p))) {
        return refuse(socket, 400, "Bad Request", "bad_request", "Never put the token in the URL: send it in the Authorization header or the bearer.<token> subprotocol.");
      }
      const authorization = authorizationOf(req);
      if (!authorization) return refuse(socket, 401, "Unauthorized", "unauthenticated", "Missing Bearer token.");
      const offered = req.headers["sec-websocket-protocol"];
      if (offered && !offered.split(",").some((p) => p.trim() === SUBPROTOCOL)) {
        return refuse(socket, 400, "Bad Request", "bad_request", `Offer the subprotocol ${SUBPROTOCOL}.`);
      }
      const upgrade = (principal: ConsumerPrincipal) => {
        if (socket.destroyed) return;
        wss.handleUpgrade(req, socket, head, (ws) => open(ws, principal, authorization));
      };
      const failed = (err: unknown) => {
        const d = errorDetail(toAppError(err));
        refuse(socket, d?.httpStatus ?? 500, d?.code === "unauthenticated" ? "Unauthorized" : "Error", d?.code ?? "internal_error", toAppError(err).rawMessage);
      };
      try {
        const p = authenticate(authorization);
        if (p instanceof Promise) p.then(upgrade, failed);
        else upgrade(p);
      } catch (err) {
        failed(err);
      }
    },
  };

  function open(ws: WebSocket, principal: ConsumerPrincipal, authorization: string): void {
    const conn = new WsConnection(ws, principal, authorization, limits.sendBufferBytes);
    ws.on("error", () => ws.terminate());
    ws.on("close", () => conn.gone());
    if (!hub.admit(conn)) return;
    conn.send("welcome", JSON.stringify({
      type: "welcome",
      connection_id: conn.id,
      consumer_id: principal.consumerId,
      heartbeat_ms: limits.heartbeatMs,
      limits: { message_bytes: limits.messageBytes, subscriptions: limits.subscriptionsPerConnection, broadcasts_per_second: limits.broadcastsPerSecond },
    }));
    // Messages are handled one after another, in the order they came. A
    // client that sends faster than its messages are handled is read no
    // further once MAX_PENDING wait (TCP backpressure, nothing refused), and
    // again when half of them are done: what waits stays bounded.
    let queue = Promise.resolve();
    let pending = 0;
    ws.on("message", (data: RawData, isBinary: boolean) => {
      conn.heard();
      const size = Array.isArray(data) ? data.reduce((n, b) => n + b.length, 0) : (data as Buffer).byteLength;
      if (isBinary) return conn.send("error", errorMessage("unsupported_media_type", "Send JSON text frames."));
      if (size > limits.messageBytes) {
        hub.noteDropped("too_large");
        return conn.send("error", errorMessage("payload_too_large", `A message may be ${limits.messageBytes} bytes.`));
      }
      const text = Array.isArray(data) ? Buffer.concat(data).toString("utf8") : Buffer.from(data as Buffer).toString("utf8");
      pending++;
      if (pending >= MAX_PENDING && !ws.isPaused) ws.pause();
      queue = queue
        .then(() => hub.handle(conn, text))
        .catch(() => {})
        .finally(() => {
          pending--;
          if (ws.isPaused && pending <= MAX_PENDING / 2) ws.resume();
        });
    });
  }
}
