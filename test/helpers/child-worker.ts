// `npm run worker` as a user runs it: a child process of src/server/worker.ts
// on this test file's PostgreSQL schema, with its metrics on a free port.
import { spawn, type ChildProcess } from "node:child_process";
import type { TestDb } from "./db.js";
import { freePort } from "./ports.js";

/** DATABASE_URL of a test database for a child process (its connections named after the schema). */
export function databaseUrlFor(db: TestDb): string {
  const schema = db.schema!;
  const url = new URL(db.url!);
  url.searchParams.set("application_name", schema);
  url.searchParams.set("options", `-c search_path=${schema},public`);
  return url.toString();
}

export interface ChildWorker {
  child: ChildProcess;
  metricsPort: number;
  output(): string;
  /** GET /metrics as text. */
  metrics(): Promise<string>;
  /** SIGKILL (no clean-up: what a crash or a lost host does). */
  kill(): Promise<void>;
  /** SIGTERM and its exit code. */
  stop(): Promise<number | null>;
}

export async function spawnWorker(env: Record<string, string>): Promise<ChildWorker> {
  const metricsPort = await freePort();
  const child = spawn(process.execPath, ["--import", "tsx", "src/server/worker.ts"], {
    env: { ...process.env, PULSEBASE_LOG_LEVEL: "info", PULSEBASE_ADMIN_HOST: "127.0.0.1", PULSEBASE_WORKER_METRICS_PORT: String(metricsPort), ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout!.on("data", (d) => (out += d));
  child.stderr!.on("data", (d) => (out += d));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const deadline = Date.now() + 60_000;
  while (!out.includes("pulsebase workers running")) {
    if (child.exitCode !== null) throw new Error(`worker exited: ${out}`);
    if (Date.now() > deadline) throw new Error(`worker did not start: ${out}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  const gone = () => child.exitCode !== null || child.signalCode !== null;
  return {
    child,
    metricsPort,
    output: () => out,
    async metrics() {
      const res = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
      if (res.status !== 200) throw new Error(`GET /metrics: ${res.status}`);
      return res.text();
    },
    async kill() {
      if (!gone()) child.kill("SIGKILL");
      await exited;
    },
    async stop() {
      if (!gone()) child.kill("SIGTERM");
      return exited;
    },
  };
}

/** The value of one series of a Prometheus text page, or undefined. */
export function metricValue(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split("\n")) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (!Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) continue;
    return Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return undefined;
}
