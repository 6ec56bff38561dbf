// Sessions, events, logs and breadcrumbs with an offline queue.
//
// Every record goes to a per-kind queue kept in the storage adapter. A sender
// takes up to `batchSize` items whose session the server knows, stores them
// as ONE batch (an Idempotency-Key and the exact body) before the first send,
// and resends that same key and body until the server answers: a retry after
// a lost response, even after a reload, counts once. Sessions recorded while
// offline are created with /api/session/batch before their items are sent.
import type { PulsebaseClient } from "./client.js";
import { isRetryable, ValidationError, type PulsebaseError } from "./errors.js";
import { backoff } from "./http.js";
import { randomId } from "./ids.js";
import { after } from "./storage.js";

export type Kind = "events" | "logs" | "breadcrumbs";

export interface AnalyticsOptions {
  /** Send when this many items are queued (default 50). */
  flushAt?: number;
  /** Send at least this often while items are queued, in ms (default 10,000). */
  flushInterval?: number;
  /** Items per batch request, 1-100 (default 100, the server's maximum). */
  batchSize?: number;
  /** Items kept per kind while unsent (default 5,000); beyond it the oldest unsent items are dropped. */
  maxQueueSize?: number;
  /** A session ends after this much inactivity, in ms (default 30 minutes). */
  sessionTimeout?: number;
  /** `app_version` of logs (default "unknown"). */
  appVersion?: string;
  /** Breadcrumbs kept for the context of logs (default 20). */
  maxBreadcrumbs?: number;
  /** First retry delay, in ms (default 1,000); doubles up to `retryMax` (default 60,000). */
  retryBase?: number;
  retryMax?: number;
  /** Follow the page or process lifecycle (end the session when hidden or exiting; default true). */
  lifecycle?: boolean;
  /** React Native: pass `AppState` to end the session when the app goes to the background. */
  appState?: { addEventListener(type: "change", cb: (state: string) => void): unknown };
  /** Failed sends and refused items (the SDK never throws from track/log/breadcrumb). */
  onError?: (err: unknown) => void;
  /** Items dropped: queue full, or refused by the server as invalid. */
  onDrop?: (kind: Kind, count: number, reason: string) => void;
}

export interface LogInput {
  classFQN: string;
  message: string;
  type?: "error" | "crash";
  stackTrace?: string;
  fileName?: string;
  lineNumber?: number;
  context?: Record<string, unknown>;
  appVersion?: string;
}

export interface CaptureOptions {
  type?: "error" | "crash";
  context?: Record<string, unknown>;
  fileName?: string;
  lineNumber?: number;
}

export interface AnalyticsStats {
  queued: Record<Kind, number>;
  sent: Record<Kind, number>;
  dropped: number;
  session: { id: string; serverId?: number } | undefined;
}

export interface Analytics {
  readonly client: PulsebaseClient;
  track(name: string, metadata?: Record<string, unknown>): void;
  breadcrumb(name: string): void;
  log(entry: LogInput): void;
  /** An Error (or anything thrown) as a log; `type: "crash"` is stored at once and sent at once. */
  captureError(err: unknown, o?: CaptureOptions): void;
  /** Sends everything queued now; rejects with the error if the server could not take it (it stays queued). */
  flush(): Promise<void>;
  /** Ends the session, makes a last flush and stops timers and listeners. */
  shutdown(): Promise<void>;
  /** Ends the current session now (the next activity starts a new one). */
  endSession(): void;
  /** The page or app went to the background: end the session, store everything, send what can be sent. */
  background(): void;
  stats(): AnalyticsStats;
  /** Resolves once the stored queue is loaded. */
  readonly loaded: Promise<void>;
}

// s: local id, t: start, l: last activity, e: end, v: server id, c: consumer, d: server has its end, r: re-created once
interface Session { i: string; t: number; l: number; e?: number; v?: number; c?: number; d?: 1; r?: 1 }
interface Item { s?: string; b: Record<string, unknown> }
// k: Idempotency-Key, n: items, b: the exact body, s: [local, server] ids of the sessions it names
interface Batch { k: string; n: number; b: string; s: [string, number][] }
interface Queue { q: Item[]; o?: Batch }

const KINDS: Kind[] = ["events", "logs", "breadcrumbs"];
const PATH: Record<Kind, string> = { events: "/api/events/batch", logs: "/api/log/batch", breadcrumbs: "/api/breadcrumbs/batch" };

// The server's limits (docs/analytics.md): longer strings are cut, NUL removed.
const str = (v: unknown, max: number) => String(v ?? "").split("\0").join("").slice(0, max);

function unref<T>(t: T): T {
  (t as { unref?: () => void }).unref?.();
  return t;
}

interface G {
  document?: { visibilityState?: string };
  addEventListener?(t: string, f: () => void): void;
  removeEventListener?(t: string, f: () => void): void;
  process?: { on?(e: string, f: () => void): void; off?(e: string, f: () => void): void };
}

export function createAnalytics(client: PulsebaseClient, o: AnalyticsOptions = {}): Analytics {
  const flushAt = o.flushAt ?? 50;
  const size = Math.max(1, Math.min(100, o.batchSize ?? 100));
  const max = Math.max(size * 2, o.maxQueueSize ?? 5000);
  const timeout = o.sessionTimeout ?? 1_800_000;
  const st = client.storage;
  const pre = `pb:${client.appKey}:`;
  const Q = { events: { q: [] }, logs: { q: [] }, breadcrumbs: { q: [] } } as Record<Kind, Queue>;
  // l: sessions, c: current, o: server clock minus ours
  let S: { l: Session[]; c?: string; o: number } = { l: [], o: 0 };
  const lim = { events: size, logs: size, breadcrumbs: size };
  const sent = { events: 0, logs: 0, breadcrumbs: 0 };
  const crumbs: { name: string; at: string }[] = [];
  const dirty = new Set<string>();
  const starting = new Map<string, Promise<void>>();
  const report = (e: unknown) => o.onError?.(e);
  let dropped = 0;
  let closed = false;
  let hidden = false;
  let attempt = 0;
  let retryAt = 0;
  let wTimer: ReturnType<typeof setTimeout> | undefined;
  let rTimer: ReturnType<typeof setTimeout> | undefined;
  let isLoaded = false;
  const waiting: (() => void)[] = [];

  const drop = (k: Kind, n: number, why: string) => {
    dropped += n;
    if (n) o.onDrop?.(k, n, why);
  };
  const iso = (t: number) => new Date(t + S.o).toISOString();
  const cur = () => S.l.find((s) => s.i === S.c);
  const sess = (i?: string) => S.l.find((s) => s.i === i);

  // --- storage: coalesced writes (at most one per key every 100 ms), and
  // synchronous ones with a synchronous adapter when the page or process goes.
  function writeNow(): Promise<void> | void {
    clearTimeout(wTimer);
    wTimer = undefined;
    const ps: Promise<void>[] = [];
    for (const k of dirty) {
      dirty.delete(k);
      try {
        const r = st.set(pre + k, JSON.stringify(k === "s" ? S : Q[k as Kind]));
        if (r instanceof Promise) ps.push(r.catch(report));
      } catch (e) {
        report(e); // quota: the queue stays in memory
      }
    }
    if (ps.length) return Promise.all(ps).then(() => undefined);
  }
  function mark(k: string) {
    dirty.add(k);
    wTimer ??= unref(setTimeout(writeNow, 100));
  }

  const run = (f: () => void) => (isLoaded ? f() : waiting.push(f));

  // --- sessions
  function end(s: Session, t: number) {
    s.e = Math.max(t, s.t);
    if (S.c === s.i) S.c = undefined;
    mark("s");
  }
  function touch(t: number): Session {
    let c = cur();
    if (c && t - c.l > timeout) end(c, c.l);
    if (!c || c.e !== undefined) {
      c = { i: randomId(), t, l: t };
      S.l.push(c);
      S.c = c.i;
      start(c);
    }
    c.l = Math.max(c.l, t);
    mark("s");
    return c;
  }
  function start(s: Session) {
    const t0 = Date.now();
    const p = client
      .request<{ session_id: number; started_at: string }>("/api/session/start", { body: {} })
      .then((r) => {
        const at = Date.parse(r.data.started_at);
        S.o = Math.round(at - (t0 + Date.now()) / 2);
        // The server's start (it keeps microseconds: +1 ms), so the end sent later is never before it.
        s.t = at + 1 - S.o;
        s.v = r.data.session_id;
        s.c = client.identity?.consumerId;
        mark("s");
      }, () => undefined) // offline: sent later with /api/session/batch
      .finally(() => starting.delete(s.i));
    starting.set(s.i, p);
  }

  async function syncSessions() {
    await Promise.all(starting.values());
    const consumer = client.identity!.consumerId;
    for (const s of S.l) {
      // Resolved under a consumer this device no longer is (registered again): create it again.
      if (s.v !== undefined && s.c !== undefined && s.c !== consumer) {
        delete s.v;
        delete s.d;
      }
    }
    // Sessions the server does not know: ended ones, and the current one if
    // it began offline (its offline part is closed now and the next activity
    // starts a new session, so that both keep their true times).
    const todo = S.l.filter((s) => s.v === undefined && !starting.has(s.i)).slice(0, 100);
    if (todo.length) {
      const now = Date.now();
      const r = await client.request<{ session_id: number }[]>("/api/session/batch", {
        body: { sessions: todo.map((s) => ({ started_at: iso(s.t), ended_at: iso(s.e ?? Math.max(now, s.t)) })) },
      });
      todo.forEach((s, i) => {
        s.v = r.data[i]!.session_id;
        s.c = consumer;
        s.d = 1;
        if (s.e === undefined) end(s, now);
      });
      mark("s");
    }
    for (const s of S.l) {
      if (s.v === undefined || s.d || s.e === undefined) continue;
      const body: Record<string, unknown> = { session_id: s.v, timestamp: iso(s.e) };
      for (;;) {
        try {
          await client.request("/api/session/end", { body });
        } catch (e) {
          // A clock behind the server's start: let the server's time end it.
          if (e instanceof ValidationError && body.timestamp) {
            delete body.timestamp;
            continue;
          }
          // 404 gone, 409 already ended: nothing left to do for it.
          if (![404, 409].includes((e as PulsebaseError).status)) throw e;
        }
        break;
      }
      s.d = 1;
      mark("s");
    }
  }

  // --- records
  function add(k: Kind, b: Record<string, unknown>, crash?: boolean) {
    const t = Date.now();
    run(() => {
      if (closed) return;
      const q = Q[k];
      q.q.push({ s: touch(t).i, b: { ...b, created_at: iso(t) } });
      const over = q.q.length + (q.o?.n ?? 0) - max;
      if (over > 0) drop(k, q.q.splice(0, over).length, "queue full");
      mark(k);
      if (crash) {
        writeNow();
        kick(true);
      } else if (KINDS.reduce((n, x) => n + Q[x].q.length, 0) >= flushAt) kick();
    });
  }

  function log(e: LogInput) {
    let context = e.context;
    if (context && JSON.stringify(context).length > 65_536) context = { ...context, breadcrumbs: crumbs.slice(-3) };
    if (context && JSON.stringify(context).length > 65_536) context = { truncated: "context over 64 KiB" };
    const b: Record<string, unknown> = {
      app_version: str(e.appVersion ?? o.appVersion ?? "unknown", 255),
      classFQN: str(e.classFQN, 1024) || "Error",
      message: str(e.message, 16_384) || "(no message)",
      type: e.type ?? "error",
    };
    if (e.stackTrace) b.stack_trace = str(e.stackTrace, 262_144);
    if (e.fileName) b.file_name = str(e.fileName, 1024);
    if (e.lineNumber! >= 0) b.line_number = Math.floor(e.lineNumber!);
    if (context) b.context = context;
    add("logs", b, e.type === "crash");
  }

  // --- sending
  const work = () =>
    KINDS.some((k) => Q[k].q.length || Q[k].o) || S.l.some((s) => !starting.has(s.i) && (s.v === undefined ? s.e !== undefined : !s.d && s.e !== undefined));

  let tail: Promise<void> = Promise.resolve();
  let next: Promise<void> | undefined;
  /** One pass after the one running (passes never overlap; calls made before it starts share it). */
  function pump(): Promise<void> {
    if (!next) {
      const go = async () => {
        next = undefined;
        try {
          await pass();
          attempt = 0;
          retryAt = 0;
        } catch (e) {
          report(e);
          const d = backoff(attempt++, o.retryBase ?? 1000, o.retryMax ?? 60_000, (e as PulsebaseError).retryAfter);
          retryAt = Date.now() + d;
          clearTimeout(rTimer);
          rTimer = unref(setTimeout(() => kick(true), d));
          throw e;
        }
      };
      tail = next = tail.then(go, go);
      next.catch(() => undefined);
    }
    return next;
  }
  function kick(now?: boolean) {
    if (isLoaded && (now || Date.now() >= retryAt)) pump().catch(() => undefined);
  }

  async function pass() {
    if (!work()) return;
    await client.ready();
    // Again when a refused batch put items back (e.g. a session to create again).
    for (let i = 0; i < 3 && work(); i++) {
      await syncSessions();
      for (const k of KINDS) await sendKind(k);
    }
    // Forget sessions the server has whole that nothing queued still names.
    const named = new Set<string | undefined>(KINDS.flatMap((k) => [...Q[k].q.map((i) => i.s), ...(Q[k].o?.s ?? []).map((x) => x[0])]));
    const before = S.l.length;
    S.l = S.l.filter((s) => !s.d || s.i === S.c || named.has(s.i));
    if (S.l.length !== before) mark("s");
  }

  async function sendKind(k: Kind) {
    const q = Q[k];
    for (;;) {
      if (!q.o) {
        const take: Record<string, unknown>[] = [];
        const names = new Map<string, number>();
        const keep: Item[] = [];
        let lost = 0;
        for (const it of q.q) {
          const s = sess(it.s);
          if (it.s && !s) lost++;
          else if (take.length >= lim[k] || (s && s.v === undefined)) keep.push(it);
          else {
            take.push(s ? { ...it.b, session_id: s.v } : it.b);
            if (s) names.set(s.i, s.v!);
          }
        }
        drop(k, lost, "session lost");
        q.q = keep;
        if (!take.length) return;
        // Stored before the first send: a retry, even after a reload, resends this key with this body.
        q.o = { k: randomId(), n: take.length, b: JSON.stringify({ [k]: take }), s: [...names] };
        mark(k);
        await writeNow();
      }
      const b = q.o;
      try {
        await client.request(PATH[k], { raw: b.b, headers: { "idempotency-key": b.k }, keepalive: hidden && b.b.length < 60_000 });
        sent[k] += b.n;
      } catch (e) {
        if (isRetryable(e) || (e as PulsebaseError).status === 401) throw e;
        report(e);
        // Refused whole, nothing of it stored (DECISIONS 6): keep what can be sent, as a new batch.
        q.q.unshift(...repair(k, b, e as PulsebaseError));
      }
      delete q.o;
      mark(k);
    }
  }

  function repair(k: Kind, b: Batch, e: PulsebaseError): Item[] {
    const items: (Item | undefined)[] = (JSON.parse(b.b) as Record<Kind, Record<string, unknown>[]>)[k].map((w) => ({
      s: b.s.find((x) => x[1] === w.session_id)?.[0],
      b: w,
    }));
    const all = items.length;
    if (e.status === 413 && b.n > 1) {
      lim[k] = b.n >> 1; // too large to queue: smaller batches
    } else if (e instanceof ValidationError) {
      for (const path in e.fields) {
        const m = /^\w+\.(\d+)\.(\w+)/.exec(path);
        const it = m && items[+m[1]!];
        if (!it) return drop(k, all, "refused"), [];
        const s = sess(it.s);
        if (m[2] === "created_at") delete it.b.created_at; // a clock ahead of the server's: server time
        else if (m[2] === "session_id" && s && !(s.r && s.v !== undefined)) {
          // Not this consumer's (any more): create it again under the current one, once.
          if (s.v !== undefined) Object.assign(s, { v: undefined, d: undefined, r: 1 });
        } else items[+m[1]!] = undefined;
      }
    } else {
      return drop(k, all, "refused"), [];
    }
    const keep = items.filter((x): x is Item => !!x);
    drop(k, all - keep.length, "refused");
    for (const it of keep) delete it.b.session_id;
    return keep;
  }

  // --- lifecycle
  function background() {
    hidden = true;
    const c = cur();
    if (c) end(c, Date.now());
    writeNow();
    kick(true);
  }
  const g = globalThis as G;
  const onVis = () => (g.document?.visibilityState === "hidden" ? background() : (hidden = false));
  const onOnline = () => kick(true);
  let exitFlushed = false;
  const onBeforeExit = () => {
    if (exitFlushed || !work()) return;
    exitFlushed = true; // once: the flush itself ends in another beforeExit
    background();
  };
  const onExit = () => {
    const c = cur();
    if (c) end(c, Date.now());
    writeNow();
  };
  const lc = o.lifecycle !== false;
  if (lc && g.document && g.addEventListener) {
    g.addEventListener("visibilitychange", onVis);
    g.addEventListener("pagehide", background);
    g.addEventListener("online", onOnline);
  } else if (lc && g.process?.on) {
    g.process.on("beforeExit", onBeforeExit);
    g.process.on("exit", onExit);
  }
  o.appState?.addEventListener("change", (s) => (s === "active" ? (hidden = false) : s === "background" && background()));
  const iTimer = unref(
    setInterval(() => {
      const c = cur();
      if (c && Date.now() - c.l > timeout) end(c, c.l);
      if (work()) kick();
    }, o.flushInterval ?? 10_000),
  );

  // --- loading (last: it may pump at once)
  const loads = ["s", ...KINDS].map((k) =>
    after(st.get(pre + k), (v) => {
      try {
        if (v && k === "s") S = JSON.parse(v);
        else if (v) Q[k as Kind] = JSON.parse(v);
      } catch (e) {
        report(e);
      }
    }),
  );
  function onLoaded() {
    // Sessions of a page or process that went without ending them end at their last activity.
    for (const s of S.l) s.e ??= s.l;
    S.c = undefined;
    isLoaded = true;
    for (const f of waiting.splice(0)) f();
    if (work()) kick();
  }
  const loaded = loads.some((p) => p instanceof Promise)
    ? Promise.all(loads).then(onLoaded, (e) => (report(e), onLoaded()))
    : (onLoaded(), Promise.resolve());

  return {
    client,
    loaded,
    track(name, metadata = {}) {
      const md: Record<string, string> = {};
      let n = 0;
      for (const key in metadata) {
        const v = metadata[key];
        if (n++ < 100) md[str(key, 255)] = str(typeof v === "object" && v ? JSON.stringify(v) : v, 4096);
      }
      if (name) add("events", { name: str(name, 255), metadata: md });
      else report(new TypeError("track: a name is required"));
    },
    breadcrumb(name) {
      const at = iso(Date.now());
      crumbs.push({ name: str(name, 255), at });
      if (crumbs.length > (o.maxBreadcrumbs ?? 20)) crumbs.shift();
      if (name) add("breadcrumbs", { name: str(name, 255) });
    },
    log,
    captureError(err, c = {}) {
      const e = (err ?? {}) as { name?: string; message?: string; stack?: string; constructor?: { name?: string } };
      const stack = typeof e.stack === "string" ? e.stack : "";
      // The first frame with a location: "at f (file:line:col)", "at file:line:col", "f@file:line:col".
      const m = /(?:\(|@|at )([^\s()@]+?):(\d+):\d+\)?\s*$/m.exec(stack);
      const cls = e.name && e.name !== "Error" ? e.name : e.constructor?.name && e.constructor.name !== "Object" ? e.constructor.name : "Error";
      log({
        classFQN: typeof err === "object" && err ? cls : typeof err,
        message: typeof err === "object" && err ? String(e.message ?? err) : String(err),
        type: c.type,
        stackTrace: stack,
        fileName: c.fileName || m?.[1],
        lineNumber: c.lineNumber ?? (m ? +m[2]! : undefined),
        context: { ...c.context, breadcrumbs: crumbs.slice() },
      });
    },
    async flush() {
      await loaded;
      return pump();
    },
    async shutdown() {
      closed = true;
      clearInterval(iTimer);
      clearTimeout(rTimer);
      if (lc) {
        g.removeEventListener?.("visibilitychange", onVis);
        g.removeEventListener?.("pagehide", background);
        g.removeEventListener?.("online", onOnline);
        g.process?.off?.("beforeExit", onBeforeExit);
        g.process?.off?.("exit", onExit);
      }
      await loaded;
      const c = cur();
      if (c) end(c, Date.now());
      try {
        await pump();
      } finally {
        await writeNow();
      }
    },
    endSession() {
      run(() => {
        const c = cur();
        if (c) end(c, Date.now());
        kick();
      });
    },
    background,
    stats() {
      const c = cur();
      return {
        queued: { events: Q.events.q.length + (Q.events.o?.n ?? 0), logs: Q.logs.q.length + (Q.logs.o?.n ?? 0), breadcrumbs: Q.breadcrumbs.q.length + (Q.breadcrumbs.o?.n ?? 0) },
        sent: { ...sent },
        dropped,
        session: c && { id: c.i, serverId: c.v },
      };
    },
  };
}
