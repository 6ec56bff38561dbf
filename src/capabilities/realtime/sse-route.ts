// Server-Sent Events: GET /api/realtime/sse?channel=room:5 (or
// ?table=notes[&filter=<JSON>], or ?cms=<content type>) with the Bearer header opens one
// subscription; every server message is an event named by its type. A
// channel's events carry an `id:` line (a per-connection sequence); a
// table's (or CMS type's) `change` events carry the change's cursor as their id (other
// events none, so the browser's last id stays the last change's), and a
// reconnect's Last-Event-ID resumes the subscription. A comment line is the
// heartbeat. The stream is bounded like a WebSocket's send buffer (a slow
// reader is cut off).
import { PassThrough } from "node:stream";
import { appError } from "../../kernel/errors.js";
import type { ConsumerPrincipal } from "../../kernel/principal.js";
import type { RawRoute } from "../../kernel/module.js";
import { RealtimeConnection, type CloseReason } from "./connection.js";
import type { Hub } from "./hub.js";
import { checkChannel, checkTopic, type Topic } from "./protocol.js";

export const SSE_PATH = "/api/realtime/sse";

class SseConnection extends RealtimeConnection {
  private seq = 0;

  constructor(private readonly stream: PassThrough, principal: ConsumerPrincipal, authorization: string, maxBuffered: number, private readonly cursorIds = false) {
    super("sse", principal, authorization, maxBuffered);
  }

  protected buffered(): number {
    return this.stream.writableLength + this.stream.readableLength;
  }

  protected write(type: string, text: string, eventId?: string): void {
    const id = this.cursorIds ? eventId : String(++this.seq);
    this.stream.write(`event: ${type}\n${id !== undefined ? `id: ${id}\n` : ""}data: ${text}\n\n`);
  }

  beat(): boolean {
    if (this.buffered() <= this.maxBuffered) this.stream.write(": heartbeat\n\n");
    return true;
  }

  protected end(_code: number, reason: CloseReason): void {
    if (reason === "slow_consumer") this.stream.destroy();
    else this.stream.end();
  }
}

const first = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v);

export function sseRoute(hub: Hub, authenticate: (h: string | undefined) => ConsumerPrincipal | Promise<ConsumerPrincipal>): RawRoute {
  return {
    method: "GET",
    path: SSE_PATH,
    iface: "platform",
    async handle(req) {
      const authorization = first(req.headers.authorization);
      const principal = await authenticate(authorization);
      const table = first(req.query?.table);
      const cms = first(req.query?.cms);
      let topic: Topic;
      if (cms !== undefined) {
        topic = checkTopic({ kind: "cms", content_type: cms });
      } else if (table !== undefined) {
        let filter: unknown;
        const f = first(req.query?.filter);
        if (f !== undefined) {
          try {
            filter = JSON.parse(f);
          } catch {
            throw appError("validation_failed", "filter must be JSON: {\"column\",\"op\",\"value\"}.", { fields: { filter: ["JSON"] } });
          }
        }
        topic = checkTopic({ kind: "table", table, ...(filter !== undefined && { filter }) });
      } else {
        topic = { kind: "channel", channel: checkChannel(first(req.query?.channel)), self: false };
      }
      const lastId = first(req.headers["last-event-id"]);
      if (hub.limits.subscriptionsPerConnection < 1) throw appError("limit_exceeded");
      const stream = new PassThrough();
      const conn = new SseConnection(stream, principal, authorization!, hub.limits.sendBufferBytes, topic.kind !== "channel");
      // Fastify destroys the stream when the client goes away.
      stream.on("close", () => conn.gone());
      if (!hub.admit(conn)) throw appError("limit_exceeded", `The application has ${hub.limits.connectionsPerApp} realtime connections open (the limit).`);
      // A reconnect (Last-Event-ID) on a channel gets the presence state again,
      // not the broadcasts it missed; on a table or CMS type it resumes after that cursor.
      try {
        await hub.subscribe(conn, "sse", topic, topic.kind !== "channel" && lastId ? lastId : undefined);
      } catch (err) {
        conn.close(1000, "limit");
        throw err;
      }
      return {
        status: 200,
        headers: { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-store", "x-accel-buffering": "no" },
        body: stream,
      };
    },
  };
}
