// The bare baseline: Fastify on the same TLS certificate and the same
// listener kind (HTTP/2 with HTTP/1.1 through ALPN), one JSON POST route that
// does no work. Every scenario is compared with it in the same run.
import Fastify, { type FastifyServerOptions } from "fastify";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadOrCreateTls } from "../../src/server/tls.js";

const tls = await loadOrCreateTls({ dataDir: process.env.BENCH_DATA_DIR ?? (await mkdtemp(join(tmpdir(), "bench-base-"))) });
const app = Fastify({ http2: true, https: { allowHTTP1: true, key: tls.key, cert: tls.cert } } as unknown as FastifyServerOptions);
app.post("/baseline", async (req) => ({ session_id: 1, consumer_id: 1, started_at: new Date().toISOString(), ended_at: null, echo: (req.body as { x?: number } | undefined)?.x ?? null }));
// A list page of the same shape and about the size of the CMS bench's (25
// articles, the content type's default page, with an author reference),
// serialized per request like any handler's result.
const page = {
  data: Array.from({ length: 25 }, (_, i) => ({
    id: `6f1c7a2e-0b1d-4c8e-9a3f-${String(i).padStart(12, "0")}`,
    title: `Article ${i} about volcano`,
    body: `<p>Some <b>rich</b> text on ocean and forest, ${i}.</p>`,
    views: i * 7919,
    published: "2026-01-01",
    category: "news",
    author: `0b7d2c4e-5a1f-4e3b-8c9d-${String(i % 100).padStart(12, "0")}`,
    created_at: "2026-11-21T14:28:19.160Z",
    updated_at: "2026-11-21T14:28:19.160Z",
    published_at: "2026-11-21T14:28:19.160Z",
  })),
  meta: { current_page: 1, per_page: 25, total: 10000, last_page: 400 },
};
app.get("/baseline", async () => page);
await app.listen({ host: "127.0.0.1", port: 0 });
const port = (app.server.address() as { port: number }).port;
process.stdout.write(JSON.stringify({ https: port }) + "\n");
process.on("SIGTERM", () => void app.close().then(() => process.exit(0)));
