// A client process of the realtime bench (bench/scenarios/realtime.ts):
// holds many real WebSocket connections (`ws`, TLS) to one server, each
// subscribed to a channel, and counts or times the broadcasts they receive.
// Driven by its parent over IPC; several run at once (file descriptors and
// memory per process stay small). Pinned to the load core by the parent.
//
// Parent -> child: {op:"open", group, url, token, count, channels, mode,
//   table?, tokens?}: with `table` each connection subscribes to that table's
//   changes instead of a channel, and with `tokens` connection i uses
//   tokens[i % length] (distinct consumers) instead of `token`;
//   mode "count": only counts broadcast (or change) frames; "latency": each
//   broadcast's payload {s: seq} (a change's row {s: seq}), and once every
//   connection of the group got seq s the child reports {lat: s, group, last}
//   (last: its monotonic clock in ms);
// {op:"count", group} -> {delivered, closed}; {op:"close", group}; {op:"exit"}.
import WebSocket from "ws";

interface Group {
  conns: WebSocket[];
  delivered: number;
  closed: number;
  mode: "count" | "latency";
  /** latency: seq -> [received, last ms] */
  seen: Map<number, [number, number]>;
}

const groups = new Map<string, Group>();
const nowMs = () => Number(process.hrtime.bigint()) / 1e6;
const reply = (m: object) => process.send!(m);

function openOne(g: Group, group: string, url: string, token: string, channel: string, i: number, table?: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, ["pulsebase.v1"], { headers: token ? { authorization: `Bearer ${token}` } : {}, rejectUnauthorized: false, perMessageDeflate: false });
    let subscribed = false;
    const topic = table ? { kind: "table", table } : { kind: "channel", channel };
    ws.on("open", () => ws.send(JSON.stringify({ type: "subscribe", id: `s${i}`, topic, ref: "sub" })));
    ws.on("message", (data: Buffer) => {
      // {"type":"broadcast", ... or {"type":"change", ... : the 10th to 13th bytes
      const broadcast = data[9] === 0x62 && data[10] === 0x72 && data[11] === 0x6f && data[12] === 0x61;
      if (broadcast || (data[9] === 0x63 && data[10] === 0x68 && data[11] === 0x61 && data[12] === 0x6e)) {
        g.delivered++;
        if (g.mode === "latency") {
          const m = JSON.parse(data.toString()) as { payload?: { s: number }; row?: { s: number } };
          const s = broadcast ? m.payload!.s : m.row!.s;
          const t = nowMs();
          const e = g.seen.get(s) ?? [0, 0];
          e[0]++;
          e[1] = t;
          if (e[0] === g.conns.length) {
            g.seen.delete(s);
            reply({ lat: s, group, last: t });
          } else g.seen.set(s, e);
        }
        return;
      }
      if (!subscribed) {
        const text = data.toString();
        if (text.startsWith('{"type":"ok"')) {
          subscribed = true;
          resolve();
        } else if (text.startsWith('{"type":"error"')) reject(new Error(`connection ${i}: ${text}`));
      }
    });
    ws.on("error", (err) => {
      if (!subscribed) reject(err);
    });
    ws.on("close", (code) => {
      if (!subscribed) reject(new Error(`connection ${i} closed ${code} before subscribing`));
      else if (groups.get(group) === g && !closing.has(group)) g.closed++;
    });
    g.conns.push(ws);
  });
}

const closing = new Set<string>();

process.on("message", async (m: { op: string; id: number; group: string; url: string; token: string; count: number; channels: string[]; mode: "count" | "latency"; concurrency?: number; table?: string; tokens?: string[] }) => {
  try {
    switch (m.op) {
      case "open": {
        const g: Group = { conns: [], delivered: 0, closed: 0, mode: m.mode, seen: new Map() };
        groups.set(m.group, g);
        let next = 0;
        const errors: string[] = [];
        await Promise.all(
          Array.from({ length: m.concurrency ?? 32 }, async () => {
            while (next < m.count) {
              const i = next++;
              const token = m.tokens?.length ? m.tokens[i % m.tokens.length]! : m.token;
              await openOne(g, m.group, m.url, token, m.channels[i % m.channels.length]!, i, m.table).catch((e: Error) => void errors.push(e.message));
            }
          }),
        );
        reply({ id: m.id, opened: m.count - errors.length, errors: errors.slice(0, 3) });
        return;
      }
      case "count": {
        const g = groups.get(m.group);
        reply({ id: m.id, delivered: g?.delivered ?? 0, closed: g?.closed ?? 0 });
        return;
      }
      case "close": {
        const g = groups.get(m.group);
        closing.add(m.group);
        if (g) {
          await Promise.all(
            g.conns.map(
              (ws) =>
                new Promise<void>((r) => {
                  if (ws.readyState === WebSocket.CLOSED) return r();
                  ws.once("close", () => r());
                  ws.terminate();
                }),
            ),
          );
        }
        groups.delete(m.group);
        reply({ id: m.id });
        return;
      }
      case "exit":
        process.exit(0);
    }
  } catch (err) {
    reply({ id: m.id, error: String(err) });
  }
});
process.on("disconnect", () => process.exit(0));
