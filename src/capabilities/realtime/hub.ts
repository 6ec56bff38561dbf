// The process's realtime hub: every connection of this process, its
// subscriptions, the channels they follow and their presence. It applies
// the per-application limits, delivers a channel's messages to the local
// subscribers and hands them to the fan-out for the other servers, and ends
// a consumer's connections when its token no longer authenticates.
import { randomUUID } from "node:crypto";
import { appError, errorDetail, toAppError } from "../../kernel/errors.js";
import type { ConsumerPrincipal } from "../../kernel/principal.js";
import type { RealtimeStats } from "../../kernel/module.js";
import type { CloseReason, RealtimeConnection, Subscription } from "./connection.js";
import type { Fanout, FanoutMessage } from "./fanout.js";
import { RecentRing } from "./admin-recent.js";
import { BroadcastLimiter, type RealtimeLimits } from "./limits.js";
import { ChannelPresence, type PresenceDiff } from "./presence.js";
import { CLOSE, errorMessage, parseClientMessage, ProtocolError, type ChannelTopic, type ClientMessage, type Member, type Topic } from "./protocol.js";
import type { TableFeed, TableSubscription } from "./tables.js";
import type { CmsFeed, CmsSubscription } from "./cms.js";

export interface Channel {
  appId: number;
  name: string;
  subs: Set<Subscription>;
  presence: ChannelPresence;
  stopFanout: () => void;
  /** The last broadcasts this server delivered (the operator's inspector, admin-recent.ts). */
  recent: RecentRing;
}

interface AppState {
  connections: number;
  channels: Map<string, Channel>;
}

export interface HubOptions {
  limits: RealtimeLimits;
  fanout: Fanout;
  authenticate(authorization: string): ConsumerPrincipal | Promise<ConsumerPrincipal>;
  onError(err: unknown): void;
  /** Table subscriptions (unset: refused as not available). */
  tables?: TableFeed;
  /** CMS subscriptions (unset: refused as not available). */
  cms?: CmsFeed;
  /** Throws permission_denied when the consumer may not use the channel (channel-access.ts); unset: every channel is open. */
  channelAccess?(p: ConsumerPrincipal, channel: string): Promise<void>;
  now?: () => number;
}

const json = JSON.stringify;

export class Hub {
  readonly serverId = randomUUID();
  private readonly apps = new Map<number, AppState>();
  private readonly conns = new Set<RealtimeConnection>();
  private readonly limiter: BroadcastLimiter;
  private readonly now: () => number;
  private delivered = 0;
  private readonly dropped: Record<string, number> = {};
  private readonly closedBy: Record<string, number> = {};
  private presenceTimer: NodeJS.Timeout | undefined;
  private beatTimer: NodeJS.Timeout | undefined;

  constructor(private readonly opts: HubOptions) {
    this.limiter = new BroadcastLimiter(opts.limits);
    this.now = opts.now ?? Date.now;
  }

  get limits(): RealtimeLimits {
    return this.opts.limits;
  }

  /** The application's channels with a subscriber on this server (read-only: admin-realtime-service.ts). */
  channelsOf(appId: number): ReadonlyMap<string, Readonly<Channel>> {
    return this.apps.get(appId)?.channels ?? new Map();
  }

  start(): void {
    this.presenceTimer ??= setInterval(() => this.presenceTick(), this.opts.limits.presenceHeartbeatMs);
    this.presenceTimer.unref();
    this.beatTimer ??= setInterval(() => this.heartbeat(), this.opts.limits.heartbeatMs);
    this.beatTimer.unref();
  }

  /** Ends every connection (server shutdown) and tells the other servers its members are gone. */
  stop(): void {
    clearInterval(this.presenceTimer);
    clearInterval(this.beatTimer);
    this.presenceTimer = this.beatTimer = undefined;
    for (const app of this.apps.values()) {
      for (const ch of app.channels.values()) if (ch.presence.of(this.serverId).length) this.opts.fanout.publish(ch.appId, ch.name, { o: this.serverId, k: "x" });
    }
    for (const c of [...this.conns]) this.closeWith(c, CLOSE.goingAway, "shutdown");
  }

  /** Takes a new authenticated connection; false (and the connection closed with an error) past the application's cap. */
  admit(conn: RealtimeConnection): boolean {
    const app = this.app(conn.principal.appId);
    if (app.connections >= this.opts.limits.connectionsPerApp) {
      this.count(this.closedBy, "limit");
      conn.send("error", errorMessage("limit_exceeded", `The application has ${this.opts.limits.connectionsPerApp} realtime connections open (the limit).`));
      conn.close(CLOSE.limit, "limit");
      return false;
    }
    app.connections++;
    this.conns.add(conn);
    conn.onEnd = (reason) => this.forget(conn, reason);
    return true;
  }

  /** A WebSocket text frame: answered in order on the connection (error, ok, pong, subscribed, ...). */
  async handle(conn: RealtimeConnection, text: string): Promise<void> {
    let msg: ClientMessage;
    try {
      msg = parseClientMessage(text);
    } catch (err) {
      if (err instanceof ProtocolError) this.refuse(conn, err.error, err.ref, err.id);
      else this.opts.onError(err);
      return;
    }
    try {
      switch (msg.type) {
        case "subscribe":
          await this.subscribe(conn, msg.id, msg.topic, msg.resume);
          break;
        case "unsubscribe":
          if (!this.unsubscribe(conn, msg.id)) throw appError("not_found", `No subscription ${msg.id}.`);
          conn.send("unsubscribed", json({ type: "unsubscribed", id: msg.id }));
          break;
        case "broadcast":
          await this.broadcast(conn.principal, conn, msg.channel, msg.event, msg.payload);
          break;
        case "presence":
          this.updatePresence(conn, msg.id, msg.state);
          break;
        case "ping":
          conn.send("pong", json({ type: "pong", ...(msg.ref !== undefined && { ref: msg.ref }) }));
          return;
      }
      if (msg.ref !== undefined) conn.send("ok", json({ type: "ok", ref: msg.ref }));
    } catch (err) {
      this.refuse(conn, err, msg.ref, "id" in msg ? msg.id : undefined);
    }
  }

  /** A refusal as an `error` message (the catalogue's code). */
  refuse(conn: RealtimeConnection, err: unknown, ref?: string, id?: string): void {
    const e = toAppError(err);
    const d = errorDetail(e);
    if (d?.code === "internal_error") this.opts.onError(err);
    const fields = Object.fromEntries((d?.fieldViolations ?? []).map((v) => [v.field, v.messages]));
    conn.send("error", errorMessage(d?.code ?? "internal_error", e.rawMessage, { ref, id, retryAfterSeconds: d?.retryAfterSeconds, fields }));
  }

  subscribe(conn: RealtimeConnection, id: string, topic: Topic, resume?: string): void | Promise<void> {
    if ((topic.kind === "cms" && !this.opts.cms) || (topic.kind === "table" && !this.opts.tables)) {
      throw appError("failed_precondition", `${topic.kind === "table" ? "Table" : "CMS"} subscriptions are not available yet (docs/realtime.md).`);
    }
    const l = this.opts.limits;
    const reserve = () => {
      if (conn.subs.has(id)) throw appError("conflict", `Subscription id ${id} is in use on this connection.`);
      if (conn.subs.size >= l.subscriptionsPerConnection) throw appError("limit_exceeded", `A connection may hold ${l.subscriptionsPerConnection} subscriptions.`);
      return true;
    };
    reserve();
    if (topic.kind === "table") return this.opts.tables!.subscribe(conn, id, topic, resume, reserve).then(() => {});
    if (topic.kind === "cms") return this.opts.cms!.subscribe(conn, id, topic, resume, reserve).then(() => {});
    const access = this.opts.channelAccess;
    if (access) {
      return access(conn.principal, topic.channel).then(() => {
        if (!conn.closed && reserve()) this.joinChannel(conn, id, topic);
      });
    }
    this.joinChannel(conn, id, topic);
  }

  private joinChannel(conn: RealtimeConnection, id: string, topic: ChannelTopic): void {
    const l = this.opts.limits;
    const app = this.app(conn.principal.appId);
    let ch = app.channels.get(topic.channel);
    if (!ch && app.channels.size >= l.channelsPerApp) throw appError("limit_exceeded", `The application has ${l.channelsPerApp} channels in use (the limit).`);
    if (ch && topic.presence && ch.presence.size >= l.presencePerChannel) throw appError("limit_exceeded", `The channel has ${l.presencePerChannel} presence members (the limit).`);
    ch ??= this.openChannel(app, conn.principal.appId, topic.channel);
    const sub: Subscription = { id, conn, topic };
    conn.subs.set(id, sub);
    ch.subs.add(sub);
    conn.send("subscribed", json({ type: "subscribed", id, topic: { kind: "channel", channel: topic.channel, self: topic.self } }));
    let diff: PresenceDiff | undefined;
    if (topic.presence) {
      sub.member = randomUUID();
      const m: Member = { member: sub.member, consumer_id: conn.principal.consumerId, state: topic.presence };
      diff = ch.presence.join(this.serverId, m, this.now());
      this.opts.fanout.publish(ch.appId, ch.name, { o: this.serverId, k: "j", m });
    }
    conn.send("presence_state", json({ type: "presence_state", id, channel: ch.name, members: ch.presence.list() }));
    if (diff) this.tellPresence(ch, diff, sub);
  }

  unsubscribe(conn: RealtimeConnection, id: string): boolean {
    const sub = conn.subs.get(id);
    if (!sub) return false;
    conn.subs.delete(id);
    if (sub.topic.kind === "table") {
      this.opts.tables?.unsubscribe(sub as TableSubscription);
      return true;
    }
    if (sub.topic.kind === "cms") {
      this.opts.cms?.unsubscribe(sub as CmsSubscription);
      return true;
    }
    const app = this.apps.get(conn.principal.appId);
    const ch = sub.topic.kind === "channel" ? app?.channels.get(sub.topic.channel) : undefined;
    if (!app || !ch) return true;
    ch.subs.delete(sub);
    if (sub.member) {
      const diff = ch.presence.leave(sub.member);
      this.opts.fanout.publish(ch.appId, ch.name, { o: this.serverId, k: "l", m: sub.member });
      if (diff) this.tellPresence(ch, diff);
    }
    if (ch.subs.size === 0) {
      ch.stopFanout();
      app.channels.delete(ch.name);
    }
    return true;
  }

  /** A broadcast from a consumer (the connection it came on, if any): rate-limited, then to every subscriber on every server. */
  async broadcast(from: ConsumerPrincipal, conn: RealtimeConnection | undefined, channel: string, event: string, payload: unknown): Promise<void> {
    await this.opts.channelAccess?.(from, channel);
    const wait = await this.limiter.take(from.appId, from.consumerId);
    if (wait !== undefined) {
      this.count(this.dropped, "rate_limited");
      throw appError("rate_limited", "Too many broadcasts.", { retryAfterSeconds: wait });
    }
    const size = json(payload ?? null).length + channel.length + event.length;
    if (size > this.opts.limits.messageBytes) {
      this.count(this.dropped, "too_large");
      throw appError("payload_too_large", `A broadcast may carry ${this.opts.limits.messageBytes} bytes.`);
    }
    this.opts.fanout.publish(from.appId, channel, { o: this.serverId, k: "b", e: event, p: payload ?? null, f: from.consumerId });
    const ch = this.apps.get(from.appId)?.channels.get(channel);
    if (ch) this.deliver(ch, event, payload ?? null, from.consumerId, conn);
  }

  updatePresence(conn: RealtimeConnection, id: string, state: Record<string, unknown>): void {
    const sub = conn.subs.get(id);
    if (!sub) throw appError("not_found", `No subscription ${id}.`);
    if (!sub.member || sub.topic.kind !== "channel") throw appError("failed_precondition", `Subscription ${id} did not join presence.`);
    const ch = this.apps.get(conn.principal.appId)?.channels.get(sub.topic.channel);
    if (!ch) return;
    const m: Member = { member: sub.member, consumer_id: conn.principal.consumerId, state };
    const diff = ch.presence.join(this.serverId, m, this.now());
    this.opts.fanout.publish(ch.appId, ch.name, { o: this.serverId, k: "j", m });
    if (diff) this.tellPresence(ch, diff);
  }

  /**
   * Checks the token of every connection of the application (of one
   * consumer when given) again; those that no longer authenticate are
   * closed (4001). Called on the change bus's consumer and app changes.
   */
  recheck(appId: number, consumerId?: number): void {
    for (const c of this.conns) {
      if (c.principal.appId !== appId || (consumerId !== undefined && c.principal.consumerId !== consumerId)) continue;
      this.check(c);
    }
  }

  private check(c: RealtimeConnection): void {
    const revoked = (err: unknown) => {
      if (c.closed) return;
      const d = errorDetail(toAppError(err));
      if (d?.code !== "unauthenticated") return void this.opts.onError(err); // storage trouble: keep the connection, the next check decides
      this.closeWith(c, CLOSE.unauthenticated, "revoked", (err as Error).message);
    };
    try {
      const p = this.opts.authenticate(c.authorization);
      if (p instanceof Promise) p.then((x) => this.reprincipal(c, x), revoked);
      else this.reprincipal(c, p);
    } catch (err) {
      revoked(err);
    }
  }

  private reprincipal(c: RealtimeConnection, p: ConsumerPrincipal): void {
    if (p.consumerId !== c.principal.consumerId || p.appId !== c.principal.appId) return this.closeWith(c, CLOSE.unauthenticated, "revoked");
    c.principal = p;
  }

  /** Sends `closing` with the reason, then closes. */
  closeWith(c: RealtimeConnection, code: number, reason: CloseReason, message?: string): void {
    if (c.closed) return;
    c.send("closing", json({ type: "closing", code, reason, ...(message && { message }) }));
    c.close(code, reason);
  }

  /** Heartbeat of every connection: a connection that did not answer the last one is closed; tokens are checked again (expiry). */
  heartbeat(): void {
    for (const c of [...this.conns]) {
      if (c.closed) continue;
      if (!c.beat()) {
        this.closeWith(c, CLOSE.heartbeat, "heartbeat_timeout");
        continue;
      }
      this.check(c);
    }
  }

  stats(): RealtimeStats {
    const connections: Record<string, number> = { websocket: 0, sse: 0, stream: 0 };
    let subscriptions = 0;
    for (const c of this.conns) {
      connections[c.transport] = (connections[c.transport] ?? 0) + 1;
      subscriptions += c.subs.size;
    }
    let channels = 0;
    let presenceMembers = 0;
    for (const app of this.apps.values()) {
      channels += app.channels.size;
      for (const ch of app.channels.values()) presenceMembers += ch.presence.size;
    }
    const t = this.opts.tables?.stats();
    return {
      connections,
      subscriptions,
      channels,
      presenceMembers,
      delivered: this.delivered + (t?.changes ?? 0) + (this.opts.cms?.stats().changes ?? 0),
      dropped: { ...this.dropped },
      closed: { ...this.closedBy },
      changes: t?.changes ?? 0,
      changeLagSeconds: (t?.lagMs ?? 0) / 1000,
    };
  }

  /** The presence heartbeat: repeat this server's members, drop the members of servers not heard for `presenceMissed` beats. */
  presenceTick(): void {
    const l = this.opts.limits;
    const before = this.now() - l.presenceMissed * l.presenceHeartbeatMs;
    for (const app of this.apps.values()) {
      for (const ch of app.channels.values()) {
        const own = ch.presence.of(this.serverId);
        if (own.length) this.opts.fanout.publish(ch.appId, ch.name, { o: this.serverId, k: "h", ms: own });
        const diff = ch.presence.expire(before);
        if (diff) this.tellPresence(ch, diff);
      }
    }
  }

  private app(appId: number): AppState {
    let a = this.apps.get(appId);
    if (!a) this.apps.set(appId, (a = { connections: 0, channels: new Map() }));
    return a;
  }

  private openChannel(app: AppState, appId: number, name: string): Channel {
    const ch: Channel = { appId, name, subs: new Set(), presence: new ChannelPresence(this.serverId), stopFanout: () => {}, recent: new RecentRing() };
    app.channels.set(name, ch);
    if (this.opts.fanout.shared) {
      ch.stopFanout = this.opts.fanout.join(appId, name, (m) => this.fromServer(ch, m));
      // The other servers answer with their members (presence_diff to this channel's subscribers).
      this.opts.fanout.publish(appId, name, { o: this.serverId, k: "q" });
    }
    return ch;
  }

  private fromServer(ch: Channel, m: FanoutMessage): void {
    if (m.o === this.serverId || ch.subs.size === 0) return;
    const now = this.now();
    switch (m.k) {
      case "b":
        return this.deliver(ch, m.e, m.p, m.f, undefined);
      case "j": {
        const d = ch.presence.join(m.o, m.m, now);
        if (d) this.tellPresence(ch, d);
        return;
      }
      case "l": {
        const d = ch.presence.leave(m.m);
        if (d) this.tellPresence(ch, d);
        return;
      }
      case "h": {
        const d = ch.presence.heartbeat(m.o, m.ms, now);
        if (d) this.tellPresence(ch, d);
        return;
      }
      case "q": {
        const own = ch.presence.of(this.serverId);
        if (own.length) this.opts.fanout.publish(ch.appId, ch.name, { o: this.serverId, k: "h", ms: own });
        return;
      }
      case "x": {
        const d = ch.presence.dropServer(m.o);
        if (d) this.tellPresence(ch, d);
        return;
      }
    }
  }

  private deliver(ch: Channel, event: string, payload: unknown, from: number, sender: RealtimeConnection | undefined): void {
    ch.recent.push({ event, payload, from, at: this.now() });
    // The message's JSON is built once; each subscriber's frame adds its subscription id.
    const tail = `,"channel":${json(ch.name)},"event":${json(event)},"payload":${json(payload)},"from":${from}}`;
    for (const sub of [...ch.subs]) {
      if (sub.conn === sender && !(sub.topic as ChannelTopic).self) continue;
      if (sub.conn.send("broadcast", `{"type":"broadcast","id":${json(sub.id)}${tail}`)) this.delivered++;
      else this.count(this.dropped, "slow_consumer");
    }
  }

  private tellPresence(ch: Channel, diff: PresenceDiff, except?: Subscription): void {
    const tail = `,"channel":${json(ch.name)},"joins":${json(diff.joins)},"leaves":${json(diff.leaves)}}`;
    for (const sub of [...ch.subs]) {
      if (sub === except) continue;
      if (sub.conn.send("presence_diff", `{"type":"presence_diff","id":${json(sub.id)}${tail}`)) this.delivered++;
      else this.count(this.dropped, "slow_consumer");
    }
  }

  private forget(conn: RealtimeConnection, reason: CloseReason): void {
    if (!this.conns.delete(conn)) return;
    if (reason !== "client") this.count(this.closedBy, reason);
    for (const id of [...conn.subs.keys()]) this.unsubscribe(conn, id);
    const app = this.apps.get(conn.principal.appId);
    if (app) {
      app.connections--;
      if (app.connections === 0 && app.channels.size === 0) this.apps.delete(conn.principal.appId);
    }
  }

  /** A client message refused before the hub saw it. */
  noteDropped(reason: string): void {
    this.count(this.dropped, reason);
  }

  private count(into: Record<string, number>, key: string): void {
    into[key] = (into[key] ?? 0) + 1;
  }
}
