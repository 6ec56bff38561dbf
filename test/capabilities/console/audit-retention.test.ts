// The audit log's retention (issue #28, point 9): rows older than
// PULSEBASE_AUDIT_RETENTION_DAYS go on the console module's sweep, at start
// and then hourly (the hour is faked; PostgreSQL is real), and 0 keeps them.
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import pino from "pino";
import { AUDIT_SWEEP_MS, createConsoleModule } from "../../../src/capabilities/console/console-module.js";
import { loadConfig } from "../../../src/kernel/config.js";
import { createTestDb, type TestDb } from "../../helpers/db.js";
import { until } from "../../helpers/until.js";

let db: TestDb;
beforeAll(async () => {
  db = await createTestDb("postgres");
});
afterAll(() => db.drop());
afterEach(() => vi.useRealTimers());

const consoleConfig = (env: Record<string, string>) => loadConfig({ PULSEBASE_DATA_DIR: "/tmp/unused", PULSEBASE_OPERATOR_TOKEN: "op_test_operator_token_0123456789", ...env }).console;

async function row(method: string, daysAgo: number): Promise<void> {
  await db.sql.query("INSERT INTO audit_log (actor_kind, method, outcome, at) VALUES ('anonymous', $1, 'ok', now() - make_interval(days => $2))", [method, daysAgo]);
}

const methods = async () => (await db.sql.query<{ method: string }>("SELECT method FROM audit_log ORDER BY method")).rows.map((r) => r.method);

describe("PULSEBASE_AUDIT_RETENTION_DAYS", () => {
  it("defaults to 365 days and reads the setting", () => {
    expect(consoleConfig({}).auditRetentionDays).toBe(365);
    expect(consoleConfig({ PULSEBASE_AUDIT_RETENTION_DAYS: "30" }).auditRetentionDays).toBe(30);
    expect(() => consoleConfig({ PULSEBASE_AUDIT_RETENTION_DAYS: "-1" })).toThrow(/PULSEBASE_AUDIT_RETENTION_DAYS/);
  });

  it("deletes rows past the retention at start and on each hourly sweep, and keeps younger ones", async () => {
    await db.sql.query("DELETE FROM audit_log");
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    await row("old-at-start", 31);
    const m = createConsoleModule({ sql: db.sql, logger: pino({ level: "silent" }), operatorToken: "op", config: consoleConfig({ PULSEBASE_AUDIT_RETENTION_DAYS: "30" }), mediaBaseUrl: "" });
    await m.start!();
    await until(async () => ((await methods()).includes("old-at-start") ? undefined : true));
    // Rows written (or aged) after the start go on the next sweep.
    await row("backdated", 400);
    await row("recent", 29);
    expect(await methods()).toEqual(["backdated", "recent"]);
    await vi.advanceTimersByTimeAsync(AUDIT_SWEEP_MS);
    await until(async () => ((await methods()).includes("backdated") ? undefined : true));
    expect(await methods()).toEqual(["recent"]);
    await m.stop!();
  });

  it("keeps every row with 0", async () => {
    await db.sql.query("DELETE FROM audit_log");
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    await row("ancient", 5000);
    const m = createConsoleModule({ sql: db.sql, logger: pino({ level: "silent" }), operatorToken: "op", config: consoleConfig({ PULSEBASE_AUDIT_RETENTION_DAYS: "0" }), mediaBaseUrl: "" });
    await m.start!();
    await vi.advanceTimersByTimeAsync(AUDIT_SWEEP_MS * 2);
    await m.stop!(); // waits for a sweep in progress, if one had started
    expect(await methods()).toEqual(["ancient"]);
  });
});
