// CMS change subscriptions (docs/realtime.md, "CMS changes"): an entry of a
// content type published, updated while published, or unpublished (or
// deleted while published) reaches the subscribers of that content type on
// every server. The server where the authoring call ran renders the entry
// once, as the read API renders it (GET /api/v1/<type>/<uuid>, through
// deps.render), and appends the change to the CMS feed of the change log
// (change-log.ts: the same JetStream stream as table changes, its own
// subjects; an in-process ring without NATS); every server follows the feed
// and sends each change to its subscribers of the content type. Resume works
// as for tables: the changes after the cursor from the log, then the live
// ones, each exactly once per subscription.
import { randomUUID } from "node:crypto";
import { appError } from "../../kernel/errors.js";
import { sleep } from "../../kernel/retry.js";
import type { RealtimeConnection, Subscription } from "./connection.js";
import { MAX_REPLAY, type ChangeLog, type LogEntry, type LogFeed } from "./change-log.js";
import type { CmsTopic } from "./protocol.js";

export type CmsOp = "publish" | "update" | "unpublish";

/** One CMS change as the log stores it: the entry rendered once (publish, update). */
export interface CmsLogChange {
  /** Unique per change (the JetStream message id). */
  uid: string;
  content_type: string;
  id: string;
  op: CmsOp;
  entry?: Record<string, unknown>;
  at: string;
}

/** The authoring side's change (the CMS capability's CmsChange, structurally). */
export interface AuthoredChange {
  collection: string;
  operation: string;
  before: Record<string, unknown> | null;
  after: Record<string, unknown> | null;
}

/** CMS changes in the realtime stream: `<prefix>.<appId>.cms`. */
export const CMS_FEED: LogFeed<CmsLogChange> = {
  subject: (prefix, appId) => `${prefix}.${appId}.cms`,
  filter: (prefix) => `${prefix}.*.cms`,
  msgId: (appId, c) => `cms:${appId}:${c.uid}`,
};

export interface CmsFeedDeps {
  log: ChangeLog<CmsLogChange>;
  /** Whether the application has the content type (any entries or none). */
  hasContentType(appId: number, slug: string): Promise<boolean>;
  /** The published entry as the read API renders it; undefined when it is not published (any more). */
  render(appId: number, id: string): Promise<Record<string, unknown> | undefined>;
  onError(err: unknown): void;
}

export interface CmsSubscription extends Subscription {
  topic: CmsTopic;
  /** The log sequence of the last change looked at for this subscription. */
  cursor: number;
  /** While a resume replays: the live changes that arrived meanwhile. */
  pending?: Array<LogEntry<CmsLogChange>>;
}

const json = JSON.stringify;
/** Attempts to store an authored change (NATS briefly away); the message id stores a retried one once. */
const APPEND_ATTEMPTS = 4;

/** What subscribers see of an authoring change; undefined: nothing (a draft's change, a creation before its publish). */
export function cmsOpOf(c: AuthoredChange): CmsOp | undefined {
  switch (c.operation) {
    case "published":
      return "publish";
    case "unpublished":
      return "unpublish";
    case "updated":
      return c.after?.published === true ? "update" : undefined;
    case "deleted":
      // gone from the read API: for subscribers the entry is unpublished
      return c.before?.published === true ? "unpublish" : undefined;
    default:
      return undefined;
  }
}

export class CmsFeed {
  /** appId -> content type -> subscriptions of this server. */
  private readonly apps = new Map<number, Map<string, Set<CmsSubscription>>>();
  /** Per application: deliveries here, and renders and appends of changes authored here, one after another. */
  private readonly chains = new Map<number, Promise<void>>();
  private readonly sources = new Map<number, Promise<void>>();
  private stopFollow: (() => void) | undefined;
  private delivered = 0;

  constructor(private readonly deps: CmsFeedDeps) {}

  start(): void {
    this.stopFollow ??= this.deps.log.follow((e) => this.onEntry(e));
  }

  stop(): void {
    this.stopFollow?.();
    this.stopFollow = undefined;
  }

  stats(): { changes: number } {
    return { changes: this.delivered };
  }

  /**
   * A change committed by the CMS authoring API on this server: rendered
   * (once) and appended to the log, after the application's earlier changes
   * of this server. Resolves once stored, or once the first attempt failed:
   * the append is then retried a few times behind it (keeping the order),
   * and a last failure is reported (onError), never thrown.
   */
  authored(appId: number, change: AuthoredChange): Promise<void> {
    const op = cmsOpOf(change);
    const id = (change.after ?? change.before)?.id;
    if (!op || typeof id !== "string") return Promise.resolve();
    // the authoring call waits for the first attempt only (NATS away: the retries go on behind it)
    let firstTry!: () => void;
    const tried = new Promise<void>((resolve) => (firstTry = resolve));
    const run = async () => {
      let entry: Record<string, unknown> | undefined;
      if (op !== "unpublish") {
        // rendered now, after the commit: an entry unpublished (or deleted) since is
        // not sent; its unpublish follows
        entry = await this.deps.render(appId, id);
        if (!entry) return firstTry();
      }
      const c: CmsLogChange = { uid: randomUUID(), content_type: change.collection, id, op, ...(entry && { entry }), at: new Date().toISOString() };
      for (let attempt = 1; ; attempt++) {
        try {
          await this.deps.log.append(appId, [c]);
          return firstTry();
        } catch (err) {
          firstTry();
          if (attempt >= APPEND_ATTEMPTS) throw err;
          await sleep(200 * 2 ** (attempt - 1));
        }
      }
    };
    const next = (this.sources.get(appId) ?? Promise.resolve()).then(run).catch((err: unknown) => {
      firstTry();
      this.deps.onError(err);
    });
    this.sources.set(appId, next);
    void next.finally(() => {
      if (this.sources.get(appId) === next) this.sources.delete(appId);
    });
    return tried;
  }

  /** Opens a CMS subscription (the hub checked the id and the connection's limit): `subscribed`, then with `resume` the missed changes or `resync`. */
  async subscribe(conn: RealtimeConnection, id: string, topic: CmsTopic, resume: string | undefined, reserve: () => boolean): Promise<CmsSubscription | undefined> {
    const appId = conn.principal.appId;
    if (!(await this.deps.hasContentType(appId, topic.content_type))) throw appError("not_found", `Content type ${topic.content_type} does not exist.`);
    if (conn.closed || !reserve()) return undefined;
    const sub: CmsSubscription = { id, conn, topic, cursor: 0, ...(resume !== undefined && { pending: [] }) };
    conn.subs.set(id, sub);
    let app = this.apps.get(appId);
    if (!app) this.apps.set(appId, (app = new Map()));
    let subs = app.get(topic.content_type);
    if (!subs) app.set(topic.content_type, (subs = new Set()));
    subs.add(sub);
    conn.send("subscribed", json({ type: "subscribed", id, topic: { kind: "cms", content_type: topic.content_type } }));
    if (resume !== undefined) await this.resume(sub, resume);
    return sub;
  }

  unsubscribe(sub: CmsSubscription): void {
    const appId = sub.conn.principal.appId;
    const app = this.apps.get(appId);
    const subs = app?.get(sub.topic.content_type);
    if (!app || !subs?.delete(sub)) return;
    if (subs.size === 0) app.delete(sub.topic.content_type);
    if (app.size === 0) this.apps.delete(appId);
  }

  private async resume(sub: CmsSubscription, cursor: string): Promise<void> {
    const appId = sub.conn.principal.appId;
    let replay: Array<LogEntry<CmsLogChange>> | "resync";
    try {
      replay = await this.deps.log.replay(appId, cursor, MAX_REPLAY);
    } catch (err) {
      this.deps.onError(err);
      replay = "resync";
    }
    this.enqueue(appId, () => {
      const pending = sub.pending ?? [];
      sub.pending = undefined;
      if (replay === "resync") {
        sub.conn.send("resync", json({ type: "resync", id: sub.id }));
        this.deliver(pending, [sub]);
        return;
      }
      const seen = new Set<number>();
      const all = [...replay, ...pending].filter((e) => !seen.has(e.seq) && seen.add(e.seq)).sort((a, b) => a.seq - b.seq);
      this.deliver(all.filter((e) => e.change.content_type === sub.topic.content_type), [sub]);
    });
  }

  private onEntry(e: LogEntry<CmsLogChange>): void {
    const subs = this.apps.get(e.appId)?.get(e.change.content_type);
    if (!subs?.size) return;
    const live: CmsSubscription[] = [];
    for (const s of subs) {
      if (s.pending) s.pending.push(e);
      else live.push(s);
    }
    if (live.length) this.enqueue(e.appId, () => this.deliver([e], live));
  }

  private enqueue(appId: number, fn: () => void): void {
    const next = (this.chains.get(appId) ?? Promise.resolve()).then(fn).catch((err: unknown) => this.deps.onError(err));
    this.chains.set(appId, next);
    void next.finally(() => {
      if (this.chains.get(appId) === next) this.chains.delete(appId);
    });
  }

  private deliver(entries: Array<LogEntry<CmsLogChange>>, targets: CmsSubscription[]): void {
    for (const e of entries) {
      const c = e.change;
      const cursor = this.deps.log.cursorOf(e);
      // The message's JSON is built once; each subscriber's frame adds its subscription id.
      const tail = `,"op":${json(c.op)},"content_type":${json(c.content_type)},"entry":${json(c.entry ?? { id: c.id })},"cursor":${json(cursor)},"at":${json(c.at)}}`;
      for (const s of targets) {
        if (s.conn.closed || e.seq <= s.cursor) continue;
        s.cursor = e.seq;
        if (s.conn.send("change", `{"type":"change","id":${json(s.id)}${tail}`, cursor)) this.delivered++;
      }
    }
  }
}
