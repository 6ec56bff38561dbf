// Issue #28, point 3: idle HTTP/2 streams declaring large bodies must not
// reserve the body budget. An attacker (its own address, 127.0.0.2) holds
// three streams with one consumer token declaring 128 MiB together and 2,048
// streams without a token declaring 64 KiB each (the whole 256 MiB under the
// old rules); another application's events and a registration from another
// address still answer 2xx. Clients without a token have a share per
// address, and a large body that stalls after a fast start is cut.
import { connect as h2connect, type ClientHttp2Session, type ClientHttp2Stream } from "node:http2";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createModules } from "../../src/server/modules.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { H2_ERROR } from "../helpers/h2-frames.js";
import { answer, post, within, type Answer } from "../helpers/h2-answers.js";
import { until } from "../helpers/until.js";

const MiB = 1024 * 1024;
const EVENT = JSON.stringify({ name: "tap", metadata: { screen: "home" } });
const ATTACKER = "127.0.0.2";

function session(s: TestServer, localAddress?: string): Promise<ClientHttp2Session> {
  const c = h2connect(s.httpsUrl, { rejectUnauthorized: false, ...(localAddress && { localAddress }) });
  c.on("error", () => {});
  // The server's SETTINGS (100 streams) are known once connected.
  return new Promise((resolve) => c.once("remoteSettings", () => resolve(c)));
}

/** A PING's round trip: every frame sent before it has been read by the server (and its request's hooks run). */
const ping = (c: ClientHttp2Session) => new Promise<void>((resolve, reject) => c.ping((err) => (err ? reject(err) : resolve())));

const registration = (appKey: string) =>
  JSON.stringify({ app_key: appKey, device_id: `dev-${Math.random().toString(36).slice(2)}`, device_model: "Pixel 9", user_id: "u", os: "android", country: "DE", language: "de" });

async function request(c: ClientHttp2Session, path: string, token: string | undefined, body: string): Promise<Answer | { reset: number }> {
  const st = c.request(post(path, token));
  const a = answer(st);
  st.end(body);
  return a;
}

describe("the body budget under idle streams (default limits: 256 MiB, 50 MiB bodies)", () => {
  let s: TestServer;
  let attackerToken: string;
  let victimToken: string;
  let newcomerKey: string;

  beforeAll(async () => {
    s = await startTestServer({ modules: createModules });
    attackerToken = (await s.register((await s.createApp("attacker")).appKey)).token;
    victimToken = (await s.register((await s.createApp("victim")).appKey)).token;
    newcomerKey = (await s.createApp("newcomer")).appKey;
  });
  afterAll(() => s?.close());

  it("keeps another application's POST /api/events and a registration answering 2xx", async () => {
    const attackers: ClientHttp2Session[] = [];
    const held: ClientHttp2Stream[] = [];
    try {
      // The attacker's token is known to the server (an accepted event), so its streams are admitted at once.
      const first = await session(s, ATTACKER);
      attackers.push(first);
      expect(await request(first, "/api/events", attackerToken, EVENT)).toMatchObject({ status: 200 });
      // Three streams with the token declaring 128 MiB together, no byte sent.
      for (let i = 0; i < 3; i++) held.push(first.request(post("/api/events", attackerToken, { "content-length": String(Math.floor((128 * MiB) / 3)) })));
      // 2,048 streams without a token declaring 64 KiB each (the largest such body), 100 per connection.
      for (let n = 0; n < 2048; n += 100) {
        const c = await session(s, ATTACKER);
        attackers.push(c);
        for (let i = n; i < Math.min(2048, n + 100); i++) held.push(c.request(post("/api/consumer", undefined, { "content-length": String(64 * 1024) })));
      }
      let answeredCount = 0;
      for (const st of held) void answer(st).then(() => answeredCount++);
      await Promise.all(attackers.map(ping));

      const victim = await session(s);
      try {
        const event = await within(request(victim, "/api/events", victimToken, EVENT), 10_000);
        expect(event).toMatchObject({ status: 200 });
        const reg = await within(request(victim, "/api/consumer", undefined, registration(newcomerKey)), 10_000);
        expect(reg).toMatchObject({ status: 200 });
        expect(JSON.parse((reg as Answer).body)).toHaveProperty("token");
      } finally {
        victim.destroy();
      }
      // The attack was in place throughout: its streams are still waiting for their bodies.
      expect(answeredCount).toBe(0);
    } finally {
      for (const c of attackers) c.destroy();
    }
  }, 60_000);

  it("limits the bodies of clients without a token per address", async () => {
    const attacker = await session(s, ATTACKER);
    const other = await session(s, "127.0.0.3");
    try {
      // 20 registrations of 64 KiB each from one address, all but a byte of
      // each sent (1.25 MiB), never finished: past the address's 1 MiB the rest is refused.
      const streams = Array.from({ length: 20 }, () => attacker.request(post("/api/consumer", undefined, { "content-length": String(64 * 1024) })));
      const refused: Answer[] = [];
      for (const st of streams) void answer(st).then((a) => refused.push(a as Answer));
      for (const st of streams) st.write(Buffer.alloc(64 * 1024 - 1, 0x20));
      await until(async () => (refused.length >= 4 ? true : undefined));
      expect(refused).toHaveLength(4);
      for (const a of refused) {
        expect(a).toMatchObject({ status: 503 });
        expect(a.headers["retry-after"]).toBe("1");
        expect(a.headers["x-request-id"]).toBeTruthy();
        expect(JSON.parse(a.body)).toMatchObject({ error: "unavailable" });
      }
      // The same address is refused while its bodies are held...
      expect(await within(request(attacker, "/api/consumer", undefined, registration(newcomerKey)), 5000)).toMatchObject({ status: 503 });
      // ...another address is not.
      expect(await within(request(other, "/api/consumer", undefined, registration(newcomerKey)), 5000)).toMatchObject({ status: 200 });
    } finally {
      attacker.destroy();
      other.destroy();
    }
  }, 30_000);
});

describe("the pace of a large body (2 s, 4 KiB/s)", () => {
  let s: TestServer;
  let token: string;

  beforeAll(async () => {
    s = await startTestServer({
      modules: createModules,
      env: { PULSEBASE_BODY_TIMEOUT_SECONDS: "2", PULSEBASE_BODY_MIN_RATE_BYTES: "4096" },
    });
    token = (await s.register((await s.createApp("slow")).appKey)).token;
  });
  afterAll(() => s?.close());

  it("cuts a large declared body that trickles below the minimum rate after a fast start", async () => {
    const c = await session(s);
    try {
      const st = c.request(post("/api/events", token, { "content-length": String(40 * MiB) }));
      const done = answer(st);
      // 4 MiB at once (a thousand seconds at the minimum rate), then 50 bytes a second.
      st.write(Buffer.alloc(4 * MiB, 0x20));
      const drip = setInterval(() => !st.closed && st.write("          "), 200);
      const a = await within(done, 15_000);
      clearInterval(drip);
      expect(a).toEqual({ reset: H2_ERROR.CANCEL });
      // The session goes on serving.
      expect(await within(request(c, "/api/events", token, EVENT), 5000)).toMatchObject({ status: 200 });
    } finally {
      c.destroy();
    }
  }, 30_000);
});
