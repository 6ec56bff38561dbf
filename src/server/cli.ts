// `npx pulsebase <command>`: the operator CLI over the admin Connect API
// (`pulsebase load`, the load generator, is tools/load/cli.ts: bin/pulsebase.js
// runs it; its usage is listed here).
import { parseArgs, type ParseArgsConfig } from "node:util";
import { createConnectTransport } from "@connectrpc/connect-node";
import type { Transport } from "@connectrpc/connect";
import { CliError, describeAdminError, operatorToken, resolveAdminUrl } from "./admin-target.js";
import { COMMANDS, Outcome, Printed, type Command, type Flags } from "./cli-commands.js";

const OPTIONS = {
  "admin-url": { type: "string" },
  token: { type: "string" },
  data: { type: "string" },
  file: { type: "string" },
  name: { type: "string" },
  email: { type: "string" },
  member: { type: "string", multiple: true },
  team: { type: "string" },
  id: { type: "string" },
  key: { type: "string" },
  app: { type: "string" },
  consumer: { type: "string" },
  function: { type: "string" },
  trigger: { type: "string" },
  sql: { type: "string" },
  table: { type: "string" },
  offset: { type: "string" },
  user: { type: "string" },
  role: { type: "string" },
  database: { type: "string" },
  event: { type: "string" },
  log: { type: "string" },
  breadcrumb: { type: "string" },
  occurrence: { type: "string" },
  slug: { type: "string" },
  type: { type: "string" },
  env: { type: "string", multiple: true },
  activate: { type: "string" },
  enabled: { type: "string" },
  publish: { type: "boolean" },
  version: { type: "string" },
  payload: { type: "string" },
  "timeout-ms": { type: "string" },
  "memory-mb": { type: "string" },
  source: { type: "string" },
  target: { type: "string" },
  operations: { type: "string", multiple: true },
  ids: { type: "string", multiple: true },
  allow: { type: "string", multiple: true },
  "allow-private": { type: "boolean" },
  kind: { type: "string" },
  "auth-token": { type: "string" },
  "include-deleted": { type: "boolean" },
  "content-type": { type: "string" },
  filename: { type: "string" },
  "file-id": { type: "string" },
  from: { type: "string" },
  to: { type: "string" },
  "page-size": { type: "string" },
  "page-token": { type: "string" },
  "plan-name": { type: "string" },
  "functions-enabled": { type: "string" },
  "invocations-per-minute": { type: "string" },
  "cms-requests-per-day": { type: "string" },
  "cms-requests-per-second": { type: "string" },
  "function-max-timeout-ms": { type: "string" },
  "function-max-memory-mb": { type: "string" },
  "strict-token-mode": { type: "string" },
  url: { type: "string" },
  "app-key": { type: "string" },
  rpc: { type: "string" },
  duration: { type: "string" },
  concurrency: { type: "string" },
  "request-timeout": { type: "string" },
  insecure: { type: "boolean" },
  auth: { type: "string" },
  "signing-secret": { type: "string" },
  "signature-header": { type: "string" },
  tolerance: { type: "string" },
  cron: { type: "string" },
  tz: { type: "string" },
  missed: { type: "string" },
  show: { type: "string" },
  diff: { type: "string" },
  follow: { type: "boolean" },
  prefix: { type: "string" },
  "expected-version": { type: "string" },
  limit: { type: "string" },
  json: { type: "boolean" },
  help: { type: "boolean", short: "h" },
} satisfies ParseArgsConfig["options"];

const LOAD_USAGE = "--url https://HOST:8443 --app-key KEY [--rpc session.start|consumer.create] [--duration 10] [--concurrency 32]\n" +
  "              [--request-timeout 10] [--insecure]";

function help(): string {
  const lines = [
    "pulsebase <command> [options]        (commands print JSON; db query prints tables, JSON with --json)",
    "",
    "Operator commands talk to the admin listener with the operator token. The listener is, first found:",
    "--admin-url URL, PULSEBASE_ADMIN_URL (e.g. http://10.0.0.5:8444), PULSEBASE_ADMIN_PORT (on 127.0.0.1, or",
    "PULSEBASE_ADMIN_HOST), else http://127.0.0.1:8444. The token: --token, PULSEBASE_OPERATOR_TOKEN, else",
    "<PULSEBASE_DATA_DIR or .data>/operator-token. Ids are numbers; --id names the object of the command.",
    "A command takes only the options listed with it: an unknown command or option exits 2 with its usage.",
    "",
  ];
  let group = "";
  for (const c of COMMANDS) {
    const g = c.name.split(" ")[0]!;
    if (g !== group) {
      if (group) lines.push("");
      group = g;
    }
    lines.push(`  ${c.name} ${c.usage}`.trimEnd(), `              ${c.summary}`);
  }
  lines.push(
    "",
    "Load test (Connect binary protocol over HTTP/2; exit status 1 when any request failed or was not sent):",
    `  load ${LOAD_USAGE}`,
    "",
    "  help         this list",
  );
  return lines.join("\n");
}

/** Flags every command takes (where the admin listener is, the token, help). */
const GLOBAL_FLAGS = new Set(["admin-url", "token", "help"]);

/** The flags a command takes: those its usage line names, plus the global ones. */
export function flagsOf(c: Command): Set<string> {
  return new Set([...GLOBAL_FLAGS, ...[...c.usage.matchAll(/--([a-z][a-z0-9-]*)/g)].map((m) => m[1]!)]);
}

const usageOf = (c: Command) => `usage: pulsebase ${c.name} ${c.usage}`.trimEnd();

/** The usage lines of the commands that start with these words (all of them when none does). */
function usageNear(words: string[]): string {
  for (let n = Math.min(words.length, 2); n >= 1; n--) {
    const prefix = words.slice(0, n).join(" ");
    const near = COMMANDS.filter((c) => c.name === prefix || c.name.startsWith(`${prefix} `));
    if (near.length) return near.map(usageOf).join("\n");
  }
  return help();
}

/** A usage mistake: the message, the usage, exit status 2 (nothing is sent to the server). */
function usageError(message: string, usage: string): number {
  console.error(`error: ${message}\n${usage}\nRun \`pulsebase help\` for every command and its options.`);
  return 2;
}

/** The command named by the leading words (the longest match: "functions triggers create" before "functions"). */
function findCommand(words: string[]): { command: Command; args: string[] } | undefined {
  for (let n = Math.min(words.length, 3); n >= 1; n--) {
    const name = words.slice(0, n).join(" ");
    const command = COMMANDS.find((c) => c.name === name);
    if (command) return { command, args: words.slice(n) };
  }
  return undefined;
}

/**
 * JSON as the server sent it, except durations (`duration_ms`, measured as
 * a double) rounded to a tenth of a millisecond: 40.2, not 40.21994500000437.
 */
const printJson = (v: unknown) => console.log(JSON.stringify(v, (k, x) => (typeof x === "number" && k.endsWith("duration_ms") && !Number.isInteger(x) ? Math.round(x * 10) / 10 : x), 2));

export async function main(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, allowPositionals: true, strict: true, options: OPTIONS });
  } catch (err) {
    // Unknown to every command (or a value missing): the usage of the command the words name, if any.
    const words = argv.filter((a) => !a.startsWith("-"));
    const found = findCommand(words);
    return usageError((err as Error).message, found ? usageOf(found.command) : usageNear(words));
  }
  const { values, positionals } = parsed;
  if (!positionals.length || positionals[0] === "help" || values.help) {
    console.log(help());
    return 0;
  }
  if (positionals[0] === "load") {
    // The load generator is not part of the server: bin/pulsebase.js runs it from tools/load/cli.ts.
    console.error("error: `load` runs through bin/pulsebase.js (npx pulsebase load ...)");
    return 2;
  }
  const found = findCommand(positionals);
  if (!found) return usageError(`unknown command: ${positionals.join(" ")}`, usageNear(positionals));
  // A flag another command takes is still a mistake here (it would be ignored, and the answer mislead).
  const allowed = flagsOf(found.command);
  const stray = Object.keys(values).filter((k) => !allowed.has(k));
  if (stray.length) {
    return usageError(`${found.command.name} does not take ${stray.map((k) => `--${k}`).join(", ")}`, usageOf(found.command));
  }
  if (found.args.length && !found.command.positional) {
    return usageError(`unknown command: ${positionals.join(" ")}`, usageOf(found.command));
  }
  let target: { url: string; from: string } | undefined;
  let transport: Transport | undefined;
  try {
    const result = await found.command.run({
      flags: values as Flags,
      args: found.args,
      env,
      transport: async () => {
        if (!transport) {
          target = resolveAdminUrl(values["admin-url"], env);
          const token = await operatorToken(values.token, env);
          transport = createConnectTransport({
            baseUrl: target.url,
            httpVersion: "1.1",
            useBinaryFormat: true,
            // A listener that accepts the connection but never answers must not hang the CLI.
            defaultTimeoutMs: 120_000,
            interceptors: [(next) => (req) => {
              req.header.set("authorization", `Bearer ${token}`);
              return next(req);
            }],
          });
        }
        return transport;
      },
    });
    if (result instanceof Printed) {
      if (result.text !== "") console.log(result.text);
      return 0;
    }
    if (result instanceof Outcome) {
      if (typeof result.output === "string") console.log(result.output);
      else printJson(result.output);
      if (result.note) console.error(result.note);
      return result.failed ? 1 : 0;
    }
    printJson(result);
    return 0;
  } catch (err) {
    if (err instanceof CliError) {
      console.error(`error: ${err.message}`);
      return err.exitCode;
    }
    console.error(`error: ${target ? describeAdminError(err, target) : err instanceof Error ? err.message : String(err)}`);
    return 1;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    // Only a bug gets here; still no stack trace for the operator.
    console.error(`error: ${err instanceof Error ? err.message : String(err)}`);
    process.exitCode = 1;
  },
);
