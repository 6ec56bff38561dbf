// Entry point: `npm start`. Reads the configuration once, opens storage,
// builds the app and listens; SIGINT/SIGTERM drain and stop.
import { join } from "node:path";
import { build } from "./build.js";
import { createLogger } from "../infra/logging/logger.js";
import { loadOrCreateOperatorToken } from "./operator-token.js";
import { loadOrCreateTls } from "./tls.js";
import { loadConfigOrExit } from "../kernel/config.js";
import { loadOrCreateKeys } from "../capabilities/identity/token-keys.js";
import { DataDirLockedError, lockDataDir } from "./data-lock.js";
import { createModules } from "./modules.js";
import { openStorage } from "./open-storage.js";
import { setupLink } from "../capabilities/console/console-module.js";

async function main(): Promise<void> {
  const config = loadConfigOrExit();
  const logger = createLogger(config.logLevel);
  // One server per embedded database (data-lock.ts). With DATABASE_URL the
  // directory holds only files that servers on one host may share (keys,
  // certificate, libSQL files, which SQLite locks itself).
  const lock = config.databaseUrl
    ? undefined
    : await lockDataDir(config.dataDir, {
        onLost: (err) => {
          logger.fatal({ err }, "another server took over the data directory: stopping");
          process.kill(process.pid, "SIGTERM");
        },
      }).catch((err: unknown) => {
        if (!(err instanceof DataDirLockedError)) throw err;
        console.error(`pulsebase: ${err.message}`);
        process.exit(1);
      });
  const sql = await openStorage(config);
  const signingKeys = await loadOrCreateKeys(config.jwtKeysFile ?? join(config.dataDir, "jwt-keys.json"), !config.jwtKeysFile);
  const op = await loadOrCreateOperatorToken(config.operatorToken, config.dataDir);
  const tls = await loadOrCreateTls({ certFile: config.tlsCertFile, keyFile: config.tlsKeyFile, dataDir: config.dataDir });
  const app = await build(config, { sql, signingKeys, operatorToken: op.token, tls, logger, modules: createModules });
  const ports = await app.listen();
  logger.info(
    { https: ports.https, http: ports.http, admin: ports.admin, dataDir: config.dataDir, storage: config.databaseUrl ? "postgres" : "pglite", queue: config.natsUrl ? "nats" : "embedded" },
    "pulsebase listening",
  );
  // Until the first owner is set up, every start prints a fresh one-time link (the previous one stops working).
  const link = await setupLink(app.console.accounts, config.console.publicUrl ?? `http://127.0.0.1:${ports.admin}`);
  if (link) console.log(`\nConsole: set up the first owner (one-time link, valid 24 hours):\n  ${link}\n`);
  if (op.created) {
    console.log(`\nOperator token (saved in ${op.file}):\n  ${op.token}\nUse it with the CLI: export PULSEBASE_OPERATOR_TOKEN=${op.token}\n`);
  }
  let closing = false;
  const stop = async (signal: string) => {
    if (closing) return;
    closing = true;
    logger.info({ signal }, "shutting down");
    const force = setTimeout(() => process.exit(1), 15_000);
    force.unref();
    await app.close();
    await sql.close();
    await lock?.release();
    process.exit(0);
  };
  process.on("SIGINT", () => void stop("SIGINT"));
  process.on("SIGTERM", () => void stop("SIGTERM"));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
