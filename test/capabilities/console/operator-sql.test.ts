// Operator SQL on a real server: what the device guard refuses works for an
// operator (PRAGMA table_info, CREATE VIEW/TRIGGER, WITH), what would leave
// the database or touch the service's tables stays refused, the time limit
// holds, errors come back per statement, the schema and the table browser,
// a viewer browses but cannot run SQL, every run is audited, and the CLI's
// `pulsebase db query`.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Code, ConnectError } from "@connectrpc/connect";
import { toJson } from "@bufbuild/protobuf";
import { ListValueSchema } from "@bufbuild/protobuf/wkt";
import { AccountService } from "../../../gen/pulsebase/admin/v1/account_pb.js";
import { DatabaseService } from "../../../gen/pulsebase/admin/v1/database_pb.js";
import { SqlService, type SqlResult } from "../../../gen/pulsebase/admin/v1/sql_pb.js";
import { Role } from "../../../gen/pulsebase/common/v1/options_pb.js";
import { createModules } from "../../../src/server/modules.js";
import type { TestServer } from "../../helpers/server.js";
import { until } from "../../helpers/until.js";
import { operatorEnv, runCli, type CliRun } from "../../helpers/cli.js";
import { codeOf, invite, startWithOwner, type OperatorSession } from "./operator-session.js";

let s: TestServer;
let owner: OperatorSession;
let appId: bigint;
let appKey: string;

const rows = (r: SqlResult) => r.rows.map((l) => toJson(ListValueSchema, l));

beforeAll(async () => {
  ({ s, owner } = await startWithOwner({ modules: createModules }));
  const teamId = owner.me.teams[0]!.teamId;
  const app = await s.admin.createApp({ teamId, name: "sql" });
  appId = app.id;
  appKey = app.appKey;
  const dbs = s.adminClient(DatabaseService);
  const db = await dbs.createDatabase({ teamId, name: "main" });
  await dbs.linkDatabase({ databaseId: db.id, appId });
});
afterAll(() => s.close());

describe("RunSql", () => {
  it("runs what the device guard refuses: PRAGMA table_info, CREATE VIEW and TRIGGER, WITH", async () => {
    const sql = owner.client(SqlService);
    const r = await sql.runSql({
      appId,
      sql: `CREATE TABLE orders (id INTEGER PRIMARY KEY, total REAL NOT NULL, note TEXT DEFAULT 'none');
            CREATE INDEX orders_total ON orders (total);
            CREATE TABLE audit (n INTEGER);
            CREATE TRIGGER orders_ins AFTER INSERT ON orders BEGIN INSERT INTO audit VALUES (new.id); END;
            CREATE VIEW big AS SELECT * FROM orders WHERE total > 10;
            INSERT INTO orders (total) VALUES (5), (50), (500);
            WITH t AS (SELECT count(*) AS n FROM big) SELECT n FROM t;
            PRAGMA table_info(orders);
            SELECT count(*) FROM audit`,
    });
    expect(r.results.map((x) => x.error)).toEqual(Array(9).fill(""));
    expect(rows(r.results[6]!)).toEqual([[2]]);
    expect(r.results[7]!.columns).toContain("notnull");
    expect(rows(r.results[7]!).map((x) => x[1])).toEqual(["id", "total", "note"]);
    expect(rows(r.results[8]!)).toEqual([[3]]);
    expect(Number(r.results[5]!.rowsWritten)).toBe(3);
    // The device API still refuses the same statement.
    const dev = await s.register(appKey);
    const res = await s.fetch("/api/db/query", {
      method: "POST",
      headers: { authorization: `Bearer ${dev.token}`, "content-type": "application/json" },
      body: JSON.stringify({ sql: "PRAGMA table_info(orders)" }),
    });
    expect(res.status).toBe(403);
  });

  it("keeps each trigger's body whole, also when two bodies read the same", async () => {
    const r = await owner.client(SqlService).runSql({
      appId,
      sql: `CREATE TABLE tr (x INTEGER); CREATE TABLE tr_log (x INTEGER);
            CREATE TRIGGER tr_a AFTER INSERT ON tr BEGIN INSERT INTO tr_log VALUES (new.x); END;
            CREATE TRIGGER tr_b AFTER INSERT ON tr BEGIN INSERT INTO tr_log VALUES (new.x); END;
            INSERT INTO tr VALUES (7); SELECT count(*) FROM tr_log`,
    });
    expect(r.results.map((x) => x.error)).toEqual(["", "", "", "", "", ""]);
    expect(r.results[3]!.sql).toMatch(/^CREATE TRIGGER tr_b .* END$/s);
    expect(rows(r.results[5]!)).toEqual([[2]]);
  });

  it("reports a statement's error in place and runs the rest", async () => {
    const r = await owner.client(SqlService).runSql({ appId, sql: "SELECT * FROM nope; SELECT 1 AS one" });
    expect(r.results[0]!.error).toMatch(/no such table: nope/);
    expect(rows(r.results[1]!)).toEqual([[1]]);
  });

  it.each([
    ["ATTACH DATABASE '/tmp/x.db' AS x", /ATTACH/],
    ["SELECT load_extension('/tmp/evil')", /LOAD_EXTENSION/],
    ["SELECT readfile('/etc/passwd')", /READFILE/],
    ["VACUUM INTO '/tmp/copy.db'", /VACUUM INTO/],
    ["PRAGMA max_page_count = 1", /PRAGMA max_page_count/],
    ["PRAGMA foreign_keys = OFF", /assignments/],
    ["PRAGMA writable_schema", /writable_schema/],
    ["CREATE TABLE _pulsebase_changes (x)", /_pulsebase_/],
    ["DELETE FROM _pulsebase_changes", /_pulsebase_/],
  ])("refuses %s (forbidden_query)", async (sql, why) => {
    const err = await owner.client(SqlService).runSql({ appId, sql }).then(() => undefined, (e) => ConnectError.from(e));
    expect(err?.code).toBe(Code.PermissionDenied);
    expect(err?.rawMessage).toMatch(why);
  });

  it("stops a runaway query at the time limit", { timeout: 30_000 }, async () => {
    // (a query that never ends on its own: its deadline_exceeded is the cut)
    const code = await codeOf(owner.client(SqlService).runSql({ appId, sql: "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c" }));
    expect(code).toBe(Code.DeadlineExceeded);
    // The database answers again afterwards (while its engine is replaced, a
    // call may be told to retry: unavailable, never an internal error).
    const again = await until(async () => {
      try {
        return await owner.client(SqlService).runSql({ appId, sql: "SELECT 1" });
      } catch (e) {
        expect(ConnectError.from(e).code).toBe(Code.Unavailable);
        return undefined;
      }
    }, 20_000, 100);
    expect(again.results[0]!.error).toBe("");
  });

  it("answers database_not_linked for an app without a database", async () => {
    const other = await s.admin.createApp({ teamId: owner.me.teams[0]!.teamId, name: "no db" });
    expect(await codeOf(owner.client(SqlService).runSql({ appId: other.id, sql: "SELECT 1" }))).toBe(Code.FailedPrecondition);
  });
});

describe("schema and table browser", () => {
  it("lists tables and views with columns and indexes", async () => {
    const schema = await owner.client(SqlService).getSchema({ appId });
    const orders = schema.tables.find((t) => t.name === "orders")!;
    expect(orders.type).toBe("table");
    expect(orders.columns.map((c) => [c.name, c.type, c.notNull, c.primaryKey])).toEqual([
      ["id", "INTEGER", false, true],
      ["total", "REAL", true, false],
      ["note", "TEXT", false, false],
    ]);
    expect(orders.columns[2]!.defaultValue).toBe("'none'");
    expect(orders.indexes).toEqual([expect.objectContaining({ name: "orders_total", unique: false, columns: ["total"] })]);
    expect(schema.tables.find((t) => t.name === "big")?.type).toBe("view");
  });

  it("pages through a table, and a viewer may browse but not run SQL", async () => {
    await owner.client(SqlService).runSql({ appId, sql: "INSERT INTO orders (total) SELECT value FROM json_each('[1,2,3,4,5,6,7]')" });
    const viewer = await invite(s, owner, owner.me.teams[0]!.teamId, "viewer@example.com", Role.VIEWER);
    const page = await viewer.client(SqlService).browseTable({ appId, table: "orders", pageSize: 4, offset: 8n });
    expect(Number(page.totalRows)).toBe(10);
    expect(page.columns).toEqual(["id", "total", "note"]);
    expect(page.rows.length).toBe(2);
    expect(await codeOf(viewer.client(SqlService).browseTable({ appId, table: 'x"; DROP TABLE orders; --' }))).toBe(Code.NotFound);
    expect(await codeOf(viewer.client(SqlService).runSql({ appId, sql: "SELECT 1" }))).toBe(Code.PermissionDenied);
  });

  it("audits each run with its SQL", async () => {
    const log = await owner.client(AccountService).listAuditLog({ teamId: owner.me.teams[0]!.teamId, pageSize: 200 });
    const runs = log.entries.filter((e) => e.method === "pulsebase.admin.v1.SqlService/RunSql");
    expect(runs.map((e) => e.resource.sql)).toContain("SELECT * FROM nope; SELECT 1 AS one");
    expect(runs.find((e) => e.resource.sql?.startsWith("ATTACH"))?.outcome).toBe("forbidden_query");
    expect(runs.find((e) => e.actorEmail === "viewer@example.com")?.outcome).toBe("permission_denied");
  });
});

const cli = (...args: string[]): Promise<CliRun> => runCli(args, { env: operatorEnv(s) });

describe("the CLI", () => {
  it("pulsebase db query prints the results of the SQL given as an argument, and exits 1 when a statement failed", async () => {
    const out = await cli("db", "query", "--json", "--app", String(appId), "PRAGMA table_info(orders)");
    expect(out.code, out.stderr).toBe(0);
    const body = JSON.parse(out.stdout);
    expect(body.results[0].rows.map((r: unknown[]) => r[1])).toEqual(["id", "total", "note"]);
    const bad = await cli("db", "query", "--json", "--app", String(appId), "SELECT * FROM nowhere");
    expect(bad.code).toBe(1);
    expect(JSON.parse(bad.stdout).results[0].error).toMatch(/no such table/);
    const refused = await cli("db", "query", "--app", String(appId), "ATTACH 'x' AS y");
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/ATTACH/);
  });

  it("pulsebase audit list shows the operator token's runs; invitations create prints the link", async () => {
    const teamId = String(owner.me.teams[0]!.teamId);
    const audit = JSON.parse((await cli("audit", "list", "--team", teamId, "--page-size", "500")).stdout);
    const runs = audit.entries.filter((e: { method: string }) => e.method.endsWith("/RunSql"));
    expect(runs.find((e: { actor_kind: string; resource: { sql?: string } }) => e.actor_kind === "service" && e.resource.sql === "PRAGMA table_info(orders)")).toBeDefined();
    const inv = await cli("invitations", "create", "--team", teamId, "--email", "cli@example.com", "--role", "developer");
    expect(inv.code, inv.stderr).toBe(0);
    expect(JSON.parse(inv.stdout)).toMatchObject({ email: "cli@example.com", role: "ROLE_DEVELOPER", link_path: expect.stringMatching(/^\/invite#token=[\w-]{40,}$/) });
    expect((await cli("invitations", "create", "--team", teamId, "--email", "x@example.com", "--role", "admin")).code).toBe(2);
  });
});
