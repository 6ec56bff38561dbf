// A bare HTTP/2 client over TLS that writes frames as told, for what a
// well-behaved client (node:http2, nghttp2) will not do: open more streams
// than the server's SETTINGS allow, send header lists over its limit. Headers
// are HPACK literals without indexing (no Huffman), enough for any request.
import { connect, type TLSSocket } from "node:tls";

export const FRAME = { DATA: 0x0, HEADERS: 0x1, RST_STREAM: 0x3, SETTINGS: 0x4, PING: 0x6, GOAWAY: 0x7, WINDOW_UPDATE: 0x8 } as const;
export const SETTING = { MAX_CONCURRENT_STREAMS: 0x3, INITIAL_WINDOW_SIZE: 0x4, MAX_HEADER_LIST_SIZE: 0x6 } as const;
export const H2_ERROR = { NO_ERROR: 0x0, PROTOCOL_ERROR: 0x1, REFUSED_STREAM: 0x7, CANCEL: 0x8, ENHANCE_YOUR_CALM: 0xb } as const;

export interface Frame {
  type: number;
  flags: number;
  streamId: number;
  payload: Buffer;
}

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");

function frame(type: number, flags: number, streamId: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head[3] = type;
  head[4] = flags;
  head.writeUInt32BE(streamId & 0x7fffffff, 5);
  return Buffer.concat([head, payload]);
}

/** An HPACK integer with an N-bit prefix (RFC 7541 5.1). */
function hpackInt(n: number, prefixBits: number, firstByteFlags = 0): Buffer {
  const max = (1 << prefixBits) - 1;
  if (n < max) return Buffer.from([firstByteFlags | n]);
  const out = [firstByteFlags | max];
  n -= max;
  while (n >= 128) {
    out.push((n % 128) + 128);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return Buffer.from(out);
}

function hpackString(s: string): Buffer {
  const b = Buffer.from(s, "latin1");
  return Buffer.concat([hpackInt(b.length, 7), b]);
}

/** A header block of literals without indexing, new names (RFC 7541 6.2.2). */
export function headerBlock(headers: [string, string][]): Buffer {
  return Buffer.concat(headers.flatMap(([k, v]) => [Buffer.from([0]), hpackString(k), hpackString(v)]));
}

export class RawH2 {
  readonly frames: Frame[] = [];
  /** The server's SETTINGS, by identifier. */
  readonly serverSettings = new Map<number, number>();
  closed = false;
  private buf: Buffer = Buffer.alloc(0);
  private waiters: (() => void)[] = [];

  private constructor(readonly socket: TLSSocket) {
    socket.on("data", (d: Buffer) => this.read(d));
    socket.on("close", () => {
      this.closed = true;
      this.wake();
    });
    socket.on("error", () => {});
  }

  /**
   * Connects and exchanges SETTINGS, ready for streams. With `ack` false the
   * server's SETTINGS are left unacknowledged (still pending, RFC 9113 6.5.3).
   */
  static async open(url: string, settings: [number, number][] = [], ack = true): Promise<RawH2> {
    const u = new URL(url);
    const socket = connect({ host: u.hostname, port: Number(u.port), ALPNProtocols: ["h2"], rejectUnauthorized: false, servername: "localhost" });
    await new Promise<void>((resolve, reject) => {
      socket.once("secureConnect", () => resolve());
      socket.once("error", reject);
    });
    const c = new RawH2(socket);
    const payload = Buffer.concat(settings.map(([id, v]) => {
      const b = Buffer.alloc(6);
      b.writeUInt16BE(id, 0);
      b.writeUInt32BE(v, 2);
      return b;
    }));
    socket.write(Buffer.concat([PREFACE, frame(FRAME.SETTINGS, 0, 0, payload)]));
    await c.until(() => c.frames.some((f) => f.type === FRAME.SETTINGS && !(f.flags & 1)));
    if (ack) socket.write(frame(FRAME.SETTINGS, 1, 0));
    return c;
  }

  /** HEADERS (one frame, END_HEADERS) on a stream. */
  headers(streamId: number, headers: [string, string][], endStream = false): Buffer {
    return frame(FRAME.HEADERS, 0x4 | (endStream ? 0x1 : 0), streamId, headerBlock(headers));
  }

  data(streamId: number, bytes: Buffer, endStream = false): Buffer {
    return frame(FRAME.DATA, endStream ? 0x1 : 0, streamId, bytes);
  }

  /** Writes frames in one go (one TLS write). */
  send(...frames: Uint8Array[]): void {
    this.socket.write(Buffer.concat(frames));
  }

  /** RST_STREAM frames received, with their error codes, by stream. */
  resets(): Map<number, number> {
    const m = new Map<number, number>();
    for (const f of this.frames) if (f.type === FRAME.RST_STREAM) m.set(f.streamId, f.payload.readUInt32BE(0));
    return m;
  }

  /** Streams the server answered (sent HEADERS on). */
  answered(): Set<number> {
    return new Set(this.frames.filter((f) => f.type === FRAME.HEADERS).map((f) => f.streamId));
  }

  goaway(): { lastStreamId: number; code: number } | undefined {
    const f = this.frames.find((x) => x.type === FRAME.GOAWAY);
    return f && { lastStreamId: f.payload.readUInt32BE(0) & 0x7fffffff, code: f.payload.readUInt32BE(4) };
  }

  async until(pred: () => boolean, timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!pred()) {
      if (this.closed) throw new Error("connection closed");
      if (Date.now() > deadline) throw new Error("timed out waiting for frames");
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, 50);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  close(): void {
    this.socket.destroy();
  }

  private read(d: Buffer): void {
    this.buf = this.buf.length ? Buffer.concat([this.buf, d]) : d;
    while (this.buf.length >= 9) {
      const len = this.buf.readUIntBE(0, 3);
      if (this.buf.length < 9 + len) break;
      const f: Frame = { type: this.buf[3]!, flags: this.buf[4]!, streamId: this.buf.readUInt32BE(5) & 0x7fffffff, payload: this.buf.subarray(9, 9 + len) };
      this.buf = this.buf.subarray(9 + len);
      this.frames.push(f);
      if (f.type === FRAME.SETTINGS && !(f.flags & 1)) {
        for (let i = 0; i + 6 <= f.payload.length; i += 6) this.serverSettings.set(f.payload.readUInt16BE(i), f.payload.readUInt32BE(i + 2));
      }
      if (f.type === FRAME.PING && !(f.flags & 1)) this.socket.write(frame(FRAME.PING, 1, 0, f.payload));
    }
    this.wake();
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const fn of w) fn();
  }
}
