import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDb, type TestDb } from "../../helpers/db.js";
import { migrate, loadMigrations } from "../../../src/infra/storage/migrate.js";

for (const kind of ["postgres", "pglite"] as const) {
  describe(`migrations on ${kind}`, () => {
    let db: TestDb;
    beforeAll(async () => {
      db = await createTestDb(kind);
    });
    afterAll(() => db.drop());

    it("records every migration and applies nothing twice", async () => {
      const names = (await loadMigrations()).map((m) => m.name);
      const { rows } = await db.sql.query<{ name: string }>("SELECT name FROM schema_migrations ORDER BY name");
      expect(rows.map((r) => r.name)).toEqual(names);
      expect(await migrate(db.sql)).toEqual([]);
    });

    it("rolls back a failing migration whole", async () => {
      await expect(
        migrate(db.sql, [{ name: "999_bad.sql", sql: "CREATE TABLE ok_t (id int); SELECT nope FROM missing_table;" }]),
      ).rejects.toThrow();
      const { rows } = await db.sql.query("SELECT to_regclass('ok_t') AS t");
      expect(rows[0]!.t).toBeNull();
    });

    it("translates a unique violation into a conflict error", async () => {
      await db.sql.query("INSERT INTO users (name, email) VALUES ('a', 'dup@example.com')");
      await expect(db.sql.query("INSERT INTO users (name, email) VALUES ('b', 'dup@example.com')")).rejects.toMatchObject({
        rawMessage: "Already exists.",
      });
    });
  });
}
