// The bare WebSocket baseline of the realtime bench (`--only realtime`): a
// `ws` server on the same TLS certificate and the same listener kind as the
// service's public listener (HTTP/2 with HTTP/1.1 through ALPN, WebSocket by
// HTTP/1.1 Upgrade), speaking just enough of docs/realtime.md to be driven
// by the same clients: `welcome`; `subscribe` to a channel (`subscribed`);
// `broadcast` delivered to every subscriber of the channel as the service's
// frame (its subscription id, channel, event, payload, from), then `ok`.
// No authentication, limits, presence or send-buffer checks: the cost of
// the fan-out itself. With NATS_URL (the three-server rows) a broadcast is
// also published on a NATS subject per channel, and the other baseline
// servers deliver it to their subscribers, as the service's fan-out does.
import { createSecureServer } from "node:http2";
import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomUUID } from "node:crypto";
import { WebSocketServer, type WebSocket } from "ws";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { loadOrCreateTls } from "../../src/server/tls.js";

interface Sub {
  id: string;
  ws: WebSocket;
  self: boolean;
}

const tls = await loadOrCreateTls({ dataDir: process.env.BENCH_DATA_DIR ?? (await mkdtemp(join(tmpdir(), "bench-ws-base-"))) });
const server = createSecureServer({ allowHTTP1: true, key: tls.key, cert: tls.cert });
server.on("request", (_req, res) => {
  res.statusCode = 404;
  res.end();
});
const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false, handleProtocols: (p) => (p.has("pulsebase.v1") ? "pulsebase.v1" : false) });
const channels = new Map<string, Set<Sub>>();
const serverId = randomUUID();
const json = JSON.stringify;
let nc: NatsConnection | undefined;
const natsSubs = new Map<string, { unsubscribe(): void }>();
const subject = (channel: string) => `wsbase.${Buffer.from(channel).toString("base64url")}`;

function deliver(channel: string, event: string, payload: unknown, from: number, sender: WebSocket | undefined): void {
  const subs = channels.get(channel);
  if (!subs) return;
  const tail = `,"channel":${json(channel)},"event":${json(event)},"payload":${json(payload)},"from":${from}}`;
  for (const s of subs) {
    if (s.ws === sender && !s.self) continue;
    s.ws.send(`{"type":"broadcast","id":${json(s.id)}${tail}`);
  }
}

server.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) => {
  socket.on("error", () => socket.destroy());
  wss.handleUpgrade(req, socket, head, (ws) => {
    const mine: { channel: string; sub: Sub }[] = [];
    ws.on("error", () => ws.terminate());
    ws.on("close", () => {
      for (const { channel, sub } of mine) {
        const subs = channels.get(channel);
        subs?.delete(sub);
        if (subs && subs.size === 0) {
          channels.delete(channel);
          natsSubs.get(channel)?.unsubscribe();
          natsSubs.delete(channel);
        }
      }
    });
    ws.send(json({ type: "welcome", connection_id: randomUUID(), consumer_id: 0, heartbeat_ms: 25000 }));
    ws.on("message", (data) => {
      const m = JSON.parse(String(data)) as { type: string; id?: string; ref?: string; channel?: string; event?: string; payload?: unknown; topic?: { channel: string; self?: boolean } };
      if (m.type === "subscribe" && m.topic && m.id) {
        const channel = m.topic.channel;
        let subs = channels.get(channel);
        if (!subs) {
          channels.set(channel, (subs = new Set()));
          if (nc) {
            natsSubs.set(channel, nc.subscribe(subject(channel), {
              callback: (_err, msg) => {
                const b = msg.json<{ o: string; e: string; p: unknown; f: number }>();
                if (b.o !== serverId) deliver(channel, b.e, b.p, b.f, undefined);
              },
            }));
          }
        }
        const sub = { id: m.id, ws, self: m.topic.self ?? false };
        subs.add(sub);
        mine.push({ channel, sub });
        ws.send(json({ type: "subscribed", id: m.id, topic: { kind: "channel", channel, self: sub.self } }));
      } else if (m.type === "broadcast" && m.channel) {
        nc?.publish(subject(m.channel), json({ o: serverId, k: "b", e: m.event, p: m.payload ?? null, f: 0 }));
        deliver(m.channel, m.event ?? "", m.payload ?? null, 0, ws);
      } else if (m.type === "ping") {
        ws.send(json({ type: "pong", ref: m.ref }));
        return;
      }
      if (m.ref !== undefined) ws.send(json({ type: "ok", ref: m.ref }));
    });
  });
});

if (process.env.NATS_URL) nc = await connect({ servers: process.env.NATS_URL });
server.listen(0, "127.0.0.1", () => {
  const port = (server.address() as { port: number }).port;
  process.stdout.write(JSON.stringify({ https: port }) + "\n");
});
process.on("SIGTERM", () => {
  for (const c of wss.clients) c.terminate();
  void (nc?.close() ?? Promise.resolve()).finally(() => process.exit(0));
});
