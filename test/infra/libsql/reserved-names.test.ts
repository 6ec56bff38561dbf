import { describe, expect, it } from "vitest";
import { checkStatement } from "../../../src/infra/libsql/sql-guard.js";
import { tokenize } from "../../../src/infra/libsql/sql-tokenizer.js";

describe("service-owned names", () => {
  it.each([
    "SELECT * FROM _pulsebase_changes",
    "DELETE FROM _PULSEBASE_CHANGES",
    'DROP TABLE "_pulsebase_changes"',
    "DROP INDEX _pulsebase_t_orders_insert",
  ])("refuses %s", (sql) => {
    const v = checkStatement(sql, tokenize(sql));
    expect(v.ok).toBe(false);
  });

  it("allows names that merely contain the word", () => {
    const sql = "SELECT * FROM my_pulsebase_notes";
    expect(checkStatement(sql, tokenize(sql)).ok).toBe(true);
  });
});
