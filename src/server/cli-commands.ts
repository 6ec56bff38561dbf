// The operator CLI's commands: one entry per operation an operator needs,
// each a thin mapping from flags to a pulsebase.admin.v1 request. Requests
// are built from proto JSON (fromJson checks every value) and answers are
// printed the way the REST API writes JSON (snake_case, ids as numbers).
import { readFile, writeFile } from "node:fs/promises";
import { createTwoFilesPatch } from "diff";
import { basename, extname, join } from "node:path";
import { create, fromJson, type DescMessage, type DescMethod, type DescMethodServerStreaming, type DescMethodUnary, type DescService, type JsonObject, type JsonValue, type Message } from "@bufbuild/protobuf";
import { createClient, type Transport } from "@connectrpc/connect";
import { AnalyticsService } from "../../gen/pulsebase/admin/v1/analytics_pb.js";
import { CmsService } from "../../gen/pulsebase/admin/v1/cms_pb.js";
import { DatabaseService } from "../../gen/pulsebase/admin/v1/database_pb.js";
import { FunctionService } from "../../gen/pulsebase/admin/v1/functions_pb.js";
import { IdentityService } from "../../gen/pulsebase/admin/v1/identity_pb.js";
import { AccountService } from "../../gen/pulsebase/admin/v1/account_pb.js";
import { AccessRulesService } from "../../gen/pulsebase/admin/v1/access_rules_pb.js";
import { SqlService } from "../../gen/pulsebase/admin/v1/sql_pb.js";
import { encodeRest } from "../transport/http/rest-json.js";
import { dataDirOf } from "../kernel/config.js";
import { TYPE_OF_EXT } from "../capabilities/cms/media.js";
import { rotateKeys } from "../capabilities/identity/token-keys.js";
import { CliError } from "./admin-target.js";

export type Flags = Record<string, string | string[] | boolean | undefined>;

export interface CommandContext {
  flags: Flags;
  /** Words after the command's own (e.g. the Service/Method of `call`). */
  args: string[];
  env: NodeJS.ProcessEnv;
  /** The admin transport (resolved lazily: commands that need no server never touch it). */
  transport(): Promise<Transport>;
}

export interface Command {
  /** The words that select it, e.g. "functions triggers create". */
  name: string;
  /** Its flags, as shown by help. */
  usage: string;
  summary: string;
  /** Takes words after its name (the SQL of `db query`, the method of `call`); others refuse them. */
  positional?: boolean;
  /** The JSON to print; an Outcome to also report a failure (exit status 1). */
  run(ctx: CommandContext): Promise<unknown>;
}

/**
 * A command's output that also reports a failure (e.g. a run that did not
 * end "ok") or carries a note for the operator (printed on stderr, so that
 * stdout stays the JSON).
 */
export class Outcome {
  constructor(readonly output: unknown, readonly failed: boolean, readonly note?: string) {}
}

/** Output that is printed as it is (text, not JSON), or was printed already (empty). */
export class Printed {
  constructor(readonly text: string) {}
}

export const ADMIN_SERVICES: DescService[] = [IdentityService, DatabaseService, SqlService, AccessRulesService, FunctionService, CmsService, AnalyticsService, AccountService];

// ---------------------------------------------------------------- helpers

const str = (f: Flags, name: string): string | undefined => {
  const v = f[name];
  if (Array.isArray(v)) return v[v.length - 1];
  return typeof v === "string" ? v : undefined;
};

function need(f: Flags, cmd: string, ...names: string[]): void {
  const missing = names.filter((n) => str(f, n) === undefined);
  if (missing.length) throw new CliError(`${cmd} needs ${missing.map((n) => `--${n}`).join(" and ")} (see pulsebase help)`, 2);
}

/**
 * The team `apps create` uses without --team: the instance's only team (so
 * apps made before and after the console's setup share one team), a new one
 * named after the app on a fresh instance, and a usage error when several
 * teams make the choice ambiguous.
 */
async function onlyTeam(ctx: CommandContext, appName: string): Promise<string> {
  const me = await invoke(ctx, AccountService, "GetMe", {});
  const teams = (me.teams ?? []) as { team_id?: string; team_name?: string }[];
  if (teams.length === 1) return String(teams[0]!.team_id);
  if (teams.length === 0) return String((await invoke(ctx, IdentityService, "CreateTeam", { name: appName })).id);
  const list = teams.map((t) => `${t.team_id} (${t.team_name})`).join(", ");
  throw new CliError(`apps create: there are several teams, pass --team (${list})`, 2);
}

/** The first of several flags that is set (e.g. --function or --id), required. */
function oneOf(f: Flags, cmd: string, ...names: string[]): string {
  for (const n of names) {
    const v = str(f, n);
    if (v !== undefined) return v;
  }
  throw new CliError(`${cmd} needs --${names[0]}`, 2);
}

function boolFlag(f: Flags, name: string): boolean | undefined {
  const v = f[name];
  if (v === undefined || typeof v === "boolean") return v;
  const s = str(f, name)!.toLowerCase();
  if (s === "true" || s === "1" || s === "yes") return true;
  if (s === "false" || s === "0" || s === "no") return false;
  throw new CliError(`--${name} must be true or false, got ${JSON.stringify(s)}`, 2);
}

function parseJson(text: string, where: string): JsonValue {
  try {
    return JSON.parse(text) as JsonValue;
  } catch (err) {
    throw new CliError(`${where} is not valid JSON: ${(err as Error).message}`, 2);
  }
}

async function readText(path: string): Promise<string> {
  try {
    return await readFile(path, "utf8");
  } catch (err) {
    throw new CliError(`cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
}

/** A JSON document from --data (inline) or --file (a path). */
async function jsonInput(f: Flags, cmd: string): Promise<JsonValue> {
  const data = str(f, "data");
  if (data !== undefined) return parseJson(data, "--data");
  const file = str(f, "file");
  if (file !== undefined) return parseJson(await readText(file), file);
  throw new CliError(`${cmd} needs --file PATH or --data JSON`, 2);
}

async function jsonObjectInput(f: Flags, cmd: string): Promise<JsonObject> {
  const v = await jsonInput(f, cmd);
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw new CliError(`${cmd}: the JSON must be an object`, 2);
  return v;
}

/** KEY=VALUE pairs of a repeatable flag (--env). */
function pairs(f: Flags, name: string): [string, string][] {
  const raw = f[name];
  const list = Array.isArray(raw) ? raw : typeof raw === "string" ? [raw] : [];
  return list.map((p) => {
    const i = p.indexOf("=");
    if (i <= 0) throw new CliError(`--${name} takes KEY=VALUE, got ${JSON.stringify(p)}`, 2);
    return [p.slice(0, i), p.slice(i + 1)];
  });
}

const list = (f: Flags, name: string): string[] | undefined => {
  const raw = f[name];
  if (raw === undefined || typeof raw === "boolean") return undefined;
  return (Array.isArray(raw) ? raw : [raw]).flatMap((s) => s.split(",")).map((s) => s.trim()).filter(Boolean);
};

/** Drops unset values so the request keeps the field's default. */
function clean(o: Record<string, unknown>): JsonObject {
  const out: JsonObject = {};
  for (const [k, v] of Object.entries(o)) {
    if (v === undefined) continue;
    out[k] = v && typeof v === "object" && !Array.isArray(v) ? clean(v as Record<string, unknown>) : (v as JsonValue);
  }
  return out;
}

function methodOf(service: DescService, name: string): DescMethod {
  const m = service.methods.find((x) => x.name === name);
  if (!m) throw new Error(`${service.typeName} has no method ${name}`);
  return m;
}

function request(method: DescMethod, json: JsonObject): Message {
  try {
    return fromJson(method.input, json);
  } catch (err) {
    throw new CliError(`invalid request for ${method.parent.name}/${method.name}: ${(err as Error).message}`, 2);
  }
}

/** Calls one admin method with a proto-JSON request; answers the REST-style JSON of the response. */
export async function invoke(ctx: CommandContext, service: DescService, name: string, json: JsonObject | Message): Promise<Record<string, JsonValue>> {
  const method = methodOf(service, name);
  const req = "$typeName" in json ? (json as Message) : request(method, json as JsonObject);
  if (method.methodKind !== "unary") throw new CliError(`${service.name}/${name} is not a unary method`, 2);
  const res = await (await ctx.transport()).unary(method as DescMethodUnary, undefined, undefined, undefined, req as never, undefined);
  return encodeRest(method.output as DescMessage, res.message as Message);
}

/** Most rows `db query` reads of one result; past it the rest is left with a note. */
const MAX_QUERY_ROWS = 1_000_000;

/** Appends a paged result's further pages (ReadSqlPage) to its rows, up to MAX_QUERY_ROWS. */
async function readRemainingPages(ctx: CommandContext, appId: string, result: JsonObject): Promise<void> {
  const rows = (result.rows ?? []) as JsonValue[];
  let token = typeof result.next_page_token === "string" ? result.next_page_token : "";
  while (token && rows.length < MAX_QUERY_ROWS) {
    const page = await invoke(ctx, SqlService, "ReadSqlPage", { app_id: appId, sql: String(result.sql), page_token: token });
    rows.push(...((page.rows ?? []) as JsonValue[]));
    token = typeof page.next_page_token === "string" ? page.next_page_token : "";
  }
  result.rows = rows;
  if (token) {
    result.next_page_token = token;
    process.stderr.write(`note: stopped after ${rows.length} rows; add LIMIT and OFFSET to read further\n`);
  } else delete result.next_page_token;
}

const MAX_CELL = 80;

/** A value as one table cell: numbers as the server sent them, NULL, text on one line (cut at 80 characters). */
function cell(v: JsonValue | undefined): string {
  const text = v === null || v === undefined ? "NULL" : typeof v === "string" ? v : typeof v === "object" ? JSON.stringify(v) : String(v);
  const line = text.replace(/\r?\n/g, "\\n").replace(/\t/g, " ");
  return line.length > MAX_CELL ? `${line.slice(0, MAX_CELL - 1)}…` : line;
}

/** A result's rows as an aligned table (psql's layout: numbers right-aligned), with its row count. */
export function formatTable(columns: string[], rows: JsonValue[][]): string {
  const cells = rows.map((r) => columns.map((_, i) => cell(r[i])));
  const numeric = columns.map((_, i) => rows.length > 0 && rows.every((r) => r[i] === null || typeof r[i] === "number"));
  // A loop, not Math.max(...cells): a spread of a million rows overflows the stack.
  const width = columns.map((c, i) => cells.reduce((w, r) => Math.max(w, r[i]!.length), c.length));
  const line = (vals: string[], head: boolean) =>
    vals.map((v, i) => (numeric[i] && !head ? v.padStart(width[i]!) : v.padEnd(width[i]!))).join(" | ").trimEnd();
  return [line(columns, true), width.map((w) => "-".repeat(w)).join("-+-"), ...cells.map((r) => line(r, false)), `(${rows.length} ${rows.length === 1 ? "row" : "rows"})`].join("\n");
}

/** `db query`'s answer for a person: each statement's table (or rows written, or its error), then the time taken. */
function formatSqlResults(r: Record<string, JsonValue>): string {
  const out: string[] = [];
  for (const res of (r.results ?? []) as JsonObject[]) {
    const columns = (res.columns ?? []) as string[];
    if (typeof res.error === "string" && res.error !== "") out.push(`error: ${res.error}`);
    else if (columns.length) {
      out.push(formatTable(columns, (res.rows ?? []) as JsonValue[][]));
      if (res.next_page_token) out.push("(more rows follow: add LIMIT and OFFSET, or see next_page_token with --json)");
    } else out.push(`${Number(res.rows_written ?? 0)} rows written`);
  }
  if (typeof r.duration_ms === "number") out.push(`(${Math.round(r.duration_ms * 10) / 10} ms)`);
  return out.join("\n\n");
}

/** A command that is exactly one admin call. */
function rpc(name: string, usage: string, summary: string, service: DescService, method: string, build: (f: Flags, cmd: string) => Record<string, unknown> | Promise<Record<string, unknown>>): Command {
  methodOf(service, method); // a typo in the table fails at load, not at use
  return { name, usage, summary, run: async (ctx) => invoke(ctx, service, method, clean(await build(ctx.flags, name))) };
}

const page = (f: Flags, dflt?: number) => ({ page_size: str(f, "page-size") ?? dflt, page_token: str(f, "page-token") });
const PAGE = "[--page-size N] [--page-token T]";


// ---------------------------------------------------------------- commands

function roleFlag(f: Flags): string {
  const r = (str(f, "role") ?? "").toLowerCase();
  if (!["viewer", "developer", "owner"].includes(r)) throw new CliError("--role must be viewer, developer or owner", 2);
  return `ROLE_${r.toUpperCase()}`;
}

/** What the application's token mode lets the holder of its (public) app key do. */
function tokenModeNote(app: Record<string, JsonValue>): string {
  if (app.strict_token_mode === true) {
    return "token mode: strict. GET /api/consumer/token also requires the consumer's device_id.";
  }
  return [
    "token mode: lenient (the spec's default). Whoever has this app key, which ships inside your app, can get a token",
    "for any consumer id of the app from GET /api/consumer/token, and with it read that consumer's stored user_email",
    "and device_id; one address may do so for at most 20 different consumers an hour. Strict mode also requires the",
    `consumer's device_id: pulsebase apps settings --id ${String(app.id)} --strict-token-mode true`,
  ].join("\n");
}

async function setPlan(ctx: CommandContext, cmd: string): Promise<Record<string, JsonValue>> {
  const f = ctx.flags;
  const appId = oneOf(f, cmd, "app", "id");
  const cur = await invoke(ctx, IdentityService, "GetApp", { id: appId });
  const p = (cur.plan ?? {}) as Record<string, JsonValue>;
  const plan = clean({
    ...p,
    name: str(f, "plan-name") ?? p.name,
    functions_enabled: boolFlag(f, "functions-enabled") ?? p.functions_enabled,
    function_invocations_per_minute: str(f, "invocations-per-minute") ?? p.function_invocations_per_minute,
    cms_requests_per_day: str(f, "cms-requests-per-day") ?? p.cms_requests_per_day,
    cms_requests_per_second: str(f, "cms-requests-per-second") ?? p.cms_requests_per_second,
    function_max_timeout_ms: str(f, "function-max-timeout-ms") ?? p.function_max_timeout_ms,
    function_max_memory_mb: str(f, "function-max-memory-mb") ?? p.function_max_memory_mb,
  });
  return invoke(ctx, IdentityService, "SetAppPlan", { app_id: appId, plan });
}

const PLAN_FLAGS = "[--plan-name N] [--functions-enabled true|false] [--invocations-per-minute N] [--cms-requests-per-day N]\n" +
  "              [--cms-requests-per-second N] [--function-max-timeout-ms N] [--function-max-memory-mb N]";

/** `functions deploy`: the function (created when new), its secrets, a new active version, its HTTP trigger. */
async function deploy(ctx: CommandContext): Promise<unknown> {
  const cmd = "functions deploy";
  const f = ctx.flags;
  need(f, cmd, "file");
  const file = str(f, "file")!;
  const code = await readText(file);
  const slug = str(f, "slug");
  let fn: Record<string, JsonValue>;
  let created = false;
  const id = str(f, "function") ?? str(f, "id");
  if (id !== undefined) {
    fn = await invoke(ctx, FunctionService, "GetFunction", { id });
  } else {
    if (str(f, "app") === undefined) throw new CliError(`${cmd} needs --app (or --id of an existing function)`, 2);
    const name = str(f, "name") ?? slug ?? basename(file, extname(file));
    const existing = await findFunction(ctx, str(f, "app")!, name);
    // A new function is created with its code in one call: code the
    // sandbox refuses leaves no empty function behind.
    fn = existing ?? await invoke(ctx, FunctionService, "CreateFunction", clean({
      app_id: str(f, "app"), name, timeout_ms: str(f, "timeout-ms"), memory_mb: str(f, "memory-mb"), invocations_per_minute: str(f, "invocations-per-minute"), code,
    }));
    if (!existing) created = true;
  }
  for (const [name, value] of pairs(f, "env")) {
    fn = await invoke(ctx, FunctionService, "SetSecret", { function_id: String(fn.id), name, value });
  }
  const activate = boolFlag(f, "activate") ?? true;
  const version = created
    ? await invoke(ctx, FunctionService, "GetVersion", { function_id: String(fn.id), version: 1 })
    : await invoke(ctx, FunctionService, "DeployVersion", { function_id: String(fn.id), code, activate });
  delete version.code; // the file the operator just gave
  let trigger: JsonValue | undefined;
  if (slug !== undefined) {
    const { triggers } = await invoke(ctx, FunctionService, "ListTriggers", { function_id: String(fn.id) });
    trigger = (triggers as Record<string, JsonValue>[]).find((t) => t.slug === slug)
      ?? await invoke(ctx, FunctionService, "CreateHttpTrigger", { function_id: String(fn.id), slug });
  }
  fn = await invoke(ctx, FunctionService, "GetFunction", { id: String(fn.id) });
  return clean({ function: fn, version, trigger });
}

async function findFunction(ctx: CommandContext, appId: string, name: string): Promise<Record<string, JsonValue> | undefined> {
  let token = "";
  do {
    const r = await invoke(ctx, FunctionService, "ListFunctions", { app_id: appId, page_size: 500, page_token: token });
    const hit = (r.functions as Record<string, JsonValue>[]).find((x) => x.name === name);
    if (hit) return hit;
    token = String(r.next_page_token ?? "");
  } while (token);
  return undefined;
}

const fnId = (f: Flags, cmd: string) => oneOf(f, cmd, "function", "id");

function numberFlag(v: string, flag: string): number {
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < 0) throw new CliError(`${flag} takes a whole number, not ${JSON.stringify(v)}`, 2);
  return n;
}

/** `functions logs --follow`: one JSON line per invocation as it is recorded, until interrupted. */
async function follow(ctx: CommandContext, functionId: string): Promise<void> {
  const method = methodOf(FunctionService, "FollowInvocations") as DescMethodServerStreaming;
  const abort = new AbortController();
  const stop = () => abort.abort();
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
  try {
    const client = createClient(FunctionService, await ctx.transport());
    // Open-ended: no deadline (the transport's default would end the stream).
    const stream = client.followInvocations(fromJson(method.input, { function_id: functionId }) as never, { signal: abort.signal, timeoutMs: 2_147_483_647 });
    for await (const inv of stream) console.log(JSON.stringify(encodeRest(method.output as DescMessage, inv as Message)));
  } catch (err) {
    if (!abort.signal.aborted) throw err;
  } finally {
    process.off("SIGINT", stop);
    process.off("SIGTERM", stop);
  }
}
const filter = (f: Flags) => ({ app_id: str(f, "app"), name: str(f, "name"), from: str(f, "from"), to: str(f, "to"), ...page(f) });
const dbKind = (f: Flags) => {
  const k = str(f, "kind");
  if (k === undefined) return undefined;
  if (k !== "embedded" && k !== "remote") throw new CliError(`--kind is embedded or remote, got ${JSON.stringify(k)}`, 2);
  return `DATABASE_KIND_${k.toUpperCase()}`;
};


// -------------------------------------------------------------- access rules (db rules)

/** The operations of a table's rules, as the rules file and `db rules get` name them. */
const RULE_KEYS = ["select", "insert", "update", "update_check", "delete"] as const;
/** What a rules file may hold besides mode and tables (the output of `db rules get --json`, so it can be edited and set again). */
const RULES_FILE_EXTRA = new Set(["app_id", "version", "saved_at", "saved_by"]);

/**
 * A rules file: `{ "mode": "rules", "tables": { "notes": { "select": "…", … } } }`
 * (tables may also be the list `db rules get --json` prints). Returns the
 * request's mode (undefined: keep the one in force), tables, and the
 * version the file was taken from (its `version`, if any).
 */
export function parseRulesFile(v: JsonValue, where: string): { mode?: string; tables: JsonObject[]; version?: number } {
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw new CliError(`${where}: the rules file must be a JSON object with "mode" and "tables"`, 2);
  for (const k of Object.keys(v)) {
    if (k !== "mode" && k !== "tables" && !RULES_FILE_EXTRA.has(k)) throw new CliError(`${where}: unknown key ${JSON.stringify(k)} (the file has "mode" and "tables")`, 2);
  }
  const mode = v.mode;
  if (mode !== undefined && mode !== "open" && mode !== "rules") throw new CliError(`${where}: "mode" is "open" or "rules", got ${JSON.stringify(mode)}`, 2);
  const raw = v.tables ?? {};
  let tables: JsonObject[];
  if (Array.isArray(raw)) {
    tables = raw.map((t, i) => {
      if (typeof t !== "object" || t === null || Array.isArray(t) || typeof t.table !== "string") throw new CliError(`${where}: tables[${i}] needs "table"`, 2);
      return t;
    });
  } else if (typeof raw === "object" && raw !== null) {
    tables = Object.entries(raw).map(([table, r]) => {
      if (typeof r !== "object" || r === null || Array.isArray(r)) throw new CliError(`${where}: the rules of ${table} must be an object ({ "select": "…", … })`, 2);
      return { table, ...r };
    });
  } else throw new CliError(`${where}: "tables" must be an object of table names`, 2);
  const version = typeof v.version === "number" ? v.version : undefined;
  return { ...(typeof mode === "string" ? { mode } : {}), tables, ...(version !== undefined ? { version } : {}) };
}

/** The account names of an application's team by user id, for "saved by" (best effort: ids when the members cannot be read). */
async function saverNames(ctx: CommandContext, appId: string): Promise<Map<number, string>> {
  try {
    const app = await invoke(ctx, IdentityService, "GetApp", { id: appId });
    const { members } = await invoke(ctx, AccountService, "ListMembers", { team_id: String(app.team_id) });
    return new Map(((members ?? []) as JsonObject[]).map((m) => [Number(m.user_id), String(m.email ?? m.name ?? "")]));
  } catch {
    return new Map();
  }
}

const savedBy = (by: JsonValue | undefined, names: Map<number, string>) => (!by ? "the operator token" : (names.get(Number(by)) ?? `user ${String(by)}`));

/** `db rules get` for a person: the mode and version, then each table's rules. */
export function formatRules(r: Record<string, JsonValue>, names: Map<number, string>): string {
  const version = Number(r.version ?? 0);
  const out = [
    version === 0
      ? `mode: ${String(r.mode ?? "open")} (no rules saved yet: version 0)`
      : `mode: ${String(r.mode)}, version ${version}, saved ${String(r.saved_at ?? "")} by ${savedBy(r.saved_by, names)}`,
  ];
  const tables = (r.tables ?? []) as JsonObject[];
  if (!tables.length) out.push(r.mode === "rules" ? "no table has rules: devices can use no table" : "no table has rules");
  for (const t of tables) {
    out.push("", String(t.table));
    for (const k of RULE_KEYS) {
      const text = typeof t[k] === "string" ? t[k] : "";
      out.push(`  ${`${k.replace("_", " ")}:`.padEnd(14)}${text || (k === "update_check" ? "(the update rule)" : "(not allowed)")}`);
    }
    for (const k of ["select_columns", "insert_columns", "update_columns"] as const) {
      const cols = (t[k] ?? []) as string[];
      out.push(`  ${`${k.replace("_", " ")}:`.padEnd(16)}${cols.length ? cols.join(", ") : "every column"}`);
    }
  }
  return out.join("\n");
}

/** `db rules history` for a person: one line per version, newest first. */
function formatRuleVersions(r: Record<string, JsonValue>, names: Map<number, string>): string {
  const rows = ((r.versions ?? []) as JsonObject[]).map((v) => [
    Number(v.version),
    String(v.mode),
    ((v.tables ?? []) as JsonObject[]).map((t) => String(t.table)).join(", ") || "-",
    savedBy(v.saved_by, names),
    String(v.saved_at ?? ""),
  ]);
  if (!rows.length) return "no rules saved yet";
  return formatTable(["version", "mode", "tables", "saved_by", "saved_at"], rows);
}

/** `db rules set` and `db rules mode`: a new version from the mode and tables given. */
async function setRules(ctx: CommandContext, appId: string, mode: string | undefined, tables: JsonObject[] | undefined, expected: number | undefined): Promise<Record<string, JsonValue>> {
  let cur: Record<string, JsonValue> | undefined;
  if (mode === undefined || tables === undefined || expected === undefined) cur = await invoke(ctx, AccessRulesService, "GetAccessRules", { app_id: appId });
  return invoke(ctx, AccessRulesService, "SetAccessRules", {
    app_id: appId,
    mode: mode ?? String(cur!.mode ?? "open"),
    tables: (tables ?? (cur!.tables as JsonObject[] | undefined) ?? []) as JsonValue,
    expected_version: expected ?? Number(cur!.version ?? 0),
  });
}

const expectedFlag = (f: Flags) => {
  const v = str(f, "expected-version");
  return v === undefined ? undefined : numberFlag(v, "--expected-version");
};

const RULES_COMMANDS: Command[] = [
  {
    name: "db rules get", usage: "--app ID [--json]",
    summary: "The access mode and each table's rules in force (docs/database.md, \"Access rules\"); --json: as the API writes them\n" +
      "              (a file `db rules set` takes back, checked against its version)",
    run: async (ctx) => {
      need(ctx.flags, "db rules get", "app");
      const app = str(ctx.flags, "app")!;
      const r = await invoke(ctx, AccessRulesService, "GetAccessRules", { app_id: app });
      return ctx.flags.json ? r : new Printed(formatRules(r, await saverNames(ctx, app)));
    },
  },
  {
    name: "db rules set", usage: "--app ID --file RULES.json [--expected-version N]",
    summary: "Save the rules of a file ({ \"mode\": \"rules\", \"tables\": { \"notes\": { \"select\": \"owner_id = :user_id\", ... } } }) as a new version;\n" +
      "              no \"mode\": the one in force. Refused if the version in force is not --expected-version (else the file's \"version\", else the current one)",
    run: async (ctx) => {
      const f = ctx.flags;
      need(f, "db rules set", "app", "file");
      const file = str(f, "file")!;
      const parsed = parseRulesFile(parseJson(await readText(file), file), file);
      return setRules(ctx, str(f, "app")!, parsed.mode, parsed.tables, expectedFlag(f) ?? parsed.version);
    },
  },
  {
    name: "db rules mode", usage: "--app ID open|rules [--expected-version N]", positional: true,
    summary: "Switch the application's access mode, keeping the tables' rules (a new version)",
    run: async (ctx) => {
      need(ctx.flags, "db rules mode", "app");
      const mode = ctx.args[0];
      if (ctx.args.length !== 1 || (mode !== "open" && mode !== "rules")) throw new CliError("db rules mode takes open or rules: pulsebase db rules mode --app 1 rules", 2);
      const cur = await invoke(ctx, AccessRulesService, "GetAccessRules", { app_id: str(ctx.flags, "app")! });
      return setRules(ctx, str(ctx.flags, "app")!, mode, (cur.tables ?? []) as JsonObject[], expectedFlag(ctx.flags) ?? Number(cur.version ?? 0));
    },
  },
  {
    name: "db rules history", usage: "--app ID [--limit N] [--json]", summary: "The saved versions of the rules, newest first: mode, tables, who and when",
    run: async (ctx) => {
      need(ctx.flags, "db rules history", "app");
      const app = str(ctx.flags, "app")!;
      const limit = str(ctx.flags, "limit");
      const r = await invoke(ctx, AccessRulesService, "ListAccessRuleVersions", clean({ app_id: app, limit: limit === undefined ? undefined : numberFlag(limit, "--limit") }));
      return ctx.flags.json ? r : new Printed(formatRuleVersions(r, await saverNames(ctx, app)));
    },
  },
  {
    name: "db rules try", usage: "--app ID --consumer N --sql SQL [--file DRAFT.json] [--json]",
    summary: "Run SQL as that consumer's device would, under the rules in force (or those of --file, not saved); nothing it writes is kept",
    run: async (ctx) => {
      const f = ctx.flags;
      need(f, "db rules try", "app", "consumer", "sql");
      const file = str(f, "file");
      const draft = file === undefined ? undefined : parseRulesFile(parseJson(await readText(file), file), file);
      const r = await invoke(ctx, AccessRulesService, "TryAsConsumer", {
        app_id: str(f, "app")!,
        consumer_id: str(f, "consumer")!,
        sql: str(f, "sql")!,
        use_draft: draft !== undefined,
        draft_tables: (draft?.tables ?? []) as JsonValue,
      });
      const results = (r.results ?? []) as JsonObject[];
      return new Outcome(f.json ? r : formatSqlResults(r), results.some((x) => typeof x.error === "string" && x.error !== ""));
    },
  },
];

export const COMMANDS: Command[] = [
  // -------------------------------------------------------------- identity
  rpc("users create", "--name N --email E", "Create an operator user", IdentityService, "CreateUser", (f, c) => (need(f, c, "name", "email"), { name: str(f, "name"), email: str(f, "email") })),
  rpc("teams create", "--name N [--member USER_ID ...]", "Create a team", IdentityService, "CreateTeam", (f, c) => (need(f, c, "name"), { name: str(f, "name"), member_user_ids: list(f, "member") })),
  {
    name: "apps create", usage: "--name N [--team TEAM_ID]", summary: "Create an application (no --team: the only team, or a new team named after it when there is none)",
    run: async (ctx) => {
      need(ctx.flags, "apps create", "name");
      const name = str(ctx.flags, "name")!;
      const team = str(ctx.flags, "team") ?? (await onlyTeam(ctx, name));
      const app = await invoke(ctx, IdentityService, "CreateApp", { team_id: team, name });
      // The mode is part of the answer even while false, with what it means.
      return new Outcome({ ...app, strict_token_mode: app.strict_token_mode === true }, false, tokenModeNote(app));
    },
  },
  rpc("apps list", `[--team TEAM_ID] ${PAGE}`, "List applications (of one team, or all)", IdentityService, "ListApps", (f) => ({ team_id: str(f, "team"), ...page(f, 500) })),
  rpc("apps get", "(--id ID | --key APP_KEY)", "Show an application", IdentityService, "GetApp", (f, c) => {
    if (str(f, "key") !== undefined) return { app_key: str(f, "key") };
    return { id: oneOf(f, c, "id", "app") };
  }),
  rpc("apps rotate-key", "--id ID", "Issue a new app key (the old one stops working)", IdentityService, "RotateAppKey", (f, c) => ({ app_id: oneOf(f, c, "id", "app") })),
  { name: "apps plan", usage: `--id ID ${PLAN_FLAGS}`, summary: "Change an application's plan (flags left out keep their value)", run: (ctx) => setPlan(ctx, "apps plan") },
  rpc("apps settings", "--id ID [--strict-token-mode true|false] [--name N]", "Change an application's settings", IdentityService, "UpdateAppSettings", (f, c) => ({
    app_id: oneOf(f, c, "id", "app"), strict_token_mode: boolFlag(f, "strict-token-mode"), name: str(f, "name"),
  })),
  {
    name: "plans show", usage: "--app ID", summary: "Show an application's plan",
    run: async (ctx) => (await invoke(ctx, IdentityService, "GetApp", { id: oneOf(ctx.flags, "plans show", "app", "id") })).plan,
  },
  { name: "plans set", usage: `--app ID ${PLAN_FLAGS}`, summary: "Same as apps plan", run: (ctx) => setPlan(ctx, "plans set") },
  rpc("consumers list", `--app ID ${PAGE}`, "List an application's consumers", IdentityService, "ListConsumers", (f, c) => (need(f, c, "app"), { app_id: str(f, "app"), ...page(f, 500) })),
  rpc("consumers delete", "--id ID", "Delete a consumer", IdentityService, "DeleteConsumer", (f, c) => ({ consumer_id: oneOf(f, c, "id", "consumer") })),
  rpc("sessions list", `--consumer ID ${PAGE}`, "List a consumer's sessions", IdentityService, "ListSessions", (f, c) => ({ consumer_id: oneOf(f, c, "consumer", "id"), ...page(f, 500) })),
  {
    name: "keys rotate", usage: "[--file PATH]", summary: "Add a JWT signing key (no server needed; restart to sign with it)",
    run: async (ctx) => {
      const file = str(ctx.flags, "file") ?? join(dataDirOf(ctx.env), "jwt-keys.json");
      return { kid: await rotateKeys(file), file, note: "restart the server to sign with the new key" };
    },
  },

  // -------------------------------------------------------------- databases
  {
    name: "databases create", usage: "--team ID --name N [--kind embedded|remote --url URL --auth-token T] [--app ID]",
    summary: "Create (and provision) a libSQL database; --app also links it to that application",
    run: async (ctx) => {
      const f = ctx.flags;
      need(f, "databases create", "team", "name");
      const db = await invoke(ctx, DatabaseService, "CreateDatabase", clean({ team_id: str(f, "team"), name: str(f, "name"), kind: dbKind(f), url: str(f, "url"), auth_token: str(f, "auth-token") }));
      if (str(f, "app") === undefined) return db;
      return invoke(ctx, DatabaseService, "LinkDatabase", { database_id: String(db.id), app_id: str(f, "app")! });
    },
  },
  rpc("databases list", "--team ID [--include-deleted]", "List a team's databases", DatabaseService, "ListDatabases", (f, c) => (need(f, c, "team"), { team_id: str(f, "team"), include_deleted: boolFlag(f, "include-deleted") })),
  rpc("databases show", "--id ID", "Show a database", DatabaseService, "GetDatabase", (f, c) => ({ id: oneOf(f, c, "id", "database") })),
  {
    name: "databases status", usage: "--id ID", summary: "A database's status, why provisioning failed, and its linked apps",
    run: async (ctx) => {
      const d = await invoke(ctx, DatabaseService, "GetDatabase", { id: oneOf(ctx.flags, "databases status", "id", "database") });
      return { id: d.id, name: d.name, status: d.status, status_message: d.status_message, linked_app_ids: d.linked_app_ids };
    },
  },
  rpc("databases link", "--id DATABASE_ID --app APP_ID", "Link an application (same team) to the database", DatabaseService, "LinkDatabase", (f, c) => (need(f, c, "app"), { database_id: oneOf(f, c, "id", "database"), app_id: str(f, "app") })),
  rpc("databases unlink", "--id DATABASE_ID --app APP_ID", "Unlink an application", DatabaseService, "UnlinkDatabase", (f, c) => (need(f, c, "app"), { database_id: oneOf(f, c, "id", "database"), app_id: str(f, "app") })),
  rpc("databases provision", "--id ID", "Retry provisioning a pending database", DatabaseService, "ProvisionDatabase", (f, c) => ({ id: oneOf(f, c, "id", "database") })),
  rpc("databases suspend", "--id ID", "Suspend a database", DatabaseService, "SuspendDatabase", (f, c) => ({ id: oneOf(f, c, "id", "database") })),
  rpc("databases resume", "--id ID", "Resume a suspended database", DatabaseService, "ResumeDatabase", (f, c) => ({ id: oneOf(f, c, "id", "database") })),
  rpc("databases delete", "--id ID", "Delete a database (data removed once no app links it)", DatabaseService, "DeleteDatabase", (f, c) => ({ id: oneOf(f, c, "id", "database") })),

  // -------------------------------------------------------------- functions
  {
    name: "functions deploy",
    usage: "--app ID --file CODE.js [--slug SLUG] [--name N] [--env KEY=VALUE ...] [--activate true|false]\n" +
      "              [--timeout-ms N] [--memory-mb N] [--invocations-per-minute N]   (or --id FUNCTION_ID --file CODE.js)",
    summary: "Deploy code from a file: creates the function (named --name, else the slug, else the file name) when new,\n" +
      "              sets --env secrets, deploys and activates a new version, and adds the HTTP trigger /api/fn/SLUG if missing",
    run: deploy,
  },
  rpc("functions create", "--app ID --name N [--timeout-ms N] [--memory-mb N] [--invocations-per-minute N]", "Create a function without code", FunctionService, "CreateFunction", (f, c) => (need(f, c, "app", "name"), {
    app_id: str(f, "app"), name: str(f, "name"), timeout_ms: str(f, "timeout-ms"), memory_mb: str(f, "memory-mb"), invocations_per_minute: str(f, "invocations-per-minute"),
  })),
  rpc("functions list", `--app ID ${PAGE}`, "List an application's functions", FunctionService, "ListFunctions", (f, c) => (need(f, c, "app"), { app_id: str(f, "app"), ...page(f, 500) })),
  rpc("functions show", "--id ID", "Show a function", FunctionService, "GetFunction", (f, c) => ({ id: fnId(f, c) })),
  rpc("functions settings", "--id ID [--timeout-ms N] [--memory-mb N] [--invocations-per-minute N]", "Change a function's limits", FunctionService, "UpdateFunctionSettings", (f, c) => ({
    id: fnId(f, c), timeout_ms: str(f, "timeout-ms"), memory_mb: str(f, "memory-mb"), invocations_per_minute: str(f, "invocations-per-minute"),
  })),
  rpc("functions delete", "--id ID", "Delete a function with its versions, triggers, secrets and invocations", FunctionService, "DeleteFunction", (f, c) => ({ id: fnId(f, c) })),
  {
    name: "functions secrets set", usage: "--id ID --env KEY=VALUE [--env ...]", summary: "Set secrets (ctx.env in the function)",
    run: async (ctx) => {
      const id = fnId(ctx.flags, "functions secrets set");
      const env = pairs(ctx.flags, "env");
      if (!env.length) throw new CliError("functions secrets set needs --env KEY=VALUE", 2);
      let fn: unknown;
      for (const [name, value] of env) fn = await invoke(ctx, FunctionService, "SetSecret", { function_id: id, name, value });
      return fn;
    },
  },
  rpc("functions secrets delete", "--id ID --name KEY", "Delete a secret", FunctionService, "DeleteSecret", (f, c) => (need(f, c, "name"), { function_id: fnId(f, c), name: str(f, "name") })),
  {
    name: "functions versions", usage: "--id ID [--show N | --diff A B]", positional: true,
    summary: "List a function's versions (number, size, SHA-256, active); --show N: one version with its code;\n" +
      "              --diff A B: what changed from version A to version B (unified diff)",
    run: async (ctx) => {
      const cmd = "functions versions";
      const f = ctx.flags;
      const id = fnId(f, cmd);
      const show = str(f, "show");
      if (show !== undefined) return invoke(ctx, FunctionService, "GetVersion", { function_id: id, version: numberFlag(show, "--show") });
      const diff = str(f, "diff");
      if (diff === undefined) return invoke(ctx, FunctionService, "ListVersions", { function_id: id });
      const [a, b] = diff.includes(",") ? diff.split(",") : diff.includes("..") ? diff.split("..") : [diff, ctx.args[0]];
      if (a === undefined || b === undefined) throw new CliError(`${cmd} --diff needs two versions: --diff A B`, 2);
      const [va, vb] = await Promise.all([a, b].map((n) => invoke(ctx, FunctionService, "GetVersion", { function_id: id, version: numberFlag(n, "--diff") })));
      const patch = createTwoFilesPatch(`v${a}`, `v${b}`, String(va!.code ?? ""), String(vb!.code ?? ""), `sha256 ${va!.sha256}`, `sha256 ${vb!.sha256}`);
      return new Printed(va!.sha256 === vb!.sha256 ? `versions ${a} and ${b} are identical (sha256 ${va!.sha256})` : patch.trimEnd());
    },
  },
  rpc("functions activate", "--id ID --version N", "Make a deployed version the active one (roll forward or back)", FunctionService, "ActivateVersion", (f, c) => (need(f, c, "version"), { function_id: fnId(f, c), version: str(f, "version") })),
  ...["run", "invoke"].map((verb): Command => ({
    name: `functions ${verb}`, usage: "--id ID [--payload JSON] [--version N]",
    summary: "Run the function now with the payload as req (exit status 1 unless the outcome is ok)",
    run: async (ctx) => {
      const f = ctx.flags;
      const payload = str(f, "payload");
      const r = await invoke(ctx, FunctionService, "RunFunction", clean({ function_id: fnId(f, `functions ${verb}`), version: str(f, "version"), payload: payload === undefined ? undefined : parseJson(payload, "--payload") }));
      return new Outcome(r, r.outcome !== "ok");
    },
  })),
  ...["invocations", "logs"].map((verb): Command => ({
    name: `functions ${verb}`, usage: `--id ID ${PAGE} | --id ID --follow`,
    summary: "A function's invocations with their errors and logs, newest first; --follow: each new one as it is\n" +
      "              recorded (one JSON line each, oldest first) until interrupted",
    run: async (ctx) => {
      const c = `functions ${verb}`;
      const f = ctx.flags;
      if (!f.follow) return invoke(ctx, FunctionService, "ListInvocations", { function_id: fnId(f, c), ...clean(page(f)) });
      await follow(ctx, fnId(f, c));
      return new Printed("");
    },
  })),
  rpc("functions triggers list", "--id FUNCTION_ID", "List a function's triggers", FunctionService, "ListTriggers", (f, c) => ({ function_id: fnId(f, c) })),
  {
    name: "functions triggers create",
    usage: "--id FUNCTION_ID (--slug SLUG [--auth consumer|public|signed [--signing-secret S] [--signature-header H] [--tolerance SECONDS]]\n" +
      "              | --source db|cms --target TABLE_OR_TYPE --operations insert,update,delete\n" +
      "              | --cron EXPR [--tz ZONE] [--missed skip|run_once]) [--enabled false]",
    summary: "Add an HTTP trigger (/api/fn/SLUG) or an event trigger",
    run: async (ctx) => {
      const f = ctx.flags;
      const c = "functions triggers create";
      const id = fnId(f, c);
      if (str(f, "slug") !== undefined) {
        return invoke(ctx, FunctionService, "CreateHttpTrigger", clean({
          function_id: id, slug: str(f, "slug"), enabled: boolFlag(f, "enabled"), auth: str(f, "auth"), signing_secret: str(f, "signing-secret"),
          signature_header: str(f, "signature-header"), signature_tolerance_seconds: str(f, "tolerance") === undefined ? undefined : numberFlag(str(f, "tolerance")!, "--tolerance"),
        }));
      }
      if (str(f, "cron") !== undefined) {
        return invoke(ctx, FunctionService, "CreateScheduleTrigger", clean({ function_id: id, cron: str(f, "cron"), timezone: str(f, "tz"), missed_ticks: str(f, "missed"), enabled: boolFlag(f, "enabled") }));
      }
      need(f, c, "source", "target");
      return invoke(ctx, FunctionService, "CreateEventTrigger", clean({ function_id: id, source: str(f, "source"), target: str(f, "target"), operations: list(f, "operations"), enabled: boolFlag(f, "enabled") }));
    },
  },
  ...[["enable", true], ["disable", false]].map(([verb, enabled]) => rpc(`functions triggers ${verb}`, "--trigger ID", `${verb === "enable" ? "Enable" : "Disable"} a trigger`, FunctionService, "SetTriggerEnabled", (f, c) => ({ trigger_id: oneOf(f, c, "trigger", "id"), enabled }))),
  rpc("functions triggers delete", "--trigger ID", "Delete a trigger", FunctionService, "DeleteTrigger", (f, c) => ({ trigger_id: oneOf(f, c, "trigger", "id") })),
  rpc("functions triggers rotate-secret", "--trigger ID [--signing-secret S]", "A signed trigger's new signing secret (shown once; the old one stops working)", FunctionService, "RotateTriggerSecret", (f, c) => ({ trigger_id: oneOf(f, c, "trigger", "id"), signing_secret: str(f, "signing-secret") })),
  rpc("functions schedules update", "--trigger ID [--cron EXPR] [--tz ZONE] [--missed skip|run_once]", "Change a schedule (options left out keep their values; the run history stays)", FunctionService, "UpdateScheduleTrigger", (f, c) => ({ trigger_id: oneOf(f, c, "trigger"), ...clean({ cron: str(f, "cron"), timezone: str(f, "tz"), missed_ticks: str(f, "missed") }) })),
  rpc("functions schedules runs", `--trigger ID ${PAGE}`, "A schedule's ticks, newest first: ran (with the invocation), failed, or skipped as missed", FunctionService, "ListScheduleRuns", (f, c) => ({ trigger_id: oneOf(f, c, "trigger", "id"), ...page(f) })),
  rpc("functions kv list", `--app ID [--prefix P] ${PAGE}`, "Keys of the application's key-value store (ctx.kv) in key order, with sizes and the totals", FunctionService, "ListKvEntries", (f, c) => (need(f, c, "app"), { app_id: str(f, "app"), prefix: str(f, "prefix"), ...page(f) })),
  rpc("functions kv get", "--app ID --key KEY", "One key with its value", FunctionService, "GetKvEntry", (f, c) => (need(f, c, "app", "key"), { app_id: str(f, "app"), key: str(f, "key") })),
  rpc("functions kv delete", "--app ID --key KEY", "Delete one key", FunctionService, "DeleteKvEntry", (f, c) => (need(f, c, "app", "key"), { app_id: str(f, "app"), key: str(f, "key") })),
  rpc("functions egress get", "--app ID", "Where the application's functions may fetch (no policy set: any public host, private addresses refused)", FunctionService, "GetEgressPolicy", (f, c) => (need(f, c, "app"), { app_id: str(f, "app") })),
  rpc("functions egress set", "--app ID [--allow HOST,*.DOMAIN,...] [--allow-private]", "Replace the fetch egress policy: without --allow any public host; --allow-private also opens private ranges (never loopback, link-local, cloud metadata or the server's own listeners)", FunctionService, "SetEgressPolicy", (f, c) => (need(f, c, "app"), { app_id: str(f, "app"), allow_hosts: list(f, "allow") ?? [], allow_private: boolFlag(f, "allow-private") ?? false })),
  rpc("functions dead-letters list", `--app ID [--function ID] ${PAGE}`, "Event deliveries that failed every attempt", FunctionService, "ListFunctionDeadLetters", (f, c) => (need(f, c, "app"), { app_id: str(f, "app"), function_id: str(f, "function"), ...page(f) })),
  rpc("functions dead-letters replay", "--app ID [--function ID] [--ids ID,ID]", "Deliver dead letters again (all of the app's, or of one function, without --ids)", FunctionService, "ReplayFunctionDeadLetters", (f, c) => (need(f, c, "app"), { app_id: str(f, "app"), function_id: str(f, "function"), ids: list(f, "ids") })),

  // -------------------------------------------------------------- CMS
  {
    name: "cms types create", usage: "--app ID (--file TYPE.json | --data JSON)",
    summary: "Create a content type from its definition ({ slug, name, fields: [{ name, type, ... }], filterable_fields, ... })",
    run: async (ctx) => (need(ctx.flags, "cms types create", "app"), invoke(ctx, CmsService, "CreateContentType", { app_id: str(ctx.flags, "app")!, content_type: await jsonObjectInput(ctx.flags, "cms types create") })),
  },
  {
    name: "cms types update", usage: "--app ID --slug SLUG (--file TYPE.json | --data JSON)", summary: "Replace a content type's definition",
    run: async (ctx) => (need(ctx.flags, "cms types update", "app", "slug"), invoke(ctx, CmsService, "UpdateContentType", { app_id: str(ctx.flags, "app")!, slug: str(ctx.flags, "slug")!, content_type: await jsonObjectInput(ctx.flags, "cms types update") })),
  },
  rpc("cms types list", "--app ID", "List content types", CmsService, "ListContentTypes", (f, c) => (need(f, c, "app"), { app_id: str(f, "app") })),
  rpc("cms types show", "--app ID --slug SLUG", "Show a content type", CmsService, "GetContentType", (f, c) => (need(f, c, "app", "slug"), { app_id: str(f, "app"), slug: str(f, "slug") })),
  rpc("cms types delete", "--app ID --slug SLUG", "Delete a content type and all its entries", CmsService, "DeleteContentType", (f, c) => (need(f, c, "app", "slug"), { app_id: str(f, "app"), slug: str(f, "slug") })),
  {
    name: "cms entries create", usage: "--app ID --type SLUG (--file DATA.json | --data JSON) [--publish]", summary: "Create an entry from its field values",
    run: async (ctx) => {
      const f = ctx.flags;
      need(f, "cms entries create", "app", "type");
      return invoke(ctx, CmsService, "CreateEntry", clean({ app_id: str(f, "app"), content_type: str(f, "type"), data: await jsonObjectInput(f, "cms entries create"), publish: boolFlag(f, "publish") }));
    },
  },
  {
    name: "cms entries update", usage: "--app ID --id ENTRY_ID (--file DATA.json | --data JSON)", summary: "Patch an entry (keys present are set, null clears)",
    run: async (ctx) => (need(ctx.flags, "cms entries update", "app", "id"), invoke(ctx, CmsService, "UpdateEntry", { app_id: str(ctx.flags, "app")!, id: str(ctx.flags, "id")!, data: await jsonObjectInput(ctx.flags, "cms entries update") })),
  },
  ...([["publish", "PublishEntry", "Publish an entry"], ["unpublish", "UnpublishEntry", "Unpublish an entry"], ["show", "GetEntry", "Show an entry, published or not"], ["delete", "DeleteEntry", "Delete an entry"]] as const)
    .map(([verb, method, summary]) => rpc(`cms entries ${verb}`, "--app ID --id ENTRY_ID", summary, CmsService, method, (f, c) => (need(f, c, "app", "id"), { app_id: str(f, "app"), id: str(f, "id") }))),
  rpc("cms entries list", `--app ID --type SLUG ${PAGE}`, "List entries, published or not, newest first", CmsService, "ListEntries", (f, c) => (need(f, c, "app", "type"), { app_id: str(f, "app"), content_type: str(f, "type"), ...page(f) })),
  {
    name: "cms media upload", usage: "--app ID --file PATH [--content-type TYPE] [--filename NAME]", summary: "Upload a media file (its file_id goes in media fields)",
    run: async (ctx) => {
      const f = ctx.flags;
      need(f, "cms media upload", "app", "file");
      const path = str(f, "file")!;
      let data: Buffer;
      try {
        data = await readFile(path);
      } catch (err) {
        throw new CliError(`cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
      }
      const method = methodOf(CmsService, "UploadMedia");
      const req = create(method.input, {
        ...(request(method, clean({ app_id: str(f, "app"), filename: str(f, "filename") ?? basename(path), content_type: str(f, "content-type") ?? TYPE_OF_EXT.get(extname(path).slice(1).toLowerCase()) ?? "application/octet-stream" })) as object),
        data: new Uint8Array(data),
      } as never);
      return invoke(ctx, CmsService, "UploadMedia", req);
    },
  },
  rpc("cms media list", `--app ID ${PAGE}`, "List media files, newest first", CmsService, "ListMedia", (f, c) => (need(f, c, "app"), { app_id: str(f, "app"), ...page(f) })),
  rpc("cms media delete", "--app ID --file-id FILE_ID", "Delete a media file (refused while an entry references it)", CmsService, "DeleteMedia", (f, c) => (need(f, c, "app", "file-id"), { app_id: str(f, "app"), file_id: str(f, "file-id") })),
  rpc("cms usage", "--app ID [--from YYYY-MM-DD] [--to YYYY-MM-DD]", "Daily CMS request counts (counted against the plan, included)", CmsService, "GetCmsUsage", (f, c) => (need(f, c, "app"), { app_id: str(f, "app"), from_day: str(f, "from"), to_day: str(f, "to") })),

  // -------------------------------------------------------------- analytics
  rpc("analytics events list", `--app ID [--name N] [--from ISO] [--to ISO] ${PAGE}`, "Events, newest activity first", AnalyticsService, "ListEvents", (f, c) => (need(f, c, "app"), { filter: filter(f) })),
  rpc("analytics events show", "--id ID", "An event with its data", AnalyticsService, "GetEvent", (f, c) => ({ id: oneOf(f, c, "id", "event") })),
  rpc("analytics events daily", "--id EVENT_ID --from ISO --to ISO", "Occurrences and distinct users per UTC day", AnalyticsService, "GetEventDailyCounts", (f, c) => (need(f, c, "from", "to"), { event_id: oneOf(f, c, "id", "event"), from: str(f, "from"), to: str(f, "to") })),
  rpc("analytics logs list", `--app ID [--name CLASS_FQN] [--type error|crash] [--from ISO] [--to ISO] ${PAGE}`, "Error and crash logs", AnalyticsService, "ListLogs", (f, c) => (need(f, c, "app"), { filter: filter(f), type: str(f, "type") })),
  rpc("analytics logs show", "--id ID", "A log", AnalyticsService, "GetLog", (f, c) => ({ id: oneOf(f, c, "id", "log") })),
  rpc("analytics logs occurrences", `--id LOG_ID [--from ISO] [--to ISO] ${PAGE}`, "A log's occurrences", AnalyticsService, "ListLogOccurrences", (f, c) => ({ log_id: oneOf(f, c, "id", "log"), from: str(f, "from"), to: str(f, "to"), ...page(f) })),
  {
    name: "analytics logs attachment", usage: "--occurrence ID [--file OUT_PATH]", summary: "The file attached to a log occurrence (written to --file, else printed base64)",
    run: async (ctx) => {
      const r = await invoke(ctx, AnalyticsService, "GetLogAttachment", { occurrence_id: oneOf(ctx.flags, "analytics logs attachment", "occurrence", "id") });
      const out = str(ctx.flags, "file");
      if (out === undefined) return r;
      const bytes = Buffer.from(String(r.data ?? ""), "base64");
      await writeFile(out, bytes);
      return { filename: r.filename, content_type: r.content_type, size: bytes.length, written_to: out };
    },
  },
  rpc("analytics breadcrumbs list", `--app ID [--name N] [--from ISO] [--to ISO] ${PAGE}`, "Breadcrumbs", AnalyticsService, "ListBreadcrumbs", (f, c) => (need(f, c, "app"), { filter: filter(f) })),
  rpc("analytics breadcrumbs occurrences", `--id BREADCRUMB_ID [--from ISO] [--to ISO] ${PAGE}`, "A breadcrumb's occurrences", AnalyticsService, "ListBreadcrumbOccurrences", (f, c) => ({ breadcrumb_id: oneOf(f, c, "id", "breadcrumb"), from: str(f, "from"), to: str(f, "to"), ...page(f) })),
  rpc("analytics queue", "", "The ingestion queue: backend, lag, in flight, dead letters", AnalyticsService, "GetQueueStats", () => ({})),
  rpc("analytics dead-letters list", PAGE, "Ingestion batches that failed every attempt", AnalyticsService, "ListDeadLetters", (f) => page(f)),
  rpc("analytics dead-letters replay", "[--ids ID,ID]", "Put dead-lettered batches back on the queue (all without --ids)", AnalyticsService, "ReplayDeadLetters", (f) => ({ ids: list(f, "ids") })),

  // -------------------------------------------------------------- operator SQL
  {
    name: "db query", usage: "--app ID \"SQL\" (or --sql SQL, or --file QUERY.sql) [--json]", positional: true,
    summary: "Run SQL on an application's database with operator rights (PRAGMA, CREATE VIEW/TRIGGER, WITH; time-limited, audited);\n" +
      "              prints each result as a table, --json: the answer as JSON",
    run: async (ctx) => {
      const f = ctx.flags;
      need(f, "db query", "app");
      const file = str(f, "file");
      const sql = ctx.args.join(" ") || str(f, "sql") || (file !== undefined ? await readFile(file, "utf8") : "");
      if (!sql.trim()) throw new CliError('db query needs the SQL: pulsebase db query --app 1 "SELECT 1"', 2);
      const r = await invoke(ctx, SqlService, "RunSql", { app_id: str(f, "app")!, sql });
      const results = (r.results ?? []) as JsonObject[];
      // A result longer than a page (10,000 rows) is read to its end, as psql prints every row.
      for (const result of results) await readRemainingPages(ctx, str(f, "app")!, result);
      return new Outcome(f.json ? r : formatSqlResults(r), results.some((x) => typeof x.error === "string" && x.error !== ""));
    },
  },
  rpc("db schema", "--app ID", "Tables and views of an application's database, with columns and indexes", SqlService, "GetSchema", (f, c) => (need(f, c, "app"), { app_id: str(f, "app") })),
  rpc("db browse", "--app ID --table T [--page-size N] [--offset N]", "One page of a table's rows", SqlService, "BrowseTable", (f, c) => (need(f, c, "app", "table"), { app_id: str(f, "app"), table: str(f, "table"), page_size: str(f, "page-size"), offset: str(f, "offset") })),
  ...RULES_COMMANDS,

  // -------------------------------------------------------------- accounts and audit
  rpc("audit list", `[--team ID] ${PAGE}`, "The audit log of a team (all teams without --team), newest first", AccountService, "ListAuditLog", (f) => ({ team_id: str(f, "team"), ...page(f) })),
  rpc("members list", "--team ID", "A team's members and their roles", AccountService, "ListMembers", (f, c) => (need(f, c, "team"), { team_id: str(f, "team") })),
  rpc("members role", "--team ID --user USER_ID --role viewer|developer|owner", "Change a member's role", AccountService, "SetMemberRole", (f, c) => (need(f, c, "team", "user", "role"), { team_id: str(f, "team"), user_id: str(f, "user"), role: roleFlag(f) })),
  rpc("members remove", "--team ID --user USER_ID", "Remove a member from a team", AccountService, "RemoveMember", (f, c) => (need(f, c, "team", "user"), { team_id: str(f, "team"), user_id: str(f, "user") })),
  {
    name: "invitations create", usage: "--team ID --email E --role viewer|developer|owner",
    summary: "Invite someone to a team: prints the one-time link (append it to the console's address)",
    run: async (ctx) => {
      const f = ctx.flags;
      need(f, "invitations create", "team", "email", "role");
      const inv = await invoke(ctx, AccountService, "CreateInvitation", { team_id: str(f, "team")!, email: str(f, "email")!, role: roleFlag(f) });
      return { ...inv, link_path: `/invite#token=${String(inv.token)}` };
    },
  },
  rpc("invitations list", "--team ID", "A team's invitations", AccountService, "ListInvitations", (f, c) => (need(f, c, "team"), { team_id: str(f, "team") })),
  {
    name: "users password-link", usage: "--user USER_ID [--team ID]",
    summary: "A one-time link (24 hours) with which an account without a password (users create) chooses its first one",
    run: async (ctx) => {
      need(ctx.flags, "users password-link", "user");
      const link = await invoke(ctx, AccountService, "CreatePasswordLink", { user_id: str(ctx.flags, "user")!, team_id: str(ctx.flags, "team") ?? "0" });
      return { ...link, link_path: `/set-password#token=${String(link.token)}` };
    },
  },

  // -------------------------------------------------------------- any method
  {
    name: "call", usage: "SERVICE/METHOD (--data JSON | --file REQUEST.json)   (no argument: list the methods)", positional: true,
    summary: "Call any operator method with a proto-JSON request, e.g. call FunctionService/ListVersions --data '{\"function_id\": 1}'",
    run: async (ctx) => {
      const target = ctx.args[0];
      if (!target) return ADMIN_SERVICES.flatMap((s) => s.methods.map((m) => `${s.name}/${m.name}`));
      const [svcName, methodName] = target.split("/");
      const service = ADMIN_SERVICES.find((s) => s.name === svcName || s.typeName === svcName);
      const method = service?.methods.find((m) => m.name === methodName);
      if (!service || !method) throw new CliError(`unknown method ${target}; \`pulsebase call\` lists them`, 2);
      const hasInput = str(ctx.flags, "data") !== undefined || str(ctx.flags, "file") !== undefined;
      return invoke(ctx, service, method.name, hasInput ? await jsonObjectInput(ctx.flags, "call") : {});
    },
  },
];
