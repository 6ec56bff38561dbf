// The Rules tab's calls (AccessRulesService) and its draft: the mode and
// each table's rules as the editor holds them, the templates for the
// common cases, and the conversion to and from the API's TableRules. The
// tab's place is in the URL (?tab=rules&rtable=T); the draft is the page's
// until it is saved (docs/database.md, "Access rules").
import { toJson } from "@bufbuild/protobuf";
import { ListValueSchema } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";
import type { AccessRules, TableRules } from "../../../../../gen/pulsebase/admin/v1/access_rules_pb.js";
import { api, isCode } from "../../api";

export type Mode = "open" | "rules";

/** One table's rules in the editor: "" is "not allowed" (as on the server). */
export interface RuleDraft {
  select: string;
  insert: string;
  update: string;
  updateCheck: string;
  delete: string;
  /** Columns an update may set (none: every column). */
  updateColumns: string[];
  /** Columns a device reads (none: every column; the others read as NULL). */
  selectColumns: string[];
  /** Columns an insert may set (none: every column; the others keep their DEFAULT). */
  insertColumns: string[];
}

export type ColumnListKey = "selectColumns" | "insertColumns" | "updateColumns";
export const COLUMN_LISTS: { key: ColumnListKey; legend: string; hint: string }[] = [
  { key: "selectColumns", legend: "Columns a device may read", hint: "None checked: every column. Unchecked ones read as NULL." },
  { key: "insertColumns", legend: "Columns an insert may set", hint: "None checked: every column. Unchecked ones keep their DEFAULT." },
  { key: "updateColumns", legend: "Columns an update may set", hint: "None checked: every column (e.g. leave owner_id unchecked)." },
];

export interface RulesDraft {
  mode: Mode;
  tables: Record<string, RuleDraft>;
}

export const OPERATIONS: { key: keyof Omit<RuleDraft, ColumnListKey>; label: string; hint: string }[] = [
  { key: "select", label: "select", hint: "Which rows a device sees (and so may update or delete)." },
  { key: "insert", label: "insert", hint: "The check a new row must pass." },
  { key: "update", label: "update", hint: "Which rows a device may update." },
  { key: "updateCheck", label: "update check", hint: "The check an updated row must pass (empty: the update rule)." },
  { key: "delete", label: "delete", hint: "Which rows a device may delete." },
];

export const emptyRules = (): RuleDraft => ({ select: "", insert: "", update: "", updateCheck: "", delete: "", updateColumns: [], selectColumns: [], insertColumns: [] });

/** A table with nothing in it is left out of a save (a device cannot use it in rules mode). */
export const hasRules = (r: RuleDraft | undefined): boolean =>
  !!r && (OPERATIONS.some((o) => r[o.key].trim() !== "") || COLUMN_LISTS.some((l) => r[l.key].length > 0));

export function draftOf(r: Pick<AccessRules, "mode" | "tables">): RulesDraft {
  return {
    mode: r.mode === "rules" ? "rules" : "open",
    tables: Object.fromEntries(
      r.tables.map((t) => [
        t.table,
        {
          select: t.select,
          insert: t.insert,
          update: t.update,
          updateCheck: t.updateCheck,
          delete: t.delete,
          updateColumns: [...t.updateColumns],
          selectColumns: [...t.selectColumns],
          insertColumns: [...t.insertColumns],
        },
      ]),
    ),
  };
}

/** The draft's tables as the API takes them (empty tables left out, names in order). */
export function tablesOf(d: RulesDraft): Omit<TableRules, "$typeName">[] {
  return Object.entries(d.tables)
    .filter(([, r]) => hasRules(r))
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([table, r]) => ({
      table,
      select: r.select.trim(),
      insert: r.insert.trim(),
      update: r.update.trim(),
      updateCheck: r.updateCheck.trim(),
      delete: r.delete.trim(),
      updateColumns: r.updateColumns,
      selectColumns: r.selectColumns,
      insertColumns: r.insertColumns,
    }));
}

/** Whether two drafts would save the same rules. */
export const sameDraft = (a: RulesDraft, b: RulesDraft): boolean => a.mode === b.mode && JSON.stringify(tablesOf(a)) === JSON.stringify(tablesOf(b));

// ---------------------------------------------------------------- templates

export type TemplateId = "owner" | "public-read" | "members" | "operator-writes";

export const TEMPLATES: { id: TemplateId; label: string; hint: string }[] = [
  { id: "owner", label: "Owner only", hint: "Each user reads and writes only the rows whose owner column is their user id." },
  { id: "public-read", label: "Public read, owner write", hint: "Every device reads every row; only the owner inserts, updates and deletes." },
  { id: "members", label: "Members of a group", hint: "A user reads and writes the rows of the groups they are a member of (a membership table)." },
  { id: "operator-writes", label: "Read only (operator writes)", hint: "Every device reads; no device writes (the console, the CLI and functions do)." },
];

/** A column or table name as SQL: bare when it is a plain identifier, else double-quoted. */
export function ident(name: string): string {
  return /^[A-Za-z_][A-Za-z0-9_]*$/.test(name) ? name : `"${name.replace(/"/g, '""')}"`;
}

export interface TemplateParams {
  /** The column that holds the owner's user id (owner, public-read). */
  owner?: string;
  /** The group column of this table, the membership table and its user column (members). */
  group?: string;
  membership?: string;
  memberUser?: string;
}

/** The rules a template gives a table (the column lists are kept). */
export function applyTemplate(id: TemplateId, p: TemplateParams, keep: RuleDraft = emptyRules()): RuleDraft {
  const base = { ...emptyRules(), updateColumns: keep.updateColumns, selectColumns: keep.selectColumns, insertColumns: keep.insertColumns };
  switch (id) {
    case "owner": {
      const own = `${ident(p.owner || "owner_id")} = :user_id`;
      return { ...base, select: own, insert: own, update: own, delete: own };
    }
    case "public-read": {
      const own = `${ident(p.owner || "owner_id")} = :user_id`;
      return { ...base, select: "true", insert: own, update: own, delete: own };
    }
    case "members": {
      const g = ident(p.group || "room_id");
      const member = `${g} IN (SELECT ${g} FROM ${ident(p.membership || "members")} WHERE ${ident(p.memberUser || "user_id")} = :user_id)`;
      return { ...base, select: member, insert: member, update: member, delete: member };
    }
    case "operator-writes":
      return { ...base, select: "true" };
  }
}

/** The column a template most likely means (owner_id, user_id, …), else the first. */
export function guessColumn(columns: string[], likely: string[]): string {
  for (const l of likely) {
    const hit = columns.find((c) => c.toLowerCase() === l);
    if (hit) return hit;
  }
  return columns[0] ?? "";
}
export const OWNER_COLUMNS = ["owner_id", "user_id", "owner", "author_id", "created_by", "uid"];
export const GROUP_COLUMNS = ["room_id", "team_id", "group_id", "org_id", "channel_id", "project_id"];

// ---------------------------------------------------------------- calls

export const getRules = (appId: bigint) => api.rules.getAccessRules({ appId });

export const saveRules = (appId: bigint, d: RulesDraft, expectedVersion: number) =>
  api.rules.setAccessRules({ appId, mode: d.mode, tables: tablesOf(d), expectedVersion });

/** The save was refused because another save came first (failed_precondition, REST 409). */
export const isConflict = (e: unknown): boolean => isCode(e, Code.FailedPrecondition);

export const listVersions = (appId: bigint, limit = 20) => api.rules.listAccessRuleVersions({ appId, limit }).then((r) => r.versions);

/** The team's members by user id, for "saved by" (the operator token is 0). */
export const membersById = (teamId: bigint) =>
  api.account.listMembers({ teamId }).then((r) => new Map(r.members.map((m) => [m.userId, m.email || m.name])));

export interface TryResult {
  sql: string;
  columns: string[];
  rows: unknown[][];
  error: string;
  rowsWritten: number;
}

/** Runs SQL as the consumer would, under the draft (`draft`) or the rules in force; nothing it writes is kept. */
export async function tryAsConsumer(appId: bigint, consumerId: bigint, sql: string, draft: RulesDraft | undefined): Promise<{ results: TryResult[]; durationMs: number }> {
  const res = await api.rules.tryAsConsumer({ appId, consumerId, sql, useDraft: !!draft, draftTables: draft ? tablesOf(draft) : [] });
  return {
    durationMs: res.durationMs,
    results: res.results.map((r) => ({
      sql: r.sql,
      columns: r.columns,
      rows: r.rows.map((l) => toJson(ListValueSchema, l) as unknown[]),
      error: r.error,
      rowsWritten: Number(r.rowsWritten),
    })),
  };
}
