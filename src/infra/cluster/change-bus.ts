// The change bus: how a change made through one server process reaches the
// caches of every other one (CMS content, consumer revocation, an app's key
// or plan, functions, database links). publish(kind, appId, itemId?) tells this process's
// subscribers at once, then
//   - records the change in PostgreSQL: one row per (application, kind)
//     whose version is bumped (cluster_changes), awaited, so once the call
//     that made the change answers, every server will see it;
//   - sends it over NATS (the fast path, milliseconds), if connected.
// Every server reads the rows changed since its last read every pollMs
// (one indexed query for all applications) and tells its subscribers of any
// version it has not seen. NATS messages carry the version they announce: a
// server that heard every version of a row over NATS has nothing left to do
// when it reads the row; one that missed a message (NATS down, restarting, a
// reconnect gap, started while NATS was unreachable) learns of the change
// from the row, at most pollMs (plus the query) later. So the bound holds
// whatever state NATS is in, without dropping caches wholesale.
// With the embedded PGlite there is one process: changes are only delivered
// locally.
import { randomUUID } from "node:crypto";
import type { Msg, Subscription } from "@nats-io/transport-node";
import type { NatsLink } from "../nats/nats-link.js";
import type { Sql } from "../storage/sql.js";

/**
 * cms: content or content types of the application changed;
 * consumer: a consumer was deleted (itemId), its tokens are revoked;
 * app: the application's key or plan changed;
 * functions: a function, version, secret or trigger of the application changed;
 * database: a linked database was linked, unlinked, suspended, resumed or
 *   deleted (appId 0: the link cache is one for all applications);
 * realtime: the application's channel access entries changed.
 */
export type ChangeKind = "cms" | "consumer" | "app" | "functions" | "database" | "realtime";

export interface Change {
  kind: ChangeKind;
  appId: number;
  /** The changed item (a consumer id); undefined: anything of the application may have changed. */
  itemId?: number;
}

export type ChangeListener = (change: Change) => void;

export interface ChangeBusOptions {
  sql: Sql;
  /** The process's NATS connection (the fast path); unset: PostgreSQL only. */
  nats?: NatsLink;
  /** NATS subject of the fast path (`<namespace>.changes`). */
  subject: string;
  /** How often the change table is read (default 250 ms). */
  pollMs?: number;
  /** A failed read or record (logged; the bus keeps trying). */
  onError?: (err: unknown) => void;
}

const KINDS: ReadonlySet<string> = new Set<ChangeKind>(["cms", "consumer", "app", "functions", "database", "realtime"]);
/** Rows changed this long before the last read are read again: a change committed just after its timestamp is never missed. */
const OVERLAP = "5 seconds";
const OVERLAP_MS = 5000;
/** Versions of rows not seen for this long are forgotten (memory stays bounded). */
const FORGET_MS = 10 * 60_000;

// Also returns the previous version and when it was made: a process that had
// not seen the row yet can then tell whether it missed anything before.
const RECORD_SQL = `WITH prev AS (SELECT version, changed_at FROM cluster_changes WHERE app_id = $1 AND kind = $2)
  INSERT INTO cluster_changes (app_id, kind, version, changed_at) VALUES ($1, $2, 1, clock_timestamp())
  ON CONFLICT (app_id, kind) DO UPDATE SET version = cluster_changes.version + 1, changed_at = clock_timestamp()
  RETURNING version, (SELECT version FROM prev) AS prev_version, (SELECT changed_at FROM prev) AS prev_at`;
// One row even when nothing changed, for the database's clock.
const READ_SQL = `SELECT n.now, c.app_id, c.kind, c.version
  FROM (SELECT clock_timestamp() AS now) n
  LEFT JOIN cluster_changes c ON c.changed_at > COALESCE($1::timestamptz, n.now) - interval '${OVERLAP}'`;

const keyOf = (kind: string, appId: number) => `${kind}\u0000${appId}`;

/** A recorded version and the one before it (0: none; at: epoch ms). */
interface Recorded {
  version: number;
  prevVersion: number;
  prevAt: number;
}

export class ChangeBus {
  private readonly listeners = new Map<ChangeKind, Set<ChangeListener>>();
  private readonly origin = randomUUID();
  private readonly shared: boolean;
  private readonly pollMs: number;
  /** The last version seen of each recently changed row. */
  private readonly known = new Map<string, { version: number; seenAt: number }>();
  /** Changes whose record failed: recorded again by the next poll. */
  private readonly unrecorded = new Map<string, Change>();
  private since: Date | undefined;
  private lastRead = 0;
  private failing = false;
  private timer: NodeJS.Timeout | undefined;
  private loop: Promise<void> | undefined;
  private running = false;
  private sub: Subscription | undefined;

  constructor(private readonly opts: ChangeBusOptions) {
    this.shared = opts.sql.kind === "postgres";
    this.pollMs = opts.pollMs ?? 250;
  }

  /** Calls fn with every change of this kind (made here or elsewhere); returns the function that stops it. */
  subscribe(kind: ChangeKind, fn: ChangeListener): () => void {
    let set = this.listeners.get(kind);
    if (!set) this.listeners.set(kind, (set = new Set()));
    set.add(fn);
    return () => set.delete(fn);
  }

  /**
   * Announces a committed change: this process's subscribers at once, the
   * others through PostgreSQL (awaited) and NATS. Never throws: a record
   * that fails is retried by the poll until PostgreSQL answers.
   */
  async publish(kind: ChangeKind, appId: number, itemId?: number): Promise<void> {
    const change: Change = itemId === undefined ? { kind, appId } : { kind, appId, itemId };
    this.deliver(change);
    if (!this.shared) return;
    let recorded: Recorded | undefined;
    try {
      recorded = await this.record(kind, appId);
    } catch (err) {
      this.unrecorded.set(keyOf(kind, appId), { kind, appId });
      this.opts.onError?.(err);
    }
    this.send(change, recorded);
  }

  /** Starts reading the change table and listening on NATS. */
  async start(): Promise<void> {
    if (this.running || !this.shared) return;
    this.running = true;
    const nats = this.opts.nats;
    if (nats) {
      // Subscribed once: the client subscribes again by itself after a reconnect.
      void nats.connection().then(
        (nc) => {
          if (this.running) this.sub = nc.subscribe(this.opts.subject, {
              callback: (err, msg) => {
                if (!err) this.heard(msg);
              },
            });
        },
        () => {},
      );
    }
    // The first read only learns the versions (caches are empty at start).
    await this.read().catch((err: unknown) => this.failed(err));
    this.schedule();
  }

  async stop(): Promise<void> {
    this.running = false;
    clearTimeout(this.timer);
    await this.loop;
    this.sub?.unsubscribe();
    this.sub = undefined;
  }

  /** Seconds since the change table was last read (undefined when there is none: PGlite). */
  secondsSinceRead(): number | undefined {
    if (!this.shared) return undefined;
    return this.lastRead ? (Date.now() - this.lastRead) / 1000 : Infinity;
  }

  private deliver(change: Change): void {
    for (const fn of this.listeners.get(change.kind) ?? []) {
      try {
        fn(change);
      } catch (err) {
        this.opts.onError?.(err);
      }
    }
  }

  private async record(kind: ChangeKind, appId: number): Promise<Recorded> {
    const { rows } = await this.opts.sql.query<{ version: string | number; prev_version: string | number | null; prev_at: Date | string | null }>(
      RECORD_SQL,
      [appId, kind],
    );
    const r = rows[0]!;
    const recorded = { version: Number(r.version), prevVersion: Number(r.prev_version ?? 0), prevAt: r.prev_at === null ? 0 : new Date(r.prev_at).getTime() };
    // Applied here already: the row's next read has nothing to deliver.
    this.learn(keyOf(kind, appId), recorded);
    return recorded;
  }

  private send(change: Change, recorded: Recorded | undefined): void {
    const nats = this.opts.nats;
    const nc = nats?.current;
    // Not buffered while disconnected: the row carries it.
    if (!nc || !nats!.connected) return;
    try {
      nc.publish(
        this.opts.subject,
        JSON.stringify({ k: change.kind, a: change.appId, i: change.itemId, v: recorded?.version, pv: recorded?.prevVersion, pt: recorded?.prevAt, o: this.origin }),
      );
    } catch (err) {
      this.opts.onError?.(err);
    }
  }

  private heard(msg: Msg): void {
    let m: { k?: unknown; a?: unknown; i?: unknown; v?: unknown; pv?: unknown; pt?: unknown; o?: unknown };
    try {
      m = msg.json();
    } catch {
      return;
    }
    if (m.o === this.origin || typeof m.k !== "string" || !KINDS.has(m.k) || !Number.isSafeInteger(m.a)) return;
    const kind = m.k as ChangeKind;
    const appId = m.a as number;
    this.deliver(Number.isSafeInteger(m.i) ? { kind, appId, itemId: m.i as number } : { kind, appId });
    if (Number.isSafeInteger(m.v)) {
      const num = (x: unknown) => (typeof x === "number" && Number.isFinite(x) ? x : 0);
      this.learn(keyOf(kind, appId), { version: m.v as number, prevVersion: num(m.pv), prevAt: num(m.pt) });
    }
  }

  /**
   * Marks a version seen (delivered) when nothing before it can have been
   * missed: it directly follows the last version seen; or this process has
   * no version of the row and the previous one is older than what its reads
   * covered (so it was read then, or predates this process), or there was
   * none. Otherwise the row's next read delivers it (a gap: a message missed).
   */
  private learn(key: string, r: Recorded): void {
    const now = Date.now();
    const k = this.known.get(key);
    if (k) {
      if (k.version === r.version - 1) {
        k.version = r.version;
        k.seenAt = now;
      }
      return;
    }
    const covered = this.since !== undefined && r.prevAt < this.since.getTime() - OVERLAP_MS;
    if (r.prevVersion === r.version - 1 && (r.prevVersion === 0 || covered)) this.known.set(key, { version: r.version, seenAt: now });
  }

  private schedule(): void {
    if (!this.running) return;
    this.timer = setTimeout(() => {
      this.loop = this.tick().finally(() => this.schedule());
    }, this.pollMs);
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    try {
      for (const [key, c] of this.unrecorded) {
        const recorded = await this.record(c.kind, c.appId);
        this.unrecorded.delete(key);
        this.send(c, recorded);
      }
      await this.read();
    } catch (err) {
      this.failed(err);
    }
  }

  private failed(err: unknown): void {
    // Logged once per outage, not four times a second.
    if (!this.failing) this.opts.onError?.(err);
    this.failing = true;
  }

  private async read(): Promise<void> {
    const first = this.since === undefined;
    const { rows } = await this.opts.sql.query<{ now: Date; app_id: string | number | null; kind: string | null; version: string | number | null }>(
      READ_SQL,
      [this.since ?? null],
    );
    const now = Date.now();
    for (const r of rows) {
      if (r.app_id === null || r.kind === null || !KINDS.has(r.kind)) continue;
      const appId = Number(r.app_id);
      const version = Number(r.version);
      const key = keyOf(r.kind, appId);
      const k = this.known.get(key);
      if (k && k.version >= version) {
        k.seenAt = now;
        continue;
      }
      this.known.set(key, { version, seenAt: now });
      if (!first) this.deliver({ kind: r.kind as ChangeKind, appId });
    }
    for (const [key, k] of this.known) if (now - k.seenAt > FORGET_MS) this.known.delete(key);
    this.since = new Date(rows[0]!.now);
    this.lastRead = now;
    this.failing = false;
  }
}
