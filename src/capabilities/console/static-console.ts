// Serves the built console (packages/console/dist) at / on the admin
// listener: hashed assets with a year's cache, index.html (no-cache) for
// every other GET path so client routes load, and a Content-Security-Policy
// that allows scripts from this origin only (no inline script).
import { readdir, readFile } from "node:fs/promises";
import { extname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import type { FastifyInstance, FastifyReply } from "fastify";
import type { RawRoute } from "../../kernel/module.js";
import { clearingCookies, sessionCookies } from "./cookies.js";

// PULSEBASE_CONSOLE_DIST points at another build (a development build of
// the console beside the committed one); the default is the package's dist/.
export const CONSOLE_DIST = process.env.PULSEBASE_CONSOLE_DIST ?? fileURLToPath(new URL("../../../packages/console/dist/", import.meta.url));

export const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  // CodeMirror and ProseMirror add style elements at run time.
  "style-src 'self' 'unsafe-inline'",
  // Media previews are served here (/media/…, registerConsoleMedia); rich
  // text may show images from anywhere.
  "img-src 'self' data: blob: https: http:",
  "connect-src 'self'",
  "font-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join("; ");

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".json": "application/json",
  ".woff2": "font/woff2",
  ".map": "application/json",
};

async function walk(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...(await walk(p)));
    else out.push(p);
  }
  return out;
}

const NOT_BUILT = `<!doctype html><meta charset="utf-8"><title>Pulsebase</title>
<p>The console is not built. Run <code>npm install</code> (it builds packages/console) and restart.</p>`;

function secure(reply: FastifyReply): FastifyReply {
  return reply
    .header("content-security-policy", CONSOLE_CSP)
    .header("x-content-type-options", "nosniff")
    .header("referrer-policy", "no-referrer")
    .header("x-frame-options", "DENY");
}

/**
 * CMS media previews on the console's own origin: GET /media/<APP_KEY>/<file_id>
 * answers what the public listener's media URL answers (the same handler,
 * public data: whoever has the app key reads it there too), so a preview
 * never depends on the browser trusting the public listener's certificate.
 * A file opened as a page runs nothing on this origin (CSP sandbox).
 */
export function registerConsoleMedia(app: FastifyInstance, media: () => RawRoute | undefined): void {
  app.get<{ Params: { appKey: string; fileId: string } }>("/media/:appKey/:fileId", async (req, reply) => {
    const route = media();
    secure(reply).header("content-security-policy", "sandbox; default-src 'none'; img-src 'self' data:; media-src 'self'; style-src 'unsafe-inline'");
    try {
      if (!route) throw new Error("no media route");
      const res = await route.handle({ params: req.params, headers: req.headers });
      const { "content-security-policy": _own, ...headers } = res.headers;
      reply.headers(headers).code(res.status);
      return res.body !== undefined ? reply.send(res.body) : reply.send();
    } catch {
      return reply.code(404).type("text/plain; charset=utf-8").send("Media file not found.");
    }
  });
}

/** Loads the files once (a few hundred kB) and registers the routes. */
export async function registerConsole(app: FastifyInstance, dist = CONSOLE_DIST): Promise<void> {
  // Every answer to a request with two session cookies (or the old name)
  // removes them, whatever route serves it: the access policy refuses such a
  // call (access.ts), and the browser must not send them again. Set on the
  // raw response so the RPC codecs' writeHead keeps it.
  app.addHook("onRequest", async (req, reply) => {
    const c = sessionCookies(req.headers.cookie);
    if (c.kind === "conflict" || c.legacy) reply.raw.setHeader("set-cookie", clearingCookies(req.url));
  });
  const files = new Map<string, { body: Buffer; type: string }>();
  try {
    for (const f of await walk(dist)) {
      files.set("/" + relative(dist, f).split("\\").join("/"), { body: await readFile(f), type: TYPES[extname(f)] ?? "application/octet-stream" });
    }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
  const index = files.get("/index.html");
  const sendIndex = (reply: FastifyReply) =>
    secure(reply)
      .header("cache-control", "no-cache")
      .type("text/html; charset=utf-8")
      .send(index?.body ?? NOT_BUILT);
  app.get("/", (_req, reply) => sendIndex(reply));
  app.get("/*", (req, reply) => {
    const path = req.url.split("?")[0]!;
    const f = files.get(path);
    if (f && path !== "/index.html") {
      return secure(reply)
        .header("cache-control", path.startsWith("/assets/") ? "public, max-age=31536000, immutable" : "no-cache")
        .type(f.type)
        .send(f.body);
    }
    // Missing assets are 404s; other paths are the console's own routes.
    if (path.startsWith("/assets/") || extname(path)) return reply.code(404).type("text/plain").send("Not found");
    return sendIndex(reply);
  });
}
