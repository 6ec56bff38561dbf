// Configuration is read once from the environment into a typed object and
// passed down; no module reads process.env itself. An invalid value stops
// start-up with a message naming the variable.
import { resolve } from "node:path";
import { isIP } from "node:net";

export interface Config {
  dataDir: string;
  /** The operator console's accounts (src/capabilities/console). */
  console: ConsoleConfig;
  host: string;
  httpsPort: number;
  /** 0 disables the plain-HTTP refusal listener. */
  httpPort: number;
  adminHost: string;
  adminPort: number;
  /**
   * Host names the admin listener answers besides localhost, IP literals,
   * adminHost and the console URL's host (PULSEBASE_ADMIN_HOSTS): any other
   * Host is refused 421 (DNS rebinding, docs/console.md).
   */
  adminHosts: string[];
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
  /** Proxy addresses whose X-Forwarded-Proto and X-Forwarded-Host are believed. */
  trustedProxies: string[];
  /**
   * The address devices reach the public listener at (PULSEBASE_PUBLIC_URL,
   * origin only): the plain listener's redirects point there, never at a
   * client-supplied Host. Unset: https://localhost:<https port>.
   */
  publicUrl?: string;
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
  /**
   * Request bodies being received or held at once, all connections together
   * (PULSEBASE_BODY_BUDGET_BYTES): past it a request is answered 503; one
   * application (or all clients without a token together) holds at most half.
   */
  bodyBudgetBytes: number;
  /** One application's bodies together (PULSEBASE_BODY_APP_SHARE_BYTES; at least bodyLimitBytes). */
  bodyAppShareBytes: number;
  /** The bodies of all clients without a token together (PULSEBASE_BODY_ANONYMOUS_SHARE_BYTES). */
  bodyAnonymousShareBytes: number;
  /** The bodies of one client address without a token, an IPv6 /64 (PULSEBASE_BODY_ADDRESS_SHARE_BYTES). */
  bodyAddressShareBytes: number;
  /**
   * A request body must arrive within this many seconds plus one second per
   * bodyMinRateBytes received (PULSEBASE_BODY_TIMEOUT_SECONDS and
   * PULSEBASE_BODY_MIN_RATE_BYTES); a slower one is cut.
   */
  bodyTimeoutSeconds: number;
  bodyMinRateBytes: number;
  /** Concurrent streams one HTTP/2 connection may open (PULSEBASE_HTTP2_MAX_STREAMS). */
  http2MaxStreams: number;
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
   * Which pipeline serves unary Connect, gRPC and gRPC-Web calls
   * (PULSEBASE_RPC_PIPELINE): `fast`, the project's own codecs in front of
   * the one dispatcher (docs/architecture.md), or `connect-node`, connect-es's
   * router, kept as a diagnostic fallback.
   */
  rpcPipeline: "fast" | "connect-node";
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
   * PULSEBASE_CACHE_TTL_MS (tests only; unset: each cache's own safety net):
   * the TTL of every cache the change bus invalidates (token checks, app
   * keys and plans, CMS responses, function resolution, database links). The
   * cluster tests make it long, so a change they see reach another server
   * came over the bus, not by an entry expiring.
   */
  cacheTtlMs?: number;
  /**
   * Port of GET /metrics of a `npm run worker` process, on adminHost
   * (PULSEBASE_WORKER_METRICS_PORT); 0 serves none.
   */
  workerMetricsPort: number;
  /** PULSEBASE_WORKER_METRICS_PORT was set: a taken port is not walked past (the worker runs without metrics, with a warning). */
  workerMetricsPortExplicit: boolean;
  /** Linked databases' engine scheduling (docs/database.md). */
  db: {
    /** Engine processes (PULSEBASE_DB_ENGINE_PROCESSES). */
    engineProcesses: number;
    /** Requests of one application running at once on them; 0 = half of them (PULSEBASE_DB_APP_RUNNING). */
    appRunning: number;
    /** Requests of one application waiting for an engine or a remote slot (PULSEBASE_DB_APP_QUEUED). */
    appQueued: number;
    /** How long a request may wait to start (PULSEBASE_DB_QUEUE_WAIT_MS). */
    queueWaitMs: number;
    /** Requests of one application outstanding on its remote libSQL server (PULSEBASE_DB_REMOTE_APP_RUNNING). */
    remoteAppRunning: number;
  };
  /** ctx.db calls of one function invocation (docs/functions.md). */
  fnDbCalls: {
    /** Handed to the database at once (PULSEBASE_FN_DB_CALLS_RUNNING). */
    running: number;
    /** Waiting for one of those (PULSEBASE_FN_DB_CALLS_QUEUED). */
    queued: number;
  };
  /** The functions' isolates shared between applications (docs/functions-operator.md, "Sharing the isolates"). */
  fnIsolates: {
    /** Isolates one application's runs hold at once; 0 = a quarter of the process's 64 (PULSEBASE_FN_APP_ISOLATES). */
    appIsolates: number;
    /** Heap the process's isolates may keep between runs, in MiB (PULSEBASE_FN_HEAP_BUDGET_MB). */
    heapBudgetMb: number;
    /** Of that, one application's isolates; 0 = a quarter (PULSEBASE_FN_APP_HEAP_MB). */
    appHeapMb: number;
    /** An isolate keeping more heap than this after a run is disposed, not kept warm, in MiB (PULSEBASE_FN_KEEP_HEAP_MB). */
    keepHeapMb: number;
  };
  /** Functions' limits and schedule timing (docs/functions.md). */
  functions: {
    /** PULSEBASE_FUNCTION_PUBLIC_PER_MINUTE: calls of one public or signed trigger per minute (all processes). */
    publicTriggerPerMinute: number;
    /** PULSEBASE_FUNCTION_PUBLIC_PER_ADDRESS_PER_MINUTE: of one such trigger from one address (per process). */
    publicPerAddressPerMinute: number;
    /** PULSEBASE_FUNCTION_SCHEDULES_PER_APP */
    maxSchedulesPerApp: number;
    /**
     * PULSEBASE_FUNCTION_SANDBOX_CSP (default on): HTTP trigger answers carry
     * `Content-Security-Policy: sandbox ...` without allow-same-origin, so a
     * tenant's page runs in an opaque origin (no cookies of the host name).
     */
    sandboxCsp: boolean;
    /** PULSEBASE_SCHEDULE_POLL_MS: how often each process looks for due ticks. */
    schedulePollMs: number;
    /** PULSEBASE_SCHEDULE_GRACE_MS: a tick later than this counts as missed. */
    scheduleGraceMs: number;
    /** PULSEBASE_KV_MAX_BYTES_PER_APP, PULSEBASE_KV_MAX_KEYS_PER_APP */
    kvMaxBytesPerApp: number;
    kvMaxKeysPerApp: number;
    /** A function's fetch, per invocation (docs/functions.md, "Calling other services: fetch"). */
    fetch: {
      /** PULSEBASE_FUNCTION_FETCH_SUBREQUESTS: requests started (redirect hops not counted). */
      subrequests: number;
      /** PULSEBASE_FUNCTION_FETCH_CONCURRENCY: requests in flight at once; more wait. */
      concurrent: number;
      /** PULSEBASE_FUNCTION_FETCH_RESPONSE_BYTES: one response body (decompressed). */
      responseBytes: number;
      /** PULSEBASE_FUNCTION_FETCH_RUN_RESPONSE_BYTES: all response bodies of one invocation. */
      runResponseBytes: number;
      /** PULSEBASE_FUNCTION_FETCH_REQUEST_BYTES: one request body. */
      requestBytes: number;
      /** PULSEBASE_FUNCTION_FETCH_REDIRECTS: redirects one request follows. */
      redirects: number;
      /** PULSEBASE_FUNCTION_FETCH_TIMEOUT_MS: one request, redirects included (the invocation's timeout cuts first). */
      timeoutMs: number;
      /** PULSEBASE_FUNCTION_FETCH_PROCESS_BYTES: response bytes the process holds for all invocations at once. */
      processBytes: number;
      /** PULSEBASE_FUNCTION_EGRESS_ALLOW_LOOPBACK (tests only, default off): loopback counts as private for applications allowed private addresses; never the server's own listeners. */
      allowLoopback: boolean;
    };
  };
  /** The realtime gateway's limits and timing (docs/realtime.md, "Limits"). */
  realtime: {
    /** PULSEBASE_REALTIME_CONNECTIONS_PER_APP: open WebSocket, SSE and stream connections of one application, per process. */
    connectionsPerApp: number;
    /** PULSEBASE_REALTIME_SUBSCRIPTIONS_PER_CONNECTION */
    subscriptionsPerConnection: number;
    /** PULSEBASE_REALTIME_CHANNELS_PER_APP: channels of one application with a subscriber on this process. */
    channelsPerApp: number;
    /** PULSEBASE_REALTIME_PRESENCE_PER_CHANNEL: presence members of one channel (all processes). */
    presencePerChannel: number;
    /** PULSEBASE_REALTIME_MESSAGE_BYTES: largest client message (text frame or POST body). */
    messageBytes: number;
    /** PULSEBASE_REALTIME_BROADCASTS_PER_SECOND: broadcasts of one consumer per second (per process). */
    broadcastsPerSecond: number;
    /** PULSEBASE_REALTIME_APP_BROADCASTS_PER_SECOND: broadcasts of one application per second (per process). */
    appBroadcastsPerSecond: number;
    /** PULSEBASE_REALTIME_SEND_BUFFER_BYTES: a connection with more unsent bytes is a slow consumer and is closed. */
    sendBufferBytes: number;
    /** PULSEBASE_REALTIME_HEARTBEAT_MS: server heartbeat (ping and heartbeat message); a connection silent for two is closed. */
    heartbeatMs: number;
    /** PULSEBASE_REALTIME_PRESENCE_HEARTBEAT_MS: how often a server repeats its presence members to the others. */
    presenceHeartbeatMs: number;
    /** PULSEBASE_REALTIME_PRESENCE_MISSED: heartbeats a server may miss before the others drop its members. */
    presenceMissed: number;
    /** PULSEBASE_REALTIME_RESUME_WINDOW (seconds): how long table changes are kept for subscriptions that resume. */
    resumeWindowMs: number;
  };
}

export interface ConsoleConfig {
  /** A console session ends this long after sign-in (PULSEBASE_SESSION_TTL_HOURS). */
  sessionTtlHours: number;
  /** The role the operator token has in every team (PULSEBASE_OPERATOR_TOKEN_ROLE). */
  operatorTokenRole: "admin" | "owner" | "developer" | "viewer";
  /** The console's address as browsers reach it, for printed links (PULSEBASE_CONSOLE_URL). */
  publicUrl?: string;
  /** Sign-in attempts per client address per minute (PULSEBASE_LOGIN_ATTEMPTS_PER_MINUTE). */
  loginAttemptsPerMinute: number;
  /** Audit log rows older than this many days are deleted by an hourly sweep; 0 keeps them (PULSEBASE_AUDIT_RETENTION_DAYS). */
  auditRetentionDays: number;
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

/** An https (or http) origin: scheme, host and port, no path. */
function origin(env: Env, name: string): string | undefined {
  const raw = url(env, name, ["https:", "http:"]);
  if (raw === undefined) return undefined;
  const u = new URL(raw);
  if ((u.pathname !== "/" && u.pathname !== "") || u.search || u.hash || u.username || u.password) {
    throw new ConfigError(`${name} must be an origin such as https://api.example.com (no path, query or credentials), got "${raw}"`);
  }
  return u.origin;
}

function list(env: Env, name: string, def: string[]): string[] {
  const raw = env[name];
  if (raw === undefined || raw.trim() === "") return def;
  return raw.split(",").map((s) => s.trim()).filter(Boolean);
}

/** Host names (no scheme, port or path), lower-cased; IPv6 in brackets or bare. */
function hostNames(env: Env, name: string): string[] {
  const out = list(env, name, []).map((h) => h.toLowerCase());
  for (const h of out) {
    if (!/^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$/.test(h) && !isIP(h.replace(/^\[|\]$/g, ""))) {
      throw new ConfigError(`${name} must list host names such as console.example.com (no scheme, port or path), got "${h}"`);
    }
  }
  return out;
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
  const bodyLimitBytes = int(env, "PULSEBASE_BODY_LIMIT_BYTES", 50 * 1024 * 1024, 1024, 1024 * 1024 * 1024);
  const bodyBudgetBytes = int(env, "PULSEBASE_BODY_BUDGET_BYTES", 256 * 1024 * 1024, 2048, 16 * 1024 * 1024 * 1024);
  // Room for an application's largest request twice over (its share is at least one).
  if (bodyBudgetBytes < 2 * bodyLimitBytes) {
    throw new ConfigError(`PULSEBASE_BODY_BUDGET_BYTES must be at least twice PULSEBASE_BODY_LIMIT_BYTES (${2 * bodyLimitBytes}), got ${bodyBudgetBytes}`);
  }
  // Shares of the budget (issue #28): an application a quarter (its largest
  // request must fit), clients without a token an eighth together and 1 MiB
  // per address, so no one owner, nor idle streams, can take it all.
  const bodyAppShareBytes = int(env, "PULSEBASE_BODY_APP_SHARE_BYTES", Math.max(bodyLimitBytes, Math.floor(bodyBudgetBytes / 4)), bodyLimitBytes, bodyBudgetBytes);
  const bodyAnonymousShareBytes = int(env, "PULSEBASE_BODY_ANONYMOUS_SHARE_BYTES", Math.max(Math.floor(bodyBudgetBytes / 8), Math.min(bodyBudgetBytes, 64 * 1024)), 1024, bodyBudgetBytes);
  const bodyAddressShareBytes = int(env, "PULSEBASE_BODY_ADDRESS_SHARE_BYTES", Math.min(1024 * 1024, bodyAnonymousShareBytes), 1024, bodyAnonymousShareBytes);
  return {
    dataDir: dataDirOf(env),
    console: {
      sessionTtlHours: int(env, "PULSEBASE_SESSION_TTL_HOURS", 12, 1, 720),
      operatorTokenRole: oneOf(env, "PULSEBASE_OPERATOR_TOKEN_ROLE", ["admin", "owner", "developer", "viewer"] as const, "admin"),
      publicUrl: url(env, "PULSEBASE_CONSOLE_URL", ["http:", "https:"]),
      loginAttemptsPerMinute: int(env, "PULSEBASE_LOGIN_ATTEMPTS_PER_MINUTE", 20, 1, 100_000),
      auditRetentionDays: int(env, "PULSEBASE_AUDIT_RETENTION_DAYS", 365, 0, 36_500),
    },
    host: env.PULSEBASE_HOST?.trim() || "0.0.0.0",
    httpsPort: int(env, "PULSEBASE_HTTPS_PORT", 8443, 0, 65535),
    httpPort: int(env, "PULSEBASE_HTTP_PORT", 8080, 0, 65535),
    adminHost: env.PULSEBASE_ADMIN_HOST?.trim() || "127.0.0.1",
    adminPort: int(env, "PULSEBASE_ADMIN_PORT", DEFAULT_ADMIN_PORT, 0, 65535),
    adminHosts: hostNames(env, "PULSEBASE_ADMIN_HOSTS"),
    operatorToken,
    databaseUrl: url(env, "DATABASE_URL", ["postgres:", "postgresql:"]),
    natsUrl: url(env, "NATS_URL", ["nats:", "tls:", "ws:", "wss:"]),
    natsNamespace: namespace(env),
    tlsCertFile: cert,
    tlsKeyFile: key,
    trustedProxies,
    publicUrl: origin(env, "PULSEBASE_PUBLIC_URL"),
    jwtKeysFile: env.PULSEBASE_JWT_KEYS_FILE?.trim() || undefined,
    tokenTtlSeconds: int(env, "PULSEBASE_TOKEN_TTL_SECONDS", 30 * 24 * 3600, 60, 366 * 24 * 3600),
    bodyLimitBytes,
    idleTimeoutSeconds: int(env, "PULSEBASE_IDLE_TIMEOUT_SECONDS", 120, 1, 3600),
    bodyBudgetBytes,
    bodyAppShareBytes,
    bodyAnonymousShareBytes,
    bodyAddressShareBytes,
    bodyTimeoutSeconds: int(env, "PULSEBASE_BODY_TIMEOUT_SECONDS", 30, 1, 3600),
    bodyMinRateBytes: int(env, "PULSEBASE_BODY_MIN_RATE_BYTES", 4096, 1, 1024 * 1024 * 1024),
    http2MaxStreams: int(env, "PULSEBASE_HTTP2_MAX_STREAMS", 100, 1, 10_000),
    corsOrigins: list(env, "PULSEBASE_CORS_ORIGINS", ["*"]),
    mediaBaseUrl: url(env, "PULSEBASE_MEDIA_BASE_URL", ["http:", "https:"]),
    planEnforcement: bool(env, "PULSEBASE_PLAN_ENFORCEMENT", true),
    logLevel: level,
    inProcessWorkers: bool(env, "PULSEBASE_IN_PROCESS_WORKERS", true),
    pgPoolSize: int(env, "PULSEBASE_PG_POOL_SIZE", 10, 1, 1000),
    accessLog: bool(env, "PULSEBASE_ACCESS_LOG", true),
    rpcPipeline: oneOf(env, "PULSEBASE_RPC_PIPELINE", ["fast", "connect-node"] as const, "fast"),
    metricsToken,
    changePollMs: int(env, "PULSEBASE_CHANGE_POLL_MS", 250, 50, 10_000),
    cacheTtlMs: (env.PULSEBASE_CACHE_TTL_MS ?? "") === "" ? undefined : int(env, "PULSEBASE_CACHE_TTL_MS", 0, 1, 86_400_000),
    workerMetricsPort: int(env, "PULSEBASE_WORKER_METRICS_PORT", DEFAULT_WORKER_METRICS_PORT, 0, 65535),
    workerMetricsPortExplicit: (env.PULSEBASE_WORKER_METRICS_PORT ?? "") !== "",
    db: {
      engineProcesses: int(env, "PULSEBASE_DB_ENGINE_PROCESSES", 2, 1, 64),
      appRunning: int(env, "PULSEBASE_DB_APP_RUNNING", 0, 0, 64),
      appQueued: int(env, "PULSEBASE_DB_APP_QUEUED", 64, 1, 100_000),
      queueWaitMs: int(env, "PULSEBASE_DB_QUEUE_WAIT_MS", 2000, 10, 600_000),
      remoteAppRunning: int(env, "PULSEBASE_DB_REMOTE_APP_RUNNING", 8, 1, 1000),
    },
    fnDbCalls: {
      running: int(env, "PULSEBASE_FN_DB_CALLS_RUNNING", 4, 1, 100),
      queued: int(env, "PULSEBASE_FN_DB_CALLS_QUEUED", 100, 0, 10_000),
    },
    fnIsolates: {
      appIsolates: int(env, "PULSEBASE_FN_APP_ISOLATES", 0, 0, 10_000),
      heapBudgetMb: int(env, "PULSEBASE_FN_HEAP_BUDGET_MB", 2048, 16, 1024 * 1024),
      appHeapMb: int(env, "PULSEBASE_FN_APP_HEAP_MB", 0, 0, 1024 * 1024),
      keepHeapMb: int(env, "PULSEBASE_FN_KEEP_HEAP_MB", 64, 1, 64 * 1024),
    },
    functions: {
      publicTriggerPerMinute: int(env, "PULSEBASE_FUNCTION_PUBLIC_PER_MINUTE", 600, 0, 1_000_000),
      publicPerAddressPerMinute: int(env, "PULSEBASE_FUNCTION_PUBLIC_PER_ADDRESS_PER_MINUTE", 120, 0, 1_000_000),
      maxSchedulesPerApp: int(env, "PULSEBASE_FUNCTION_SCHEDULES_PER_APP", 50, 0, 100_000),
      sandboxCsp: bool(env, "PULSEBASE_FUNCTION_SANDBOX_CSP", true),
      schedulePollMs: int(env, "PULSEBASE_SCHEDULE_POLL_MS", 500, 50, 60_000),
      scheduleGraceMs: int(env, "PULSEBASE_SCHEDULE_GRACE_MS", 30_000, 100, 86_400_000),
      kvMaxBytesPerApp: int(env, "PULSEBASE_KV_MAX_BYTES_PER_APP", 64 * 1024 * 1024, 1024, 1024 ** 4),
      kvMaxKeysPerApp: int(env, "PULSEBASE_KV_MAX_KEYS_PER_APP", 100_000, 1, 1_000_000_000),
      fetch: {
        subrequests: int(env, "PULSEBASE_FUNCTION_FETCH_SUBREQUESTS", 50, 0, 10_000),
        concurrent: int(env, "PULSEBASE_FUNCTION_FETCH_CONCURRENCY", 6, 1, 100),
        responseBytes: int(env, "PULSEBASE_FUNCTION_FETCH_RESPONSE_BYTES", 10 * 1024 * 1024, 1024, 256 * 1024 * 1024),
        runResponseBytes: int(env, "PULSEBASE_FUNCTION_FETCH_RUN_RESPONSE_BYTES", 32 * 1024 * 1024, 1024, 1024 * 1024 * 1024),
        requestBytes: int(env, "PULSEBASE_FUNCTION_FETCH_REQUEST_BYTES", 10 * 1024 * 1024, 1024, 256 * 1024 * 1024),
        redirects: int(env, "PULSEBASE_FUNCTION_FETCH_REDIRECTS", 10, 0, 20),
        timeoutMs: int(env, "PULSEBASE_FUNCTION_FETCH_TIMEOUT_MS", 30_000, 100, 600_000),
        processBytes: int(env, "PULSEBASE_FUNCTION_FETCH_PROCESS_BYTES", 256 * 1024 * 1024, 1024 * 1024, 64 * 1024 ** 3),
        allowLoopback: bool(env, "PULSEBASE_FUNCTION_EGRESS_ALLOW_LOOPBACK", false),
      },
    },
    realtime: {
      connectionsPerApp: int(env, "PULSEBASE_REALTIME_CONNECTIONS_PER_APP", 10_000, 1, 10_000_000),
      subscriptionsPerConnection: int(env, "PULSEBASE_REALTIME_SUBSCRIPTIONS_PER_CONNECTION", 100, 1, 100_000),
      channelsPerApp: int(env, "PULSEBASE_REALTIME_CHANNELS_PER_APP", 10_000, 1, 10_000_000),
      presencePerChannel: int(env, "PULSEBASE_REALTIME_PRESENCE_PER_CHANNEL", 1000, 1, 1_000_000),
      messageBytes: int(env, "PULSEBASE_REALTIME_MESSAGE_BYTES", 64 * 1024, 256, 16 * 1024 * 1024),
      broadcastsPerSecond: int(env, "PULSEBASE_REALTIME_BROADCASTS_PER_SECOND", 50, 1, 1_000_000),
      appBroadcastsPerSecond: int(env, "PULSEBASE_REALTIME_APP_BROADCASTS_PER_SECOND", 5000, 1, 10_000_000),
      sendBufferBytes: int(env, "PULSEBASE_REALTIME_SEND_BUFFER_BYTES", 1024 * 1024, 1024, 1024 * 1024 * 1024),
      heartbeatMs: int(env, "PULSEBASE_REALTIME_HEARTBEAT_MS", 25_000, 50, 600_000),
      presenceHeartbeatMs: int(env, "PULSEBASE_REALTIME_PRESENCE_HEARTBEAT_MS", 2000, 20, 600_000),
      presenceMissed: int(env, "PULSEBASE_REALTIME_PRESENCE_MISSED", 3, 1, 100),
      resumeWindowMs: int(env, "PULSEBASE_REALTIME_RESUME_WINDOW", 300, 1, 7 * 24 * 3600) * 1000,
    },
  };
}

function oneOf<T extends string>(env: Env, name: string, values: readonly T[], def: T): T {
  const v = env[name]?.trim();
  if (!v) return def;
  if (!(values as readonly string[]).includes(v)) throw new ConfigError(`${name} must be one of ${values.join(", ")}`);
  return v as T;
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
