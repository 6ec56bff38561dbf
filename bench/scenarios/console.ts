// Console scenarios: what an operator's page costs on the admin listener,
// one request at a time (as a page loads it), beside the bare Fastify POST
// one at a time: the home page's overview, table editor pages deep in a
// 100,000-row table (sorted by a column without an index, and filtered), and
// a 100,000-row SQL result read page by page to its end (rows/s, as the
// console's grid and CSV export read it).
import { spawnSync } from "node:child_process";
import { DatabaseService } from "../../gen/pulsebase/admin/v1/database_pb.js";
import { SqlService } from "../../gen/pulsebase/admin/v1/sql_pb.js";
import { seqLoad, type Row } from "../lib.js";
import type { BenchContext } from "../run.js";

const ROWS = 100_000;

export async function consoleScenarios(ctx: BenchContext): Promise<Row[]> {
  const { appId, teamId } = await ctx.newConsumer("console");
  const dbs = ctx.adminClient(DatabaseService);
  const db = await dbs.createDatabase({ teamId, name: "console-bench" });
  await dbs.linkDatabase({ databaseId: db.id, appId });
  const sql = ctx.adminClient(SqlService);
  await sql.runSql({ appId, sql: "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, city TEXT, spent REAL)" });
  await sql.runSql({
    appId,
    sql: `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${ROWS})
          INSERT INTO customers SELECT i, 'customer ' || i, CASE i % 4 WHEN 0 THEN 'Oslo' WHEN 1 THEN 'Lima' WHEN 2 THEN 'Pune' ELSE 'Kyiv' END, (i * 37) % 1000 FROM n`,
  });

  const call = (method: string, body: Record<string, unknown>) => ({
    url: `${ctx.adminUrl}/pulsebase.admin.v1.${method}`,
    method: "POST",
    headers: { authorization: `Bearer ${ctx.operatorToken}`, "content-type": "application/json" },
    body: JSON.stringify(body),
    durationSec: ctx.durationSec,
  });
  const baseline = "bare Fastify POST, 1 in flight REST h1";
  const transport = "Connect JSON h1, admin";
  const rows: Row[] = [
    { scenario: "home overview (GetOverview), 1 in flight", transport, baseline, result: await seqLoad(call("OverviewService/GetOverview", { teamId: String(teamId) })) },
    {
      scenario: `table page at row 50,000 of ${ROWS.toLocaleString("en")}, sorted by an unindexed column, 1 in flight`, transport, baseline,
      result: await seqLoad(call("SqlService/BrowseTable", { appId: String(appId), table: "customers", pageSize: 50, offset: "50000", orderBy: "spent", descending: true })),
    },
    {
      scenario: "table page filtered (city = Oslo) at row 10,000, 1 in flight", transport, baseline,
      result: await seqLoad(call("SqlService/BrowseTable", { appId: String(appId), table: "customers", pageSize: 50, offset: "10000", filters: [{ column: "city", op: "eq", value: "Oslo" }] })),
    },
  ];

  // One SELECT of every row, read to its end the way the grid reads it.
  const started = performance.now();
  const first = (await sql.runSql({ appId, sql: "SELECT * FROM customers" })).results[0]!;
  let read = first.rows.length;
  for (let token = first.nextPageToken; token; ) {
    const page = await sql.readSqlPage({ appId, sql: first.sql, pageToken: token });
    read += page.rows.length;
    token = page.nextPageToken;
  }
  const ms = performance.now() - started;
  rows.push({
    scenario: `SQL result of ${ROWS.toLocaleString("en")} rows read to its end (RunSql + ReadSqlPage)`, transport,
    result: { requests: read, errors: read === ROWS ? 0 : 1, durationMs: ms, rps: (read / ms) * 1000, p50Ms: 0, p99Ms: 0, statuses: {} },
    note: `rows/s; ${read} rows in ${ms.toFixed(0)} ms`,
  });

  // The CLI as an operator runs it, a whole process per command, against
  // Node starting and doing nothing: the median of 7 runs of each, in turn.
  const env = { ...process.env, PULSEBASE_ADMIN_URL: ctx.adminUrl, PULSEBASE_OPERATOR_TOKEN: ctx.operatorToken };
  const time = (args: string[]) => {
    const t0 = performance.now();
    const r = spawnSync(process.execPath, args, { env, stdio: "ignore" });
    if (r.status !== 0) throw new Error(`${args.join(" ")} exited ${r.status}`);
    return performance.now() - t0;
  };
  const cli: number[] = [];
  const bare: number[] = [];
  for (let i = 0; i < 7; i++) {
    cli.push(time(["bin/pulsebase.js", "apps", "list"]));
    bare.push(time(["-e", "0"]));
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
  rows.push({
    scenario: "CLI `pulsebase apps list`, whole process", transport: "Connect h1, admin",
    result: { requests: cli.length, errors: 0, durationMs: cli.reduce((a, b) => a + b, 0), rps: 1000 / median(cli), p50Ms: median(cli), p99Ms: Math.max(...cli), statuses: {} },
    note: `median ${median(cli).toFixed(0)} ms against ${median(bare).toFixed(0)} ms for node -e 0: +${(median(cli) - median(bare)).toFixed(0)} ms`,
  });
  return rows;
}
