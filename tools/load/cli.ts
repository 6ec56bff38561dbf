// `npx pulsebase load`: bin/pulsebase.js runs this for the `load` command
// (the operator CLI, src/server/cli.ts, lists its usage). Registers a
// consumer, drives one RPC (load-command.ts) and prints a JSON summary; exit
// status 1 when any request failed or was not sent, 2 on a usage mistake.
import { parseArgs } from "node:util";
import { runLoad } from "./load-command.js";

const USAGE = "--url https://HOST:8443 --app-key KEY [--rpc session.start|consumer.create] [--duration 10] [--concurrency 32]\n" +
  "              [--request-timeout 10] [--insecure]";

export async function loadMain(argv: string[]): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        url: { type: "string" },
        "app-key": { type: "string" },
        rpc: { type: "string" },
        duration: { type: "string" },
        concurrency: { type: "string" },
        "request-timeout": { type: "string" },
        insecure: { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
    }));
  } catch (err) {
    console.error(`error: ${(err as Error).message}\nusage: pulsebase load ${USAGE}`);
    return 2;
  }
  if (values.help) {
    console.log(`usage: pulsebase load ${USAGE}`);
    return 0;
  }
  if (!values.url || !values["app-key"]) {
    console.error(`error: load needs --url and --app-key\nusage: pulsebase load ${USAGE}`);
    return 2;
  }
  try {
    const summary = await runLoad({
      url: values.url,
      appKey: values["app-key"],
      rpc: values.rpc ?? "session.start",
      durationSec: Number(values.duration ?? 10),
      concurrency: Number(values.concurrency ?? 32),
      requestTimeoutMs: Number(values["request-timeout"] ?? 10) * 1000,
      insecure: values.insecure ?? false,
    });
    console.log(JSON.stringify(summary, null, 2));
    return summary.failed + summary.unsent > 0 ? 1 : 0;
  } catch (err) {
    // runLoad words its own failures (LoadError).
    console.error(`error: ${err instanceof Error ? err.message : String(err)}`);
    return 1;
  }
}

loadMain(process.argv.slice(3)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  },
);
