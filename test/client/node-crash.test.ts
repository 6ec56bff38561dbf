// Crash capture in Node: a real child process using the SDK with its file
// storage crashes (uncaught exception, unhandled rejection); the crash log is
// sent before the process exits with status 1 as Node's default would, or,
// with the server unreachable, stored on disk and sent by the next start.
import { spawn } from "node:child_process";
import { createServer, type AddressInfo, type Socket } from "node:net";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDevServer, type DevServer } from "../../examples/web/dev-server.js";
import { createModules } from "../../src/server/modules.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { waitFor } from "./sdk-fixture.js";

let s: TestServer;
let dev: DevServer;
let appKey: string;
let appId: bigint;
const dirs: string[] = [];
const APP = join(import.meta.dirname, "fixtures/crash-app.ts");

beforeAll(async () => {
  s = await startTestServer({ modules: createModules });
  ({ appKey, appId } = await s.createApp("sdk node crash"));
  dev = await startDevServer({ upstream: s.httpsUrl, insecure: true });
});
afterAll(async () => {
  await dev.close();
  await s.close();
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

async function run(mode: string, dir: string, url = dev.url): Promise<{ code: number | null; out: string }> {
  const child = spawn(process.execPath, ["--import", "tsx", APP], {
    env: { ...process.env, PB_URL: url, PB_APP_KEY: appKey, PB_DIR: dir, PB_MODE: mode },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (out += d));
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
  return { code, out };
}

const crashLog = (cls: string) =>
  s.db.sql.query<{ message: string; stack_trace: string; file_name: string; line_number: string; occurrences: string; context: Record<string, unknown>; app_versions: string }>(
    "SELECT message, stack_trace, file_name, line_number, occurrences, context, app_versions FROM analytics_logs WHERE app_id = $1 AND type = 'crash' AND class_fqn = $2",
    [Number(appId), cls]);

const newDir = async () => {
  const d = await mkdtemp(join(tmpdir(), "pb-sdk-node-"));
  dirs.push(d);
  return d;
};

describe("Node crash capture", () => {
  it("an uncaught exception is sent as a crash log, then the process exits 1 as Node would", async () => {
    const r = await run("crash", await newDir());
    expect(r.code).toBe(1);
    expect(r.out).toMatch(/SyntaxError/);
    const rows = await waitFor(() => crashLog("SyntaxError"), (x) => x.rows.length === 1);
    const log = rows.rows[0]!;
    const line = readFileSync(APP, "utf8").split("\n").findIndex((l) => l.includes('JSON.parse("{oops")')) + 1;
    expect(log.stack_trace).toContain("crash-app.ts");
    expect(log.file_name).toMatch(/crash-app\.ts$/);
    expect(Number(log.line_number)).toBe(line);
    expect(log.app_versions).toBe("cli-1.0");
    expect((log.context.breadcrumbs as { name: string }[]).map((b) => b.name)).toEqual(["started", "parsing config"]);
  });

  it("an unhandled rejection is a crash log too", async () => {
    const r = await run("rejection", await newDir());
    expect(r.code).toBe(1);
    const rows = await waitFor(() => crashLog("RangeError"), (x) => x.rows.length === 1);
    expect(rows.rows[0]).toMatchObject({ message: "never handled", context: { unhandledRejection: true } });
  });

  it("a program that simply ends sends what it recorded and ends its session (beforeExit)", async () => {
    const r = await run("exit", await newDir());
    expect(r.code).toBe(0);
    const occ = await waitFor(() => s.db.sql.query<{ session_id: string }>(
      `SELECT o.session_id FROM analytics_event_occurrences o JOIN analytics_events e ON e.id = o.event_id
        WHERE e.app_id = $1 AND e.name = 'before_exit'`, [Number(appId)]), (x) => x.rows.length > 0);
    expect(occ.rows).toHaveLength(1);
    const sess = await s.db.sql.query<{ ended_at: Date | null }>("SELECT ended_at FROM sessions WHERE id = $1", [occ.rows[0]!.session_id]);
    expect(sess.rows[0]!.ended_at).not.toBeNull();
  });

  it("with the server unreachable the crash is stored on disk and sent by the next start", async () => {
    const dir = await newDir();
    await run("send", dir); // registered while online
    dev.offline = true;
    const r = await run("crash", dir);
    expect(r.code).toBe(1);
    expect((await readdir(dir)).some((f) => f.includes("logs"))).toBe(true);
    // A server that takes the connection and never answers: the process
    // still ends, as Node's default would (a hang is this test's timeout).
    const silent = createServer((sock) => void held.push(sock));
    const held: Socket[] = [];
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
    try {
      const hung = await run("crash", await newDir(), `http://127.0.0.1:${(silent.address() as AddressInfo).port}`);
      expect(hung.code).toBe(1);
      expect(held.length).toBeGreaterThan(0); // it did try to send
    } finally {
      for (const sock of held) sock.destroy();
      silent.close();
    }
    const before = Number((await crashLog("SyntaxError")).rows[0]?.occurrences ?? 0);
    dev.offline = false;
    const next = await run("send", dir);
    expect(next.code).toBe(0);
    expect(JSON.parse(next.out.trim().split("\n").at(-1)!)).toMatchObject({ queued: { logs: 0 }, sent: { logs: 1 } });
    await waitFor(() => crashLog("SyntaxError"), (x) => Number(x.rows[0]?.occurrences) === before + 1);
    expect(Number((await crashLog("SyntaxError")).rows[0]!.occurrences)).toBe(before + 1);
  });
});
