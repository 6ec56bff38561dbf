// Access rules (issue 31 point 7, docs/database.md "Access rules"): what an
// owner rule costs a device's SQL against the same statement with no rules.
// Two applications, each with its own embedded database holding the same
// `notes` table (100,000 rows: 100 owners x 1,000, an index on owner_id),
// seeded through the operator's SQL; one stays in `open` mode, the other is
// switched to `rules` with `owner_id = :user_id` for every operation. One
// device per application, both with user_id `user-42`. Through REST
// (`POST /api/db/query`), open and rules measured turn about
// (alternateAll), one in flight and FEW in flight:
//   1. a primary-key read of the caller's own row (under rules meant for the
//      in-process point reader once the engine has made its verdict; whether
//      it is shows in the CPU: docs/benchmarks.md, 2026-11-29, access rules);
//   2. the caller's own 1,000 rows (`WHERE owner_id = ?`);
//   3. an insert of a row of the caller's (the insert check rule).
// The rules row's note has its CPU per request (and req/s) as a ratio of the
// open row's, against the targets. Before measuring, the rules are
// checked to be in force (a count sees 1,000 rows, another owner's row reads
// as nothing, another owner's insert is refused); after the inserts, the
// rows added are checked against the answers (a refused insert is a 200
// with an error entry, which the load counts as answered).
import { DatabaseService as AdminDatabaseService } from "../../gen/pulsebase/admin/v1/database_pb.js";
import { SqlService } from "../../gen/pulsebase/admin/v1/sql_pb.js";
import { AccessRulesService } from "../../gen/pulsebase/admin/v1/access_rules_pb.js";
import { alternateAll, h1Load, seqLoad, type BenchResult, type Row } from "../lib.js";
import type { BenchContext } from "../run.js";

const ROWS = 100_000;
const OWNERS = 100;
const USER = "user-42";
/** A row of USER's (ids i with i % OWNERS = 42). */
const OWN_ID = 4242;
const FEW = 8;
/** BENCH_ACCESS_RULE replaces the rule of every operation (to compare rule shapes; the figures use the default). */
const OWNER_RULE = process.env.BENCH_ACCESS_RULE || "owner_id = :user_id";
const TARGETS = { pk: 1.2, scan: 1.5, insert: 1.3 };

interface App {
  appId: bigint;
  auth: Record<string, string>;
}

async function seededApp(ctx: BenchContext, name: string): Promise<App> {
  const { token, appId, teamId } = await ctx.newConsumer(name, { userId: USER });
  const dbs = ctx.adminClient(AdminDatabaseService);
  const db = await dbs.createDatabase({ teamId, name: "notes" });
  await dbs.linkDatabase({ databaseId: db.id, appId });
  // the operator's path: under rules a device may not change the schema
  await operatorSql(ctx, appId, "CREATE TABLE notes (id INTEGER PRIMARY KEY, owner_id TEXT NOT NULL, body TEXT)");
  await operatorSql(
    ctx, appId,
    `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${ROWS})
     INSERT INTO notes (id, owner_id, body) SELECT i, 'user-' || (i % ${OWNERS}), 'note ' || i || ': a line of text a notes app would keep' FROM n`,
  );
  await operatorSql(ctx, appId, "CREATE INDEX notes_owner ON notes (owner_id)");
  return { appId, auth: { authorization: `Bearer ${token}`, "content-type": "application/json" } };
}

type Result = { columns: string[]; rows: unknown[][]; error?: string };

async function query(ctx: BenchContext, app: App, sql: string, params: unknown[] = []): Promise<Result> {
  const r = await fetch(`${ctx.https}/api/db/query`, { method: "POST", headers: app.auth, body: JSON.stringify({ sql, params }) });
  if (r.status !== 200) throw new Error(`${sql}: HTTP ${r.status} ${await r.text()}`);
  return ((await r.json()) as { results: Result[] }).results[0]!;
}

async function operatorSql(ctx: BenchContext, appId: bigint, sql: string) {
  const res = (await ctx.adminClient(SqlService).runSql({ appId, sql })).results[0]!;
  if (res.error) throw new Error(`${sql}: ${res.error}`);
  return res;
}

async function rowCount(ctx: BenchContext, app: App): Promise<number> {
  const v = (await operatorSql(ctx, app.appId, "SELECT count(*) AS n FROM notes")).rows[0]!.values[0]!;
  return Number((v.kind as { value: unknown }).value);
}

export async function accessRulesScenarios(ctx: BenchContext): Promise<Row[]> {
  const t0 = performance.now();
  const open = await seededApp(ctx, "rules-open");
  const ruled = await seededApp(ctx, "rules-owner");
  const rule = { table: "notes", select: OWNER_RULE, insert: OWNER_RULE, update: OWNER_RULE, delete: OWNER_RULE };
  await ctx.adminClient(AccessRulesService).setAccessRules({ appId: ruled.appId, mode: "rules", tables: [rule] });
  const seedSec = (performance.now() - t0) / 1000;

  // The rules in force (the link's cache may take a moment), and doing what they say.
  const count = "SELECT count(*) FROM notes";
  for (let i = 0; ; i++) {
    const r = await query(ctx, ruled, count);
    if (!r.error && Number(r.rows[0]![0]) === ROWS / OWNERS) break;
    if (i === 100) throw new Error(`rules not in force after 10 s: ${JSON.stringify(r)}`);
    await new Promise((res) => setTimeout(res, 100));
  }
  const openCount = await query(ctx, open, count);
  if (Number(openCount.rows[0]![0]) !== ROWS) throw new Error(`open app sees ${JSON.stringify(openCount)}`);
  const pk = { sql: "SELECT * FROM notes WHERE id = ?", params: [OWN_ID] };
  const scan = { sql: "SELECT id, body FROM notes WHERE owner_id = ?", params: [USER] };
  const insert = { sql: "INSERT INTO notes (owner_id, body) VALUES (?, ?)", params: [USER, "a new note of the caller's"] };
  for (const app of [open, ruled]) {
    // a few reads first: the first teaches the point reader (the engine's verdict)
    for (let i = 0; i < 20; i++) {
      const r = await query(ctx, app, pk.sql, pk.params);
      if (r.error || r.rows.length !== 1) throw new Error(`PK read: ${JSON.stringify(r)}`);
    }
    const s = await query(ctx, app, scan.sql, scan.params);
    if (s.error || s.rows.length !== ROWS / OWNERS) throw new Error(`scan: ${s.error ?? s.rows.length + " rows"}`);
  }
  const other = await query(ctx, ruled, pk.sql, [OWN_ID + 1]);
  if (other.error || other.rows.length !== 0) throw new Error(`another owner's row under rules: ${JSON.stringify(other)}`);
  const refused = await query(ctx, ruled, insert.sql, ["user-43", "not mine"]);
  if (!refused.error?.includes("access rule")) throw new Error(`another owner's insert under rules: ${JSON.stringify(refused)}`);

  const d = ctx.durationSec;
  const url = `${ctx.https}/api/db/query`;
  const one = (app: App, body: object) => (t: number) => seqLoad({ url, method: "POST", headers: app.auth, body: JSON.stringify(body), durationSec: t });
  const few = (app: App, body: object) => (t: number) => h1Load({ url, method: "POST", headers: app.auth, body: JSON.stringify(body), durationSec: t, connections: FEW });
  const bareUrl = new URL(ctx.bareUrl);
  const bareBody = JSON.stringify({ x: 1 });
  const rows: Row[] = [];
  const bareFew = `bare Fastify POST, ${FEW} in flight REST h1`;
  rows.push({ scenario: `bare Fastify POST, ${FEW} in flight`, transport: "REST h1", result: await h1Load({ url: bareUrl.href, method: "POST", headers: { "content-type": "application/json" }, body: bareBody, durationSec: d, connections: FEW }) });

  const ratios: string[] = [];
  const pair = async (what: string, key: keyof typeof TARGETS, body: object, inFlight: "1" | "few", after?: (o: BenchResult, r: BenchResult) => Promise<string>) => {
    const load = inFlight === "1" ? one : few;
    const [o, r] = (await alternateAll([load(open, body), load(ruled, body)], d)) as [BenchResult, BenchResult];
    const label = `${what}, ${inFlight === "1" ? "1" : FEW} in flight`;
    const baseline = inFlight === "1" ? "bare Fastify POST, 1 in flight REST h1" : bareFew;
    const cpu = o.cpuUsPerReq && r.cpuUsPerReq ? r.cpuUsPerReq / o.cpuUsPerReq : NaN;
    const extra = after ? `; ${await after(o, r)}` : "";
    rows.push({ scenario: `${label}, open`, transport: "REST h1", baseline, result: o, note: after ? extra.slice(2) : undefined });
    rows.push({
      scenario: `${label}, rules`, transport: "REST h1", baseline,
      result: r,
      note: `cpu ${cpu.toFixed(2)} x open (target <= ${TARGETS[key]}${cpu <= TARGETS[key] ? ", met" : ", MISSED"}); ${(r.rps / o.rps).toFixed(2)} x open req/s`,
    });
    ratios.push(`${label}: cpu ${cpu.toFixed(2)} x (${o.cpuUsPerReq?.toFixed(0)} -> ${r.cpuUsPerReq?.toFixed(0)} us)`);
  };

  await pair("PK read (own row)", "pk", pk, "1");
  await pair("PK read (own row)", "pk", pk, "few");
  await pair(`scan, ${ROWS / OWNERS} of ${ROWS.toLocaleString("en")} rows`, "scan", scan, "1");
  await pair(`scan, ${ROWS / OWNERS} of ${ROWS.toLocaleString("en")} rows`, "scan", scan, "few");
  // Inserts last (they add rows the scans would read). Every answer must be a row added.
  const had = { open: ROWS, ruled: ROWS };
  const answered = (x: BenchResult) => Object.values(x.statuses).reduce((a, n) => a + n, 0);
  const inserted = async (o: BenchResult, r: BenchResult) => {
    const now = { open: await rowCount(ctx, open), ruled: await rowCount(ctx, ruled) };
    const added = { open: now.open - had.open, ruled: now.ruled - had.ruled };
    Object.assign(had, now);
    // a load may stop with requests the server still completes: more rows than answers, never fewer
    if (added.open < answered(o) || added.ruled < answered(r)) throw new Error(`inserts answered without a row: ${JSON.stringify({ added, answered: [answered(o), answered(r)] })}`);
    return `rows added ${added.open} / ${added.ruled} (rules) for ${answered(o)} / ${answered(r)} answers`;
  };
  await pair("INSERT own row (check rule)", "insert", insert, "1", inserted);
  await pair("INSERT own row (check rule)", "insert", insert, "few", inserted);

  console.error(`access-rules (rule ${OWNER_RULE}): seeded 2 x ${ROWS.toLocaleString("en")} rows in ${seedSec.toFixed(1)} s; rules/open server CPU:\n  ${ratios.join("\n  ")}`);
  return rows;
}
