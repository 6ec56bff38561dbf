// Configuration is read once from the environment into a typed object and
// passed down; no module reads process.env itself. An invalid value stops
// start-up with a message naming the variable.
import { resolve } from "node:path";
import { isIP } from "node:net";

export interface Config {
  dataDir: string;
  host: string;
  httpsPort: number;
  /** 0 disables the plain-HTTP refusal listener. */
  httpPort: number;
  adminHost: string;
  adminPort: number;
  /** Operator token for the admin listener; generated in the data dir when unset. */
  operatorToken?: string;
  databaseUrl?: string;
  natsUrl?: string;
  /**
   * Prefix of every JetStream stream and subject this deployment uses, so
   * several deployments (or test runs) can share one NATS cluster.
   */
  natsNamespace: string;
  tlsCertFile?: string;
  tlsKeyFile?: string;
  /** Proxy addresses whose X-Forwarded-Proto is trusted. */
  trustedProxies: string[];
  /** JWT signing keys file (JSON); generated in the data dir when unset. */
  jwtKeysFile?: string;
  tokenTtlSeconds: number;
  bodyLimitBytes: number;
  /**
   * A public-listener connection with no bytes in either direction for this
   * long is closed (PULSEBASE_IDLE_TIMEOUT_SECONDS): a stalled upload or a
   * silent client does not hold a socket for ever.
   */
  idleTimeoutSeconds: number;
  corsOrigins: string[];
  mediaBaseUrl?: string;
  planEnforcement: boolean;
  logLevel: string;
  /** Run the batch workers inside the server process. */
  inProcessWorkers: boolean;
  /** Cap on one PostgreSQL pool. */
  pgPoolSize: number;
  /** One info line per request (PULSEBASE_ACCESS_LOG, default on). */
  accessLog: boolean;
  /**
   * Bearer token GET /metrics on the admin listener requires
   * (PULSEBASE_METRICS_TOKEN); unset = open to whoever reaches that listener.
   */
  metricsToken?: string;
  /**
   * How often every server reads the change table (PULSEBASE_CHANGE_POLL_MS):
   * the bound on cache staleness when a NATS message was missed.
   */
  changePollMs: number;
  /**
   * Port of GET /metrics of a `npm run worker` process, on adminHost
   * (PULSEBASE_WORKER_METRICS_PORT); 0 serves none.
   */
  workerMetricsPort: number;
  /** Functions' limits and schedule timing (issue 19; docs/functions.md). */
  functions: {
    /** PULSEBASE_FUNCTION_PUBLIC_PER_MINUTE: calls of one public or signed trigger per minute (all processes). */
    publicTriggerPerMinute: number;
    /** PULSEBASE_FUNCTION_PUBLIC_PER_ADDRESS_PER_MINUTE: of one such trigger from one address (per process). */
    publicPerAddressPerMinute: number;
    /** PULSEBASE_FUNCTION_SCHEDULES_PER_APP */
    maxSchedulesPerApp: number;
    /** PULSEBASE_SCHEDULE_POLL_MS: how often each process looks for due ticks. */
    schedulePollMs: number;
    /** PULSEBASE_SCHEDULE_GRACE_MS: a tick later than this counts as missed. */
    scheduleGraceMs: number;
    /** PULSEBASE_KV_MAX_BYTES_PER_APP, PULSEBASE_KV_MAX_KEYS_PER_APP */
    kvMaxBytesPerApp: number;
    kvMaxKeysPerApp: number;
  };
}

/** The admin listener's port when PULSEBASE_ADMIN_PORT is unset (the CLI's default too). */
export const DEFAULT_ADMIN_PORT = 8444;
/** The worker process's metrics port when PULSEBASE_WORKER_METRICS_PORT is unset. */
export const DEFAULT_WORKER_METRICS_PORT = 8445;

export class ConfigError extends Error {}

/** PULSEBASE_DATA_DIR as an absolute path (the server, the worker and the CLI agree on it). */
export function dataDirOf(env: Record<string, string | undefined>): string {
  return resolve(env.PULSEBASE_DATA_DIR?.trim() || ".data");
}

type Env = Record<string, string | undefined>;

function int(env: Env, name: string, def: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return def;
  if (!/^\d+$/.test(raw.trim())) throw new ConfigError(`${name} must be an integer, got "${raw}"`);
  const n = Number(raw.trim());
  if (n < min || n > max) throw new ConfigError(`${name} must be between ${min} and ${max}, got ${n}`);
  return n;
}

function bool(env: Env, name: string, def: boolean): boolean {
  const raw = env[name]?.trim().toLowerCase();
  if (raw === undefined || raw === "") return def;
  if (["1", "true", "yes", "on"].includes(raw)) return true;
  if (["0", "false", "no", "off"].includes(raw)) return false;
  throw new ConfigError(`${name} must be true or false, got "${env[name]}"`);
}

function url(env: Env, name: string, protocols: string[]): string | undefined {
  const raw = env[name]?.trim();
  if (!raw) return undefined;
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new ConfigError(`${name} is not a valid URL: "${raw}"`);
  }
  if (!protocols.includes(u.protocol)) {
    throw new ConfigError(`${name} must use ${protocols.join(" or ")}, got "${u.protocol}"`);
  }
  return raw;
}

function list(env: Env, name: string, def: string[]): string[] {
  const raw = env[name];
  if (raw === undefined || raw.trim() === "") return def;
  return raw.split(",").map((s) => s.trim()).filter(Boolean);
}

function namespace(env: Env): string {
  const raw = env.PULSEBASE_NATS_NAMESPACE?.trim() || "pulsebase";
  if (!/^[a-z][a-z0-9_]{0,31}$/.test(raw)) {
    throw new ConfigError("PULSEBASE_NATS_NAMESPACE must be 1-32 lower-case letters, digits or _, starting with a letter");
  }
  return raw;
}

export function loadConfig(env: Env = process.env): Config {
  const trustedProxies = list(env, "PULSEBASE_TRUSTED_PROXIES", []);
  for (const p of trustedProxies) {
    if (!isIP(p)) throw new ConfigError(`PULSEBASE_TRUSTED_PROXIES must list IP addresses, got "${p}"`);
  }
  const cert = env.PULSEBASE_TLS_CERT_FILE?.trim() || undefined;
  const key = env.PULSEBASE_TLS_KEY_FILE?.trim() || undefined;
  if (!!cert !== !!key) {
    throw new ConfigError("PULSEBASE_TLS_CERT_FILE and PULSEBASE_TLS_KEY_FILE must be set together");
  }
  const level = env.PULSEBASE_LOG_LEVEL?.trim() || "info";
  if (!["fatal", "error", "warn", "info", "debug", "trace", "silent"].includes(level)) {
    throw new ConfigError(`PULSEBASE_LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent`);
  }
  const operatorToken = env.PULSEBASE_OPERATOR_TOKEN?.trim() || undefined;
  if (operatorToken && operatorToken.length < 16) {
    throw new ConfigError("PULSEBASE_OPERATOR_TOKEN must be at least 16 characters");
  }
  const metricsToken = env.PULSEBASE_METRICS_TOKEN?.trim() || undefined;
  if (metricsToken && metricsToken.length < 16) {
    throw new ConfigError("PULSEBASE_METRICS_TOKEN must be at least 16 characters");
  }
  return {
    dataDir: dataDirOf(env),
    host: env.PULSEBASE_HOST?.trim() || "0.0.0.0",
    httpsPort: int(env, "PULSEBASE_HTTPS_PORT", 8443, 0, 65535),
    httpPort: int(env, "PULSEBASE_HTTP_PORT", 8080, 0, 65535),
    adminHost: env.PULSEBASE_ADMIN_HOST?.trim() || "127.0.0.1",
    adminPort: int(env, "PULSEBASE_ADMIN_PORT", DEFAULT_ADMIN_PORT, 0, 65535),
    operatorToken,
    databaseUrl: url(env, "DATABASE_URL", ["postgres:", "postgresql:"]),
    natsUrl: url(env, "NATS_URL", ["nats:", "tls:", "ws:", "wss:"]),
    natsNamespace: namespace(env),
    tlsCertFile: cert,
    tlsKeyFile: key,
    trustedProxies,
    jwtKeysFile: env.PULSEBASE_JWT_KEYS_FILE?.trim() || undefined,
    tokenTtlSeconds: int(env, "PULSEBASE_TOKEN_TTL_SECONDS", 30 * 24 * 3600, 60, 366 * 24 * 3600),
    bodyLimitBytes: int(env, "PULSEBASE_BODY_LIMIT_BYTES", 50 * 1024 * 1024, 1024, 1024 * 1024 * 1024),
    idleTimeoutSeconds: int(env, "PULSEBASE_IDLE_TIMEOUT_SECONDS", 120, 1, 3600),
    corsOrigins: list(env, "PULSEBASE_CORS_ORIGINS", ["*"]),
    mediaBaseUrl: url(env, "PULSEBASE_MEDIA_BASE_URL", ["http:", "https:"]),
    planEnforcement: bool(env, "PULSEBASE_PLAN_ENFORCEMENT", true),
    logLevel: level,
    inProcessWorkers: bool(env, "PULSEBASE_IN_PROCESS_WORKERS", true),
    pgPoolSize: int(env, "PULSEBASE_PG_POOL_SIZE", 10, 1, 1000),
    accessLog: bool(env, "PULSEBASE_ACCESS_LOG", true),
    metricsToken,
    changePollMs: int(env, "PULSEBASE_CHANGE_POLL_MS", 250, 50, 10_000),
    workerMetricsPort: int(env, "PULSEBASE_WORKER_METRICS_PORT", DEFAULT_WORKER_METRICS_PORT, 0, 65535),
    functions: {
      publicTriggerPerMinute: int(env, "PULSEBASE_FUNCTION_PUBLIC_PER_MINUTE", 600, 0, 1_000_000),
      publicPerAddressPerMinute: int(env, "PULSEBASE_FUNCTION_PUBLIC_PER_ADDRESS_PER_MINUTE", 120, 0, 1_000_000),
      maxSchedulesPerApp: int(env, "PULSEBASE_FUNCTION_SCHEDULES_PER_APP", 50, 0, 100_000),
      schedulePollMs: int(env, "PULSEBASE_SCHEDULE_POLL_MS", 500, 50, 60_000),
      scheduleGraceMs: int(env, "PULSEBASE_SCHEDULE_GRACE_MS", 30_000, 100, 86_400_000),
      kvMaxBytesPerApp: int(env, "PULSEBASE_KV_MAX_BYTES_PER_APP", 64 * 1024 * 1024, 1024, 1024 ** 4),
      kvMaxKeysPerApp: int(env, "PULSEBASE_KV_MAX_KEYS_PER_APP", 100_000, 1, 1_000_000_000),
    },
  };
}

/** For entry points: the configuration, or exit 2 with the variable named. */
export function loadConfigOrExit(env: Env = process.env): Config {
  try {
    return loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(`configuration error: ${err.message}`);
      process.exit(2);
    }
    throw err;
  }
}
