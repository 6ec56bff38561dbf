// Table subscriptions (docs/realtime.md, "Table changes"): the hub's part
// for `{kind:"table"}` topics. A server with a subscriber of a table keeps
// an interest row (interest.ts) so the change-capture drainer captures it;
// drained changes reach every server through the change log (change-log.ts)
// and each server delivers them to its subscribers: in log order per
// application (one delivery at a time per application), narrowed by the
// subscription's filter and, in `rules` mode, by the table's select rule
// evaluated in SQLite for every distinct caller at once (rules-filter.ts);
// a select rule that reads other tables is evaluated per distinct caller as
// that caller's device would (queryAs), a bounded number at a time.
// A resumed subscription gets the changes after its cursor from the log,
// then the live ones, each exactly once (a change at or before the
// subscription's cursor is skipped).
import { appError } from "../../kernel/errors.js";
import type { AccessRules, TableRules } from "../../infra/libsql/access-rules.js";
import type { RealtimeConnection, Subscription } from "./connection.js";
import { MAX_REPLAY, type ChangeLog, type LogEntry, type Row } from "./change-log.js";
import type { Interest } from "./interest.js";
import type { TableTopic } from "./protocol.js";
import { admitStatements, callerStatement, MAX_TABLE_READING_CALLERS, readable, readsTables, rulesOf, shown, type Caller, type Column, type Statement } from "./rules-filter.js";

export interface ServiceResult {
  columns: string[];
  rows: unknown[][];
  error?: string;
}

export interface TableFeedDeps {
  log: ChangeLog;
  interest: Interest;
  /** Makes the application's capture follow its interest now (a write committed after this resolves is captured). */
  ensureCaptured(appId: number): Promise<void>;
  /** The application's rules when it is in `rules` mode, else undefined. */
  access(appId: number): Promise<AccessRules | undefined>;
  /** Read-only statements of the service on the application's linked database, in one call. */
  query(appId: number, statements: Statement[]): Promise<ServiceResult[]>;
  /**
   * One read-only statement as the caller's device runs it (the query
   * runner with the caller: other tables read through their rules for it).
   * Unset: tables whose select rule reads other tables are refused.
   */
  queryAs?(appId: number, caller: Caller, statement: Statement): Promise<ServiceResult>;
  onError(err: unknown): void;
  now?: () => number;
}

export interface TableSubscription extends Subscription {
  topic: TableTopic;
  /** The table's name as the database spells it. */
  table: string;
  /** The log sequence of the last change looked at for this subscription. */
  cursor: number;
  /** While a resume replays: the live changes that arrived meanwhile. */
  pending?: LogEntry[];
}

export interface TableStats {
  changes: number;
  /** Commit (capture) to delivery of the last change delivered, ms. */
  lagMs: number;
}

interface Shape {
  name: string;
  columns: Column[];
  at: number;
}

const CACHE_MS = 5_000;
/** Per-caller rule statements of one change running at once (a rule that reads other tables). */
const CALLER_CONCURRENCY = 8;
const json = JSON.stringify;
const lower = (s: string) => s.replace(/[A-Z]/g, (c) => c.toLowerCase());

export class TableFeed {
  /** appId -> lower-cased table -> subscriptions of this server. */
  private readonly apps = new Map<number, Map<string, Set<TableSubscription>>>();
  private readonly chains = new Map<number, Promise<void>>();
  private readonly shapes = new Map<string, Shape>();
  private readonly rules = new Map<number, { rules: AccessRules | undefined; at: number }>();
  /** Interest and capture made ready once per (app, table) while it has subscribers here. */
  private readonly capturing = new Map<string, Promise<void>>();
  private readonly now: () => number;
  private stopFollow: (() => void) | undefined;
  private delivered = 0;
  private lagMs = 0;

  constructor(private readonly deps: TableFeedDeps) {
    this.now = deps.now ?? Date.now;
  }

  start(): void {
    this.stopFollow ??= this.deps.log.follow((e) => this.onEntry(e));
  }

  stop(): void {
    this.stopFollow?.();
    this.stopFollow = undefined;
  }

  stats(): TableStats {
    return { changes: this.delivered, lagMs: this.lagMs };
  }

  /** The rules changed (change bus): read them again. */
  invalidate(): void {
    this.rules.clear();
    this.shapes.clear();
  }

  /**
   * Opens a table subscription on the connection (the hub checked the id
   * and the connection's limit): sends `subscribed`, then, with `resume`, the
   * missed changes or `resync`.
   */
  async subscribe(conn: RealtimeConnection, id: string, topic: TableTopic, resume: string | undefined, reserve: () => boolean): Promise<TableSubscription | undefined> {
    const appId = conn.principal.appId;
    const notFound = () => appError("not_found", `no such table: ${topic.table}`);
    if (/^(_pulsebase_|sqlite_)/i.test(topic.table)) throw notFound();
    const access = await this.accessOf(appId);
    let tr: TableRules | undefined;
    if (access) {
      tr = rulesOf(access.tables, topic.table);
      // as a device's SELECT: a table without rules does not exist for it
      if (!tr) throw notFound();
      if (tr.select !== undefined && readsTables(tr.select)) {
        if (!this.deps.queryAs) {
          throw appError("failed_precondition", `The select rule of ${topic.table} reads other tables: such a table cannot be subscribed to here (docs/realtime.md, "Under access rules").`);
        }
        const callers = new Set([...(this.apps.get(appId)?.get(lower(topic.table)) ?? [])].map(callerKey));
        if (!callers.has(principalKey(conn.principal)) && callers.size >= MAX_TABLE_READING_CALLERS) {
          throw appError(
            "limit_exceeded",
            `The select rule of ${topic.table} reads other tables: it is evaluated for at most ${MAX_TABLE_READING_CALLERS} distinct consumers subscribed to it on a server, and that many are (docs/realtime.md, "Under access rules").`,
          );
        }
      }
      if (topic.filter && !readable(tr, topic.filter.column)) {
        throw appError("permission_denied", `The filter's column ${topic.filter.column} is not one this consumer may read.`, { fields: { "topic.filter.column": ["a column select_columns allows"] } });
      }
    }
    const shape = await this.shapeOf(appId, topic.table, true);
    if (!shape) throw notFound();
    if (topic.filter && !shape.columns.some((c) => lower(c.name) === lower(topic.filter!.column))) {
      throw appError("validation_failed", `${shape.name} has no column ${topic.filter.column}.`, { fields: { "topic.filter.column": ["a column of the table"] } });
    }
    if (conn.closed || !reserve()) return undefined;
    const sub: TableSubscription = { id, conn, topic, table: shape.name, cursor: 0, ...(resume !== undefined && { pending: [] }) };
    conn.subs.set(id, sub);
    let app = this.apps.get(appId);
    if (!app) this.apps.set(appId, (app = new Map()));
    let subs = app.get(lower(shape.name));
    if (!subs) app.set(lower(shape.name), (subs = new Set()));
    subs.add(sub);
    try {
      await this.capture(appId, shape.name);
    } catch (err) {
      this.unsubscribe(sub);
      conn.subs.delete(id);
      throw appError("unavailable", "The table's changes cannot be followed now: try again.", { cause: err, retryAfterSeconds: 1 });
    }
    if (conn.closed) return sub;
    conn.send("subscribed", json({ type: "subscribed", id, topic: { kind: "table", table: shape.name, ...(topic.filter && { filter: topic.filter }) } }));
    if (resume !== undefined) await this.resume(sub, resume);
    return sub;
  }

  unsubscribe(sub: TableSubscription): void {
    const appId = sub.conn.principal.appId;
    const app = this.apps.get(appId);
    const key = lower(sub.table);
    const subs = app?.get(key);
    if (!app || !subs?.delete(sub)) return;
    if (subs.size > 0) return;
    app.delete(key);
    if (app.size === 0) this.apps.delete(appId);
    this.capturing.delete(`${appId}\u0000${key}`);
    this.deps.interest.remove(appId, sub.table);
  }

  private capture(appId: number, table: string): Promise<void> {
    const k = `${appId}\u0000${lower(table)}`;
    let p = this.capturing.get(k);
    if (!p) {
      p = this.deps.interest.add(appId, table).then(() => this.deps.ensureCaptured(appId));
      this.capturing.set(k, p);
      p.catch(() => {
        if (this.capturing.get(k) === p) this.capturing.delete(k);
      });
    }
    return p;
  }

  private async resume(sub: TableSubscription, cursor: string): Promise<void> {
    const appId = sub.conn.principal.appId;
    let replay: LogEntry[] | "resync";
    try {
      replay = await this.deps.log.replay(appId, cursor, MAX_REPLAY);
    } catch (err) {
      this.deps.onError(err);
      replay = "resync";
    }
    this.enqueue(appId, async () => {
      const pending = sub.pending ?? [];
      sub.pending = undefined;
      if (replay === "resync") {
        sub.conn.send("resync", json({ type: "resync", id: sub.id }));
        await this.deliver(appId, pending, [sub]);
        return;
      }
      const seen = new Set<number>();
      const all = [...replay, ...pending].filter((e) => !seen.has(e.seq) && seen.add(e.seq)).sort((a, b) => a.seq - b.seq);
      for (const e of all) if (lower(e.change.table) === lower(sub.table)) await this.deliver(appId, [e], [sub]);
    });
  }

  private onEntry(e: LogEntry): void {
    const subs = this.apps.get(e.appId)?.get(lower(e.change.table));
    if (!subs?.size) return;
    const live: TableSubscription[] = [];
    for (const s of subs) {
      if (s.pending) s.pending.push(e);
      else live.push(s);
    }
    if (live.length) this.enqueue(e.appId, () => this.deliver(e.appId, [e], live));
  }

  /** Deliveries of one application run one after another, in the order they were queued. */
  private enqueue(appId: number, fn: () => Promise<void>): void {
    const next = (this.chains.get(appId) ?? Promise.resolve()).then(fn).catch((err: unknown) => this.deps.onError(err));
    this.chains.set(appId, next);
    void next.finally(() => {
      if (this.chains.get(appId) === next) this.chains.delete(appId);
    });
  }

  private async deliver(appId: number, entries: LogEntry[], targets: TableSubscription[]): Promise<void> {
    for (const e of entries) {
      const subs = targets.filter((s) => !s.conn.closed && e.seq > s.cursor);
      if (!subs.length) continue;
      for (const s of subs) s.cursor = e.seq;
      const c = e.change;
      const access = await this.accessOf(appId);
      const tr = access ? rulesOf(access.tables, c.table) : undefined;
      // in rules mode, a table whose rules were removed shows nothing; nor,
      // without queryAs, one whose select rule reads other tables
      if (access && (!tr || (tr.select !== undefined && readsTables(tr.select) && !this.deps.queryAs))) continue;
      const shape = await this.shapeOf(appId, c.table, false);
      const callers = new Map<string, Caller>();
      for (const s of subs) callers.set(callerKey(s), { consumerId: s.conn.principal.consumerId, userId: s.conn.principal.userId, appId });
      const list = [...callers.values()];
      const [oldIn = new Set<number>(), newIn = new Set<number>()] = await this.admitted(appId, c.table, shape, tr, [c.operation !== "insert" ? c.before : null, c.operation !== "delete" ? c.after : null], list);
      const cursor = this.deps.log.cursorOf(e);
      for (const s of subs) {
        const k = [...callers.keys()].indexOf(callerKey(s));
        // (a filter on a column the rules hide now filters nothing in)
        const hiddenFilter = !!tr && !!s.topic.filter && !readable(tr, s.topic.filter.column);
        const was = !hiddenFilter && !!c.before && oldIn.has(k) && matches(s.topic, c.before);
        const is = !hiddenFilter && !!c.after && newIn.has(k) && matches(s.topic, c.after);
        const op = was && is ? "update" : is ? "insert" : was ? "delete" : undefined;
        if (!op) continue;
        const msg: Record<string, unknown> = { type: "change", id: s.id, op, table: c.table };
        if (op !== "delete") msg.row = shown(tr, c.after!);
        if (op !== "insert") msg.old_key = keyOf(shape, tr, c.before!);
        msg.cursor = cursor;
        msg.at = c.at;
        if (s.conn.send("change", json(msg), cursor)) {
          this.delivered++;
          const at = Date.parse(c.at);
          if (!Number.isNaN(at)) this.lagMs = Math.max(0, this.now() - at);
        }
      }
    }
  }

  /**
   * For each row version (null: none), the indexes (into callers) the
   * select rule admits; every one in open mode. One service call for the
   * change (both versions of an update).
   */
  private async admitted(appId: number, table: string, shape: Shape | undefined, tr: TableRules | undefined, rows: Array<Row | null>, callers: Caller[]): Promise<Array<Set<number>>> {
    if (tr?.select !== undefined && readsTables(tr.select)) return this.admittedPerCaller(appId, table, shape, tr.select, rows, callers);
    const every = () => new Set(callers.map((_, i) => i));
    const out = rows.map(() => new Set<number>());
    const statements: Statement[] = [];
    const owner: number[] = [];
    rows.forEach((row, v) => {
      if (!row) return;
      if (!tr) return void (out[v] = every());
      // (a table dropped since: nothing to evaluate the rule on)
      if (!shape) return;
      const st = admitStatements(table, shape.columns, tr, row, callers);
      if (st === "all") out[v] = every();
      else if (st !== "none") {
        for (const x of st) {
          statements.push(x);
          owner.push(v);
        }
      }
    });
    if (!statements.length) return out;
    const results = await this.deps.query(appId, statements);
    const failed = new Set<number>();
    results.forEach((r, i) => {
      const v = owner[i]!;
      if (r.error) {
        this.deps.onError(new Error(`realtime: the select rule of ${table} failed: ${r.error}`));
        failed.add(v);
        return;
      }
      for (const row of r.rows) out[v]!.add(Number(row[0]));
    });
    // a rule that fails on a row admits it to nobody
    for (const v of failed) out[v] = new Set();
    return out;
  }

  /**
   * admitted() for a select rule that reads other tables: one statement per
   * caller and row version, each run as that caller's device (queryAs),
   * CALLER_CONCURRENCY at a time; callers past MAX_TABLE_READING_CALLERS
   * (subscribed before the rule came to read other tables) are admitted
   * nothing, as is a caller whose statement fails.
   */
  private async admittedPerCaller(appId: number, table: string, shape: Shape | undefined, select: string, rows: Array<Row | null>, callers: Caller[]): Promise<Array<Set<number>>> {
    const out = rows.map(() => new Set<number>());
    // (a table dropped since: nothing to evaluate the rule on)
    if (!shape) return out;
    if (callers.length > MAX_TABLE_READING_CALLERS) {
      this.deps.onError(new Error(`realtime: the select rule of ${table} reads other tables and ${callers.length} consumers subscribe to it: evaluated for the first ${MAX_TABLE_READING_CALLERS} only`));
    }
    const jobs: Array<() => Promise<void>> = [];
    rows.forEach((row, v) => {
      if (!row) return;
      callers.slice(0, MAX_TABLE_READING_CALLERS).forEach((caller, k) =>
        jobs.push(async () => {
          try {
            const r = await this.deps.queryAs!(appId, caller, callerStatement(table, shape.columns, select, row, caller));
            if (r.error) throw new Error(r.error);
            if (r.rows.length) out[v]!.add(k);
          } catch (err) {
            this.deps.onError(new Error(`realtime: the select rule of ${table} failed for consumer ${caller.consumerId}: ${(err as Error).message}`, { cause: err }));
          }
        }),
      );
    });
    let next = 0;
    const worker = async () => {
      while (next < jobs.length) await jobs[next++]!();
    };
    await Promise.all(Array.from({ length: Math.min(CALLER_CONCURRENCY, jobs.length) }, worker));
    return out;
  }

  private async accessOf(appId: number): Promise<AccessRules | undefined> {
    const c = this.rules.get(appId);
    if (c && this.now() - c.at < CACHE_MS) return c.rules;
    const rules = await this.deps.access(appId);
    this.rules.set(appId, { rules, at: this.now() });
    return rules;
  }

  /** The table's name and columns (fresh: read now), undefined when there is no such table. */
  private async shapeOf(appId: number, table: string, fresh: boolean): Promise<Shape | undefined> {
    const k = `${appId}\u0000${lower(table)}`;
    const c = this.shapes.get(k);
    if (c && !fresh && this.now() - c.at < CACHE_MS) return c;
    const [names, cols] = await this.deps.query(appId, [
      { sql: "SELECT name FROM sqlite_schema WHERE type = 'table' AND name = ?1 COLLATE NOCASE", params: [table] },
      { sql: "SELECT name, type, pk FROM pragma_table_info(?1)", params: [table] },
    ]);
    if (names?.error || cols?.error) throw new Error(names?.error ?? cols?.error);
    const name = names?.rows[0]?.[0];
    if (typeof name !== "string" || !cols?.rows.length) {
      this.shapes.delete(k);
      return undefined;
    }
    const shape: Shape = { name, columns: cols.rows.map((r) => ({ name: String(r[0]), type: String(r[1] ?? ""), pk: Number(r[2] ?? 0) })), at: this.now() };
    this.shapes.set(k, shape);
    return shape;
  }
}

const principalKey = (p: { consumerId: number; userId: string }) => `${p.consumerId}\u0000${p.userId}`;
const callerKey = (s: TableSubscription) => principalKey(s.conn.principal);

/** The subscription's filter on a row (JSON values compared exactly). */
function matches(topic: TableTopic, row: Row): boolean {
  const f = topic.filter;
  if (!f) return true;
  const col = Object.keys(row).find((k) => lower(k) === lower(f.column));
  const v = col === undefined ? null : row[col];
  return f.op === "eq" ? v === f.value : (f.value as unknown[]).some((x) => x === v);
}

/** The old row's primary key (the whole shown row when the table has none). */
function keyOf(shape: Shape | undefined, tr: TableRules | undefined, row: Row): Row {
  const pk = (shape?.columns ?? []).filter((c) => c.pk > 0).sort((a, b) => a.pk - b.pk);
  const r = shown(tr, row);
  if (!pk.length) return r;
  return Object.fromEntries(pk.map((c) => [c.name, r[c.name] ?? null]));
}
