// The operator CLI as operators run it: bin/pulsebase.js in a child process,
// with only the PULSEBASE_* variables a test gives (the test process's own
// never leak in), its exit code and output collected.
import { execFile } from "node:child_process";
import { join, resolve } from "node:path";

/** The CLI's entry point. */
export const CLI_BIN = join(resolve(import.meta.dirname, "../.."), "bin/pulsebase.js");

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** The test process's environment without its PULSEBASE_* variables, plus `extra`. */
export function cliEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("PULSEBASE_")) env[k] = v;
  return { ...env, ...extra };
}

export function runCli(args: string[], opts: { env?: Record<string, string>; cwd?: string } = {}): Promise<CliRun> {
  return new Promise((res) => {
    execFile(process.execPath, [CLI_BIN, ...args], { cwd: opts.cwd, env: cliEnv(opts.env), timeout: 60_000 }, (err, stdout, stderr) => {
      res({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

/** The variables that point the CLI at a server's admin listener with the operator token. */
export function operatorEnv(s: { adminUrl: string; operatorToken: string }): Record<string, string> {
  return { PULSEBASE_ADMIN_URL: s.adminUrl, PULSEBASE_OPERATOR_TOKEN: s.operatorToken };
}
