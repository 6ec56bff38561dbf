// The embedded default as a user runs it: `npm start` with only a data
// directory (PGlite, generated TLS certificate, keys and operator token), a
// restart keeps the data and the tokens.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { Agent, fetch } from "undici";
import { createServer } from "node:net";

let dataDir: string;
const dispatcher = new Agent({ connect: { rejectUnauthorized: false } });

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => resolve(p));
    });
  });
}

async function start(ports: { https: number; http: number; admin: number }): Promise<ChildProcess> {
  const child = spawn(process.execPath, ["--import", "tsx", "src/start/server.ts"], {
    env: {
      ...process.env,
      PULSEBASE_DATA_DIR: dataDir,
      PULSEBASE_HOST: "127.0.0.1",
      PULSEBASE_HTTPS_PORT: String(ports.https),
      PULSEBASE_HTTP_PORT: String(ports.http),
      PULSEBASE_ADMIN_PORT: String(ports.admin),
      DATABASE_URL: "",
      NATS_URL: "",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout!.on("data", (d) => (out += d));
  child.stderr!.on("data", (d) => (out += d));
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    try {
      const r = await fetch(`https://127.0.0.1:${ports.https}/readyz`, { dispatcher });
      if (r.status === 200) return child;
    } catch {
      /* not up yet */
    }
    if (child.exitCode !== null) throw new Error(`server exited: ${out}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`server did not start: ${out}`);
}

async function stop(child: ChildProcess): Promise<number | null> {
  child.kill("SIGTERM");
  return new Promise((resolve) => child.once("exit", (code) => resolve(code)));
}

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), "pulsebase-embedded-"));
});
afterAll(async () => {
  await rm(dataDir, { recursive: true, force: true });
});

it("runs with no external servers and keeps data and tokens across a restart", async () => {
  const ports = { https: await freePort(), http: await freePort(), admin: await freePort() };
  let child = await start(ports);
  const operator = (await readFile(join(dataDir, "operator-token"), "utf8")).trim();
  const { createClient } = await import("@connectrpc/connect");
  const { createConnectTransport } = await import("@connectrpc/connect-node");
  const { IdentityService } = await import("../../gen/pulsebase/admin/v1/identity_pb.js");
  const admin = createClient(IdentityService, createConnectTransport({
    baseUrl: `http://127.0.0.1:${ports.admin}`, httpVersion: "1.1",
    interceptors: [(next) => (req) => { req.header.set("authorization", `Bearer ${operator}`); return next(req); }],
  }));
  const team = await admin.createTeam({ name: "embedded" });
  const app = await admin.createApp({ teamId: team.id, name: "embedded" });
  const reg = await fetch(`https://127.0.0.1:${ports.https}/api/consumer`, {
    method: "POST", dispatcher, headers: { "content-type": "application/json" },
    body: JSON.stringify({ app_key: app.appKey, device_id: "e1", device_model: "m", user_id: "u", os: "ios", country: "JP", language: "ja" }),
  });
  expect(reg.status).toBe(200);
  const { token, id } = (await reg.json()) as { token: string; id: number };
  expect(await stop(child)).toBe(0);

  child = await start(ports);
  try {
    const s = await fetch(`https://127.0.0.1:${ports.https}/api/session/start`, { method: "POST", dispatcher, headers: { authorization: `Bearer ${token}` } });
    expect(s.status).toBe(200);
    expect(((await s.json()) as { consumer_id: number }).consumer_id).toBe(id);
  } finally {
    expect(await stop(child)).toBe(0);
  }
}, 90_000);
