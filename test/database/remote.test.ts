// Remote mode. The executor is exercised on @libsql/client's local "file:"
// URLs (same client code path, no network); the full flow against a real
// libSQL server runs only when TEST_LIBSQL_URL (and TEST_LIBSQL_AUTH_TOKEN)
// are set, and is reported as skipped otherwise.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DatabaseKind, DatabaseStatus } from "../../gen/pulsebase/admin/v1/database_pb.js";
import { RemoteExecutor } from "../../src/database/remote-executor.js";
import { createHarness, rowsOf, type Harness } from "./harness.js";

const TEST_LIBSQL_URL = process.env.TEST_LIBSQL_URL;
const TEST_LIBSQL_AUTH_TOKEN = process.env.TEST_LIBSQL_AUTH_TOKEN ?? "";

describe("remote executor on the @libsql/client driver", () => {
  let dir: string;
  let exec: RemoteExecutor;
  let db: { id: number; url: string; authToken: string };
  const limits = { maxRows: 100, maxBytes: 1 << 20 };
  const st = (sql: string, args: (number | string | null)[] = []) => ({ sql, args, verb: sql.split(" ")[0]!.toUpperCase() });

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "pb-remote-"));
    exec = new RemoteExecutor();
    db = { id: 1, url: `file:${join(dir, "r.db")}`, authToken: "" };
  });
  afterAll(async () => {
    exec.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("encodes values and reports statement errors in results", async () => {
    const res = await exec.run(db, [st("SELECT 1, 9007199254740993, x'ff', NULL, 2.5, ?", ["t"]), st("SELECT * FROM nope")], false, limits);
    expect(res[0]!.rows).toEqual([[1, "9007199254740993", "/w==", null, 2.5, "t"]]);
    expect(res[1]!.error).toMatch(/no such table/);
  });

  it("rolls a transaction back at the first failure", async () => {
    await exec.run(db, [st("CREATE TABLE t (v TEXT UNIQUE)")], false, limits);
    const res = await exec.run(db, [st("INSERT INTO t VALUES ('a')"), st("INSERT INTO t VALUES ('a')"), st("INSERT INTO t VALUES ('b')")], true, limits);
    expect(res).toHaveLength(2);
    expect(res[0]!.rowsWritten).toBe(1);
    expect(res[1]!.error).toMatch(/UNIQUE/);
    const count = await exec.run(db, [st("SELECT count(*) FROM t")], false, limits);
    expect(count[0]!.rows).toEqual([[0]]);
  });
});

describe.skipIf(!TEST_LIBSQL_URL)("remote libSQL server (TEST_LIBSQL_URL)", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await createHarness();
  });
  afterAll(async () => h?.close());

  it("provisions, links and queries a remote database", async () => {
    const team = await h.team();
    const app = await h.app(team);
    const db = await h.admin.createDatabase({
      teamId: BigInt(team),
      name: "remote",
      kind: DatabaseKind.REMOTE,
      url: TEST_LIBSQL_URL!,
      authToken: TEST_LIBSQL_AUTH_TOKEN,
    });
    expect(db.status).toBe(DatabaseStatus.ACTIVE);
    await h.admin.linkDatabase({ databaseId: db.id, appId: BigInt(app) });
    const table = `pb_remote_${Date.now()}`;
    const res = await h.batch(
      app,
      [{ sql: `CREATE TABLE ${table} (v TEXT)` }, { sql: `INSERT INTO ${table} VALUES (?)`, params: ["x"] }, { sql: `SELECT v FROM ${table}` }],
      true,
    );
    expect(rowsOf(res.results[2])).toEqual([["x"]]);
    await h.query(app, `DROP TABLE ${table}`);
  });
});
