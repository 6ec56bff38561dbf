// Issue 28 point 3: application B's POST /api/events (REST h2) alone, and
// while an attacker (from its own address, 127.0.0.2) holds idle HTTP/2
// streams declaring large bodies and sends none of them: three with one
// consumer token declaring 128 MiB together, and 2,048 without a token
// declaring 64 KiB each (under the old rules these reserved the whole
// 256 MiB budget and everyone else was answered 503). Streams the server
// cuts (the body clock) are opened again while the attack lasts. After each
// load, ten registrations of a new device (no token) are tried.
import { connect, type ClientHttp2Session } from "node:http2";
import { h2, type Row } from "../lib.js";
import type { BenchContext } from "../run.js";

const MiB = 1024 * 1024;
const ATTACKER = "127.0.0.2";
const EVENT = JSON.stringify({ name: "tap", metadata: { screen: "home" } });

interface Attack {
  /** Attacker streams open now. */
  open(): number;
  /** Streams the server ended (cut or answered) so far. */
  ended(): number;
  stop(): void;
}

async function startAttack(ctx: BenchContext, token: string): Promise<Attack> {
  const sessions: ClientHttp2Session[] = [];
  let open = 0;
  let ended = 0;
  let stopped = false;
  const hold = (c: ClientHttp2Session, headers: Record<string, string>) => {
    if (stopped || c.destroyed || c.closed) return;
    const st = c.request({ ":method": "POST", "content-type": "application/json", ...headers });
    open++;
    st.on("error", () => {});
    st.resume();
    st.on("close", () => {
      open--;
      ended++;
      // Open it again, as the attacker would, while the attack lasts.
      if (!stopped) setImmediate(() => hold(c, headers));
    });
  };
  // (localAddress is passed on to tls.connect; the http2 types omit it)
  const fromAttacker = { rejectUnauthorized: false, localAddress: ATTACKER };
  const session = () => new Promise<ClientHttp2Session>((resolve) => {
    const c = connect(ctx.https, fromAttacker);
    c.on("error", () => {});
    c.once("remoteSettings", () => resolve(c));
    sessions.push(c);
  });
  const withToken = await session();
  for (let i = 0; i < 3; i++) hold(withToken, { ":path": "/api/events", authorization: `Bearer ${token}`, "content-length": String(Math.floor((128 * MiB) / 3)) });
  for (let n = 0; n < 2048; n += 100) {
    const c = await session();
    for (let i = n; i < Math.min(2048, n + 100); i++) hold(c, { ":path": "/api/consumer", "content-length": String(64 * 1024) });
  }
  await Promise.all(sessions.map((c) => new Promise<void>((r) => c.ping(() => r()))));
  return {
    open: () => open,
    ended: () => ended,
    stop() {
      stopped = true;
      for (const c of sessions) c.destroy();
    },
  };
}

/** Ten registrations of new devices (no token): their statuses, e.g. "10 x 200". */
async function registrations(ctx: BenchContext, appKey: string): Promise<string> {
  const statuses = await Promise.all(Array.from({ length: 10 }, async (_, i) => {
    const res = await fetch(`${ctx.https}/api/consumer`, {
      method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ app_key: appKey, device_id: `bench-hostile-${Date.now()}-${i}`, device_model: "m", user_id: "bench", os: "ios", country: "US", language: "en" }),
    });
    await res.arrayBuffer();
    return res.status;
  }));
  const counts = new Map<number, number>();
  for (const s of statuses) counts.set(s, (counts.get(s) ?? 0) + 1);
  return [...counts].map(([s, n]) => `${n} x ${s}`).join(", ");
}

export async function hostileHttpScenarios(ctx: BenchContext): Promise<Row[]> {
  const victim = await ctx.newConsumer("http-victim");
  const attacker = await ctx.newConsumer("http-attacker");
  const newcomer = await ctx.newConsumer("http-newcomer");
  const load = () => h2({
    url: ctx.https, path: "/api/events",
    headers: { authorization: `Bearer ${victim.token}`, "content-type": "application/json" },
    body: Buffer.from(EVENT), durationSec: ctx.durationSec,
  });
  const statuses = (r: { statuses?: Record<string, number> }) => Object.entries(r.statuses ?? {}).map(([s, n]) => `${n} x ${s}`).join(", ");

  // Warm-up (JIT, pools, the token cache): not measured.
  await h2({ url: ctx.https, path: "/api/events", headers: { authorization: `Bearer ${victim.token}`, "content-type": "application/json" }, body: Buffer.from(EVENT), durationSec: 2 });
  const alone = await load();
  const regAlone = await registrations(ctx, newcomer.appKey);
  const attack = await startAttack(ctx, attacker.token);
  let attacked;
  let regAttacked;
  const openAtStart = attack.open();
  try {
    attacked = await load();
    regAttacked = await registrations(ctx, newcomer.appKey);
  } finally {
    attack.stop();
  }
  return [
    { scenario: "POST /api/events, no attacker", transport: "REST h2", result: alone, note: `statuses ${statuses(alone)}; registrations ${regAlone}` },
    {
      scenario: "POST /api/events, idle-stream attacker", transport: "REST h2", baseline: "POST /api/events, no attacker REST h2", result: attacked,
      note: `p99 ${(attacked.p99Ms / alone.p99Ms).toFixed(2)} x alone; statuses ${statuses(attacked)}; registrations ${regAttacked}; attacker streams open ${openAtStart}, ended by the server ${attack.ended()}`,
    },
  ];
}
