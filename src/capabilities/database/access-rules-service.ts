// pulsebase.admin.v1.AccessRulesService: an application's access rules
// (docs/database.md, "Access rules"). A save compiles every rule against
// the linked database first (on an engine process, on a connection of its
// own), so a rule that does not compile is refused when it is saved, never
// met by a device's request.
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import {
  AccessRulesSchema,
  AccessRulesService,
  ListAccessRuleVersionsResponseSchema,
  TableRulesSchema,
  type AccessRules as AccessRulesMessage,
  type TableRules as TableRulesMessage,
} from "../../../gen/pulsebase/admin/v1/access_rules_pb.js";
import { RunSqlResponseSchema, SqlResultSchema } from "../../../gen/pulsebase/admin/v1/sql_pb.js";
import { appError, Violations } from "../../kernel/errors.js";
import { bindCaller, callerColumn, type AccessRules, type TableRules } from "../../infra/libsql/access-rules.js";
import type { AccessMode, AccessRulesRecord, AccessRulesStore } from "./access-rules-store.js";
import type { QueryRunner } from "./query-runner.js";
import { rowToListValue } from "./proto-values.js";

export interface AccessRulesServiceDeps {
  store: AccessRulesStore;
  runner: QueryRunner;
  /** The console account of the call (0 for the operator token). */
  callerId?: (ctx: HandlerContext) => number;
  /** After a save: every process drops its cached rules. */
  changed(): void;
}

/** Tables per application with rules. */
export const MAX_RULE_TABLES = 100;
/** Characters of one rule. */
export const MAX_RULE_CHARS = 4000;

export function tablesFromProto(list: readonly TableRulesMessage[], field = "tables"): Record<string, TableRules> {
  const v = new Violations();
  const out: Record<string, TableRules> = {};
  const seen = new Set<string>();
  if (list.length > MAX_RULE_TABLES) v.add(field, `At most ${MAX_RULE_TABLES} tables may have rules.`);
  list.forEach((t, i) => {
    const at = `${field}.${i}`;
    const name = t.table.trim();
    if (name === "") v.add(`${at}.table`, "The table name is required.");
    else if (seen.has(name.toLowerCase())) v.add(`${at}.table`, `${name} has rules twice.`);
    seen.add(name.toLowerCase());
    const r: TableRules = {};
    for (const [key, text] of [["select", t.select], ["insert", t.insert], ["update", t.update], ["updateCheck", t.updateCheck], ["delete", t.delete]] as const) {
      if (text.trim() === "") continue;
      if (text.length > MAX_RULE_CHARS) {
        v.add(`${at}.${key}`, `A rule may be at most ${MAX_RULE_CHARS} characters.`);
        continue;
      }
      const bound = bindCaller(text, callerColumn);
      if (typeof bound !== "string") v.add(`${at}.${snake(key)}`, `The rule is not valid: ${bound.error}.`);
      r[key] = text.trim();
    }
    if (t.updateColumns.length) r.updateColumns = [...t.updateColumns];
    if (t.selectColumns.length) r.selectColumns = [...t.selectColumns];
    if (t.insertColumns.length) r.insertColumns = [...t.insertColumns];
    out[name] = r;
  });
  v.throwIfAny();
  return out;
}

const snake = (k: string) => k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

export function tablesToProto(tables: Record<string, TableRules>): TableRulesMessage[] {
  return Object.entries(tables).map(([table, r]) =>
    create(TableRulesSchema, {
      table,
      select: r.select ?? "",
      insert: r.insert ?? "",
      update: r.update ?? "",
      updateCheck: r.updateCheck ?? "",
      delete: r.delete ?? "",
      updateColumns: r.updateColumns ?? [],
      selectColumns: r.selectColumns ?? [],
      insertColumns: r.insertColumns ?? [],
    }),
  );
}

function toProto(r: AccessRulesRecord): AccessRulesMessage {
  return create(AccessRulesSchema, {
    appId: BigInt(r.appId),
    mode: r.mode,
    version: r.version,
    tables: tablesToProto(r.tables),
    ...(r.savedAt ? { savedAt: timestampFromDate(r.savedAt) } : {}),
    savedBy: BigInt(r.savedBy),
  });
}

export function createAccessRulesServiceImpl(deps: AccessRulesServiceDeps): ServiceImpl<typeof AccessRulesService> {
  const { store, runner } = deps;

  /** Compiles the rules against the linked database: 400 with SQLite's messages when any fails. */
  async function check(appId: number, tables: Record<string, TableRules>, mode: AccessMode): Promise<void> {
    // (rules mode with no tables still needs a database that can enforce "nothing")
    if (Object.keys(tables).length === 0 && mode === "open") return;
    const errors = await runner.checkRules(appId, { version: 0, tables });
    if (errors.length) throw appError("bad_request", `The rules do not compile: ${errors.join("; ")}.`);
  }

  async function known(appId: number): Promise<number> {
    if (!(await store.appExists(appId))) throw appError("not_found", `No application ${appId}.`);
    return appId;
  }

  return {
    getAccessRules: async (req) => toProto(await store.current(await known(Number(req.appId)))),
    async setAccessRules(req, ctx) {
      const appId = await known(Number(req.appId));
      const v = new Violations();
      if (req.mode !== "open" && req.mode !== "rules") v.add("mode", 'The mode must be "open" or "rules".');
      v.throwIfAny();
      const tables = tablesFromProto(req.tables);
      await check(appId, tables, req.mode as AccessMode);
      const saved = await store.save(appId, req.mode as AccessMode, tables, deps.callerId?.(ctx) ?? 0, req.expectedVersion);
      deps.changed();
      return toProto(saved);
    },
    async listAccessRuleVersions(req) {
      const limit = req.limit === 0 ? 20 : req.limit;
      if (limit < 1 || limit > 100) badLimit();
      const list = await store.versions(await known(Number(req.appId)), limit);
      return create(ListAccessRuleVersionsResponseSchema, { versions: list.map(toProto) });
    },
    async tryAsConsumer(req) {
      const appId = await known(Number(req.appId));
      const consumerId = Number(req.consumerId);
      const userId = await store.consumerUser(appId, consumerId);
      if (userId === undefined) throw appError("not_found", `Consumer ${consumerId} is not a consumer of this application.`);
      // a draft, or (none given) the rules in force, as a device of this consumer would run
      let rules: AccessRules | undefined;
      if (req.useDraft) {
        const tables = tablesFromProto(req.draftTables, "draft_tables");
        await check(appId, tables, "rules");
        rules = { version: 0, tables };
      }
      const started = performance.now();
      const results = await runner.batch(appId, [{ sql: req.sql }], true, { caller: { consumerId, userId, appId }, ...(rules ? { rules } : {}), rollback: true });
      return create(RunSqlResponseSchema, {
        results: results.map((r) =>
          create(SqlResultSchema, {
            columns: r.columns,
            rows: r.rows.map(rowToListValue),
            rowsRead: BigInt(r.rowsRead),
            rowsWritten: BigInt(r.rowsWritten),
            error: r.error ?? "",
            sql: req.sql,
          }),
        ),
        // rounded up: a preview that ran reports at least 1 ms
        durationMs: Math.ceil(performance.now() - started),
      });
    },
  };
}

function badLimit(): never {
  const v = new Violations();
  v.add("limit", "The limit must be between 1 and 100.");
  v.throwIfAny();
  throw new Error("unreachable");
}
