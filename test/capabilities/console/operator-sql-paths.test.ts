// Operator SQL must not show where the server keeps the database file (issue
// #28, point 12): every way to reach SQLite's database_list (and the other
// pragmas that print host directories) is refused with forbidden_query, on
// a real server, and no answer carries the data directory's path.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Code, ConnectError } from "@connectrpc/connect";
import { toJson } from "@bufbuild/protobuf";
import { ListValueSchema } from "@bufbuild/protobuf/wkt";
import { DatabaseService } from "../../../gen/pulsebase/admin/v1/database_pb.js";
import { SqlService } from "../../../gen/pulsebase/admin/v1/sql_pb.js";
import { createModules } from "../../../src/server/modules.js";
import { startTestServer, type TestServer } from "../../helpers/server.js";
import { setupOwner, type OperatorSession } from "./operator-session.js";

let s: TestServer;
let owner: OperatorSession;
let appId: bigint;

beforeAll(async () => {
  s = await startTestServer({ modules: createModules });
  owner = await setupOwner(s);
  const teamId = owner.me.teams[0]!.teamId;
  appId = (await s.admin.createApp({ teamId, name: "paths" })).id;
  const dbs = s.adminClient(DatabaseService);
  const db = await dbs.createDatabase({ teamId, name: "main" });
  await dbs.linkDatabase({ databaseId: db.id, appId });
});
afterAll(() => s.close());

describe("operator SQL hides host paths", () => {
  it.each([
    "PRAGMA database_list",
    "pragma DATABASE_LIST;",
    "PRAGMA main.database_list",
    'PRAGMA "main"."database_list"',
    "PRAGMA /* c */ database_list -- trailing",
    "SELECT * FROM pragma_database_list",
    "SELECT file FROM pragma_database_list()",
    "select * from PRAGMA_DATABASE_LIST",
    'SELECT * FROM "pragma_database_list"',
    "SELECT * FROM [pragma_database_list]",
    "SELECT * FROM `pragma_database_list`",
    "SELECT name FROM (SELECT * FROM pragma_database_list) WHERE 1",
    "SELECT 1 WHERE EXISTS (SELECT file FROM\n\tpragma_database_list)",
    "WITH d AS (SELECT * FROM pragma_database_list) SELECT * FROM d",
    "CREATE VIEW paths AS SELECT * FROM pragma_database_list",
    "PRAGMA temp_store_directory",
    "PRAGMA data_store_directory",
    "SELECT * FROM pragma_temp_store_directory",
  ])("refuses %s", async (sql) => {
    const err = await owner.client(SqlService).runSql({ appId, sql }).then(
      (r) => new Error(`ran: ${JSON.stringify(r.results.map((x) => x.rows.map((l) => toJson(ListValueSchema, l))))}`),
      (e: unknown) => ConnectError.from(e),
    );
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).code).toBe(Code.PermissionDenied);
    expect((err as ConnectError).rawMessage).toMatch(/file|path/i);
    expect((err as ConnectError).rawMessage).not.toContain(s.dataDir);
  });

  it("still runs the other reading pragmas, and no answer names the data directory", async () => {
    const r = await owner.client(SqlService).runSql({ appId, sql: "CREATE TABLE t (a INTEGER); PRAGMA table_info(t); PRAGMA page_count; SELECT * FROM pragma_table_info('t')" });
    expect(r.results.map((x) => x.error)).toEqual(["", "", "", ""]);
    expect(JSON.stringify(r.results.map((x) => x.rows.map((l) => toJson(ListValueSchema, l))))).not.toContain(s.dataDir);
  });
});
