// The process's one NATS connection, shared by every user (the analytics
// JetStream queue, the function-event transport, the change bus). It is
// opened in the background and retried until NATS answers, so a process
// started while NATS is unreachable starts anyway and joins as soon as NATS
// is up (the same transports as every other process, never a silent
// fallback); once connected the client reconnects by itself, forever.
// Users wait for the connection with connection(), bounded by a timeout, and
// follow its state with onChange().
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { withTimeout } from "../../kernel/deadlines.js";
import { appError } from "../../kernel/errors.js";
import { backoffMs, sleep } from "../../kernel/retry.js";

export interface NatsLinkOptions {
  /** NATS server URL(s). */
  servers: string | string[];
  /** Connection name shown by the server (monitoring). */
  name: string;
  /** Told about each failed first attempt (the link keeps trying). */
  onRetry?: (err: unknown, attempt: number) => void;
}

export type NatsLinkState = "connecting" | "connected" | "reconnecting" | "closed";

export class NatsLink {
  private conn: NatsConnection | undefined;
  private stateNow: NatsLinkState = "connecting";
  private closing = false;
  private readonly listeners = new Set<(state: NatsLinkState) => void>();
  private readonly first: Promise<NatsConnection>;
  /** Connections re-established after a loss (a gap in which messages may have been missed). */
  reconnects = 0;

  constructor(private readonly opts: NatsLinkOptions) {
    this.first = this.open();
    // Nobody may be waiting yet; a rejection (closed first) is reported to the waiters.
    this.first.catch(() => {});
  }

  private async open(): Promise<NatsConnection> {
    for (let attempt = 1; ; attempt++) {
      if (this.closing) throw closedError();
      try {
        // maxReconnectAttempts -1: after the first connection the client
        // itself reconnects forever; the first one is retried here, so
        // close() can stop it.
        const c = await connect({ servers: this.opts.servers, name: this.opts.name, maxReconnectAttempts: -1, reconnectTimeWait: 250, timeout: 2000 });
        if (this.closing) {
          await c.close().catch(() => {});
          throw closedError();
        }
        this.conn = c;
        this.set("connected");
        void this.follow(c);
        return c;
      } catch (err) {
        if (this.closing) throw closedError();
        this.opts.onRetry?.(err, attempt);
        await sleep(backoffMs({ baseBackoffMs: 250, maxBackoffMs: 2000 }, attempt));
      }
    }
  }

  private async follow(c: NatsConnection): Promise<void> {
    for await (const s of c.status()) {
      if (s.type === "disconnect" || s.type === "reconnecting") {
        if (this.stateNow === "connected") this.set("reconnecting");
      } else if (s.type === "reconnect") {
        this.reconnects++;
        this.set("connected");
      }
    }
    this.set("closed");
  }

  private set(state: NatsLinkState): void {
    if (this.stateNow === state) return;
    this.stateNow = state;
    for (const fn of this.listeners) fn(state);
  }

  get state(): NatsLinkState {
    return this.stateNow;
  }

  get connected(): boolean {
    return this.stateNow === "connected";
  }

  /** The connection, once it was opened (it may be reconnecting right now). */
  get current(): NatsConnection | undefined {
    return this.conn;
  }

  /**
   * The connection, waiting for the first one at most timeoutMs (then 503
   * `unavailable`); without a timeout, until it is open or the link closes.
   */
  connection(timeoutMs?: number): Promise<NatsConnection> {
    if (this.conn) return Promise.resolve(this.conn);
    if (timeoutMs === undefined) return this.first;
    return withTimeout(this.first, timeoutMs, () => appError("unavailable", "NATS is unreachable.", { retryAfterSeconds: 1 }));
  }

  /** Calls fn on every state change; returns the function that stops it. */
  onChange(fn: (state: NatsLinkState) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** Drains the connection (or stops trying to open it). */
  async close(): Promise<void> {
    this.closing = true;
    const c = this.conn;
    if (c && !c.isClosed()) await c.drain().catch(() => c.close());
    this.set("closed");
  }
}

const closedError = () => appError("unavailable", "The NATS connection is closed.", { retryAfterSeconds: 1 });

/** A raw connection (tests, tools) or the process's link: what NATS users accept. */
export type NatsSource = NatsConnection | NatsLink;

/** The connection of a source (see NatsLink.connection for the wait). */
export function natsConnection(src: NatsSource, timeoutMs?: number): Promise<NatsConnection> {
  return src instanceof NatsLink ? src.connection(timeoutMs) : Promise.resolve(src);
}
