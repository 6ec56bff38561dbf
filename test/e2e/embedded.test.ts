// The embedded default as a user runs it: `npm start` with only a data
// directory (PGlite, generated TLS certificate, keys and operator token), a
// restart keeps the data and the tokens.
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { Agent, fetch } from "undici";
import { spawnServer } from "../helpers/child-server.js";

let dataDir: string;
const dispatcher = new Agent({ connect: { rejectUnauthorized: false } });

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), "pulsebase-embedded-"));
});
afterAll(async () => {
  await rm(dataDir, { recursive: true, force: true });
});

it("runs with no external servers and keeps data and tokens across a restart", async () => {
  let server = await spawnServer({ dataDir });
  await server.ready();
  const operator = (await readFile(join(dataDir, "operator-token"), "utf8")).trim();
  const { createClient } = await import("@connectrpc/connect");
  const { createConnectTransport } = await import("@connectrpc/connect-node");
  const { IdentityService } = await import("../../gen/pulsebase/admin/v1/identity_pb.js");
  const admin = createClient(IdentityService, createConnectTransport({
    baseUrl: `http://127.0.0.1:${server.admin}`, httpVersion: "1.1",
    interceptors: [(next) => (req) => { req.header.set("authorization", `Bearer ${operator}`); return next(req); }],
  }));
  const team = await admin.createTeam({ name: "embedded" });
  const app = await admin.createApp({ teamId: team.id, name: "embedded" });
  const reg = await fetch(`https://127.0.0.1:${server.https}/api/consumer`, {
    method: "POST", dispatcher, headers: { "content-type": "application/json" },
    body: JSON.stringify({ app_key: app.appKey, device_id: "e1", device_model: "m", user_id: "u", os: "ios", country: "JP", language: "ja" }),
  });
  expect(reg.status).toBe(200);
  const { token, id } = (await reg.json()) as { token: string; id: number };
  expect(await server.stop()).toBe(0);

  server = await spawnServer({ dataDir });
  await server.ready();
  try {
    const s = await fetch(`https://127.0.0.1:${server.https}/api/session/start`, { method: "POST", dispatcher, headers: { authorization: `Bearer ${token}` } });
    expect(s.status).toBe(200);
    expect(((await s.json()) as { consumer_id: number }).consumer_id).toBe(id);
  } finally {
    expect(await server.stop()).toBe(0);
  }
}, 90_000);
