// Development server of the example web app: serves the page and the SDK
// bundle, and forwards /api/... to a Pulsebase server, so the page and the API
// share one origin (no CORS, no browser warning for a self-signed certificate).
// It can also play a bad network, for trying (and testing) offline behaviour:
// `offline` refuses every API request, `dropResponse()` lets the server handle
// one request and then cuts the connection before the answer reaches the page.
//
//   npx tsx examples/web/dev-server.ts --upstream https://localhost:8443 [--port 5173]
//   open http://localhost:5173/?appKey=pk_...
import { readFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type Server } from "node:http";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { Agent, request } from "undici";

const here = dirname(fileURLToPath(import.meta.url));

export interface ProxiedRequest {
  method: string;
  path: string;
  idempotencyKey?: string;
  body: string;
  /** When it arrived (ms since the epoch). */
  at: number;
  /** The server's status; undefined when refused (offline). */
  status?: number;
  /** The server answered but the answer was cut off. */
  dropped?: boolean;
}

export interface DevServer {
  url: string;
  /** When true every API request is refused (the connection is closed without an answer). */
  offline: boolean;
  /** The next API request matching `match` reaches the server, and its answer is lost. */
  dropResponse(match: (r: ProxiedRequest) => boolean): void;
  /** Every API request seen, in order. */
  log: ProxiedRequest[];
  close(): Promise<void>;
}

const HOP = new Set(["connection", "keep-alive", "transfer-encoding", "host", "content-length", "upgrade"]);

async function sdkBundle(): Promise<string> {
  const out = await build({
    entryPoints: [join(here, "../../packages/client/src/index.ts")],
    bundle: true,
    format: "esm",
    platform: "browser",
    target: "es2020",
    write: false,
    sourcemap: "inline",
  });
  return out.outputFiles[0]!.text;
}

const readBody = (req: IncomingMessage) =>
  new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks)));
    req.on("error", reject);
  });

export async function startDevServer(opts: { upstream: string; port?: number; host?: string; insecure?: boolean }): Promise<DevServer> {
  const dispatcher = new Agent({ connect: { rejectUnauthorized: !opts.insecure } });
  const bundle = await sdkBundle();
  const drops: ((r: ProxiedRequest) => boolean)[] = [];
  const files: Record<string, [string, string]> = {
    "/": ["index.html", "text/html; charset=utf-8"],
    "/index.html": ["index.html", "text/html; charset=utf-8"],
    "/app.js": ["app.js", "text/javascript; charset=utf-8"],
  };
  const server: Server = createServer(async (req, res) => {
    const url = new URL(req.url ?? "/", "http://x");
    try {
      if (url.pathname === "/pulsebase-client.js") {
        res.writeHead(200, { "content-type": "text/javascript; charset=utf-8", "cache-control": "no-store" }).end(bundle);
        return;
      }
      const file = files[url.pathname];
      if (file) {
        res.writeHead(200, { "content-type": file[1], "cache-control": "no-store" }).end(await readFile(join(here, file[0])));
        return;
      }
      if (!url.pathname.startsWith("/api/")) {
        res.writeHead(404).end("not found");
        return;
      }
      const body = await readBody(req);
      const entry: ProxiedRequest = {
        method: req.method ?? "GET",
        path: url.pathname,
        idempotencyKey: req.headers["idempotency-key"] as string | undefined,
        body: body.toString("utf8"),
        at: Date.now(),
      };
      dev.log.push(entry);
      if (dev.offline) {
        req.socket.destroy(); // as if the server could not be reached
        return;
      }
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers)) if (!HOP.has(k) && typeof v === "string") headers[k] = v;
      const up = await request(opts.upstream + (req.url ?? ""), {
        method: entry.method as "GET",
        headers,
        body: body.length ? body : undefined,
        dispatcher,
      });
      const answer = Buffer.from(await up.body.arrayBuffer());
      entry.status = up.statusCode;
      const d = drops.findIndex((m) => m(entry));
      if (d >= 0) {
        drops.splice(d, 1);
        entry.dropped = true;
        req.socket.destroy(); // the server did the work; the page never hears of it
        return;
      }
      const out: Record<string, string | string[]> = {};
      for (const [k, v] of Object.entries(up.headers)) if (!HOP.has(k) && v !== undefined) out[k] = v;
      res.writeHead(up.statusCode, out).end(answer);
    } catch (err) {
      if (!res.headersSent) res.writeHead(502, { "content-type": "text/plain" }).end(String(err));
    }
  });
  await new Promise<void>((resolve) => server.listen(opts.port ?? 0, opts.host ?? "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  const dev: DevServer = {
    url: `http://${opts.host ?? "127.0.0.1"}:${port}`,
    offline: false,
    log: [],
    dropResponse: (m) => void drops.push(m),
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await dispatcher.close();
    },
  };
  return dev;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const arg = (name: string) => {
    const i = process.argv.indexOf(`--${name}`);
    return i > 0 ? process.argv[i + 1] : undefined;
  };
  const upstream = arg("upstream") ?? "https://localhost:8443";
  const dev = await startDevServer({ upstream, port: Number(arg("port") ?? 5173), host: "localhost", insecure: true });
  console.log(`example app on ${dev.url}/?appKey=<your app key>  (API forwarded to ${upstream})`);
}
