// Channel access (docs/realtime.md, "Channel access"): the operator's
// ordered entries per application (pattern + mode), stored in
// realtime_channel_access, cached per application on each server and
// dropped from the cache on the change bus's `realtime` changes. The first
// entry whose pattern matches a channel decides whether a consumer may
// subscribe to it, join its presence and broadcast on it; no match: `any`.
// A `rule` is an SQLite boolean expression over :channel, :user_id,
// :consumer_id and :app_id, compiled on a small in-memory node:sqlite
// connection of this server whose authorizer lets no table be read.
import { constants, DatabaseSync, type StatementSync } from "node:sqlite";
import { appError } from "../../kernel/errors.js";
import type { ConsumerPrincipal } from "../../kernel/principal.js";
import type { ChangeBus } from "../../infra/cluster/change-bus.js";
import type { Sql } from "../../infra/storage/sql.js";
import { bindCaller } from "../../infra/libsql/access-rules.js";
import { DENIED_FUNCTIONS } from "../../infra/libsql/sql-authorizer.js";

export type ChannelMode = "any" | "none" | "rule";

export interface ChannelAccessEntry {
  pattern: string;
  mode: ChannelMode;
  /** With mode "rule". */
  rule?: string;
}

export interface ChannelAccessList {
  entries: ChannelAccessEntry[];
  /** Epoch ms of the last save; undefined: never saved. */
  updatedAt?: number;
}

/** The values a channel rule may use. */
export const CHANNEL_RULE_VALUES = ["channel", "user_id", "consumer_id", "app_id"] as const;
type RuleValue = (typeof CHANNEL_RULE_VALUES)[number];

const MODES: ReadonlySet<string> = new Set<ChannelMode>(["any", "none", "rule"]);
const PATTERN_RE = /^(?:[A-Za-z0-9_\-:.@]{1,100}\*?|\*)$/;
const MAX_ENTRIES = 100;
const MAX_RULE = 2000;

/** Whether the pattern (`name`, `prefix*`, `*`) matches the channel. */
export function patternMatches(pattern: string, channel: string): boolean {
  return pattern.endsWith("*") ? channel.startsWith(pattern.slice(0, -1)) : pattern === channel;
}

interface Compiled extends ChannelAccessEntry {
  stmt?: StatementSync;
}

/** The in-memory SQLite connection channel rules are compiled on and run by. */
export class ChannelRules {
  private readonly db = new DatabaseSync(":memory:");

  constructor() {
    // An expression: no table, no PRAGMA, no recursive CTE; only the functions a tenant's SQL may call.
    this.db.setAuthorizer((action, a) => {
      if (action === constants.SQLITE_SELECT) return constants.SQLITE_OK;
      if (action === constants.SQLITE_FUNCTION && a !== null && !DENIED_FUNCTIONS.has(a.toLowerCase())) return constants.SQLITE_OK;
      return constants.SQLITE_DENY;
    });
  }

  /** The compiled rule, or why it is refused. */
  compile(rule: string): StatementSync | { error: string } {
    const bound = bindCaller<RuleValue>(rule, (name) => `:${name}`, CHANNEL_RULE_VALUES);
    if (typeof bound !== "string") return bound;
    try {
      const stmt = this.db.prepare(`SELECT (\n${bound}\n) AS ok`);
      // every value is given; a rule uses those it needs
      stmt.setAllowUnknownNamedParameters(true);
      return stmt;
    } catch (err) {
      const msg = (err as Error).message;
      return { error: /not authorized/i.test(msg) ? "a channel rule is an expression: it may read no table" : msg };
    }
  }

  close(): void {
    this.db.close();
  }
}

/** The entries as given (JSON or protobuf), checked; throws validation_failed naming the entry's field. */
export function checkEntries(rules: ChannelRules, given: readonly { pattern: string; mode: string; rule?: string }[]): Compiled[] {
  const bad = (field: string, message: string) => appError("validation_failed", `${field}: ${message}`, { fields: { [field]: [message] } });
  if (given.length > MAX_ENTRIES) throw bad("entries", `at most ${MAX_ENTRIES} entries`);
  return given.map((e, i) => {
    const pattern = e.pattern.trim();
    if (!PATTERN_RE.test(pattern)) throw bad(`entries[${i}].pattern`, "a channel name, a prefix followed by *, or *");
    if (!MODES.has(e.mode)) throw bad(`entries[${i}].mode`, "any, none or rule");
    const mode = e.mode as ChannelMode;
    if (mode !== "rule") {
      if (e.rule) throw bad(`entries[${i}].rule`, `only with mode rule`);
      return { pattern, mode };
    }
    const rule = (e.rule ?? "").trim();
    if (!rule) throw bad(`entries[${i}].rule`, "required with mode rule");
    if (rule.length > MAX_RULE) throw bad(`entries[${i}].rule`, `at most ${MAX_RULE} characters`);
    const stmt = rules.compile(rule);
    if ("error" in stmt && typeof stmt.error === "string") throw bad(`entries[${i}].rule`, stmt.error);
    return { pattern, mode, rule, stmt: stmt as StatementSync };
  });
}

export interface ChannelAccessOptions {
  sql: Sql;
  changes: ChangeBus;
  onError(err: unknown): void;
}

/** The store, the per-application cache and the decision. */
export class ChannelAccess {
  private readonly rules = new ChannelRules();
  private readonly cache = new Map<number, Promise<Compiled[]>>();

  constructor(private readonly opts: ChannelAccessOptions) {}

  /** Forgets the application's entries (the change bus's `realtime` change). */
  invalidate(appId: number): void {
    this.cache.delete(appId);
  }

  async get(appId: number): Promise<ChannelAccessList> {
    const { rows } = await this.opts.sql.query<{ entries: unknown; updated_at: Date | string }>(
      "SELECT entries, updated_at FROM realtime_channel_access WHERE app_id = $1",
      [appId],
    );
    const r = rows[0];
    if (!r) return { entries: [] };
    const raw = (typeof r.entries === "string" ? JSON.parse(r.entries) : r.entries) as ChannelAccessEntry[];
    return { entries: raw.map((e) => ({ pattern: e.pattern, mode: e.mode, ...(e.rule !== undefined && { rule: e.rule }) })), updatedAt: new Date(r.updated_at).getTime() };
  }

  /** Replaces the entries (checked first: nothing is saved when one is refused); every server forgets its copy. */
  async set(appId: number, given: readonly { pattern: string; mode: string; rule?: string }[]): Promise<ChannelAccessList> {
    const entries = checkEntries(this.rules, given).map(({ pattern, mode, rule }) => ({ pattern, mode, ...(rule !== undefined && { rule }) }));
    await this.opts.sql.query(
      `INSERT INTO realtime_channel_access (app_id, entries, updated_at) VALUES ($1, $2::jsonb, now())
       ON CONFLICT (app_id) DO UPDATE SET entries = EXCLUDED.entries, updated_at = EXCLUDED.updated_at`,
      [appId, JSON.stringify(entries)],
    );
    this.invalidate(appId);
    await this.opts.changes.publish("realtime", appId);
    return this.get(appId);
  }

  /** Throws permission_denied when the consumer may not use the channel (subscribe, presence, broadcast). */
  async check(p: ConsumerPrincipal, channel: string): Promise<void> {
    const entry = (await this.entries(p.appId)).find((e) => patternMatches(e.pattern, channel));
    if (!entry || entry.mode === "any") return;
    if (entry.mode === "rule" && this.admits(entry, p, channel)) return;
    throw appError("permission_denied", `The channel ${channel} is not open to this consumer.`);
  }

  close(): void {
    this.cache.clear();
    this.rules.close();
  }

  private admits(entry: Compiled, p: ConsumerPrincipal, channel: string): boolean {
    try {
      const row = entry.stmt!.get({ channel, user_id: p.userId, consumer_id: BigInt(p.consumerId), app_id: BigInt(p.appId) }) as { ok: unknown } | undefined;
      const ok = row?.ok;
      return ok !== null && ok !== undefined && Number(ok) !== 0;
    } catch (err) {
      // a rule failing at run time (an overflow, a bad cast) refuses
      this.opts.onError(err);
      return false;
    }
  }

  private entries(appId: number): Promise<Compiled[]> {
    let p = this.cache.get(appId);
    if (!p) {
      p = this.get(appId).then((l) => checkEntries(this.rules, l.entries));
      this.cache.set(appId, p);
      const mine = p;
      p.catch(() => {
        if (this.cache.get(appId) === mine) this.cache.delete(appId);
      });
    }
    return p;
  }
}
