// Upgrading an install whose table queues hold messages and dead letters
// (analytics_queue, function_event_queue, function_event_dead_letters):
// migration 610 moves them into the one queue's tables, and the queue
// delivers, lists and replays them as before.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadMigrations, migrate } from "../../../src/infra/storage/migrate.js";
import { createPgliteSql } from "../../../src/infra/storage/pglite-sql.js";
import { createPgSql } from "../../../src/infra/storage/pg-sql.js";
import { createScratchSchema, dropScratchSchema } from "../../../src/infra/storage/scratch-schema.js";
import type { Sql } from "../../../src/infra/storage/sql.js";
import { createSqlQueue } from "../../../src/infra/queue/sql-queue.js";
import type { QueueMessage } from "../../../src/infra/queue/queue.js";
import { TEST_DATABASE_URL } from "../../helpers/db.js";
import { until } from "../../helpers/until.js";

const UPGRADE = "610_one_queue.sql";
const text = (d: Uint8Array) => new TextDecoder().decode(d);

for (const kind of ["postgres", "pglite"] as const) {
  describe(`table queues of an earlier version (${kind})`, () => {
    let sql: Sql;
    let schema: string | undefined;
    beforeAll(async () => {
      if (kind === "pglite") sql = await createPgliteSql();
      else {
        schema = await createScratchSchema(TEST_DATABASE_URL, "pbmig");
        sql = createPgSql({ connectionString: TEST_DATABASE_URL, schema, max: 4 });
      }
      const all = await loadMigrations();
      await migrate(sql, all.filter((m) => m.name < UPGRADE));
      await sql.exec(`
        INSERT INTO analytics_queue (msg_id, payload, attempts) VALUES ('batch-1', '\\x01', 2), ('batch-2', '\\x02', 0);
        INSERT INTO analytics_queue (msg_id, payload, attempts, status, last_error, dead_at) VALUES ('batch-0', '\\x00', 5, 'dead', 'bad version', now());
        INSERT INTO function_event_queue (event_id, lane, payload, status, claimed_until) VALUES
          ('db:7:1', 3, '{"id":"db:7:1","source":"db","app_id":7,"table":"t"}', 'running', now() + interval '1 hour');
        INSERT INTO function_event_queue (event_id, lane, payload, trigger_id) VALUES
          ('db:7:0~replay~4', 3, '{"id":"db:7:0","source":"db","app_id":7,"table":"t"}', 12);
        INSERT INTO function_event_dead_letters (event_id, trigger_id, function_id, app_id, attempts, error, payload) VALUES
          ('cms:x', 9, 5, 8, 5, 'refused', '{"id":"cms:x","source":"cms","app_id":8,"collection":"c"}');
      `);
      // (up to the upgrade: later migrations are not this test's)
      expect(await migrate(sql, all.filter((m) => m.name <= UPGRADE))).toEqual([UPGRADE]);
    });
    afterAll(async () => {
      await sql.close();
      if (schema) await dropScratchSchema(TEST_DATABASE_URL, schema);
    });

    it("keeps the analytics batches and dead letters", async () => {
      const queue = createSqlQueue({ name: "analytics", sql, pollMs: 20 });
      expect(await queue.stats()).toMatchObject({ lag: 2, deadLetters: 1 });
      const dead = (await queue.listDeadLetters({ pageSize: 10, pageToken: "" })).entries;
      expect(dead).toMatchObject([{ msgId: "batch-0", attempts: 5, lastError: "bad version" }]);
      const got: QueueMessage[] = [];
      const c = queue.consume(async (m) => void got.push(m), { concurrency: 2 });
      await until(async () => ((await queue.stats()).lag === 0 ? true : undefined));
      await c.stop();
      expect(got.map((m) => [m.id, [...m.data]])).toEqual([["batch-1", [1]], ["batch-2", [2]]]);
      expect(await queue.replayDeadLetters({})).toBe(1);
      expect(await queue.stats()).toMatchObject({ lag: 1, deadLetters: 0 });
    });

    it("keeps the function events in their lanes (a replay for its trigger) and the dead letters of their application", async () => {
      const queue = createSqlQueue({ name: "function-events", sql, pollMs: 20, lanes: { count: 8, of: () => 3 } });
      expect(await queue.stats()).toMatchObject({ lag: 2, deadLetters: 1 });
      const dead = (await queue.listDeadLetters({ topic: "*.8", attrs: { "Pb-Function-Id": "5" }, pageSize: 10, pageToken: "" })).entries;
      expect(dead).toMatchObject([{ msgId: "cms:x", topic: "cms.8", attrs: { "Pb-Trigger-Id": "9", "Pb-Function-Id": "5" }, attempts: 5, lastError: "refused" }]);
      expect(JSON.parse(text(dead[0]!.data))).toMatchObject({ id: "cms:x", collection: "c" });
      const got: QueueMessage[] = [];
      const c = queue.consume(async (m) => void got.push(m), { concurrency: 8 });
      await until(async () => ((await queue.stats()).lag === 0 ? true : undefined));
      await c.stop();
      expect(got.map((m) => [m.id, m.attrs])).toEqual([["db:7:1", {}], ["db:7:0~replay~4", { "Pb-Trigger-Id": "12" }]]);
      expect(JSON.parse(text(got[0]!.data))).toMatchObject({ id: "db:7:1", table: "t" });
    });
  });
}
