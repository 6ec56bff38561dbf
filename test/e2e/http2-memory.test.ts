// What one hostile HTTP/2 client costs the server's memory: a flood of
// streams, each sending 256 KiB of a declared 1 MiB body, without a token
// and with one. The server runs as its own process (its RSS
// is what is measured); the growth must stay bounded by the stream limit and
// the body budget, not by how many streams the client opens. Each test has a
// fresh server (memory a flood leaves behind would hide the next one's).
import { readFile, mkdtemp, rm } from "node:fs/promises";
import { connect as h2connect, type ClientHttp2Session } from "node:http2";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { Agent, fetch } from "undici";
import { afterEach, beforeEach, expect, it } from "vitest";
import { IdentityService } from "../../gen/pulsebase/admin/v1/identity_pb.js";
import { spawnServer, type ChildServer } from "../helpers/child-server.js";

const MiB = 1024 * 1024;
const STREAMS = 1000;
let dir: string;
let server: ChildServer;
let token: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "pulsebase-h2mem-"));
  server = await spawnServer({
    dataDir: dir,
    seedEmbeddedDb: true,
    env: {
      PULSEBASE_ACCESS_LOG: "off",
      PULSEBASE_LOG_LEVEL: "warn",
      // 64 MiB of bodies at once (one application 16, bytes reserved as they arrive): at most 64 of the 256 KiB sent.
      PULSEBASE_BODY_BUDGET_BYTES: String(64 * MiB),
      PULSEBASE_BODY_LIMIT_BYTES: String(2 * MiB),
    },
  });
  await server.ready();
  const operator = (await readFile(join(dir, "operator-token"), "utf8")).trim();
  const admin = createClient(IdentityService, createConnectTransport({
    baseUrl: `http://127.0.0.1:${server.admin}`,
    httpVersion: "1.1",
    interceptors: [(next) => (req) => {
      req.header.set("authorization", `Bearer ${operator}`);
      return next(req);
    }],
  }));
  const team = await admin.createTeam({ name: "mem" });
  const app = await admin.createApp({ teamId: team.id, name: "mem" });
  const res = await fetch(`https://127.0.0.1:${server.https}/api/consumer`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ app_key: app.appKey, device_id: "d", device_model: "m", user_id: "u", os: "ios", country: "DE", language: "de" }),
    dispatcher: new Agent({ connect: { rejectUnauthorized: false } }),
  });
  token = ((await res.json()) as { token: string }).token;
}, 120_000);
afterEach(async () => {
  await server?.stop();
  await rm(dir, { recursive: true, force: true });
});

async function rssBytes(): Promise<number> {
  const status = await readFile(`/proc/${server.child.pid}/status`, "utf8");
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) * 1024;
}

/**
 * Opens STREAMS streams on one connection, each declaring a 1 MiB body and
 * sending 256 KiB of it; watches the server's RSS for `ms`. Returns the peak
 * growth over the RSS before, and the statuses the streams were answered.
 */
async function flood(authorization: string | undefined, ms: number): Promise<{ growth: number; statuses: Record<string, number> }> {
  // (The client may queue all it writes: its own session memory is not what is measured.)
  const c: ClientHttp2Session = h2connect(`https://127.0.0.1:${server.https}`, { rejectUnauthorized: false, maxSessionMemory: 4096 });
  c.on("error", () => {});
  // Warm the connection, then take the baseline.
  await new Promise<void>((resolve) => c.request({ ":path": "/healthz" }).on("response", () => resolve()).on("error", () => resolve()).resume());
  const before = await rssBytes();
  let peak = before;
  const statuses: Record<string, number> = {};
  const chunk = Buffer.alloc(256 * 1024, 0x20);
  for (let i = 0; i < STREAMS; i++) {
    const st = c.request({
      ":method": "POST",
      ":path": "/api/events",
      "content-type": "application/json",
      "content-length": String(MiB),
      ...(authorization ? { authorization } : {}),
    });
    st.on("error", () => {});
    st.on("response", (h) => {
      const k = String(h[":status"]);
      statuses[k] = (statuses[k] ?? 0) + 1;
    });
    st.resume();
    st.write(chunk);
  }
  const until = Date.now() + ms;
  while (Date.now() < until) {
    peak = Math.max(peak, await rssBytes());
    await new Promise((r) => setTimeout(r, 50));
  }
  c.destroy();
  return { growth: peak - before, statuses };
}

it("keeps the RSS growth of 1,000 unauthenticated streams of 256 KiB small: 401 before any body is read", async () => {
  const { growth, statuses } = await flood("Bearer not-a-token", 6000);
  expect(statuses["401"]).toBeGreaterThan(0);
  expect(growth).toBeLessThan(48 * MiB);
}, 60_000);

it("keeps the RSS growth of 1,000 streams with a token bounded by the body budget (503 past it)", async () => {
  const { growth, statuses } = await flood(`Bearer ${token}`, 6000);
  expect(statuses["503"]).toBeGreaterThan(0);
  expect(growth).toBeLessThan(96 * MiB);
}, 60_000);
