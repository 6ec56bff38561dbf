// Two real `npm start` processes on one data directory: the second refuses
// at once with a message naming the directory and the first server's pid,
// the first keeps serving; after a kill -9 the next start is not blocked.
import type { ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Agent, fetch } from "undici";
import { afterAll, beforeAll, expect, it } from "vitest";
import { spawnServer, type ChildServer } from "../helpers/child-server.js";

let dataDir: string;
const dispatcher = new Agent({ connect: { rejectUnauthorized: false } });
const children: ChildProcess[] = [];

function start(): Promise<ChildServer> {
  // (the embedded database made beforehand: this file is about the lock, not the first start)
  return spawnServer({ dataDir, env: { PULSEBASE_LOG_LEVEL: "warn" }, seedEmbeddedDb: true }).then((p) => {
    children.push(p.child);
    return p;
  });
}

async function createTeam(p: ChildServer, name: string): Promise<number> {
  const operator = (await readFile(join(dataDir, "operator-token"), "utf8")).trim();
  const r = await fetch(`http://127.0.0.1:${p.admin}/pulsebase.admin.v1.IdentityService/CreateTeam`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${operator}` },
    body: JSON.stringify({ name }),
  });
  return r.status;
}

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), "pulsebase-lock-"));
});
afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  await dispatcher.close();
  await rm(dataDir, { recursive: true, force: true });
});

it("refuses a second server on the same data directory and keeps the first one serving", async () => {
  const first = await start();
  await first.ready();

  // The first server's lock cannot go stale while it runs (it heartbeats):
  // the second has nothing to wait for and must give up on its own (a hang
  // is this test's timeout).
  const second = await start();
  const code = await second.exited;
  expect(code).not.toBe(0);
  expect(first.child.exitCode).toBeNull();
  expect(first.child.signalCode).toBeNull();
  // One plain message, no stack trace; other lines (a Node or tsx warning
  // inherited from the environment) are not ours to judge.
  const output = second.output();
  const refusal = output.split("\n").filter((l) => l.includes("data directory"));
  expect(refusal, output).toHaveLength(1);
  expect(refusal[0]).toContain(`pulsebase: data directory ${dataDir} is in use by another pulsebase server (pid ${first.child.pid} on this host`);
  expect(output).not.toContain("    at ");

  // The first server still reads and writes its database.
  expect((await fetch(`https://127.0.0.1:${first.https}/readyz`, { dispatcher })).status).toBe(200);
  expect(await createTeam(first, "after refusal")).toBe(200);

  // A clean stop frees the directory.
  first.child.kill("SIGTERM");
  expect(await first.exited).toBe(0);
  expect(existsSync(join(dataDir, "pulsebase.lock"))).toBe(false);
}, 120_000);

it("starts at once after the previous server was killed with SIGKILL", async () => {
  const victim = await start();
  await victim.ready();
  expect(await createTeam(victim, "before kill")).toBe(200);
  victim.child.kill("SIGKILL");
  await victim.exited;
  // The lock file is left behind, naming a process that no longer exists.
  expect(existsSync(join(dataDir, "pulsebase.lock"))).toBe(true);

  const next = await start();
  await next.ready();
  expect(await createTeam(next, "after kill")).toBe(200);
  next.child.kill("SIGTERM");
  expect(await next.exited).toBe(0);
}, 120_000);
