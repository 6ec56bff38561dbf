// A realtime test client: a real `ws` WebSocket to the public listener
// (self-signed certificate trusted) that keeps every server message and
// waits for the ones a test expects.
import WebSocket from "ws";

export type Msg = Record<string, unknown> & { type: string };

export interface RtClient {
  ws: WebSocket;
  messages: Msg[];
  /** Resolves with the first message (from the start) matching, waiting for it. */
  next(pred: (m: Msg) => boolean, what?: string): Promise<Msg>;
  send(m: Record<string, unknown>): void;
  closed: Promise<{ code: number; reason: string }>;
  close(): void;
}

export function connect(url: string, opts: { token?: string; protocols?: string[]; headers?: Record<string, string> } = {}): Promise<RtClient> {
  const headers = { ...(opts.token && { authorization: `Bearer ${opts.token}` }), ...opts.headers };
  const ws = new WebSocket(url, opts.protocols ?? ["pulsebase.v1"], { rejectUnauthorized: false, headers });
  const messages: Msg[] = [];
  const waiters: Array<{ pred: (m: Msg) => boolean; resolve: (m: Msg) => void; from: number }> = [];
  ws.on("message", (d) => {
    const m = JSON.parse(String(d)) as Msg;
    messages.push(m);
    for (const w of [...waiters]) {
      if (w.pred(m)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(m);
      }
    }
  });
  const closed = new Promise<{ code: number; reason: string }>((resolve) => ws.on("close", (code, reason) => resolve({ code, reason: String(reason) })));
  const client: RtClient = {
    ws,
    messages,
    closed,
    next(pred, what = "a message") {
      const have = messages.find(pred);
      if (have) return Promise.resolve(have);
      return new Promise((resolve, reject) => {
        waiters.push({ pred, resolve, from: messages.length });
        void closed.then((c) => reject(new Error(`closed (${c.code} ${c.reason}) before ${what}; got ${JSON.stringify(messages.slice(-5))}`)));
      });
    },
    send: (m) => ws.send(JSON.stringify(m)),
    close: () => ws.close(),
  };
  return new Promise((resolve, reject) => {
    ws.once("open", () => resolve(client));
    ws.once("unexpected-response", (_req, res) => {
      let body = "";
      res.on("data", (c: Buffer) => (body += String(c)));
      res.on("end", () => reject(Object.assign(new Error(`refused ${res.statusCode}: ${body}`), { status: res.statusCode, body })));
    });
    ws.once("error", reject);
  });
}
