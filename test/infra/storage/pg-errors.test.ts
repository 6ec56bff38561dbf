// Driver errors are translated at the storage boundary, the driver error kept
// only as the cause.
import { describe, expect, it } from "vitest";
import { Code } from "@connectrpc/connect";
import { createPgSql } from "../../../src/infra/storage/pg-sql.js";
import { TEST_DATABASE_URL } from "../../helpers/db.js";
import { errorDetail } from "../../../src/kernel/errors.js";

describe("PostgreSQL error translation", () => {
  it("turns an unreachable server into unavailable (503)", async () => {
    const sql = createPgSql({ connectionString: "postgres://root@127.0.0.1:1/test" });
    const err = await sql.query("SELECT 1").catch((e) => e);
    expect(err.code).toBe(Code.Unavailable);
    expect(errorDetail(err)?.httpStatus).toBe(503);
    expect(err.cause).toBeDefined();
    await sql.close();
  });

  it("turns a statement timeout into timeout (504)", async () => {
    const sql = createPgSql({ connectionString: TEST_DATABASE_URL, statementTimeoutMs: 50 });
    const err = await sql.query("SELECT pg_sleep(2)").catch((e) => e);
    expect(err.code).toBe(Code.DeadlineExceeded);
    expect(errorDetail(err)?.code).toBe("timeout");
    // the pool keeps working afterwards
    expect((await sql.query<{ one: number }>("SELECT 1 AS one")).rows[0]!.one).toBe(1);
    await sql.close();
  });

  it("rolls a failed transaction back and keeps the pool usable", async () => {
    const sql = createPgSql({ connectionString: TEST_DATABASE_URL });
    await sql.query("CREATE TEMP TABLE IF NOT EXISTS t_roll (id int)").catch(() => {});
    const err = await sql.transaction(async (tx) => {
      await tx.query("SELECT 1");
      await tx.query("SELECT * FROM no_such_table_here");
    }).catch((e) => e);
    expect(err.code).toBe(Code.Internal);
    expect((await sql.query<{ one: number }>("SELECT 1 AS one")).rows[0]!.one).toBe(1);
    await sql.close();
  });

  it("turns U+0000 in text or jsonb (which PostgreSQL cannot store) into bad_request (400), not a 500", async () => {
    const sql = createPgSql({ connectionString: TEST_DATABASE_URL });
    for (const [text, params] of [["SELECT $1::text AS v", ["a\u0000b"]], ["SELECT $1::jsonb AS v", ['{"a":"\\u0000"}']]] as const) {
      const err = await sql.query(text, [...params]).catch((e) => e);
      expect(errorDetail(err)?.httpStatus, text).toBe(400);
    }
    await sql.close();
  });
});
