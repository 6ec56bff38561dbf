// A node:http2 client's side of a request, for the tests of the public
// listener's HTTP/2 limits: a stream's answer (its body read to the end) or
// the reset that ended it, a request's headers, and a race against a timer.
import type { ClientHttp2Stream } from "node:http2";

export interface Answer {
  status: number;
  headers: Record<string, unknown>;
  body: string;
}

/** The answer of a stream (its body read to the end), or the reset that ended it. */
export function answer(stream: ClientHttp2Stream): Promise<Answer | { reset: number }> {
  return new Promise((resolve) => {
    let headers: Record<string, unknown> | undefined;
    let body = "";
    stream.on("response", (h) => (headers = h));
    stream.on("data", (d: Buffer) => (body += d.toString()));
    stream.on("error", () => {});
    stream.on("close", () => resolve(headers ? { status: Number(headers[":status"]), headers, body } : { reset: stream.rstCode ?? -1 }));
  });
}

/** `p`, or "timeout" if it has not settled within `ms`. */
export const within = <T>(p: Promise<T>, ms: number): Promise<T | "timeout"> =>
  Promise.race([p, new Promise<"timeout">((r) => setTimeout(() => r("timeout"), ms))]);

/** The headers of a JSON POST to `path`, with the bearer token if any. */
export const post = (path: string, token: string | undefined, extra: Record<string, string> = {}) => ({
  ":method": "POST",
  ":path": path,
  "content-type": "application/json",
  ...(token ? { authorization: `Bearer ${token}` } : {}),
  ...extra,
});
