// Access rules (docs/database.md, "Access rules"): how a device's statement
// sees only the rows its application's rules admit, enforced by SQLite on
// the connection that runs it, never by reading the statement's text.
//
// A device of an application in `rules` mode runs on a connection of its
// own (one per application per engine process) whose temp schema holds, for
// every table T with rules (tableSetup):
//   - a "rows" view under a name of the service's with a random token made
//     at each installation: main."T" filtered by T's select rule, ending in
//     `LIMIT -1`. SQLite never flattens such a view into a statement nor
//     pushes the statement's WHERE terms into it (sqlite.org/optoverview,
//     the flattener and push-down conditions), so the rule is applied to
//     every row before any expression of the device sees it: an expression
//     that fails (abs() of the smallest integer, malformed JSON) can fail
//     only on rows the device may see. A rule of `true` hides nothing and
//     gets a plain view (flattened, indexed).
//   - the view temp."T" the device names, over the rows view, with the
//     columns it may not read as NULL. SQLite resolves an unqualified name in
//     temp before main, so every reference to T a statement makes (joins,
//     subqueries, CTEs, any quoting or case) reaches the filtered rows.
//   - INSTEAD OF UPDATE and DELETE triggers on temp."T" that forward each row
//     to main."T" by its primary key and count it (changes() of a view is 0);
//   - temp triggers on main."T" itself: BEFORE UPDATE and BEFORE DELETE skip
//     a row the select and update (or delete) rules do not both admit
//     (RAISE(IGNORE), as PostgreSQL's USING); AFTER INSERT and AFTER UPDATE
//     refuse a new row the check does not admit (RAISE(ABORT)). They fire for
//     a device's INSERT, which goes to main."T" directly (so defaults and
//     generated ids work), for the forwarded rows, for the rows a REPLACE
//     conflict deletes (recursive_triggers is on) and for an UPSERT's update.
//   - the caller, one row of temp._pulsebase_caller, which the rules read as
//     :consumer_id, :user_id and :app_id.
// The authorizer (accessAuthorizer below), consulted while SQLite compiles a
// statement on the names it really resolved, trusts code only inside the
// service's own views and triggers, known by those exact unguessable names
// (SQLite compiles a CTE's body "inside" the CTE's name, and an UPDATE's
// WHERE and RETURNING inside the name of the view it targets, so a name a
// device can write is never trusted); it refuses every other read of a
// table (main."T" named outright, tables without rules, sqlite_schema, an
// INSERT's RETURNING, an operator's view, an operator's trigger that reads),
// every write the rules do not allow, and every schema change. What the
// device's text says only decides which error it gets, never which rows it
// reaches. docs/database.md, "Access rules", says why this is sound and what
// it costs.
//
// Imported by engine-process.ts under Node's type stripping: erasable syntax
// only, runtime imports name the .ts file.
import { constants as C } from "node:sqlite";
import { RESERVED_PREFIX, tenantAuthorizer } from "./sql-authorizer.ts";
import { quoteIdent, tokenize, type Token } from "./sql-tokenizer.ts";

/** One table's rules. An operation without a rule is not allowed. */
export interface TableRules {
  /** Which rows a device sees (and may then update or delete). */
  select?: string;
  /** The check a new row must pass. */
  insert?: string;
  /** Which rows a device may update (USING). */
  update?: string;
  /** The check an updated row must pass (WITH CHECK); the update rule when absent. */
  updateCheck?: string;
  /** Which rows a device may delete. */
  delete?: string;
  /** Columns an update may set (every column when absent). */
  updateColumns?: string[];
  /** Columns a device may read (the others read as NULL; every column when absent). */
  selectColumns?: string[];
  /** Columns an insert may set; the others must keep their default (every column when absent). */
  insertColumns?: string[];
}

/** An application's rules, as stored (one version). */
export interface AccessRules {
  version: number;
  /** By table name as written by the operator (matched case-insensitively). */
  tables: Record<string, TableRules>;
}

/** The caller the rules see. */
export interface AccessCaller {
  consumerId: number;
  userId: string;
  appId: number;
}

/** The named values a rule may use, each bound to the caller. */
export const CALLER_VALUES = ["consumer_id", "user_id", "app_id"] as const;

export const CALLER_TABLE = `${RESERVED_PREFIX}caller`;
export const WRITTEN_TABLE = `${RESERVED_PREFIX}written`;
const TRIGGER_PREFIX = `${RESERVED_PREFIX}rule_`;

/** The prefix of every access-rule error: a stable text naming the table and the operation, never a row. */
export const RULE_ERROR = "access rule";

/** SQLite folds only ASCII letters when it compares names: so do the rules (a JS toLowerCase would also fold Ü). */
export const asciiLower = (s: string): string => s.replace(/[A-Z]/g, (c) => String.fromCharCode(c.charCodeAt(0) + 32));

const TRUE_RULES = new Set(["true", "1"]);
export const isTrueRule = (r: string | undefined): boolean => r !== undefined && TRUE_RULES.has(asciiLower(r.trim()));

/**
 * The rule's text with its named values (:user_id, @user_id, $user_id)
 * replaced by the caller's (`caller` gives the SQL of each), or an error.
 * Done on the rule's tokens: a name inside a string or a comment stays.
 */
export function bindCaller<N extends string = (typeof CALLER_VALUES)[number]>(
  rule: string,
  caller: (name: N) => string,
  values: readonly N[] = CALLER_VALUES as readonly string[] as readonly N[],
): string | { error: string } {
  const tokens = tokenize(rule);
  let out = "";
  let depth = 0;
  for (const t of tokens) {
    if (t.kind === "semi") return { error: "a rule is one expression: it may not contain ';'" };
    if (t.kind === "punct" && t.text === "(") depth++;
    if (t.kind === "punct" && t.text === ")" && --depth < 0) return { error: "unbalanced parentheses" };
    if (t.kind === "param") {
      const name = asciiLower(t.text.slice(1));
      if (t.text.length < 2 || !(values as readonly string[]).includes(name)) {
        return { error: `unknown value ${t.text}: a rule may use ${values.map((v) => `:${v}`).join(", ")}` };
      }
      out += caller(name as N);
      continue;
    }
    out += t.text;
  }
  if (depth !== 0) return { error: "unbalanced parentheses" };
  if (out.trim() === "") return { error: "a rule may not be empty (use true or false)" };
  return out;
}

/** A caller value as the connection's rules read it. */
export const callerColumn = (name: string): string => `(SELECT ${name} FROM temp.${CALLER_TABLE})`;

/** What the setup needs to know about a table (from PRAGMA table_xinfo and sqlite_schema). */
export interface TableShape {
  name: string;
  /** Columns in order; generated ones cannot be set. `dflt`: the DEFAULT expression's text, if any. */
  columns: { name: string; generated: boolean; dflt?: string | null; rowidAlias?: boolean; hidden?: boolean }[];
  /** Primary-key columns in key order (the INTEGER PRIMARY KEY column of a rowid table included). */
  pk: string[];
  withoutRowid: boolean;
}

/** One table's setup, or an error naming the table and what is wrong. */
export interface TableSetup {
  table: string;
  statements: string[];
  /** Lower-cased names of the views and triggers made (AccessState.trusted). */
  names: string[];
  error?: string;
}

const q = quoteIdent;

/**
 * The temp views and triggers that apply `rules` to `shape` (see the file
 * comment), in the order they are created. Expressions are used as the
 * operator wrote them, inside parentheses, after bindCaller.
 */
export function tableSetup(shape: TableShape, rules: TableRules, index: number, token: string): TableSetup {
  const T = q(shape.name);
  const main = `main.${T}`;
  const out: string[] = [];
  const bind = (r: string | undefined): string | { error: string } | undefined => (r === undefined ? undefined : bindCaller(r, callerColumn));
  const sel = bind(rules.select);
  const ins = bind(rules.insert);
  const upd = bind(rules.update);
  const chk = rules.updateCheck === undefined ? upd : bind(rules.updateCheck);
  const del = bind(rules.delete);
  for (const [op, r] of [["select", sel], ["insert", ins], ["update", upd], ["update check", chk], ["delete", del]] as const) {
    if (r !== undefined && typeof r !== "string") return { table: shape.name, statements: [], names: [], error: `the ${op} rule of ${shape.name}: ${r.error}` };
  }
  if ((rules.update !== undefined || rules.delete !== undefined) && shape.pk.length === 0) {
    return { table: shape.name, statements: [], names: [], error: `${shape.name} has no PRIMARY KEY: update and delete rules need one to tell rows apart` };
  }
  const known = new Set(shape.columns.map((c) => asciiLower(c.name)));
  for (const c of [...(rules.updateColumns ?? []), ...(rules.selectColumns ?? []), ...(rules.insertColumns ?? [])]) {
    if (!known.has(asciiLower(c))) return { table: shape.name, statements: [], names: [], error: `${shape.name} has no column ${c}` };
  }
  // a row of main."T", by rowid in triggers on the table (every rowid
  // table has one) and by primary key in the view's (which has no rowid)
  const mainRow = (which: "OLD" | "NEW") => (shape.withoutRowid ? shape.pk.map((c) => `${T}.${q(c)} IS ${which}.${q(c)}`).join(" AND ") : `${T}.rowid = ${which}.rowid`);
  const admitted = (which: "OLD" | "NEW", rule: string) => `EXISTS (SELECT 1 FROM ${main} AS ${T} WHERE ${mainRow(which)} AND (${rule}))`;
  // Names of the service's own objects carry a token made per installation:
  // the authorizer trusts code compiled inside them (access-rules.ts, file
  // comment), and SQLite reports a CTE's body as "inside" the CTE's name, so
  // a name a device could write (the guard refuses _pulsebase_ words anyway)
  // or guess must never be trusted.
  const names: string[] = [];
  const name = (kind: string) => {
    const n = `${TRIGGER_PREFIX}${token}_${index}_${kind}`;
    names.push(asciiLower(n));
    return q(n);
  };
  const src = name("rows");
  const refused = (op: string, why: string) => `SELECT RAISE(ABORT, '${RULE_ERROR}: ${op} on ${shape.name.replace(/'/g, "''")} refused (${why})')`;

  const selText = sel as string | undefined;
  const selOrFalse = selText ?? "0";
  // The rows view (the rule, behind the barrier) under a name of the
  // service's; the view a device names is a plain view over it, so nothing
  // is ever compiled "inside" a name a device can write except that view's
  // own columns.
  if (selText === undefined) out.push(`CREATE TEMP VIEW ${src} AS SELECT * FROM ${main} AS ${T} WHERE 0 LIMIT -1`);
  else if (isTrueRule(rules.select)) out.push(`CREATE TEMP VIEW ${src} AS SELECT * FROM ${main} AS ${T}`);
  else out.push(`CREATE TEMP VIEW ${src} AS SELECT * FROM ${main} AS ${T} WHERE (${selText}) LIMIT -1`);
  // Columns a device may not read are NULL in the view it names (the rows
  // view keeps them for the rules and triggers): no authorizer answer is
  // needed, which matters because SQLite builds some column references
  // (a USING or NATURAL join's terms) without asking it.
  const shown = shape.columns
    .filter((c) => !c.hidden)
    .map((c) => (listed(rules.selectColumns, c.name) ? q(c.name) : `NULL AS ${q(c.name)}`));
  out.push(`CREATE TEMP VIEW ${T} AS SELECT ${rules.selectColumns ? shown.join(", ") : "*"} FROM temp.${src}`);

  // by =, not IS: a NULL key (possible in a rowid table whose PRIMARY KEY is
  // not an INTEGER one) matches nothing, never every row with a NULL key
  const byKey = shape.pk.map((c) => `${q(c)} = OLD.${q(c)}`).join(" AND ");
  const count = `UPDATE temp.${WRITTEN_TABLE} SET n = n + changes();`;
  if (upd !== undefined) {
    // Only columns a device may both read and set are forwarded: a column
    // it cannot read is NULL in the view's rows (select_columns), and the
    // others are never set, so an update leaves them as they were.
    const settable = shape.columns
      .filter((c) => !c.generated && listed(rules.selectColumns, c.name) && listed(rules.updateColumns, c.name))
      .map((c) => `${q(c.name)} = NEW.${q(c.name)}`);
    if (settable.length === 0) return { table: shape.name, statements: [], names: [], error: `the update rule of ${shape.name}: no column a device may both read and set` };
    out.push(`CREATE TEMP TRIGGER ${name("view_update")} INSTEAD OF UPDATE ON temp.${T} BEGIN UPDATE ${main} SET ${settable.join(", ")} WHERE ${byKey}; ${count} END`);
    // a row the device may not see is never one it may update, whatever path the update takes (the view, UPSERT, main."T")
    out.push(`CREATE TEMP TRIGGER ${name("using_update")} BEFORE UPDATE ON ${main} WHEN NOT ${admitted("OLD", `(${selOrFalse}) AND (${upd as string})`)} BEGIN SELECT RAISE(IGNORE); END`);
    out.push(`CREATE TEMP TRIGGER ${name("check_update")} AFTER UPDATE ON ${main} WHEN NOT ${admitted("NEW", chk as string)} BEGIN ${refused("update", "the new row does not pass the rule")}; END`);
  }
  if (del !== undefined) {
    out.push(`CREATE TEMP TRIGGER ${name("view_delete")} INSTEAD OF DELETE ON temp.${T} BEGIN DELETE FROM ${main} WHERE ${byKey}; ${count} END`);
    out.push(`CREATE TEMP TRIGGER ${name("using_delete")} BEFORE DELETE ON ${main} WHEN NOT ${admitted("OLD", `(${selOrFalse}) AND (${del as string})`)} BEGIN SELECT RAISE(IGNORE); END`);
  } else {
    // a REPLACE conflict deletes the row it conflicts with: without a delete rule, never
    out.push(`CREATE TEMP TRIGGER ${name("no_delete")} BEFORE DELETE ON ${main} BEGIN ${refused("delete", "no rule allows it")}; END`);
  }
  if (ins !== undefined) {
    out.push(`CREATE TEMP TRIGGER ${name("check_insert")} AFTER INSERT ON ${main} WHEN NOT ${admitted("NEW", ins as string)} BEGIN ${refused("insert", "the new row does not pass the rule")}; END`);
    if (rules.insertColumns) {
      // a column the device may not set keeps its DEFAULT (in a BEFORE INSERT
      // trigger NEW already holds the default of every column left out; 'now'
      // is one value within a statement); an INTEGER PRIMARY KEY takes the
      // id SQLite makes
      const allowed = new Set(rules.insertColumns.map(asciiLower));
      for (const c of shape.columns) {
        // (a DEFAULT that calls a function, say randomblob(), cannot be compared: such a column is left to the check rule)
        if (c.generated || c.rowidAlias || allowed.has(asciiLower(c.name)) || callsFunction(c.dflt)) continue;
        const col = q(c.name);
        out.push(
          `CREATE TEMP TRIGGER ${name(`insert_column_${shape.columns.indexOf(c)}`)} BEFORE INSERT ON ${main} WHEN NEW.${col} IS NOT (${c.dflt ?? "NULL"}) BEGIN SELECT RAISE(ABORT, '${RULE_ERROR}: insert into ${shape.name.replace(/'/g, "''")} may not set ${c.name.replace(/'/g, "''")}'); END`,
        );
      }
    }
  }
  return { table: shape.name, statements: out, names };
}

/** Whether a DEFAULT expression calls a function (its value may differ from one evaluation to the next). */
function callsFunction(dflt: string | null | undefined): boolean {
  if (!dflt) return false;
  const t = tokenize(dflt).filter((x) => x.kind !== "space" && x.kind !== "comment");
  return t.some((x, i) => x.kind === "word" && t[i + 1]?.kind === "punct" && t[i + 1]!.text === "(");
}

/** The per-connection objects every rules connection has, before any table's. */
export const BASE_SETUP = [
  "PRAGMA recursive_triggers = ON",
  `CREATE TEMP TABLE IF NOT EXISTS ${CALLER_TABLE}(consumer_id INTEGER, user_id TEXT, app_id INTEGER)`,
  `CREATE TEMP TABLE IF NOT EXISTS ${WRITTEN_TABLE}(n INTEGER NOT NULL)`,
];

/** What the authorizer of a rules connection knows, per installed rule set. */
export interface AccessState {
  /** Lower-cased names of the tables with rules (= the temp views). */
  tables: Map<string, TableRules>;
  /** Lower-cased names of the service's own temp views and triggers (unguessable: tableSetup). */
  trusted: Set<string>;
  /** Lower-cased names of the operator's views in main: never a device's way in. */
  mainViews: Set<string>;
  /** Lower-cased names of the triggers in main: the service's (_pulsebase_*, change capture) and the operator's. */
  mainTriggers: Set<string>;
  /** Lower-cased names of the tables in main. */
  mainTables: Set<string>;
  /** Lower-cased parent tables of the foreign keys of tables with rules (for the refusal's message). */
  fkParents: Set<string>;
  /** Why the last refusal happened (for the statement's error). */
  refusal?: string;
}

const lower = (s: string | null): string => asciiLower(s ?? "");
const listed = (list: readonly string[] | undefined, column: string | null): boolean => !list || (column !== null && list.some((c) => asciiLower(c) === asciiLower(column)));

/** Table-valued functions a device may call (they read only their arguments). */
const TABLE_FUNCTIONS = new Set(["json_each", "json_tree"]);

/**
 * The decision for one authorizer call on a rules connection (see the file
 * comment). `inside` is the innermost view or trigger being compiled.
 */
export function accessAuthorizer(s: AccessState, action: number, a: string | null, b: string | null, db: string | null, inside: string | null): number {
  // one rules connection serves every consumer of the application: how many
  // rows the others wrote is theirs (last_insert_rowid() and changes() are
  // reset when the caller changes: engine-process.ts); wherever it is called
  if (action === C.SQLITE_FUNCTION && b !== null && asciiLower(b) === "total_changes") {
    return deny(s, "total_changes() is not available under access rules: use rows_written");
  }
  if (inside !== null) {
    const at = lower(inside);
    // the service's own views and triggers: the rules are the operator's SQL;
    // and the service's change-capture triggers in main (reserved names, which
    // the guard refuses in a device's text, as for every tenant connection)
    if (s.trusted.has(at) || (at.startsWith(RESERVED_PREFIX) && s.mainTriggers.has(at))) {
      return action === C.SQLITE_READ ? C.SQLITE_OK : tenantAuthorizer(action, a, b, db, inside);
    }
    if (action === C.SQLITE_READ) {
      // A table's view (filtered), read anywhere: in a CTE, or in an UPDATE's
      // or DELETE's WHERE and RETURNING (SQLite compiles them inside the name
      // of the view they target); and a table's view reading its rows view.
      if ((db === "temp" || db === null) && (s.tables.has(lower(a)) || s.trusted.has(lower(a)))) return C.SQLITE_OK;
      // Anything else read inside a name is not the service's: a CTE's body
      // (SQLite names it after the CTE, which a device chooses), an
      // operator's view, or an operator's trigger fired by a device's write
      // (its name can be guessed and used for a CTE, so its reads cannot be
      // told from a device's).
      if (s.mainViews.has(at)) return deny(s, `${inside} is not available to devices`);
      if (s.mainTriggers.has(at)) {
        return deny(
          s,
          `${RULE_ERROR}: the trigger ${inside} reads ${a}; under access rules a trigger fired by a device's write may not read tables, NEW and OLD included (SQLite names a CTE's body after the CTE, so its reads cannot be told from a device's): do that work in a function on an event trigger`,
        );
      }
      return deny(s, `${RULE_ERROR}: ${a} cannot be read here (inside ${inside}) by a device`);
    }
    // writes, functions and selects inside a name: only triggers write (a
    // CTE cannot), so these are an operator's or the service's trigger
    // bodies, under the tenant's limits
    return tenantAuthorizer(action, a, b, db, inside);
  }
  const t = lower(a);
  switch (action) {
    case C.SQLITE_SELECT:
    case C.SQLITE_RECURSIVE:
    case C.SQLITE_TRANSACTION:
      return C.SQLITE_OK;
    case C.SQLITE_FUNCTION:
      return tenantAuthorizer(action, a, b, db, inside);
    case C.SQLITE_READ: {
      // (a count(*) over the view reads it with no schema named; an unqualified name always reaches the view)
      if ((db === "temp" || db === null) && s.tables.has(t)) return C.SQLITE_OK;
      // (a count(*) over a table's view reaches its rows view with no schema named)
      if ((db === "temp" || db === null) && s.trusted.has(t)) return C.SQLITE_OK;
      // (unless the operator has a table of that name: then it is that table)
      if (TABLE_FUNCTIONS.has(t) && !s.mainTables.has(t)) return C.SQLITE_OK;
      // SQLite checks a foreign key by reading the parent table through the authorizer, outside any rule
      if (db === "main" && s.fkParents.has(t)) {
        return deny(s, `${RULE_ERROR}: a foreign key to ${a} would be checked by reading ${a} outside the rules: enforce it in the insert and update rules instead (docs/database.md, "Access rules"); ${a} is read through its rules only`);
      }
      if (db === "main" && s.tables.has(t)) return deny(s, `${RULE_ERROR}: ${a} is read through its rules only (by its plain name; an INSERT cannot use RETURNING or read its own table)`);
      return deny(s, `no such table: ${a}`);
    }
    case C.SQLITE_INSERT:
      if (db === "main" && s.tables.get(t)?.insert !== undefined) return C.SQLITE_OK;
      return deny(s, `${RULE_ERROR}: insert on ${a} is not allowed`);
    case C.SQLITE_UPDATE: {
      const r = s.tables.get(t);
      if ((db === "temp" || db === "main") && r?.update !== undefined) {
        if (listed(r.updateColumns, b) && listed(r.selectColumns, b)) return C.SQLITE_OK;
        return deny(s, `${RULE_ERROR}: update of ${a}.${b} is not allowed`);
      }
      return deny(s, `${RULE_ERROR}: update on ${a} is not allowed`);
    }
    case C.SQLITE_DELETE:
      if (db === "temp" && s.tables.get(t)?.delete !== undefined) return C.SQLITE_OK;
      return deny(s, `${RULE_ERROR}: delete on ${a} is not allowed`);
    default:
      return deny(s, "schema changes are made by the operator when the application uses access rules");
  }
}

function deny(s: AccessState, why: string): number {
  s.refusal ??= why;
  return C.SQLITE_DENY;
}

/**
 * An INSERT's target made explicit as main."T" when T has rules (the
 * unqualified name would reach the view): the statement's first tokens are
 * INSERT [OR word] INTO name, by SQLite's grammar. Only decides where the
 * row goes; the authorizer and the triggers decide whether it may.
 */
export function insertIntoMain(sql: string, tables: Map<string, TableRules>): string {
  const tokens = tokenize(sql);
  const idx: number[] = [];
  tokens.forEach((t, i) => {
    if (t.kind !== "space" && t.kind !== "comment") idx.push(i);
  });
  const word = (k: number, w: string) => tokens[idx[k]!]?.kind === "word" && tokens[idx[k]!]!.text.toUpperCase() === w;
  if (!word(0, "INSERT")) return sql;
  let k = 1;
  if (word(k, "OR")) k += 2;
  if (!word(k, "INTO")) return sql;
  const target: Token | undefined = tokens[idx[k + 1]!];
  const next = tokens[idx[k + 2]!];
  if (!target || (next?.kind === "punct" && next.text === ".")) return sql; // already qualified
  const name = target.kind === "qident" ? target.text.slice(1, -1) : target.kind === "word" ? target.text : undefined;
  if (name === undefined || !tables.has(asciiLower(name))) return sql;
  return `${sql.slice(0, target.start)}main.${sql.slice(target.start)}`;
}
