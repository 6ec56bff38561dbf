// Realtime (docs/realtime.md): one WebSocket per client, opened on first use
// and authenticated with the browser-safe `bearer.<token>` subprotocol (never
// the token in the URL). It multiplexes broadcast channels with presence,
// table changes and CMS changes; reconnects with backoff when the socket
// drops or goes silent for two heartbeats, subscribing everything again (table
// and CMS subscriptions resume from their last cursor); re-issues the token
// after a 4001 close; and turns the server's `error` messages into the SDK's
// error classes with the catalogue code. Uses the platform's WebSocket
// (browsers, React Native, Node 22+); no dependencies.
import type { Identity, PulsebaseClient } from "./client.js";
import { errorFromResponse, NetworkError, PulsebaseError, ValidationError } from "./errors.js";
import { backoff } from "./http.js";

/**
 * What the SDK needs of a WebSocket (the platform's global one, or `ws` in
 * Node < 22). The handlers take `never` so that any WebSocket class fits; the
 * SDK reads `data` of a message and `code`, `reason` of a close.
 */
export interface WebSocketLike {
  send(data: string): void;
  close(code?: number, reason?: string): void;
  onopen: ((ev: never) => void) | null;
  onmessage: ((ev: never) => void) | null;
  onclose: ((ev: never) => void) | null;
  onerror: ((ev: never) => void) | null;
}
export type WebSocketConstructor = new (url: string, protocols: string[]) => WebSocketLike;

export interface RealtimeOptions {
  /** The WebSocket endpoint; default: the client's baseUrl as `wss://…/api/realtime`. */
  url?: string;
  /** Default: the global WebSocket (browsers, React Native, Node 22+). */
  WebSocket?: WebSocketConstructor;
  /** First reconnect delay (default 500 ms), doubling up to `reconnectMax` (30 s), half of it random. */
  reconnectBase?: number;
  reconnectMax?: number;
  /** How long an answer (`send`, `track`) may take, and a connection until its welcome (default: the client's timeoutMs, else 15 s). */
  timeoutMs?: number;
}

/** A presence member: one joining subscription (a consumer with two connections is two members). */
export interface PresenceMember<S = Record<string, unknown>> {
  member: string;
  consumer_id: number;
  state: S;
}

/** The channel's presence after a change: every member, and who joined (or changed state) and left. */
export interface PresenceEvent<S = Record<string, unknown>> {
  /** `state`: the full list (after each subscribe, also after a reconnect); `diff`: a change. */
  kind: "state" | "diff";
  members: PresenceMember<S>[];
  joins: PresenceMember<S>[];
  leaves: PresenceMember<S>[];
}

export interface BroadcastMessage<P = unknown> {
  channel: string;
  event: string;
  payload: P;
  /** The sender's consumer id. */
  from: number;
}

/** A change of a table row or CMS entry; `cursor` is what a later subscription resumes from. */
export type RealtimeChange<R = Record<string, unknown>> = {
  /** The table (table subscriptions) or content type (CMS subscriptions). */
  table?: string;
  content_type?: string;
  cursor: string;
  /** When the change was committed (ISO 8601). */
  at?: string;
} & (
  | { op: "insert" | "update"; row: R; old_key?: Partial<R> }
  | { op: "delete"; row?: R; old_key: Partial<R> }
);

/** A change of a CMS entry: published or updated (the entry as the read API renders it), or unpublished (its id). */
export type CmsChange<E = Record<string, unknown>> = {
  content_type: string;
  cursor: string;
  at?: string;
} & ({ op: "publish" | "update"; entry: E } | { op: "unpublish"; entry: { id: string } });

export type TableFilter = { column: string; op: "eq"; value: unknown } | { column: string; op: "in"; value: unknown[] };

export interface RealtimeStatusEvent {
  status: RealtimeStatus;
  /** The close that caused `reconnecting` or `closed`. */
  code?: number;
  reason?: string;
}
export type RealtimeStatus = "idle" | "connecting" | "open" | "reconnecting" | "closed";

export interface Welcome {
  connection_id: string;
  consumer_id: number;
  heartbeat_ms: number;
  limits: { message_bytes: number; subscriptions: number; broadcasts_per_second: number };
}

type Listener = (...args: never[]) => void;

interface Subscription {
  readonly id: string;
  /** Resolves once the server took the subscription (first time); rejects with its refusal. */
  readonly subscribed: Promise<void>;
  /** Ends it (its presence member leaves). */
  unsubscribe(): void;
}

export interface Channel<P = unknown, S extends object = Record<string, unknown>> extends Subscription {
  readonly name: string;
  /** The members present, as last told by the server. */
  readonly members: PresenceMember<S>[];
  on(event: "broadcast", cb: (m: BroadcastMessage<P>) => void): () => void;
  on(event: "presence", cb: (p: PresenceEvent<S>) => void): () => void;
  /** The subscription was refused (it is over) or a message about it failed. */
  on(event: "error", cb: (e: PulsebaseError) => void): () => void;
  /** To every subscriber of the channel on every server; resolves when the server took it. */
  send(event: string, payload?: P): Promise<void>;
  /** Joins presence with `state`, or replaces this member's state. */
  track(state: S): Promise<void>;
  /** Leaves presence (the subscription stays). */
  untrack(): Promise<void>;
}

export interface ChangeSubscription<R = Record<string, unknown>, C = RealtimeChange<R>> extends Subscription {
  /** The cursor of the last change received (store it to resume after a restart). */
  readonly cursor: string | undefined;
  on(event: "change", cb: (c: C) => void): () => void;
  /** The resume window was missed (changes may be lost): reload what you show; changes go on from now. */
  on(event: "resync", cb: () => void): () => void;
  on(event: "error", cb: (e: PulsebaseError) => void): () => void;
}

export interface Realtime {
  readonly status: RealtimeStatus;
  /** The server's welcome of the current connection. */
  readonly welcome: Welcome | undefined;
  channel<P = unknown, S extends object = Record<string, unknown>>(name: string, o?: { self?: boolean; presence?: S }): Channel<P, S>;
  table<R = Record<string, unknown>>(name: string, o?: { filter?: TableFilter; resume?: string }): ChangeSubscription<R>;
  cms<E = Record<string, unknown>>(contentType: string, o?: { resume?: string }): ChangeSubscription<E, CmsChange<E>>;
  /** A broadcast without subscribing. */
  broadcast(channel: string, event: string, payload?: unknown): Promise<void>;
  on(event: "status", cb: (e: RealtimeStatusEvent) => void): () => void;
  on(event: "open", cb: (w: Welcome) => void): () => void;
  /** An error not tied to a subscription or a call (e.g. a frame the server refused). */
  on(event: "error", cb: (e: PulsebaseError) => void): () => void;
  /** Ends every subscription and the connection; a later subscription opens a new one. */
  close(): void;
}

type Msg = Record<string, unknown> & { type: string };

interface SubState {
  id: string;
  kind: "channel" | "table" | "cms";
  topic: Record<string, unknown>;
  /** Channel: the presence state to join with (undefined: not joined). */
  presence?: object;
  cursor?: string;
  members: PresenceMember[];
  listeners: Map<string, Set<Listener>>;
  /** Subscribed on the current connection. */
  active: boolean;
  /** Subscribes sent so far (on any connection). */
  seq: number;
  /** Waiting for the answer to subscribe number `need` or a later one. */
  waiters: Array<{ need: number; ok: () => void; ko: (e: PulsebaseError) => void }>;
  ended: boolean;
}

interface Pending {
  resolve(m: Msg): void;
  reject(e: PulsebaseError): void;
  timer?: ReturnType<typeof setTimeout>;
}

const STATUS: Record<string, number> = {
  bad_request: 400, unauthenticated: 401, permission_denied: 403, not_found: 404, conflict: 409,
  failed_precondition: 409, payload_too_large: 413, unsupported_media_type: 415, validation_failed: 422,
  rate_limited: 429, limit_exceeded: 429, internal_error: 500, unavailable: 503,
};

/** A server `error` message as the SDK's error class (PlatformError, ValidationError) with the catalogue code. */
export function realtimeError(m: Record<string, unknown>): PulsebaseError {
  const code = String(m.code ?? "internal_error");
  const message = String(m.message ?? code);
  if (code === "validation_failed") return new ValidationError(message, (m.fields as Record<string, string[]>) ?? {});
  const retry = typeof m.retry_after_seconds === "number" ? m.retry_after_seconds : undefined;
  return errorFromResponse(STATUS[code] ?? 400, { error: code, message }, undefined, retry);
}

const SUBPROTOCOL = "pulsebase.v1";
/** Unanswered messages at most (every message the SDK sends has a ref, so each gets one answer). */
const WINDOW = 16;

function utf8Length(s: string): number {
  let n = s.length;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x80) n += c >= 0x800 && (c < 0xd800 || c > 0xdfff) ? 2 : 1; // surrogate pairs: 2 + 2
  }
  return n;
}
const clients = new WeakMap<PulsebaseClient, Realtime>();

/** The realtime connection of `client` (one per client: a second call returns the first one, whose options stay). */
export function createRealtime(client: PulsebaseClient, o: RealtimeOptions = {}): Realtime {
  let rt = clients.get(client);
  if (!rt) clients.set(client, (rt = realtime(client, o)));
  return rt;
}

function realtime(client: PulsebaseClient, o: RealtimeOptions): Realtime {
  const WS = o.WebSocket ?? (globalThis as unknown as { WebSocket?: WebSocketConstructor }).WebSocket;
  if (!WS) throw new Error("No WebSocket in this environment: pass createRealtime(client, { WebSocket }) (e.g. from the ws package).");
  const url = o.url ?? client.baseUrl.replace(/\/+$/, "").replace(/^http/, "ws") + "/api/realtime";
  const base = o.reconnectBase ?? 500;
  const max = o.reconnectMax ?? 30_000;
  const timeoutMs = o.timeoutMs ?? client.timeoutMs ?? 15_000;

  const subs = new Map<string, SubState>();
  const pending = new Map<string, Pending>();
  /**
   * Messages waiting to be sent: for the connection, or for a place in the
   * window of unanswered messages. `bound` ones belong to the connection
   * (subscribes, unsubscribes) and go with it; the others wait for the next.
   */
  let outbox: Array<{ msg: Record<string, unknown>; p: Pending; bound: boolean }> = [];
  const listeners = new Map<string, Set<Listener>>();
  let status: RealtimeStatus = "idle";
  let ws: WebSocketLike | undefined;
  let welcome: Welcome | undefined;
  let attempt = 0;
  /** The previous attempt ended before its welcome (a refused upgrade looks like that in a browser). */
  let failedBeforeWelcome = false;
  let retryAfter: number | undefined;
  let watchdog: ReturnType<typeof setTimeout> | undefined;
  let reconnectTimer: ReturnType<typeof setTimeout> | undefined;
  let generation = 0;
  let nextSub = 0;
  let nextRef = 0;

  const emitTo = (ls: Map<string, Set<Listener>>, event: string, ...args: unknown[]): number => {
    const set = ls.get(event);
    for (const cb of set ? [...set] : []) {
      try {
        (cb as (...a: unknown[]) => void)(...args);
      } catch (e) {
        setTimeout(() => {
          throw e; // the app's bug: reported as uncaught, without breaking delivery
        });
      }
    }
    return set?.size ?? 0;
  };
  const onTo = (ls: Map<string, Set<Listener>>, event: string, cb: Listener) => {
    let set = ls.get(event);
    if (!set) ls.set(event, (set = new Set()));
    set.add(cb);
    return () => void set!.delete(cb);
  };
  const setStatus = (s: RealtimeStatus, code?: number, reason?: string) => {
    status = s;
    emitTo(listeners, "status", { status: s, ...(code !== undefined && { code, reason }) });
  };
  /** An error for a subscription's listeners, else the connection's. */
  const report = (e: PulsebaseError, sub?: SubState) => {
    if (sub && emitTo(sub.listeners, "error", e)) return;
    emitTo(listeners, "error", e);
  };

  function write(msg: Record<string, unknown>): void {
    try {
      ws!.send(JSON.stringify(msg));
    } catch {
      /* closing: the close handler reconnects */
    }
  }

  /** Sends what waits while fewer than WINDOW messages are unanswered (the server refuses more than 32 in flight). */
  function pump(): void {
    while (status === "open" && pending.size < WINDOW && outbox.length) {
      const { msg, p } = outbox.shift()!;
      pending.set(msg.ref as string, p);
      write(msg);
    }
  }

  /** Sends `msg` with a ref; resolves with the server's ok (or pong), rejects with its error or on timeout. */
  function call(msg: Record<string, unknown>, queue = true): Promise<Msg> {
    return new Promise<Msg>((resolve, reject) => {
      const ref = `r${++nextRef}`;
      const p: Pending = {
        resolve, reject,
        timer: setTimeout(() => {
          pending.delete(ref);
          outbox = outbox.filter((x) => x.p !== p);
          reject(new NetworkError(`No realtime answer within ${timeoutMs} ms.`));
        }, timeoutMs),
      };
      const m = { ...msg, ref };
      const limit = welcome?.limits?.message_bytes;
      if (limit && utf8Length(JSON.stringify(m)) > limit) {
        // The server would refuse the frame without its ref (or close the socket past 4 times the limit).
        clearTimeout(p.timer);
        reject(realtimeError({ code: "payload_too_large", message: `A realtime message may be ${limit} bytes.` }));
      } else if (status === "open" || queue) {
        outbox.push({ msg: m, p, bound: !queue });
        if (status === "open") pump();
        else ensure();
      } else {
        clearTimeout(p.timer);
        reject(new NetworkError("The realtime connection is not open."));
      }
    });
  }

  function wireTopic(s: SubState): Record<string, unknown> {
    return s.kind === "channel" && s.presence ? { ...s.topic, presence: { state: s.presence } } : s.topic;
  }

  function subscribe(s: SubState): void {
    const ref = `r${++nextRef}`;
    const seq = ++s.seq;
    const p: Pending = {
      resolve: () => {
        if (s.ended || seq !== s.seq) return; // a later subscribe replaces this one
        s.active = true;
        const ready = s.waiters.filter((w) => w.need <= seq);
        s.waiters = s.waiters.filter((w) => w.need > seq);
        for (const w of ready) w.ok();
      },
      reject: (e) => {
        if (e instanceof NetworkError || s.ended) return; // the connection went: subscribed again on the next one
        // Refused: the subscription is over (not subscribed again).
        s.ended = true;
        subs.delete(s.id);
        for (const w of s.waiters.splice(0)) w.ko(e);
        report(e, s);
      },
    };
    outbox.push({ msg: { type: "subscribe", id: s.id, topic: wireTopic(s), ...(s.cursor && { resume: s.cursor }), ref }, p, bound: true });
    pump();
  }

  /** Subscribes `s` again on the open connection (a presence change that needs a new member, a resync). */
  function resubscribe(s: SubState): void {
    if (status !== "open") return; // the next connection subscribes it as it is now
    s.active = false;
    call({ type: "unsubscribe", id: s.id }, false).catch(() => {});
    subscribe(s);
  }

  function nextAnswer(s: SubState): Promise<void> {
    return new Promise((resolve, reject) => {
      s.waiters.push({ need: s.seq + 1, ok: resolve, ko: reject });
      ensure();
    });
  }

  function ensure(): void {
    if (status === "idle" || status === "closed") void connect();
  }

  async function connect(): Promise<void> {
    const gen = ++generation;
    clearTimeout(reconnectTimer);
    setStatus(status === "reconnecting" ? "reconnecting" : "connecting");
    let id: Identity;
    try {
      // A socket that failed before its welcome may have been refused for its token
      // (a browser cannot see the 401): an authenticated request re-issues it if so.
      if (failedBeforeWelcome) await client.request("/api/realtime/broadcast", { method: "POST", body: {} }).catch(() => {});
      id = await client.ready();
    } catch (e) {
      if (gen === generation) retry(undefined, (e as PulsebaseError).retryAfter);
      return;
    }
    if (gen !== generation) return;
    let sock: WebSocketLike;
    try {
      sock = new WS!(url, [SUBPROTOCOL, `bearer.${id.token}`]);
    } catch (e) {
      retry();
      report(new NetworkError(`Could not open ${url}: ${(e as Error)?.message ?? e}`, e));
      return;
    }
    ws = sock;
    welcome = undefined;
    const token = id.token;
    let welcomed = false;
    let closing: Msg | undefined;
    const alive = (ms: number) => {
      clearTimeout(watchdog);
      watchdog = setTimeout(() => gone(1006, welcomed ? "heartbeat_timeout" : "connect_timeout"), ms);
    };
    alive(timeoutMs); // until the welcome
    const gone = (code: number, reason: string) => {
      if (ws !== sock) return;
      ws = undefined;
      sock.onopen = sock.onmessage = sock.onclose = sock.onerror = null;
      try {
        sock.close();
      } catch {
        /* already closed */
      }
      closed(code, reason, welcomed, token);
    };
    sock.onclose = (ev: { code: number; reason?: string }) => gone(ev.code, String(closing?.reason ?? ev.reason ?? ""));
    sock.onerror = () => {};
    sock.onmessage = (ev: { data: unknown }) => {
      if (ws !== sock) return;
      let m: Msg;
      try {
        m = JSON.parse(String(ev.data)) as Msg;
      } catch {
        return;
      }
      alive(2 * (welcome?.heartbeat_ms ?? timeoutMs / 2));
      if (m.type === "welcome") {
        welcomed = true;
        failedBeforeWelcome = false;
        attempt = 0;
        retryAfter = undefined;
        welcome = m as unknown as Welcome;
        alive(2 * welcome.heartbeat_ms);
        // The subscriptions first, then what was sent meanwhile.
        const queued = outbox;
        outbox = [];
        setStatus("open");
        for (const s of subs.values()) subscribe(s);
        outbox.push(...queued);
        pump();
        emitTo(listeners, "open", welcome);
        return;
      }
      if (m.type === "closing") {
        closing = m;
        return;
      }
      handle(m);
    };
  }

  function closed(code: number, reason: string, welcomed: boolean, token: string): void {
    clearTimeout(watchdog);
    for (const s of subs.values()) s.active = false;
    const lost = [...pending.values(), ...outbox.filter((x) => x.bound).map((x) => x.p)];
    pending.clear();
    outbox = outbox.filter((x) => !x.bound);
    for (const p of lost) {
      clearTimeout(p.timer);
      p.reject(new NetworkError(`The realtime connection closed (${code}) before the answer.`));
    }
    if (!welcomed) failedBeforeWelcome = true;
    if (code === 4001) {
      // The token no longer authenticates: a new one (or a new registration), then at once.
      setStatus("reconnecting", code, reason);
      client.renewToken(token).then(
        () => void (status === "reconnecting" && connect()),
        (e: PulsebaseError) => retry(code, e.retryAfter, reason),
      );
      return;
    }
    retry(code, undefined, reason);
  }

  function retry(code?: number, after?: number, reason?: string): void {
    if (status === "closed" || status === "idle") return;
    setStatus("reconnecting", code, reason);
    clearTimeout(reconnectTimer);
    retryAfter = after ?? retryAfter;
    reconnectTimer = setTimeout(() => void connect(), backoff(attempt++, base, max, retryAfter));
  }

  function handle(m: Msg): void {
    const ref = typeof m.ref === "string" ? m.ref : undefined;
    const p = ref !== undefined ? pending.get(ref) : undefined;
    if (p) {
      if (m.type === "ok" || m.type === "pong" || m.type === "error") {
        pending.delete(ref!);
        clearTimeout(p.timer);
        if (m.type === "error") p.reject(realtimeError(m));
        else p.resolve(m);
        pump();
        return;
      }
    }
    const s = typeof m.id === "string" ? subs.get(m.id) : undefined;
    if (m.type === "error") return report(realtimeError(m), s);
    if (!s) return;
    switch (m.type) {
      case "broadcast":
        emitTo(s.listeners, "broadcast", { channel: m.channel, event: m.event, payload: m.payload, from: m.from });
        return;
      case "presence_state": {
        const before = new Map(s.members.map((x) => [x.member, x]));
        s.members = (m.members as PresenceMember[]) ?? [];
        const now = new Set(s.members.map((x) => x.member));
        const joins = s.members.filter((x) => !before.has(x.member));
        const leaves = [...before.values()].filter((x) => !now.has(x.member));
        emitTo(s.listeners, "presence", { kind: "state", members: [...s.members], joins, leaves });
        return;
      }
      case "presence_diff": {
        const joins = (m.joins as PresenceMember[]) ?? [];
        const leaves = (m.leaves as PresenceMember[]) ?? [];
        const gone = new Set([...leaves, ...joins].map((x) => x.member));
        s.members = [...s.members.filter((x) => !gone.has(x.member)), ...joins.filter((j) => !leaves.some((l) => l.member === j.member))];
        emitTo(s.listeners, "presence", { kind: "diff", members: [...s.members], joins, leaves });
        return;
      }
      case "change": {
        const { type: _t, id: _i, ...change } = m;
        if (typeof m.cursor === "string") s.cursor = m.cursor;
        emitTo(s.listeners, "change", change);
        return;
      }
      case "resync":
        // The resume cursor is older than the server's window: what was missed is unknown. The
        // subscription goes on from now (the cursor stays until the next change, so a reconnect
        // before it is told again), and the app reloads what it shows.
        emitTo(s.listeners, "resync");
        return;
    }
  }

  function add(kind: SubState["kind"], topic: Record<string, unknown>, extra: Partial<SubState> = {}): SubState {
    const s: SubState = { id: `s${++nextSub}`, kind, topic, members: [], listeners: new Map(), active: false, seq: 0, waiters: [], ended: false, ...extra };
    subs.set(s.id, s);
    return s;
  }

  /** The handle's common part; subscribes `s` (now when open, else on the connection it opens). */
  function handleOf<T extends object>(s: SubState, more: T) {
    const subscribed = nextAnswer(s);
    if (status === "open") subscribe(s);
    subscribed.catch(() => {}); // awaited or not: a refusal also goes to the "error" listeners
    // Descriptors, not values: `members` and `cursor` are getters.
    return Object.defineProperties({
      id: s.id,
      subscribed,
      on: (event: string, cb: Listener) => onTo(s.listeners, event, cb),
      unsubscribe() {
        if (s.ended) return;
        s.ended = true;
        subs.delete(s.id);
        for (const w of s.waiters.splice(0)) w.ko(new PulsebaseError("Unsubscribed.", 0, "unsubscribed"));
        // Also when its subscribe is still unanswered: the server handles them in order.
        if (status === "open") call({ type: "unsubscribe", id: s.id }, false).catch(() => {});
      },
    }, Object.getOwnPropertyDescriptors(more));
  }

  function changes(kind: "table" | "cms", topic: Record<string, unknown>, resume?: string): ChangeSubscription<never> {
    const s = add(kind, topic, { cursor: resume });
    return handleOf(s, {
      get cursor() {
        return s.cursor;
      },
    }) as unknown as ChangeSubscription<never>;
  }

  // A browser back online: try at once instead of waiting out the backoff.
  const g = globalThis as unknown as { addEventListener?: (type: string, cb: () => void) => void };
  g.addEventListener?.("online", () => {
    if (status === "reconnecting" && !ws) void connect();
  });

  const broadcast = (channel: string, event: string, payload?: unknown) =>
    call({ type: "broadcast", channel, event, payload: payload ?? null }).then(() => undefined);

  return {
    get status() {
      return status;
    },
    get welcome() {
      return welcome;
    },
    channel(name, co = {}) {
      const s = add("channel", { kind: "channel", channel: name, self: co.self ?? false }, { presence: co.presence });
      const ch = handleOf(s, {
        name,
        get members() {
          return [...s.members];
        },
        send: (event: string, payload?: unknown) => broadcast(name, event, payload),
        async track(state: object) {
          if (s.ended) throw new PulsebaseError("Unsubscribed.", 0, "unsubscribed");
          const joined = s.presence !== undefined;
          s.presence = state;
          if (status === "open" && s.active && joined) {
            await call({ type: "presence", id: s.id, state }, false);
            return;
          }
          const next = nextAnswer(s);
          resubscribe(s);
          await next;
        },
        async untrack() {
          if (s.ended || s.presence === undefined) return;
          s.presence = undefined;
          const next = nextAnswer(s);
          resubscribe(s);
          await next;
        },
      });
      return ch as unknown as Channel<never, never>;
    },
    table(name, to = {}) {
      return changes("table", { kind: "table", table: name, ...(to.filter && { filter: to.filter }) }, to.resume);
    },
    cms(contentType, co = {}) {
      return changes("cms", { kind: "cms", content_type: contentType }, co.resume) as unknown as ChangeSubscription<never, CmsChange<never>>;
    },
    broadcast,
    on: (event: string, cb: Listener) => onTo(listeners, event, cb),
    close() {
      generation++;
      clearTimeout(reconnectTimer);
      clearTimeout(watchdog);
      for (const s of subs.values()) {
        s.ended = true;
        for (const w of s.waiters.splice(0)) w.ko(new PulsebaseError("The realtime connection was closed.", 0, "closed"));
      }
      subs.clear();
      for (const { p } of outbox) {
        clearTimeout(p.timer);
        p.reject(new NetworkError("The realtime connection was closed."));
      }
      outbox = [];
      const sock = ws;
      ws = undefined;
      status = "closed";
      if (sock) {
        sock.onopen = sock.onmessage = sock.onclose = sock.onerror = null;
        try {
          sock.close(1000, "client");
        } catch {
          /* not open yet */
        }
      }
      for (const p of pending.values()) {
        clearTimeout(p.timer);
        p.reject(new NetworkError("The realtime connection was closed."));
      }
      pending.clear();
      attempt = 0;
      failedBeforeWelcome = false;
      welcome = undefined;
      setStatus("closed", 1000, "client");
    },
  } as Realtime;
}
