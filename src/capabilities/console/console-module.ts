// The console capability's module definition, wired once per server: the
// AccountService, the access policy of every admin method, the built
// front end at / of the admin listener, and the audit log's retention sweep.
import type { FastifyInstance } from "fastify";
import type { Logger } from "pino";
import { AccountService } from "../../../gen/pulsebase/admin/v1/account_pb.js";
import { OverviewService } from "../../../gen/pulsebase/admin/v1/overview_pb.js";
import type { CallPolicy } from "../../kernel/call-policy.js";
import type { ConsoleConfig } from "../../kernel/config.js";
import { binding, type PulsebaseModule, type QueueStatsSource, type RawRoute } from "../../kernel/module.js";
import type { Sql } from "../../infra/storage/sql.js";
import { accessPolicy } from "./access.js";
import { createAccountServiceImpl } from "./account-service.js";
import { AccountStore } from "./account-store.js";
import { AuditStore } from "./audit-store.js";
import { DEFAULT_LOGIN_LIMITS, LoginLimiter } from "./login-limiter.js";
import { roleOf } from "./roles.js";
import { ScopeResolver } from "./scope-resolver.js";
import { createOverviewServiceImpl } from "./overview-service.js";
import { registerConsole, registerConsoleMedia } from "./static-console.js";

export interface ConsoleModule extends PulsebaseModule {
  accounts: AccountStore;
  audit: AuditStore;
  /** Guards every admin service (roles, sessions, audit). */
  policy: CallPolicy;
  /** The front end on the admin listener. */
  adminRoutes(app: FastifyInstance): Promise<void>;
}

/** How often each process deletes audit rows past the retention (at start, then hourly). */
export const AUDIT_SWEEP_MS = 3600_000;

export interface ConsoleModuleOptions {
  sql: Sql;
  logger: Logger;
  operatorToken: string;
  config: ConsoleConfig;
  mediaBaseUrl: string;
  /** The data directory (the home page's database sizes). */
  dataDir?: string;
  /** The other modules' queues and media route, asked for when used (they are made after this module). */
  queues?: () => Record<string, QueueStatsSource>;
  mediaRoute?: () => RawRoute | undefined;
}

export function createConsoleModule(opts: ConsoleModuleOptions): ConsoleModule {
  const accounts = new AccountStore(opts.sql);
  const audit = new AuditStore(opts.sql);
  const days = opts.config.auditRetentionDays;
  let timer: NodeJS.Timeout | undefined;
  let sweeping: Promise<void> | undefined;
  const sweep = () => {
    // One at a time; every process sweeps (deleting by age is idempotent).
    sweeping ??= audit
      .sweep(days)
      .then((n) => void (n > 0 && opts.logger.info({ deleted: n, retentionDays: days }, "audit log: old rows deleted")))
      .catch((err: unknown) => opts.logger.warn({ err }, "audit log: retention sweep failed (retrying in an hour)"))
      .finally(() => (sweeping = undefined));
  };
  return {
    name: "console",
    async start() {
      if (days <= 0 || timer) return;
      sweep();
      timer = setInterval(sweep, AUDIT_SWEEP_MS);
      timer.unref();
    },
    async stop() {
      clearInterval(timer);
      timer = undefined;
      await sweeping;
    },
    accounts,
    audit,
    policy: accessPolicy({
      operatorToken: opts.operatorToken,
      operatorTokenRole: roleOf(opts.config.operatorTokenRole),
      accounts,
      audit,
      scopes: new ScopeResolver(opts.sql),
      logger: opts.logger,
    }),
    admin: [
      binding(AccountService, createAccountServiceImpl({ accounts, audit, limiter: new LoginLimiter({ ...DEFAULT_LOGIN_LIMITS, perAddressPerMinute: opts.config.loginAttemptsPerMinute }), sessionTtlHours: opts.config.sessionTtlHours, mediaBaseUrl: opts.mediaBaseUrl })),
      binding(OverviewService, createOverviewServiceImpl({ sql: opts.sql, dataDir: opts.dataDir ?? ".data", queues: opts.queues ?? (() => ({})) })),
    ],
    adminRoutes: async (app) => {
      // After the console's hooks (the two-cookie clean-up applies to every answer).
      await registerConsole(app);
      registerConsoleMedia(app, opts.mediaRoute ?? (() => undefined));
    },
  };
}

/** The one-time first-owner link, while no owner has been set up (printed at start). */
export async function setupLink(accounts: AccountStore, consoleUrl: string): Promise<string | undefined> {
  if (await accounts.hasAdmin()) return undefined;
  const token = await accounts.newSetupToken();
  return `${consoleUrl.replace(/\/$/, "")}/setup#token=${token}`;
}
