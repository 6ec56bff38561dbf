// The server as a user runs it: a child process of `src/server/server.ts` (or
// `npm start`) on the embedded default, in a data directory of the test's,
// on free ports. For tests of what only a whole process shows: start-up,
// restarts, the data-directory lock, the README's commands.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { Agent, fetch } from "undici";
import { join } from "node:path";
import { seedEmbeddedDb } from "./db.js";
import { freePort } from "./ports.js";

export interface ChildServer {
  child: ChildProcess;
  https: number;
  http: number;
  admin: number;
  /** Everything the process wrote to stdout and stderr so far. */
  output(): string;
  exited: Promise<number | null>;
  /** Resolves once /readyz answers 200; rejects if the process exits first. */
  ready(timeoutMs?: number): Promise<void>;
  /** SIGTERM (to the process group for `npm start`) and its exit code. */
  stop(): Promise<number | null>;
}

const dispatcher = new Agent({ connect: { rejectUnauthorized: false } });

export async function spawnServer(opts: {
  /** PULSEBASE_DATA_DIR; omitted: the default `.data` under `cwd`. */
  dataDir?: string;
  /** Run `npm start` in this directory instead of `node src/server/server.ts` in the checkout. */
  npmStartIn?: string;
  env?: Record<string, string>;
  /**
   * Start on an embedded database already made and migrated (copied into
   * `<dataDir>/pg` unless it holds one): skips the first start's initdb,
   * 4-7 s. Not for tests of that first start.
   */
  seedEmbeddedDb?: boolean;
}): Promise<ChildServer> {
  if (opts.seedEmbeddedDb) {
    if (!opts.dataDir) throw new Error("seedEmbeddedDb needs dataDir");
    const pg = join(opts.dataDir, "pg");
    if (!existsSync(join(pg, "PG_VERSION"))) await seedEmbeddedDb(pg);
  }
  const ports = { https: await freePort(), http: await freePort(), admin: await freePort() };
  const env = {
    ...process.env,
    PULSEBASE_DATA_DIR: opts.dataDir ?? "",
    PULSEBASE_HOST: "127.0.0.1",
    PULSEBASE_HTTPS_PORT: String(ports.https),
    PULSEBASE_HTTP_PORT: String(ports.http),
    PULSEBASE_ADMIN_PORT: String(ports.admin),
    PULSEBASE_OPERATOR_TOKEN: "",
    DATABASE_URL: "",
    NATS_URL: "",
    ...opts.env,
  };
  const child = opts.npmStartIn
    ? spawn("npm", ["start"], { cwd: opts.npmStartIn, env, detached: true, stdio: ["ignore", "pipe", "pipe"] })
    : spawn(process.execPath, ["--import", "tsx", "src/server/server.ts"], { env, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  child.stdout!.on("data", (d) => (out += d));
  child.stderr!.on("data", (d) => (out += d));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return {
    child,
    ...ports,
    output: () => out,
    exited,
    async ready(timeoutMs = 60_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        try {
          if ((await fetch(`https://127.0.0.1:${ports.https}/readyz`, { dispatcher })).status === 200) return;
        } catch {
          /* not up yet */
        }
        if (child.exitCode !== null) throw new Error(`server exited: ${out}`);
        if (Date.now() > deadline) throw new Error(`server did not start: ${out}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      if (opts.npmStartIn && child.pid) process.kill(-child.pid, "SIGTERM");
      else child.kill("SIGTERM");
      return exited;
    },
  };
}
