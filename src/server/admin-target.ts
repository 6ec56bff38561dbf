// Where the operator CLI finds the admin listener and its token, and how it
// words the errors an operator sees (never a stack trace).
import { DEFAULT_ADMIN_PORT, dataDirOf } from "../kernel/config.js";
import { operatorTokenFile, readOperatorToken } from "./operator-token.js";
import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorDetailSchema } from "../../gen/pulsebase/common/v1/error_pb.js";

/** An error meant for the operator as is: the CLI prints its message and exits 1. */
export class CliError extends Error {
  constructor(message: string, readonly exitCode = 1) {
    super(message);
  }
}


/**
 * The admin base URL, first found wins: --admin-url, PULSEBASE_ADMIN_URL,
 * PULSEBASE_ADMIN_PORT (with PULSEBASE_ADMIN_HOST, as the server reads them;
 * a wildcard host means this machine), then http://127.0.0.1:8444.
 */
export function resolveAdminUrl(flag: string | undefined, env: NodeJS.ProcessEnv): { url: string; from: string } {
  const fromUrl = (raw: string, from: string) => {
    let u: URL;
    try {
      u = new URL(raw.trim());
    } catch {
      throw new CliError(`${from} is not a URL: ${JSON.stringify(raw)} (expected e.g. http://127.0.0.1:8444)`);
    }
    if (u.protocol !== "http:" && u.protocol !== "https:") throw new CliError(`${from} must be an http:// or https:// URL, got ${JSON.stringify(raw)}`);
    return { url: u.href.replace(/\/+$/, ""), from };
  };
  if (flag?.trim()) return fromUrl(flag, "--admin-url");
  if (env.PULSEBASE_ADMIN_URL?.trim()) return fromUrl(env.PULSEBASE_ADMIN_URL, "PULSEBASE_ADMIN_URL");
  const host = adminHost(env.PULSEBASE_ADMIN_HOST);
  const rawPort = env.PULSEBASE_ADMIN_PORT?.trim();
  if (rawPort) {
    const port = Number(rawPort);
    // 0 lets the server pick a free port: the CLI cannot guess it.
    if (!/^\d+$/.test(rawPort) || port < 1 || port > 65535) {
      throw new CliError(`PULSEBASE_ADMIN_PORT must be a port number 1-65535, got ${JSON.stringify(rawPort)}`);
    }
    return { url: `http://${host}:${port}`, from: "PULSEBASE_ADMIN_PORT" };
  }
  return { url: `http://${host}:${DEFAULT_ADMIN_PORT}`, from: "the default" };
}

function adminHost(raw: string | undefined): string {
  const h = raw?.trim();
  if (!h || h === "0.0.0.0" || h === "::" || h === "[::]") return "127.0.0.1";
  return h.includes(":") && !h.startsWith("[") ? `[${h}]` : h;
}

/** --token, PULSEBASE_OPERATOR_TOKEN, else the token the server generated in its data directory. */
export async function operatorToken(flag: string | undefined, env: NodeJS.ProcessEnv): Promise<string> {
  if (flag?.trim()) return flag.trim();
  // Trimmed as the server trims it (a .env line often ends in a space).
  if (env.PULSEBASE_OPERATOR_TOKEN?.trim()) return env.PULSEBASE_OPERATOR_TOKEN.trim();
  const dataDir = dataDirOf(env);
  const token = await readOperatorToken(dataDir).catch(() => undefined);
  if (token) return token;
  throw new CliError(`no operator token: pass --token, set PULSEBASE_OPERATOR_TOKEN, or run where ${operatorTokenFile(dataDir)} exists (PULSEBASE_DATA_DIR)`);
}

const NETWORK_CODES: Record<string, string> = {
  ECONNREFUSED: "connection refused",
  ENOTFOUND: "host not found",
  EAI_AGAIN: "host not found",
  ECONNRESET: "connection reset",
  ETIMEDOUT: "connection timed out",
  EHOSTUNREACH: "host unreachable",
  ENETUNREACH: "network unreachable",
};

/** The cause's errno code (ECONNREFUSED, ...), looking through wrapped errors. */
export function networkCode(err: unknown): string | undefined {
  for (let e = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && code in NETWORK_CODES) return code;
    const nested = (e as { errors?: unknown[] }).errors; // AggregateError (several addresses)
    if (Array.isArray(nested)) for (const n of nested) {
      const c = networkCode(n);
      if (c) return c;
    }
  }
  return undefined;
}

/** A failed admin call as one or a few lines for the operator. */
export function describeAdminError(err: unknown, adminUrl: { url: string; from: string }): string {
  const net = networkCode(err);
  if (net || (err instanceof ConnectError && err.code === Code.Unavailable && !err.findDetails(ErrorDetailSchema).length)) {
    return `cannot reach the admin listener at ${adminUrl.url} (${net ? NETWORK_CODES[net] : (err as ConnectError).rawMessage}; URL from ${adminUrl.from}).\n` +
      "Is the server running? Point the CLI at it with --admin-url, PULSEBASE_ADMIN_URL or PULSEBASE_ADMIN_PORT.";
  }
  if (err instanceof ConnectError) {
    if (err.code === Code.DeadlineExceeded) return `the admin listener at ${adminUrl.url} did not answer in time`;
    const detail = err.findDetails(ErrorDetailSchema)[0];
    if (err.code === Code.Unauthenticated) {
      return `the admin listener at ${adminUrl.url} refused the operator token (${err.rawMessage}); ` +
        "pass the server's token with --token or PULSEBASE_OPERATOR_TOKEN, or point PULSEBASE_DATA_DIR at its data directory";
    }
    const lines = [`${detail?.code || Code[err.code]}: ${err.rawMessage}`];
    for (const v of detail?.fieldViolations ?? []) lines.push(`  ${v.field}: ${v.messages.join(" ")}`);
    return lines.join("\n");
  }
  return err instanceof Error ? err.message : String(err);
}
