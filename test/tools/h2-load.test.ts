// The HTTP/2 load generator tells successes, failed requests (error status,
// no answer in time) and requests it could not send (no connection) apart.
import http2 from "node:http2";
import { createServer } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { h2Load } from "../../tools/load/h2-load.js";

const servers: http2.Http2Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await new Promise((r) => s.close(r));
});

async function h2c(handler: (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void): Promise<{ url: string; server: http2.Http2Server }> {
  const server = http2.createServer(handler);
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, server };
}

const base = { path: "/x", connections: 1, streams: 2, durationMs: 400, requestTimeoutMs: 150 };

describe("h2Load", () => {
  it("counts error statuses as failed, apart from successes", async () => {
    let n = 0;
    const { url } = await h2c((_req, res) => {
      res.statusCode = n++ % 2 ? 500 : 200;
      res.end("x");
    });
    const r = await h2Load({ ...base, url });
    expect(r.requests).toBeGreaterThan(0);
    expect(r.failed).toBeGreaterThan(0);
    expect(r.unsent).toBe(0);
    expect(r.reasons["status 500"]).toBe(r.failed);
    expect(r.statuses["500"]).toBe(r.failed);
    expect(r.errors).toBe(r.failed);
  });

  it("fails requests left unanswered past the request timeout", async () => {
    const { url } = await h2c(() => {});
    const r = await h2Load({ ...base, url });
    expect(r.requests).toBe(0);
    expect(r.failed).toBeGreaterThanOrEqual(2);
    expect(r.reasons.timeout).toBe(r.failed);
  });

  it("counts requests it could not send when nothing listens", async () => {
    const probe = createServer();
    await new Promise<void>((r) => probe.listen(0, "127.0.0.1", r));
    const port = (probe.address() as { port: number }).port;
    await new Promise((r) => probe.close(r));
    const r = await h2Load({ ...base, url: `http://127.0.0.1:${port}` });
    expect(r.requests).toBe(0);
    expect(r.failed).toBe(0);
    expect(r.unsent).toBeGreaterThanOrEqual(2);
    expect(r.reasons.ECONNREFUSED).toBe(r.unsent);
  });
});
