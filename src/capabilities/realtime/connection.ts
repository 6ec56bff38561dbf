// One client connection as the hub sees it, whatever its transport
// (WebSocket, SSE, Connect stream): who it is, its subscriptions, and a
// bounded way to write to it. A connection whose unsent bytes pass the send
// buffer limit is a slow consumer: it is closed, never buffered further.
import { randomUUID } from "node:crypto";
import type { ConsumerPrincipal } from "../../kernel/principal.js";
import type { Topic } from "./protocol.js";

export type Transport = "websocket" | "sse" | "stream";

export interface Subscription {
  /** The client's id of the subscription. */
  id: string;
  conn: RealtimeConnection;
  topic: Topic;
  /** The presence member id when the subscription joined presence. */
  member?: string;
}

/** Why the server ended a connection (metrics label and `closing` reason). */
export type CloseReason = "revoked" | "slow_consumer" | "heartbeat_timeout" | "limit" | "too_large" | "shutdown" | "client";

export abstract class RealtimeConnection {
  readonly id = randomUUID();
  readonly subs = new Map<string, Subscription>();
  closed = false;
  /** Told once, when the connection ends (the hub forgets it). */
  onEnd: ((reason: CloseReason) => void) | undefined;

  constructor(readonly transport: Transport, public principal: ConsumerPrincipal, readonly authorization: string, protected readonly maxBuffered: number) {}

  /** Unsent bytes held for this connection. */
  protected abstract buffered(): number;
  /** `eventId`: the change's cursor (SSE writes it as the event's id). */
  protected abstract write(type: string, text: string, eventId?: string): void;
  /**
   * One heartbeat: false when the client did not answer the previous one
   * (the hub closes it), else sends the next (ping, heartbeat message).
   */
  abstract beat(): boolean;
  /** Ends the transport (a close frame with code and reason where it has one). */
  protected abstract end(code: number, reason: CloseReason): void;

  /** Writes one server message; false when it was not written (closed, or closed now as a slow consumer). */
  send(type: string, text: string, eventId?: string): boolean {
    if (this.closed) return false;
    if (this.buffered() + text.length > this.maxBuffered) {
      this.close(4008, "slow_consumer");
      return false;
    }
    this.write(type, text, eventId);
    return true;
  }

  close(code: number, reason: CloseReason): void {
    if (this.closed) return;
    this.closed = true;
    try {
      this.end(code, reason);
    } finally {
      this.onEnd?.(reason);
    }
  }

  /** The client went away (not the server's doing). */
  gone(): void {
    if (this.closed) return;
    this.closed = true;
    this.onEnd?.("client");
  }
}

/**
 * A connection whose messages the handler pulls as they come (a Connect
 * stream, the operator's table watch): queued as JSON text, bounded by the
 * send buffer like every other transport.
 */
export class QueuedConnection extends RealtimeConnection {
  private readonly queue: string[] = [];
  private bytes = 0;
  private wake: (() => void) | undefined;
  /** How the server ended it, if it did. */
  ended: { code: number; reason: CloseReason } | undefined;

  protected buffered(): number {
    return this.bytes;
  }

  protected write(_type: string, text: string): void {
    this.queue.push(text);
    this.bytes += text.length;
    this.wake?.();
  }

  beat(): boolean {
    this.send("heartbeat", '{"type":"heartbeat"}');
    return true;
  }

  protected end(code: number, reason: CloseReason): void {
    this.ended = { code, reason };
    this.wake?.();
  }

  /** The messages as they come, until the connection ends or the signal aborts (then the connection is gone). */
  async *messages(signal: AbortSignal): AsyncGenerator<string> {
    const onAbort = () => this.wake?.();
    signal.addEventListener("abort", onAbort);
    try {
      for (;;) {
        while (this.queue.length) {
          const t = this.queue.shift()!;
          this.bytes -= t.length;
          yield t;
        }
        if (this.ended || signal.aborted) return;
        await new Promise<void>((resolve) => (this.wake = resolve));
        this.wake = undefined;
      }
    } finally {
      signal.removeEventListener("abort", onAbort);
      this.gone();
    }
  }
}
